"""Clock-domain crossings of the host link (cepc.hw.cdc), with the two clocks at several ratios."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import ClockDomain, Module, Signal
from amaranth.sim import Simulator

from cepc.hw.cdc import Fetch, StreamCDC

# (input side's clock period, output side's), ns: slower, faster, equal, and not a simple ratio
PERIODS = [(10, 10), (10, 33), (33, 10), (17, 7)]


@pytest.mark.parametrize("periods", PERIODS)
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("held", [False, True])
def test_stream_passes_every_word_once_in_order(periods, seed, held):
    # held: the source keeps its word until `i_ready`, as a FIFO does (the output reads it directly)
    m = Module()
    m.domains.a = ClockDomain()
    m.domains.b = ClockDomain()
    m.submodules.dut = dut = StreamCDC(16, "a", "b", held=held)
    rng = random.Random(seed)
    words = [rng.randrange(1 << 16) for _ in range(60)]
    got = []

    async def source(ctx):
        for w in words:
            while rng.random() < 0.3:
                ctx.set(dut.i_valid, 0)
                await ctx.tick("a")
            ctx.set(dut.i_valid, 1)
            ctx.set(dut.i_data, w)
            await ctx.tick("a").until(dut.i_ready)
        ctx.set(dut.i_valid, 0)
        await ctx.tick("a").until(~dut.i_busy)  # the last word taken

    async def sink(ctx):
        while len(got) < len(words):
            ready = rng.random() < 0.6
            ctx.set(dut.o_ready, ready)
            _, _, valid, data = await ctx.tick("b").sample(dut.o_valid, dut.o_data)
            if valid and ready:
                got.append(data)
        for _ in range(20):  # nothing more comes
            ctx.set(dut.o_ready, 1)
            _, _, valid = await ctx.tick("b").sample(dut.o_valid)
            assert not valid

    sim = Simulator(m)
    sim.add_clock(periods[0] * 1e-9, domain="a")
    sim.add_clock(periods[1] * 1e-9, domain="b")
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run_until(200e-6)
    assert got == words


@pytest.mark.parametrize("periods", PERIODS)
def test_fetch_reads_the_indexed_value_as_it_was_between_start_and_ready(periods):
    m = Module()
    m.domains.near = ClockDomain()
    m.domains.far = ClockDomain()
    m.submodules.dut = dut = Fetch(20, 3, "near", "far")
    # far side: three counters, counting by 1, 2 and 3 every far cycle
    counters = [Signal(20, name=f"c{i}") for i in range(3)]
    for i, c in enumerate(counters):
        m.d.far += c.eq(c + i + 1)
        m.d.comb += dut.values[i].eq(c)
    rng = random.Random(periods[0] * 100 + periods[1])
    checked = []

    async def near(ctx):
        await ctx.tick("near").repeat(3)
        for _ in range(40):
            i = rng.randrange(3)
            ctx.set(dut.index, i)
            ctx.set(dut.start, 1)
            before = ctx.get(counters[i])
            await ctx.tick("near")
            ctx.set(dut.start, 0)
            assert not ctx.get(dut.ready)  # a request is outstanding
            await ctx.tick("near").until(dut.ready)
            after = ctx.get(counters[i])
            word = ctx.get(dut.word)
            assert before <= word <= after and word % (i + 1) == 0, (i, before, word, after)
            for _ in range(rng.randrange(4)):  # the word stays while nothing is asked
                await ctx.tick("near")
                assert ctx.get(dut.ready) and ctx.get(dut.word) == word
            checked.append(i)

    sim = Simulator(m)
    sim.add_clock(periods[0] * 1e-9, domain="near")
    sim.add_clock(periods[1] * 1e-9, domain="far")
    sim.add_testbench(near)
    sim.run_until(100e-6)
    assert len(checked) == 40 and set(checked) == {0, 1, 2}

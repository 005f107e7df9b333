"""Segmented counters (cepc.hw.counter): exact in every cycle, through every carry and the wrap."""

from __future__ import annotations

import random
import re

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from cepc.hw.counter import add, count_late, increment


@pytest.mark.parametrize("width, segment", [(10, 3), (9, 3), (8, 8), (12, 4), (5, 16)])
def test_the_count_is_exact_every_cycle(width, segment):
    m = Module()
    counter, inc, rst = Signal(width, name="c"), Signal(), Signal()
    increment(m, counter, inc, segment)
    dut = ResetInserter(rst)(m)
    rng = random.Random(width * 100 + segment)
    seen = []

    async def bench(ctx):
        expect = 0
        # long runs of increments carry through every segment and wrap around (2**10 is 1,024)
        for cycle in range(3 * (1 << width) + 500):
            go = rng.random() < (0.97 if cycle < 2 * (1 << width) else 0.5)
            reset = cycle in (1500, 1501) and width >= 10
            ctx.set(inc, go)
            ctx.set(rst, reset)
            await ctx.tick()
            expect = 0 if reset else (expect + go) % (1 << width)
            assert ctx.get(counter) == expect, f"cycle {cycle}"
            seen.append(expect)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert 0 in seen[10:] and (1 << width) - 1 in seen  # it wrapped


def test_carry_chains_are_a_segment_long():
    m = Module()
    counter = Signal(48, name="seq")
    increment(m, counter, Signal(name="inc"))
    text = rtlil.convert(m, ports=[counter])
    adders = re.findall(r"cell \$add \S+\n(?:\s+parameter \S+ \S+\n)*?\s+parameter \\Y_WIDTH (\d+)", text)
    assert [int(w) for w in adders] == [17, 17, 17]  # three 16-bit segments (Amaranth adds a bit)


@pytest.mark.parametrize("width, segment", [(12, 4), (10, 3), (4, 8)])
def test_adding_small_amounts_is_exact_every_cycle(width, segment):
    m = Module()
    counter, amount = Signal(width, name="c"), Signal(2)
    add(m, counter, amount, segment)
    rng = random.Random(width)

    async def bench(ctx):
        expect = 0
        for cycle in range(3 * (1 << width)):
            a = rng.choice([0, 1, 2, 3, 3])
            ctx.set(amount, a)
            await ctx.tick()
            expect = (expect + a) % (1 << width)
            assert ctx.get(counter) == expect, f"cycle {cycle}"

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_a_late_count_is_the_events_of_every_cycle_but_the_last_two():
    m = Module()
    counter, event = Signal(20, name="c"), Signal()
    count_late(m, counter, event)
    rng = random.Random(7)

    async def bench(ctx):
        counts = [0, 0]  # the events of every cycle before this one, and before the one before
        for cycle in range(2000):
            go = rng.random() < 0.9
            ctx.set(event, go)
            await ctx.tick()
            assert ctx.get(counter) == counts[-2], f"cycle {cycle}"  # two cycles behind
            counts.append(counts[-1] + go)

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()

"""Segmented counters (cepc.hw.counter): exact in every cycle, through every carry and the wrap."""

from __future__ import annotations

import random
import re

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from cepc.hw.counter import CounterBank, add, count_late, increment


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


# --- counters in RAM ---------------------------------------------------------------------------------


@pytest.mark.parametrize("amounts, width, rate", [([1, 1, 3, 1, 1, 1], 48, 0.95), ([7, 1], 18, 1.0), ([1], 20, 0.7)])
def test_a_counter_bank_reads_a_value_each_counter_had_and_is_exact_once_idle(amounts, width, rate):
    bank = CounterBank(amounts, width)
    rst = Signal()
    dut = ResetInserter(rst)(bank)
    n = len(amounts)
    rng = random.Random(width + n)
    mask = (1 << width) - 1
    # counter 0 of the second case runs through its low word's carry and wraps (2**18 is 262,144)
    cycles = 45_000 if width == 18 else 6_000
    reads = []

    async def bench(ctx):
        history = [[0] * n]  # the true counts after each cycle
        reading = None  # (index, cycle asked)
        for cycle in range(cycles + 600):
            counting = cycle < cycles
            reset = cycle in (2_000, 2_001) and width == 48
            incs = [rng.randint(0, a) if counting and rng.random() < rate else 0 for a in amounts]
            if width == 18 and counting:
                incs[0] = amounts[0]
            packed, lo = 0, 0
            for inc, w in zip(incs, bank.widths):
                packed |= inc << lo
                lo += w
            ctx.set(bank.inc, packed)
            ctx.set(rst, reset)
            asked = reading is None and not reset and cycle < cycles + 400 and rng.random() < 0.3
            if asked:
                reading = (rng.randrange(n), cycle)
                ctx.set(bank.index, reading[0])
            ctx.set(bank.read, asked)
            done = ctx.get(bank.done)
            await ctx.tick()
            history.append([0] * n if reset else [(c + i) & mask for c, i in zip(history[-1], incs)])
            if done and reading is not None:
                i, since = reading
                value = ctx.get(bank.word)
                had = {h[i] for h in history[max(0, since - bank.gap - 2):]}
                assert value in had, f"cycle {cycle}: counter {i} read {value}, which it never had lately"
                reads.append((cycle, i, value, history[-1][i]))
                reading = None
            if reset:
                reading = None
        # once nothing is pending, every counter reads exact
        assert not ctx.get(bank.busy)
        for i in range(n):
            ctx.set(bank.index, i)
            ctx.set(bank.read, 1)
            await ctx.tick()
            ctx.set(bank.read, 0)
            while not ctx.get(bank.done):
                await ctx.tick()
            await ctx.tick()
            assert ctx.get(bank.word) == history[-1][i], f"counter {i}"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(reads) > 100
    assert any(v != now for _, _, v, now in reads)  # (reads do lag the counts: the test would see a stale one)
    if width == 18:
        zeroth = [v for _, i, v, _ in reads if i == 0]
        assert any(b < a for a, b in zip(zeroth, zeroth[1:])) and max(zeroth) > 1 << 17  # counter 0 wrapped


def test_a_counter_bank_keeps_its_counts_in_the_up5ks_single_port_ram():
    from hwsim import OnPlatform

    class Up5k:
        family, device = "iCE40", "iCE40UP5K"

    bank = CounterBank([1, 1, 2, 1, 1, 1])
    text = rtlil.convert(OnPlatform(bank, Up5k()), ports=[bank.inc, bank.word])
    assert "SB_SPRAM256KA" in text and "$mem" not in text
    assert "SB_SPRAM256KA" not in rtlil.convert(bank, ports=[bank.inc, bank.word])

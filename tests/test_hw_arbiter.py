"""The round-robin arbiter (cepc.hw.arbiter): its registered choice against the one made in the cycle."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Cat, Elaboratable, Module, Mux
from amaranth.sim import Simulator

from cepc.hw.arbiter import RoundRobin
from cepc.hw.fifo import OutputFifo


class Outputs(Elaboratable):
    """``n`` output FIFOs behind an arbiter, as in the top."""

    def __init__(self, n: int, registered: bool, depth: int):
        self.fifos = [OutputFifo(8, depth) for _ in range(n)]
        self.arbiter = RoundRobin(n, registered)

    def elaborate(self, platform):
        m = Module()
        arbiter, fifos = self.arbiter, self.fifos
        m.submodules.arbiter = arbiter
        for i, f in enumerate(fifos):
            m.submodules[f"fifo{i}"] = f
            m.d.comb += f.r_en.eq(arbiter.take & (arbiter.chosen == i))
        m.d.comb += [arbiter.ready.eq(Cat(*(f.r_rdy for f in fifos))),
                     arbiter.ready_next.eq(Cat(*(f.r_rdy_next for f in fifos)))]
        data = fifos[0].r_data
        for i in range(1, len(fifos)):
            data = Mux(arbiter.chosen == i, fifos[i].r_data, data)
        self.data = data
        return m


def trace(n: int, registered: bool, seed: int, cycles: int = 800, depth: int = 4):
    """Random writes into every FIFO (word = FIFO index and a count) and a random sink; per cycle:
    (valid, the word offered, taken)."""
    dut = Outputs(n, registered, depth)
    rng = random.Random(seed)
    out = []

    async def bench(ctx):
        count = 0
        for _ in range(cycles):
            busy = rng.random() < 0.5  # bursts where the FIFOs fill together
            for i, f in enumerate(dut.fifos):
                w = rng.random() < (0.6 if busy else 0.1) and ctx.get(f.w_level) < depth - 1
                ctx.set(f.w_en, w)
                ctx.set(f.w_data, (count << 2 | i) & 0xFF)
                count += w
            take = rng.random() < 0.4
            ctx.set(dut.arbiter.take, take)
            valid, data = ctx.get(dut.arbiter.valid), ctx.get(dut.data)
            out.append((valid, data if valid else None, valid and take))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


@pytest.mark.parametrize("n, seed", [(2, 1), (3, 2), (3, 3), (4, 4)])
def test_the_registered_choice_is_the_choice_made_in_the_cycle(n, seed):
    registered, combinational = trace(n, True, seed), trace(n, False, seed)
    assert registered == combinational
    taken = [data & 3 for _, data, took in combinational if took]
    assert set(taken) == set(range(n)) and len(taken) > 100
    # round robin: with every FIFO holding records, a FIFO is not taken twice running
    assert any(a != b for a, b in zip(taken, taken[1:]))


def test_an_offered_record_stays_until_taken():
    out = trace(3, True, 5)
    for (valid, data, took), (valid2, data2, _) in zip(out, out[1:]):
        if valid and not took:
            assert valid2 and data2 == data

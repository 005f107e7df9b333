"""The DP16KD the host link instantiates on ECP5 (cepc.hw.ecp5), in its behavioural model: the
address in bits 13..3, the 9-bit data, the read enable and the output register's enable."""

from __future__ import annotations

import random

from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.sim import Simulator

from cepc.hw import ecp5


class Simulated:
    """A platform that asks for the primitives' models."""
    family = "ecp5"
    simulate_primitives = True


class Bench(Elaboratable):
    def __init__(self):
        self.w_en, self.w_addr, self.w_data = Signal(), Signal(11), Signal(9)
        self.r_addr, self.r_en, self.o_en, self.out = Signal(11), Signal(), Signal(), Signal(9)

    def elaborate(self, platform):
        m = Module()
        m.submodules.ram = ecp5.dp16kd(w_en=self.w_en, w_addr=self.w_addr, w_data=self.w_data, r_addr=self.r_addr,
                                       r_en=self.r_en, o_en=self.o_en, out=self.out, platform=Simulated())
        return m


def test_the_dp16kd_reads_through_its_output_register():
    dut = Bench()
    rng = random.Random(5)
    memory = [0] * ecp5.DEPTH

    async def bench(ctx):
        latch = out = 0  # what the read latched, what the output register holds
        for _ in range(600):
            w_en, w_addr, w_data = rng.random() < 0.5, rng.randrange(64), rng.randrange(512)
            r_en, o_en, r_addr = rng.random() < 0.7, rng.random() < 0.7, rng.randrange(64)
            ctx.set(dut.w_en, w_en)
            ctx.set(dut.w_addr, w_addr)
            ctx.set(dut.w_data, w_data)
            ctx.set(dut.r_en, r_en)
            ctx.set(dut.o_en, o_en)
            ctx.set(dut.r_addr, r_addr)
            await ctx.tick()
            # at the edge: the output register takes the latch, the read latches the old word
            out = latch if o_en else out
            latch = memory[r_addr] if r_en else latch
            if w_en:
                memory[w_addr] = w_data
            assert ctx.get(dut.out) == out

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_elsewhere_the_dp16kd_is_an_instance_with_its_output_register():
    class Ecp5:
        family = "ecp5"

    r = Signal(9)
    inst = ecp5.dp16kd(w_en=Signal(), w_addr=Signal(11), w_data=Signal(9), r_addr=Signal(11), r_en=1, o_en=1, out=r,
                       platform=Ecp5())
    assert inst.type == "DP16KD" and inst.parameters["REGMODE_B"] == "OUTREG"
    assert ecp5.uses_dp16kd(Ecp5()) and not ecp5.uses_dp16kd(None)

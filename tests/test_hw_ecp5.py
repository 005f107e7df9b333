"""The DP16KDs cepc.hw.ecp5 instantiates on ECP5, in their behavioural model: for each of the block's
shapes, the word address above the right number of low address bits, the byte enables, the data pins
(both ports' at 36 bits), the read enable and the output register's enable; and RegisteredRam, which
the table and the host link use, the same cycle for cycle on ECP5 (DP16KDs) and elsewhere (a memory
and a register)."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Elaboratable, Fragment, Module, Signal, signed, unsigned
from amaranth.sim import Simulator

from cepc.hw import ecp5


class Simulated:
    """A platform that asks for the primitives' models."""
    family = "ecp5"
    simulate_primitives = True


class Bench(Elaboratable):
    def __init__(self, width: int):
        depth = ecp5.MODES[width]
        self.width, self.depth = width, depth
        self.w_en, self.w_addr, self.w_data = Signal(), Signal(range(depth)), Signal(width)
        self.r_addr, self.r_en, self.o_en, self.out = Signal(range(depth)), Signal(), Signal(), Signal(width)

    def elaborate(self, platform):
        m = Module()
        m.submodules.ram = ecp5.dp16kd(w_en=self.w_en, w_addr=self.w_addr, w_data=self.w_data, r_addr=self.r_addr,
                                       r_en=self.r_en, o_en=self.o_en, out=self.out, platform=Simulated(),
                                       width=self.width)
        return m


def drive(dut, steps: int, seed: int, check):
    """Random writes and reads over the whole address range (so every address bit matters); `check`
    gets the expected output register after each edge."""
    rng = random.Random(seed)
    memory = [0] * dut.depth
    top = len(dut.w_addr)

    async def bench(ctx):
        latch = out = 0  # what the read latched, what the output register holds
        for _ in range(steps):
            # addresses differing in one bit from a few hot ones: a swapped or dropped bit shows
            hot = [0, dut.depth - 1, 0b1010 % dut.depth]
            w_addr = rng.choice(hot) ^ (1 << rng.randrange(top))
            r_addr = rng.choice([w_addr, rng.choice(hot) ^ (1 << rng.randrange(top))])
            w_en, w_data = rng.random() < 0.5, rng.getrandbits(dut.width)
            r_en, o_en = rng.random() < 0.7, rng.random() < 0.7
            for sig, v in ((dut.w_en, w_en), (dut.w_addr, w_addr), (dut.w_data, w_data), (dut.r_en, r_en),
                           (dut.o_en, o_en), (dut.r_addr, r_addr)):
                ctx.set(sig, v)
            await ctx.tick()
            # at the edge: the output register takes the latch, the read latches the old word
            out = latch if o_en else out
            latch = memory[r_addr] if r_en else latch
            if w_en:
                memory[w_addr] = w_data
            check(ctx, out)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("width", sorted(ecp5.MODES))
def test_each_shape_of_the_dp16kd_reads_through_its_output_register(width):
    dut = Bench(width)
    drive(dut, 500, width, expect(dut))


class RamBench(Elaboratable):
    """A RegisteredRam elaborated for ``platform`` (the simulator gives none)."""

    def __init__(self, width: int, depth: int, platform):
        self.ram = r = ecp5.RegisteredRam(width, depth)
        r._MustUse__silence = True  # elaborated below, for the platform given, not as a submodule
        self.width, self.depth, self.platform = width, depth, platform
        self.w_en, self.w_addr, self.w_data = r.w_en, r.w_addr, r.w_data
        self.r_addr, self.r_en, self.o_en, self.out = r.r_addr, r.r_en, r.o_en, r.r_data

    def elaborate(self, platform):
        return self.ram.elaborate(self.platform)


def expect(dut):
    def check(ctx, out):
        assert ctx.get(dut.out) == out
    return check


@pytest.mark.parametrize("width, depth, blocks", [(9, 2048, 1), (80, 256, 3), (40, 1024, 3), (5, 4096, 2)])
@pytest.mark.parametrize("primitives", [True, False])
def test_a_registered_ram_is_the_same_on_ecp5_and_elsewhere(width, depth, blocks, primitives):
    # the widest shape deep enough: 256 deep takes 36-bit blocks, so 80 bits is three of them
    dut = RamBench(width, depth, Simulated() if primitives else None)
    assert dut.ram.blocks() == blocks
    drive(dut, 400, depth + width, expect(dut))


def test_on_ecp5_the_dp16kd_is_an_instance_with_its_output_register():
    class Ecp5:
        family = "ecp5"

    r = Signal(9)
    inst = ecp5.dp16kd(w_en=Signal(), w_addr=Signal(11), w_data=Signal(9), r_addr=Signal(11), r_en=1, o_en=1, out=r,
                       platform=Ecp5())
    assert inst.type == "DP16KD" and inst.parameters["REGMODE_B"] == "OUTREG"
    wide = ecp5.dp16kd(w_en=Signal(), w_addr=Signal(9), w_data=Signal(36), r_addr=Signal(9), r_en=1, o_en=1,
                       out=Signal(36), platform=Ecp5(), width=36)
    assert wide.parameters["DATA_WIDTH_B"] == 36 and wide.parameters["REGMODE_A"] == "OUTREG"
    assert ecp5.uses_dp16kd(Ecp5()) and not ecp5.uses_dp16kd(None)
    assert [ecp5.mode_for(d) for d in (2, 512, 513, 2048, 16384)] == [36, 36, 18, 9, 1]
    # the model shares these with the instance, so they are pinned to Yosys' mapping here
    # (share/lattice/brams_map_16kd.v: a W-bit port's word address starts at address bit log2(W'))
    assert ecp5.LOW_BITS == {36: 5, 18: 4, 9: 3, 4: 2, 2: 1, 1: 0}
    assert all(ecp5.MODES[w] << ecp5.LOW_BITS[w] == 16384 for w in ecp5.MODES)


def test_the_small_die_is_told_by_the_boards_own_platforms():
    # the table's copies and the host link's slices are left out on the UP5K: by Amaranth's family name
    from amaranth_boards.icebreaker import ICEBreakerPlatform
    from amaranth_boards.ulx3s import ULX3S_85F_Platform

    from cepc.hw.replica import small_die

    assert small_die(ICEBreakerPlatform()) and not small_die(ULX3S_85F_Platform())
    assert not small_die(None)


class MultBench(Elaboratable):
    """A RegisteredMult elaborated for ``platform`` (the simulator gives none)."""

    def __init__(self, a_shape, b_shape, platform):
        self.dut = ecp5.RegisteredMult(a_shape, b_shape)
        self.platform = platform

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = Fragment.get(self.dut, self.platform)
        return m


@pytest.mark.parametrize("a_shape, b_shape", [(unsigned(18), unsigned(10)), (signed(14), unsigned(10)),
                                              (signed(18), signed(18)), (unsigned(5), signed(7)),
                                              (unsigned(18), unsigned(18)), (signed(18), unsigned(18))])
@pytest.mark.parametrize("platform", [Simulated(), None], ids=["mult18x18d", "fabric"])
def test_a_registered_product_is_the_operands_product_a_stage_later(a_shape, b_shape, platform):
    # the MULT18X18D's pins (operands extended by their signedness, SIGNEDA/B, its input registers on
    # CE0 and its output register on CE1) as the flip-flops and `*` elsewhere: each takes its operands
    # on a_en's edges and their product on p_en's
    bench = MultBench(a_shape, b_shape, platform)
    dut = bench.dut
    rng = random.Random(len(a_shape.__repr__()) * 7 + a_shape.width)

    def draw(shape):
        v = rng.choice([rng.getrandbits(shape.width), (1 << shape.width) - 1, 1 << (shape.width - 1), 0, 1])
        return v - (1 << shape.width) if shape.signed and v >> (shape.width - 1) else v

    async def run(ctx):
        a_reg = b_reg = p = 0
        for _ in range(300):
            a, b, a_en, p_en = draw(a_shape), draw(b_shape), rng.random() < 0.6, rng.random() < 0.6
            for sig, v in ((dut.a, a), (dut.b, b), (dut.a_en, a_en), (dut.p_en, p_en)):
                ctx.set(sig, v)
            await ctx.tick()
            p = a_reg * b_reg if p_en else p
            a_reg, b_reg = (a, b) if a_en else (a_reg, b_reg)
            assert ctx.get(dut.p) == p

    sim = Simulator(bench)
    sim.add_clock(1e-8)
    sim.add_testbench(run)
    sim.run()
    assert dut.p.shape() == (Signal(a_shape) * Signal(b_shape)).shape()

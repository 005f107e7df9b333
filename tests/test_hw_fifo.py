"""The output FIFOs (cepc.hw.fifo): off the iCE40 a write register in front of LUT RAM; on it,
block RAM read into its own output latch."""

from __future__ import annotations

import random

import pytest
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.sim import Simulator

from cepc.hw.fifo import BlockRamFifo, OutputFifo, TwoBeatFifo


def clocked(dut, bench):
    """Run ``bench`` (an async testbench) against ``dut`` on a clock of its own."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def run(dut, writes: float, reads: float, cycles: int, seed: int):
    """Random writes (never when the level leaves no room for the write register's word) and
    reads; returns (words read in order, words written in order, per-cycle trace)."""
    rng = random.Random(seed)
    written, read, trace = [], [], []

    async def bench(ctx):
        for _ in range(cycles):
            level, rdy, data = ctx.get(dut.w_level), ctx.get(dut.r_rdy), ctx.get(dut.r_data)
            w = rng.random() < writes and level < dut.depth - 1
            r = rng.random() < reads
            word = rng.getrandbits(len(dut.w_data))
            ctx.set(dut.w_en, w)
            ctx.set(dut.w_data, word)
            ctx.set(dut.r_en, r)
            trace.append((level, rdy, data, w, r))
            if w:
                written.append(word)
            if r and rdy:
                read.append(data)
            await ctx.tick()

    clocked(dut, bench)
    return read, written, trace


@pytest.mark.parametrize("depth, writes, reads, seed", [(16, 0.5, 0.5, 1), (16, 0.9, 0.2, 2), (16, 0.3, 0.9, 3),
                                                        (5, 0.7, 0.6, 4), (2, 0.8, 0.8, 5)])
def test_every_word_is_read_once_in_order(depth, writes, reads, seed):
    read, written, trace = run(OutputFifo(12, depth), writes, reads, 600, seed)
    assert read == written[:len(read)] and len(written) - len(read) <= depth
    # the head stays offered, unchanged, until it is taken (AXI-Stream: the host link reads it there)
    for (_, rdy, data, _, r), (_, rdy2, data2, _, _) in zip(trace, trace[1:]):
        if rdy and not r:
            assert rdy2 and data2 == data


def test_r_rdy_next_is_the_flag_after_the_edge():
    # the top's arbiter registers its choice from it
    dut = OutputFifo(8, 4)
    rng = random.Random(7)
    pairs = []

    async def bench(ctx):
        for _ in range(400):
            ctx.set(dut.w_en, rng.random() < 0.6 and ctx.get(dut.w_level) < dut.depth - 1)
            ctx.set(dut.r_en, rng.random() < 0.5)
            predicted = ctx.get(dut.r_rdy_next)
            await ctx.tick()
            pairs.append((predicted, ctx.get(dut.r_rdy)))

    clocked(dut, bench)
    assert all(p == r for p, r in pairs)
    assert {r for _, r in pairs} == {0, 1}


def after_one_write(dut, word: int) -> list[tuple[int, int]]:
    """``word`` written at the first edge (and held), nothing read: (r_rdy, w_level) after each of the
    next three edges."""
    seen = []

    async def bench(ctx):
        ctx.set(dut.w_en, 1)
        ctx.set(dut.w_data, word)
        await ctx.tick()
        ctx.set(dut.w_en, 0)
        for _ in range(3):
            seen.append((ctx.get(dut.r_rdy), ctx.get(dut.w_level)))
            await ctx.tick()

    clocked(dut, bench)
    return seen


def test_a_word_is_read_two_cycles_after_its_write_like_the_buffered_fifo():
    # both back ends, and the iCE40's block-RAM FIFO, take the same cycles
    levels = []
    for dut in (OutputFifo(8, 16), BlockRamFifo(8, 16)):
        seen = after_one_write(dut, 0xA5)
        assert [rdy for rdy, _ in seen] == [0, 1, 1], dut
        levels.append([level for _, level in seen])
    # the write register's word is not counted until stored (the top keeps a slot for it); the
    # buffered FIFO counts it at once
    assert levels == [[0, 1, 1], [1, 1, 1]]


def test_the_level_counts_stored_words_and_a_full_fifo_ignores_writes():
    dut = OutputFifo(8, 4)
    levels = []

    async def bench(ctx):
        for i in range(8):
            ctx.set(dut.w_en, 1)
            ctx.set(dut.w_data, i)
            await ctx.tick()
            levels.append(ctx.get(dut.w_level))
        ctx.set(dut.w_en, 0)
        await ctx.tick()
        out = []
        ctx.set(dut.r_en, 1)
        while ctx.get(dut.r_rdy):
            out.append(ctx.get(dut.r_data))
            await ctx.tick()
        levels.append(out)

    clocked(dut, bench)
    assert levels[:8] == [0, 1, 2, 3, 4, 4, 4, 4]
    assert levels[8] == [0, 1, 2, 3]


@pytest.mark.parametrize("depth, writes, reads, seed", [(16, 0.5, 0.5, 11), (16, 0.9, 0.3, 12), (16, 0.2, 0.9, 13),
                                                        (3, 0.8, 0.5, 14), (2, 0.7, 0.7, 15)])
def test_the_block_ram_fifo_takes_the_cycles_of_amaranths_buffered_fifo(depth, writes, reads, seed):
    # the iCE40's FIFO replaced SyncFIFOBuffered (whose memory Yosys mapped with two flip-flops and a
    # LUT a bit beside it): every cycle's level, flag and head are the same, full and empty included
    def trace(dut):
        rng = random.Random(seed)
        out = []

        async def bench(ctx):
            for _ in range(500):
                ctx.set(dut.w_en, rng.random() < writes)  # into a full FIFO too: refused alike
                ctx.set(dut.w_data, rng.getrandbits(10))
                ctx.set(dut.r_en, rng.random() < reads)
                rdy = ctx.get(dut.r_rdy)
                out.append((ctx.get(dut.w_level), ctx.get(dut.w_rdy), rdy, ctx.get(dut.r_data) if rdy else None))
                await ctx.tick()

        clocked(dut, bench)
        return out

    ours, theirs = trace(BlockRamFifo(10, depth)), trace(SyncFIFOBuffered(width=10, depth=depth))
    assert ours == theirs
    levels = {level for level, *_ in ours}
    assert 0 in levels and (depth in levels or writes <= reads)  # empty, and full where writes outpace reads


def test_the_ice40_fifo_memory_never_reads_the_word_being_written():
    # what NO_COLLISIONS promises Yosys (cepc.hw.ecp5): checked on the memory's own ports
    dut = BlockRamFifo(6, 4)
    rng = random.Random(3)
    seen = {"reads": 0, "writes": 0}

    async def bench(ctx):
        for _ in range(2000):
            ctx.set(dut.w_en, rng.random() < 0.6)
            ctx.set(dut.w_data, rng.getrandbits(6))
            ctx.set(dut.r_en, rng.random() < 0.5)
            await ctx.delay(1e-9)
            w_en, w_addr = ctx.get(dut.w_port.en), ctx.get(dut.w_port.addr)
            r_en, r_addr = ctx.get(dut.r_port.en), ctx.get(dut.r_port.addr)
            seen["writes"] += w_en
            seen["reads"] += r_en
            assert not (w_en and r_en and w_addr == r_addr)
            await ctx.tick()

    clocked(dut, bench)
    assert seen["reads"] > 500 and seen["writes"] > 500


def every_other(dut, writes: float, reads: float, cycles: int, seed: int, width: int):
    """Random writes, never in two cycles running (the pipeline partitioner's rate) and into a full
    FIFO too (refused), each word held through the cycle after, and random reads: (words read, words
    accepted, per-cycle trace, memory ports)."""
    rng = random.Random(seed)
    written, read, trace, ports = [], [], [], []

    async def bench(ctx):
        last, word, predicted = False, 0, None
        for _ in range(cycles):
            w = not last and rng.random() < writes
            word = word if last else rng.getrandbits(width)
            ctx.set(dut.w_en, w)
            ctx.set(dut.w_data, word)
            ctx.set(dut.r_en, rng.random() < reads)
            await ctx.delay(1e-9)
            level, rdy, data, r = ctx.get(dut.w_level), ctx.get(dut.r_rdy), ctx.get(dut.r_data), ctx.get(dut.r_en)
            if predicted is not None:  # (the flag after the last edge, as predicted before it)
                assert rdy == predicted
            predicted = ctx.get(dut.r_rdy_next)
            trace.append((level, ctx.get(dut.w_rdy), rdy, data if rdy else None, r))
            ports.append((ctx.get(dut.w_port.en), ctx.get(dut.w_port.addr), ctx.get(dut.r_port.en),
                          ctx.get(dut.r_port.addr)))
            if w and ctx.get(dut.w_rdy):
                written.append(word)
            if r and rdy:
                read.append(data)
            last = w
            await ctx.tick()

    clocked(dut, bench)
    return read, written, trace, ports


@pytest.mark.parametrize("width, depth, writes, reads, seed", [(11, 16, 0.5, 0.5, 21), (12, 16, 0.9, 0.2, 22),
                                                               (289, 16, 0.4, 0.9, 23), (7, 3, 0.9, 0.6, 24),
                                                               (2, 2, 0.8, 0.8, 25)])
def test_the_two_beat_fifo_gives_every_word_whole_once_in_order(width, depth, writes, reads, seed):
    # each word is stored as two halves (odd widths: the high half a bit narrower), and read back whole
    dut = TwoBeatFifo(width, depth)
    read, written, trace, ports = every_other(dut, writes, reads, 1500, seed, width)
    assert len(read) > 100
    assert read == written[:len(read)] and len(written) - len(read) <= depth
    for (_, _, rdy, data, r), (_, _, rdy2, data2, _) in zip(trace, trace[1:]):
        if rdy and not r:  # the head stays offered, unchanged, until taken
            assert rdy2 and data2 == data
    # the level counts a word from its write until it is taken, and refuses writes when full
    levels = [level for level, *_ in trace]
    assert max(levels) <= depth and all(w_rdy == (level != depth) for level, w_rdy, *_ in trace)
    assert 0 in levels and (depth in levels or writes <= reads)
    # what NO_COLLISIONS promises Yosys: a half is never read where one is being written
    assert not any(w_en and r_en and w_addr == r_addr for w_en, w_addr, r_en, r_addr in ports)


def test_the_two_beat_fifo_offers_a_word_a_cycle_after_the_block_ram_fifo_and_one_every_other_cycle():
    flags = [[rdy for rdy, _ in after_one_write(dut, 0x5A5A5)] for dut in (BlockRamFifo(20, 16), TwoBeatFifo(20, 16))]
    # written at the first edge: offered after the second (block RAM's) or the third (two halves)
    assert flags == [[0, 1, 1], [0, 0, 1]]

    dut, taken = TwoBeatFifo(20, 16), []

    async def drain(ctx):
        for i in range(3):  # three words, every other cycle
            ctx.set(dut.w_data, 0xABCD0 + i)
            ctx.set(dut.w_en, 1)
            await ctx.tick()
            ctx.set(dut.w_en, 0)
            await ctx.tick()
        ctx.set(dut.r_en, 1)  # a reader always ready
        for _ in range(8):
            taken.append(ctx.get(dut.r_data) if ctx.get(dut.r_rdy) else None)
            await ctx.tick()

    clocked(dut, drain)
    assert taken == [0xABCD0, None, 0xABCD1, None, 0xABCD2, None, None, None]

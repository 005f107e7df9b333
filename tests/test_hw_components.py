"""Unit tests of the hardware components in ``amaranth.sim``: framer, decoder, NFA core, partitioner."""

from __future__ import annotations

import random
import re

import numpy as np
import pandas as pd
import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from cepc.hw.decoder import PredicateDecoder
from cepc.hw.delay import DelayLine
from cepc.hw.expr import CHAINED_ABOVE, CMP, ordered, select_sum
from cepc.hw.framing import Framer
from cepc.hw.layouts import tuple_layout
from cepc.hw.nfa_core import NfaCore
from cepc.hw.partition import PipelinePartitioner
from cepc.lang.check import check
from cepc.lang.parse import parse
from cepc.nfa import evaluate
from cepc.nfa.lower import lower

import patterns as pt

# a Framer whose constructor raises is never elaborated, on purpose
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")


def run(dut, *benches):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for b in benches:
        sim.add_testbench(b)
    sim.run()


# --- framer ------------------------------------------------------------------------------


def frame_bytes(width: int, tb: int, packets: list[bytes], stall: float, ready: float, seed: int,
                buffered: bool | None = None):
    f = Framer(width, tb, buffered=buffered)
    rng = random.Random(seed)
    wb = width // 8
    out = []
    done = []

    async def source(ctx):
        for data in packets:
            for i in range(0, len(data), wb):
                chunk = data[i:i + wb]
                while rng.random() < stall:
                    ctx.set(f.valid, 0)
                    await ctx.tick()
                ctx.set(f.data, int.from_bytes(chunk, "little"))
                ctx.set(f.keep, (1 << len(chunk)) - 1)
                ctx.set(f.last, int(i + wb >= len(data)))
                ctx.set(f.valid, 1)
                await ctx.tick().until(f.ready)
        ctx.set(f.valid, 0)
        done.append(True)

    async def sink(ctx):
        idle = 0
        while not done or idle < 40:  # 40 quiet cycles after the last beat and the last tuple
            idle = idle + 1 if done else 0
            ctx.set(f.tuples.ready, rng.random() < ready)
            _, _, v, p, r = await ctx.tick().sample(f.tuples.valid, f.tuples.payload, f.tuples.ready)
            if v and r:
                out.append(p)
                idle = 0
        done.append(ctx.get(f.malformed))

    run(f, source, sink)
    return out, done[-1]


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([8, 16, 24, 64, 128, 512]), st.integers(1, 20), st.integers(1, 12),
       st.floats(0, 0.5), st.floats(0.3, 1), st.integers(0, 1000))
def test_framer_cuts_straddling_tuples_under_stalls(width, tb, n, stall, ready, seed):
    rng = random.Random(seed)
    data = bytes(rng.randrange(256) for _ in range(tb * n))
    out, malformed = frame_bytes(width, tb, [data], stall, ready, seed)
    assert out == [int.from_bytes(data[i * tb:(i + 1) * tb], "little") for i in range(n)]
    assert malformed == 0


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 20), st.integers(1, 8), st.floats(0, 0.5), st.floats(0.3, 1), st.integers(0, 1000))
def test_the_ice40_framer_offers_tuples_from_its_assembly_register(tb, n, stall, ready, seed):
    # the byte-serial framer without an output register (the iCE40's): the same tuples under stalls
    rng = random.Random(seed)
    data = bytes(rng.randrange(256) for _ in range(tb * n))
    out, malformed = frame_bytes(8, tb, [data], stall, ready, seed, buffered=False)
    assert out == [int.from_bytes(data[i * tb:(i + 1) * tb], "little") for i in range(n)]
    assert malformed == 0


@pytest.mark.parametrize("width, buffered", [(8, True), (8, False), (32, None), (128, None)])
def test_framer_discards_a_partial_tuple_and_resyncs(width, buffered):
    tb = 5
    a, b, c = bytes(range(10)), bytes(range(100, 103)), bytes(range(200, 215))
    out, malformed = frame_bytes(width, tb, [a, b, c], 0.0, 1.0, 0, buffered=buffered)
    expected = [a[0:5], a[5:10], c[0:5], c[5:10], c[10:15]]
    assert out == [int.from_bytes(x, "little") for x in expected]
    assert malformed == 1


@pytest.mark.parametrize("width, buffered", [(8, True), (8, False), (32, None)])
@pytest.mark.parametrize("partial", [1, 2, 3, 4])
def test_framer_resyncs_after_a_partial_tuple_of_any_length(width, buffered, partial):
    # a packet that ends 1 to 4 bytes into a 5-byte tuple (4: one byte short of completing it)
    tb = 5
    a, b, c = bytes(range(10)), bytes(range(100, 100 + partial)), bytes(range(200, 215))
    out, malformed = frame_bytes(width, tb, [a, b, c], 0.0, 1.0, 0, buffered=buffered)
    expected = [a[0:5], a[5:10], c[0:5], c[5:10], c[10:15]]
    assert out == [int.from_bytes(x, "little") for x in expected]
    assert malformed == 1


@pytest.mark.parametrize("width,tb,every,buffered", [
    (64, 13, 2, None), (64, 13, 1, None), (128, 13, 1, None), (8, 13, 2, True), (24, 5, 2, None),
    (512, 13, 1, None), (512, 100, 1, None), (8, 13, 1, False), (8, 13, 2, False)])
def test_framer_sustains_the_input_bandwidth(width, tb, every, buffered):
    # cycles per tuple in steady state: the bus's bytes per cycle, or the consumer's rate (the byte-serial
    # framer without an output register: a cycle more than the bytes, and the wait for the consumer)
    f = Framer(width, tb, buffered=buffered)
    wb, n = width // 8, 120
    data = bytes(i % 251 for i in range(tb * n))
    cycles = []

    async def source(ctx):
        for i in range(0, len(data), wb):
            chunk = data[i:i + wb]
            ctx.set(f.data, int.from_bytes(chunk, "little"))
            ctx.set(f.keep, (1 << len(chunk)) - 1)
            ctx.set(f.last, int(i + wb >= len(data)))
            ctx.set(f.valid, 1)
            await ctx.tick().until(f.ready)
        ctx.set(f.valid, 0)

    async def sink(ctx):
        cycle = 0
        while len(cycles) < n:
            ctx.set(f.tuples.ready, cycle % every == 0)
            _, _, v, r = await ctx.tick().sample(f.tuples.valid, f.tuples.ready)
            cycle += 1
            if v and r:
                cycles.append(cycle)

    run(f, source, sink)
    per_tuple = (cycles[-1] - cycles[0]) / (n - 1)
    assert per_tuple <= (max(every, tb / wb) if buffered is not False else tb + every) + 0.01


def test_framer_rejects_bad_bus_widths():
    for w in (0, 4, 12, 520):
        with pytest.raises(ValueError, match=r"^bus width must be a multiple of 8 between 8 and 512, not"):
            Framer(w, 4)


# --- delay line ------------------------------------------------------------------------------


@pytest.mark.parametrize("depth, en_ahead", [(1, False), (4, False), (1, True), (4, True), (9, True)])
def test_delay_line_gives_each_word_back_after_depth_enabled_cycles(depth, en_ahead):
    # with en_ahead (the table's top), the data registers take `en` from copies registered from `en_next`
    width = 150  # three copies of the enable a stage
    line = DelayLine(width, depth, en_ahead=en_ahead)
    rng = random.Random(depth)
    ens = [rng.random() < 0.7 for _ in range(200)]
    words = [rng.getrandbits(width) for _ in range(200)]

    async def bench(ctx):
        sent, got = [], []
        for t in range(200):
            if en_ahead:
                ctx.set(line.en_next, ens[t + 1] if t + 1 < len(ens) else 1)
            ctx.set(line.en, ens[t])
            ctx.set(line.i_valid, 1)
            ctx.set(line.i_data, words[t])
            if ens[t]:
                if ctx.get(line.o_valid):
                    got.append(ctx.get(line.o_data))
                sent.append(words[t])
            await ctx.tick()
        assert got == sent[:len(got)] and len(got) == len(sent) - depth

    if en_ahead:  # `en` is a register: its copies start at 1, so does the first cycle's `en`
        ens[0] = True
    run(line, bench)


# --- predicate decoder ------------------------------------------------------------------------

DECODER_QUERY = """CREATE STREAM s (a INT8, b UINT16, e ENUM('x', 'y', 'z'), tag CHAR(3), f BOOL, big UINT64);
PATTERN (P1 P2 P3 P4 P5 P6 P7 P8 P9 P10)
DEFINE
  P1 AS a < -3,
  P2 AS a + b > 300 AND NOT f,
  P3 AS b - a * 2 BETWEEN 10 AND 200,
  P4 AS e IN ('x', 'z'),
  P5 AS tag = 'ab' OR tag = 'abc',
  P6 AS f,
  P7 AS a - 5 >= -100 AND e != 'y',
  P8 AS big > 18446744073709551000,
  P9 AS -a = 7 OR b NOT BETWEEN 5 AND 60000,
  P10 AS b * 3 - 1 < 1000 AND a IN (1, -1, 0x10);
"""


def test_decoder_agrees_with_software_evaluation_on_random_tuples():
    checked = check(parse(DECODER_QUERY))
    design = lower(checked)
    q = design.queries[0]
    layout = tuple_layout(design.tuple)
    dut = PredicateDecoder(layout, list(q.predicates))
    rng = random.Random(7)
    rows = []
    for _ in range(400):
        rows.append({
            "a": rng.choice([-128, -4, -3, -1, 0, 1, 7, -7, 16, 127, rng.randrange(-128, 128)]),
            "b": rng.choice([0, 5, 60000, 65535, 299, 301, rng.randrange(65536)]),
            "e": rng.choice("xyz"), "tag": rng.choice(["", "a", "ab", "abc", "abd", "b"]),
            "f": rng.randrange(2),
            "big": rng.choice([0, 2**64 - 1, 18446744073709551000, 18446744073709551001, rng.randrange(2**64)]),
        })
    frame = pd.DataFrame(rows)
    cols = {c: frame[c].to_numpy() for c in frame.columns}
    cols["big"] = np.array([r["big"] for r in rows], dtype=np.uint64)
    defines = {d.name: d for d in checked.queries[0].defines}
    want = np.stack([evaluate.vector(defines[p.name].expr, checked.stream)(cols) for p in q.predicates], axis=1)

    async def bench(ctx):
        for i, row in enumerate(rows):
            ctx.set(dut.tuple.as_value(), design.tuple.pack(row))
            got = ctx.get(dut.preds)
            bits = [bool(got >> j & 1) for j in range(len(q.predicates))]
            assert bits == list(want[i]), (row, bits, list(want[i]))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert dut.shared >= 0


def test_decoder_shares_identical_comparators():
    checked = check(parse("""CREATE STREAM s (x UINT8);
        PATTERN (A B C) DEFINE A AS x = 3, B AS x = 3 OR x = 4, C AS NOT x = 4;"""))
    design = lower(checked)
    from amaranth.hdl import Fragment
    dut = PredicateDecoder(tuple_layout(design.tuple), list(design.queries[0].predicates))
    Fragment.get(dut, None)
    assert dut.shared == 2  # x = 3 and x = 4 are each built once


# --- NFA core ---------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(pt.patterns(max_leaves=10), st.booleans(), st.lists(st.integers(0, 2**16 - 1), min_size=1, max_size=16))
def test_nfa_core_is_the_plan_step_function(pattern, skip, inputs):
    checked = check(parse(pt.query_text(pattern, "SKIP PAST LAST ROW" if skip else "CONTINUE")))
    q = lower(checked).queries[0]
    if q.nfa.n_states == 0:
        return
    dut = NfaCore(q.nfa, len(q.predicates), q.skip)
    n, p = q.nfa.n_states, max(1, len(q.predicates))

    async def bench(ctx):
        for word in inputs:
            state, preds = word & ((1 << n) - 1), (word >> 8) & ((1 << p) - 1)
            ctx.set(dut.state, state)
            ctx.set(dut.preds, preds)
            want = q.nfa.step(state, preds, q.skip)
            assert (ctx.get(dut.next), bool(ctx.get(dut.match))) == want

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


# --- pipeline partitioner ------------------------------------------------------------------------


def drive_partitioner(depth: int, keys: list[int], update, slots_only: bool = True, key_ahead: bool = False):
    """Inject ``keys`` (one per slot); at the tail apply ``update(key, state, hit, free) -> next``.
    With ``key_ahead``, each key is on ``key`` from the cycle after the one before it was injected (as the
    top's stage 2 holds it), and the first from the cycle before its own.

    Returns (key, state, hit, free, next) per tuple in order, and the final occupancy.
    """
    dut = PipelinePartitioner(depth, 8, 4, key_ahead=key_ahead)
    seen = []
    pending = list(keys)

    async def bench(ctx):
        ctx.set(dut.en, 1)
        cycles = 0
        while len(seen) < len(keys) and cycles < 10 * (len(keys) + depth):
            if pending and ctx.get(dut.slot) and (cycles or not key_ahead):
                ctx.set(dut.inject, 1)
                ctx.set(dut.key, pending.pop(0))
            else:
                ctx.set(dut.inject, 0)
                if key_ahead and pending:
                    ctx.set(dut.key, pending[0])
            if ctx.get(dut.out_valid):
                k, s, h, f = (ctx.get(dut.out_key), ctx.get(dut.out_state), ctx.get(dut.out_hit),
                              ctx.get(dut.out_free))
                nxt = update(k, s, h, f)
                ctx.set(dut.next_state, nxt)
                seen.append((k, s, h, f, nxt))
            await ctx.tick()
            cycles += 1
        seen.append(ctx.get(dut.occupied))

    run(dut, bench)
    occupied = seen.pop()
    return seen, occupied


def test_partitioner_keeps_one_state_per_key_and_swaps_elements_to_the_tail():
    model: dict[int, int] = {}

    def count_up(key, state, hit, free):
        assert state == (model.get(key, 0) if hit else 0)
        assert hit == (key in model)
        nxt = (state + 1) & 0xF or 1
        model[key] = nxt
        return nxt

    keys = [3, 7, 3, 3, 9, 7, 1, 3, 9, 9, 2, 7]
    seen, occupied = drive_partitioner(6, keys, count_up)
    assert [k for k, *_ in seen] == keys
    assert occupied == len(set(keys))


@pytest.mark.parametrize("key_ahead", [False, True])
def test_one_element_keeps_its_key_until_its_state_is_zero_and_drops_the_others_meanwhile(key_ahead):
    # One element (one partition): back to back, the key just written there (a hit), another key
    # (dropped while the element lives), or any key once it is freed. (key_ahead: whether the element
    # holds the key is registered the cycle before the key's token, against the key the token at the
    # tail then writes there, or the element's)
    held: list[tuple[int, int]] = []  # the model: the element's (key, state), if it is used

    def count_to_three(key, state, hit, free):
        owner = held[0] if held else None
        assert hit == (owner is not None and owner[0] == key), (key, held)
        assert free == (owner is None)
        assert state == (owner[1] if hit else 0)
        nxt = 0 if state == 3 else state + 1
        if hit or free:
            held[:] = [(key, nxt)] if nxt else []
        return nxt

    keys = [1, 1, 2, 1, 1, 2, 2, 3, 2, 2, 2, 3, 3, 1]
    seen, occupied = drive_partitioner(1, keys, count_to_three, key_ahead=key_ahead)
    assert [k for k, *_ in seen] == keys
    # (the hits the model traces: the stream runs through every case above)
    assert [h for _, _, h, _, _ in seen] == [0, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0, 0, 0, 0]
    assert occupied == len(held)


def test_partitioner_frees_on_zero_state_and_reuses_elements():
    def alternate(key, state, hit, free):
        return 0 if hit else 5  # allocate, then free on the next tuple of the key

    keys = [1, 2, 1, 2, 3, 4, 3, 4, 5, 6, 5, 6]
    seen, occupied = drive_partitioner(2, keys, alternate)
    assert [h for _, _, h, _, _ in seen] == [0, 0, 1, 1] * 3
    assert occupied == 0


def test_partitioner_full_table_reports_neither_hit_nor_free():
    def keep(key, state, hit, free):
        return 1

    seen, occupied = drive_partitioner(3, [1, 2, 3, 4, 1, 4], keep)
    k4 = seen[3]
    assert k4[0] == 4 and not k4[2] and not k4[3]  # the fourth key finds no room: dropped
    assert seen[4][2] == 1  # key 1 still has its element
    assert occupied == 3


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("stale_by", ["timer", "expiry"])
def test_a_key_takes_over_an_element_left_stale_and_keeps_its_state_there(depth, stale_by):
    # The tail's write is decided the cycle before the token reaches it (`writes`, from registers): a
    # token that finds the tail element stale (its timer ran out, or its expiry passed) writes its key
    # and state there, so its key's next tuple finds them. Keys 5 (and 9) take every element; key 6
    # comes at each cycle around the moment they go stale, so that some time a timer runs out on the
    # very edge before key 6 reaches the tail. (`now`, the time of the tail's latest tuple, moves with a
    # tuple of key 7 just before key 6: dropped while the elements are live.)
    outcomes = set()
    for arrival in range(6, 64, 2):
        if stale_by == "timer":  # (a tick every 3 cycles, 15 ticks: a tick falls on either edge of a slot)
            dut = PipelinePartitioner(depth, 8, 4, evict_after=45)
        else:
            dut = PipelinePartitioner(depth, 8, 4, expiry_width=8)
        seen = []

        async def bench(ctx, dut=dut, arrival=arrival, seen=seen):
            ctx.set(dut.en, 1)
            schedule = {2 * depth + 4 * i: 9 - i for i in range(depth - 1)}
            schedule |= {4 * depth: 5, 4 * depth + arrival - 4: 7, 4 * depth + arrival: 6,
                         4 * depth + arrival + 20: 6}
            now = 0
            for cycle in range(4 * depth + arrival + 40):
                key = schedule.get(cycle)
                if key is not None:
                    assert ctx.get(dut.slot)
                ctx.set(dut.inject, int(key is not None))
                ctx.set(dut.key, key or 0)
                if stale_by == "expiry":  # a tuple's time is its cycle; it expires 24 later
                    ctx.set(dut.now, now)
                    ctx.set(dut.next_expiry, cycle + 24)
                if ctx.get(dut.out_valid):
                    k = ctx.get(dut.out_key)
                    seen.append((k, ctx.get(dut.out_hit), ctx.get(dut.out_free), ctx.get(dut.out_state)))
                    ctx.set(dut.next_state, k)  # (a key's state is the key)
                    now = cycle
                await ctx.tick()

        run(dut, bench)
        first, second = [s for s in seen if s[0] == 6]
        if first[1] or first[2]:  # placed: its next tuple finds its state
            assert second[1] == 1 and second[3] == 6, (arrival, seen)
        outcomes.add(bool(first[2]))
    assert outcomes == {False, True}  # (some arrivals find the elements live, some stale)


def test_partitioner_evicts_elements_whose_timer_ran_out():
    dut = PipelinePartitioner(4, 8, 4, evict_after=30)  # a tick every 2 cycles, 15 ticks
    seen, evictions = [], []

    async def bench(ctx):
        ctx.set(dut.en, 1)
        schedule = {0: 5, 10: 5, 80: 5, 90: 6}  # key 5, again soon, again after the timeout
        for cycle in range(120):
            key = schedule.get(cycle)
            if key is not None:
                assert ctx.get(dut.slot)
            ctx.set(dut.inject, int(key is not None))
            ctx.set(dut.key, key or 0)
            if ctx.get(dut.out_valid):
                seen.append((ctx.get(dut.out_key), ctx.get(dut.out_hit), ctx.get(dut.out_state)))
                ctx.set(dut.next_state, 3)
            evictions.append(ctx.get(dut.evicted))
            await ctx.tick()

    run(dut, bench)
    assert seen == [(5, 0, 0), (5, 1, 3), (5, 0, 0), (6, 0, 0)]  # the third finds its state gone
    assert sum(evictions) == 1


@pytest.mark.parametrize("wa, sa, wb, sb, chunk", [(40, False, 40, False, 16), (66, True, 64, False, 16),
                                                    (33, True, 33, True, 8), (20, False, 37, True, 16),
                                                    (17, True, 9, False, 4), (16, False, 16, True, 16)])
def test_ordered_compares_in_slices_as_amaranth_compares(wa, sa, wb, sb, chunk):
    # cepc.hw.expr.ordered: an ordering cut into slices of `chunk` bits, exact over mixed signedness,
    # against Amaranth's own comparison of the same operands, on values at and around the slices'
    # edges, the signs' and the extremes; and given either operand's inverse (a register of its own,
    # which each slice's carry then takes as it is), in one slice, and with the slices' equalities read
    # off carry chains too (chained: above CHAINED_ABOVE bits, the operands' common width)
    a, b = Signal(signed(wa) if sa else unsigned(wa)), Signal(signed(wb) if sb else unsigned(wb))
    na, nb = Signal(wa), Signal(wb)
    ops = ("<", "<=", ">", ">=")
    variants = [("none", chunk, (None, None), False), ("a", chunk, (na, None), False),
                ("b", chunk, (None, nb), False), ("a, one slice", None, (na, None), False),
                ("b, one slice", None, (None, nb), False)]
    if max(wa, wb) > CHAINED_ABOVE:
        variants += [("a, chained", chunk, (na, None), True), ("b, chained", chunk, (None, nb), True)]
    got = {(op, which): ordered(op, a, b, size, inverse, chained)
           for op in ops for which, size, inverse, chained in variants}
    want = {op: CMP[op](a, b) for op in ops}
    rng = random.Random(wa * 100 + wb)

    def samples(width, is_signed):
        lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if is_signed else (0, (1 << width) - 1)
        edges = [lo, hi, 0, 1, -1, *(k << c for c in range(0, width, chunk) for k in (1, -1))]
        return [v for v in edges if lo <= v <= hi] + [rng.randint(lo, hi) for _ in range(12)]

    pairs = [(x, y) for x in samples(wa, sa) for y in samples(wb, sb)]
    b_lo, b_hi = (-(1 << (wb - 1)) if sb else 0), (1 << (wb - (1 if sb else 0))) - 1
    # (equal, and apart in one slice alone, the lowest or one above it: where the slices' join decides)
    pairs += [(x, x + d) for x in samples(wa, sa) for d in (0, 1, -1, 1 << chunk, -(1 << chunk)) if b_lo <= x + d <= b_hi]

    async def bench(ctx):
        for x, y in pairs:
            ctx.set(a, x)
            ctx.set(b, y)
            ctx.set(na, ~x & ((1 << wa) - 1))
            ctx.set(nb, ~y & ((1 << wb) - 1))
            for (op, which), value in got.items():
                assert ctx.get(value) == ctx.get(want[op]), (x, op, y, which)

    sim = Simulator(Module())
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("wa, sa, wb, sb, chunk", [(66, True, 64, False, 16), (33, True, 33, True, 8),
                                                    (20, False, 37, True, 16)])
def test_ordered_with_its_slices_registered_joins_them_a_cycle_later(wa, sa, wb, sb, chunk):
    # ordered(cut=...): each slice's compares registered, the join after the registers (Woods' pipeline
    # with a tuple every three cycles: the conditions' slices, then their join). The cycle after the
    # operands are set, every ordering, with and without an inverse, chained or not, is Amaranth's
    # compare of the operands; and the cut takes every slice's compare, none of them joined: the join's
    # result before the edge is still the old operands'
    m = Module()
    a, b = Signal(signed(wa) if sa else unsigned(wa)), Signal(signed(wb) if sb else unsigned(wb))
    na, nb = Signal(wa), Signal(wb)
    registered = []

    def cut(v):
        r = Signal(v.shape(), name=f"slice{len(registered)}")
        m.d.sync += r.eq(v)
        registered.append(r)
        return r

    ops = ("<", "<=", ">", ">=")
    variants = [("none", (None, None), False), ("a", (na, None), False), ("b", (None, nb), False)]
    if max(wa, wb) > CHAINED_ABOVE:
        variants += [("a, chained", (na, None), True), ("b, chained", (None, nb), True)]
    got = {(op, which): ordered(op, a, b, chunk, inverse, chained, cut)
           for op in ops for which, inverse, chained in variants}
    slices = -(-max(wa + (sb and not sa), wb + (sa and not sb)) // chunk)
    assert len(registered) >= slices * len(got) // 2  # (every slice cut, the lowest's carry shared both ways)
    want = {op: CMP[op](a, b) for op in ops}
    rng = random.Random(wa * 100 + wb)

    def value(width, is_signed):
        lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if is_signed else (0, (1 << width) - 1)
        return rng.choice([lo, hi, 0, rng.randint(lo, hi), rng.randint(lo, hi)])

    pairs = [(value(wa, sa), value(wb, sb)) for _ in range(60)]
    pairs += [(x, x) for x, _ in pairs[:10] if (-(1 << (wb - 1)) if sb else 0) <= x < (1 << (wb - sb))]

    async def bench(ctx):
        before = None
        for x, y in pairs:
            ctx.set(a, x)
            ctx.set(b, y)
            ctx.set(na, ~x & ((1 << wa) - 1))
            ctx.set(nb, ~y & ((1 << wb) - 1))
            wanted = {op: ctx.get(w) for op, w in want.items()}
            if before is not None:  # (not yet the new operands': the slices are registers)
                assert all(ctx.get(v) == before[op] for (op, _), v in got.items())
            await ctx.tick()
            for (op, which), v in got.items():
                assert ctx.get(v) == wanted[op], (x, op, y, which)
            before = wanted

    run(m, bench)


@pytest.mark.parametrize("width, slice_bits, carry, y_kind", [
    (65, 22, 1, "signal"), (65, 22, 0, "signal"), (33, 22, "signal", "signal"), (24, 22, 1, "signal"),
    (7, 3, "signal", "signal"), (5, 22, 0, "signal"),
    (65, 22, 1, -20001), (65, 22, 0, 20000), (40, 8, "signal", -3), (40, 8, 1, 1 << 20)])
@pytest.mark.parametrize("x_next", [False, True])
def test_select_sum_adds_across_two_cycles_in_slices(width, slice_bits, carry, y_kind, x_next):
    # select_sum: x + y + carry modulo 2**width, its slices summed side by side (each above the lowest with
    # a carry in of 0 and of 1) into registers loaded on `load`, picked after them by the carries: the cycle
    # after a load the sum of the operands loaded, held while `load` is low; on the extremes, on values whose
    # slices carry across every boundary and on random ones. No register is wider than a slice and its carry
    # out, and there are two a slice but the lowest, whose one takes the carry in; y a constant (~20000, as
    # `time - 20000` adds it; 20000; -3; a bit in a middle slice): where its slice is all zeros or all ones,
    # one of the two is x's slice itself, from x_next (a register loaded as the sum's are) where given
    m = Module()
    x, y, load = Signal(width), Signal(width), Signal()
    c = Signal() if carry == "signal" else carry
    after = Signal(width)
    with m.If(load):
        m.d.sync += after.eq(x)
    out = Signal(width)
    m.d.comb += out.eq(select_sum(m, x, y if y_kind == "signal" else y_kind, c, load, "t", slice_bits,
                                  x_next=after if x_next else None))
    slices = -(-width // slice_bits)
    text = rtlil.convert(m, ports=[x, y, load, out, after] + ([c] if carry == "signal" else []))
    regs = {name: int(w) for w, name in re.findall(r"wire width (\d+) \\(t_s\d+(?:_c\d|_x)?)\n", text)}
    bounds = [width - width * i // slices for i in range(slices, -1, -1)]
    plain = sum(y_kind == "signal" or ((y_kind >> lo) + 1) & ((1 << (hi - lo)) - 1) > 1
                for lo, hi in zip(bounds[1:], bounds[2:]))  # (slices above the lowest, y's not all 0s or 1s)
    assert len(regs) == 2 * slices - 1 - (0 if y_kind == "signal" or not x_next else slices - 1 - plain), regs
    assert max(regs.values()) <= slice_bits + 1 and "t_s0" in regs
    rng = random.Random(width * 10 + slice_bits)
    full = (1 << width) - 1
    edges = [0, full, 1, full - 1] + [((1 << b) - 1) for b in range(slice_bits, width, slice_bits)]
    edges += [(1 << b) for b in range(slice_bits, width, slice_bits)]
    pairs = [(rng.choice(edges), rng.choice(edges)) for _ in range(40)]
    pairs += [(rng.randrange(full + 1), rng.randrange(full + 1)) for _ in range(60)]
    pairs += [(full, 1), (full, 0), (1 << (width - 1), 1 << (width - 1))]

    async def bench(ctx):
        held = None
        for i, (a, b) in enumerate(pairs):
            b = b if y_kind == "signal" else y_kind % (1 << width)
            cin = rng.randrange(2) if carry == "signal" else carry
            loads = held is None or rng.random() < 0.7
            ctx.set(x, a)
            ctx.set(y, b)
            ctx.set(load, loads)
            if carry == "signal":
                ctx.set(c, cin)
            await ctx.tick()
            if loads:
                held = (a + b + cin) & full
            assert ctx.get(out) == held, (i, a, b, cin)

    run(m, bench)

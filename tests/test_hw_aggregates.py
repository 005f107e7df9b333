"""Partial matches in hardware (SPEC §3.4, §3.5): aggregates in DEFINE, MEASURES and WITHIN, in
``amaranth.sim`` against the reference matcher (and the fast engines, through the oracle)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from amaranth.hdl import Elaboratable, Fragment, Module, Mux, Signal
from amaranth.lib import data
from amaranth.sim import Simulator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cepc import events
from cepc.hw.decoder import PredicateDecoder
from cepc.hw.layouts import tuple_layout
from cepc.hw.nfa_core import BEATS_MAX, Conditions, PartialMatchCore, TupleTerms
from cepc.hw.partition.table import GROUPED_INPUT_BITS, stall_spacing
from cepc.hw.top import Top
from cepc.lang import ast
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file
from cepc.nfa.lower import lower, max_match_length
from cepc.plan import PAgg, PArith, PConst

import hwsim
import patterns as pt
from oracle import expected_rows

ROOT = Path(__file__).resolve().parent.parent

SCHEMA = "CREATE STREAM s (t TIMESTAMP, k UINT8, c ENUM('a', 'b', 'c', 'd'), v UINT8, w INT8, n CHAR(2));\n"
# variables that may begin a match (no aggregates), and variables that read the partial match
PLAIN = {"P0": "c = 'a'", "P1": "c IN ('a', 'b')", "P2": "v > 100", "P3": "c != 'd' AND w < 0"}
AGGREGATE = {
    "R": "v > LAST(v)",
    "F": "v <= FIRST(v) + 30 AND c != 'a'",
    "S": "SUM(w) + w < 40",
    "M": "v >= MAX(v) - 60 OR COUNT(*) > 3",
    "L": "MIN(w) < w AND LAST(c) != c",
    "N": "FIRST(n) = n OR LAST(n) = 'xy'",
    # aggregates times constants: registers of their own, MAX(v * 3), FIRST(w * 2), MIN(v * 5)
    "X": "v * 4 >= MAX(v) * 3 AND 2 * FIRST(w) <= w * 2 + MIN(v) * 5",
}
MEASURES = ("COUNT(*) AS cnt, FIRST(t) AS t0, MAX(v) AS mx, SUM(w) AS sw, LAST(c) AS lc, "
            "MIN(w) - FIRST(v) AS d, v > FIRST(v) AS up, FIRST(n) AS fn")


def query(pattern: ast.Pattern, after: str, within: int | None, measures: str = MEASURES) -> str:
    defines = ",\n  ".join(f"{name} AS {cond}" for name, cond in {**PLAIN, **AGGREGATE}.items())
    clauses = [f"PARTITION BY k AFTER MATCH {after}"]
    if within is not None:
        clauses.append(f"WITHIN {within}")
    if measures:
        clauses.append(f"MEASURES {measures}")
    return SCHEMA + "\n".join(clauses) + f"\nPATTERN ( {ast.format_pattern(pattern)} )\nDEFINE\n  {defines};\n"


def stream(rows: list[tuple[int, int, int, int, int]]) -> pd.DataFrame:
    n = len(rows)
    return pd.DataFrame({
        "t": np.cumsum([r[4] for r in rows]).astype(np.int64) if n else np.zeros(0, np.int64),
        "k": np.array([r[0] for r in rows], dtype=np.int64),
        "c": np.array([pt.LETTERS[r[1]] for r in rows], dtype=object),
        "v": np.array([r[2] for r in rows], dtype=np.int64),
        "w": np.array([r[3] for r in rows], dtype=np.int64),
        "n": np.array([["ab", "xy", ""][r[2] % 3] for r in rows], dtype=object),
    })


# the partitioners the random tests draw from: hwsim.simulate's options for each
PARTITIONERS = {"pipeline": {"partitioner": "pipeline"}, "table": {"partitioner": "table"},
                "table2": {"partitioner": "table", "update_cycles": 2},
                "table3": {"partitioner": "table", "update_cycles": 3},
                "table-stall": {"partitioner": "table", "hazards": "stall"},
                "table2-stall": {"partitioner": "table", "update_cycles": 2, "hazards": "stall"},
                "table3-stall": {"partitioner": "table", "update_cycles": 3, "hazards": "stall"},
                # (one element: one key, so that no tuple is dropped)
                "pipeline1": {"partitioner": "pipeline", "partitions": 1},
                "pipeline1-ice40": {"partitioner": "pipeline", "partitions": 1, "platform": hwsim.Ice40()}}


def random_case(seed: int, after: str, within: int | None, n: int, most: int):
    """A seeded random query over every aggregate (a plain variable first, so a match can begin) and a
    stream of ``n`` rows on which the reference finds between 40 and ``most`` matches: (checked, frame,
    the reference's rows)."""
    from oracle import expected_rows

    rng = random.Random(seed)
    while True:
        head = ast.Var(rng.choice(list(PLAIN)))
        tail = pt.random_pattern(rng, 6, variables=list(PLAIN) + list(AGGREGATE))
        checked = check(parse(query(ast.Seq((head, tail)), after, within)))
        frame = stream([(rng.randrange(6), rng.randrange(4), rng.randrange(256), rng.randrange(-128, 128),
                         rng.randrange(4)) for _ in range(n)])
        want = expected_rows(checked, frame)
        if 40 <= len(want) <= most:
            return checked, frame, want


def tails() -> st.SearchStrategy:
    leaves = st.sampled_from([ast.Var(v) for v in list(PLAIN) + list(AGGREGATE)] + [ast.AnyTuple()])

    def extend(children):
        return st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda xs: ast.Seq(tuple(xs))),
            st.lists(children, min_size=2, max_size=3).map(lambda xs: ast.Alt(tuple(xs))),
            st.tuples(children, st.sampled_from(pt.QUANTIFIERS[:-1])).map(lambda t: ast.Repeat(t[0], *t[1])),
        )

    return st.recursive(leaves, extend, max_leaves=6)


@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([ast.Var(v) for v in PLAIN] + [ast.AnyTuple()]), tails(),
       st.sampled_from(["SKIP PAST LAST ROW", "CONTINUE"]), st.sampled_from([None, 3, 12]),
       st.booleans(),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 255), st.integers(-128, 127),
                          st.integers(0, 3)), min_size=1, max_size=60),
       st.sampled_from(list(PARTITIONERS)), st.integers(0, 2**16), st.sampled_from([40, 256]))
def test_random_aggregate_queries_match_the_reference(head, tail, after, within, measures, rows, partitioner,
                                                      seed, bus_width):
    # the head keeps aggregates off the transitions that begin a match (a checker rule). A 256-bit
    # bus brings a tuple a cycle (the 14-byte tuple takes three 40-bit beats), so keys follow each
    # other back to back, and at every distance the table forwards (table2, table3: its two- and
    # three-cycle updates), or
    # with --hazards stall holds them until block RAM has the writes (table-stall, table2-stall)
    text = query(ast.Seq((head, tail)), after, within, MEASURES if measures else "")
    checked = check(parse(text))
    options = {"partitions": 4} | PARTITIONERS[partitioner]
    if options["partitions"] == 1:  # (one key: another would find the element taken, and be dropped)
        rows = [(0, *row[1:]) for row in rows]
    hwsim.run_and_compare(checked, stream(rows), bus_width=bus_width, stall=0.2, backpressure=0.3, seed=seed,
                          **options)


@pytest.mark.parametrize("ice40", [False, True])
@pytest.mark.parametrize("bus_width", [40, 256])
def test_one_element_keeps_a_keys_partial_matches_while_another_key_passes(ice40, bus_width):
    # A pipeline of one element (one partition), its conditions comparing every FIRST, LAST, MIN, MAX,
    # SUM and COUNT of the partial matches. Key 1 never begins a match (P0), so its tuples find the
    # element taken and write nothing, and key 0's next tuple reads its element as it was: back to back
    # (a 256-bit bus) or with cycles between (40 bits); on the iCE40, its orderings from inverted fields.
    checked = check(parse(SCHEMA + """PARTITION BY k AFTER MATCH SKIP PAST LAST ROW
MEASURES COUNT(*) AS cnt, MAX(v) AS mx, SUM(w) AS sw, MIN(w) AS mw, FIRST(n) AS fn
PATTERN ( P0 (R | F | M | S)+ L N? )
DEFINE P0 AS c = 'a', R AS v > LAST(v), F AS v <= FIRST(v) AND c != 'a', M AS v >= MAX(v) OR COUNT(*) > 3,
  S AS SUM(w) < 40, L AS MIN(w) < w AND LAST(c) != c, N AS FIRST(n) = n OR LAST(n) = 'xy';"""))
    rng = random.Random(bus_width)
    rows = []
    for _ in range(240):
        key = rng.random() < 0.3
        rows.append((int(key), 3 if key else rng.randrange(4), rng.randrange(256), rng.randrange(-128, 128), 1))
    result = hwsim.run_and_compare(checked, stream(rows), bus_width=bus_width, partitioner="pipeline", partitions=1,
                                   seed=bus_width, platform=hwsim.Ice40() if ice40 else None)
    assert len(result.records) >= 8


def test_a_wide_bucket_simulates():
    # P0 (P0 P0 P1 R){1,3}: 13 states and their registers, 4 ways a bucket. As one memory of
    # thousands of bits, amaranth.sim nested its write enable past CPython's compiler limit
    # (RecursionError); the table is now stored a way and at most COLUMN_BITS per memory
    pattern = ast.Seq((ast.Var("P0"), ast.Repeat(ast.Seq((ast.Var("P0"), ast.Var("P0"), ast.Var("P1"), ast.Var("R"))), 1, 3)))
    checked = check(parse(query(pattern, "CONTINUE", 12)))
    rows = [(i % 3, [0, 0, 1, 0][i % 4], 10 * i % 256, 0, 1) for i in range(40)]
    hwsim.run_and_compare(checked, stream(rows), bus_width=40, partitions=4, seed=1, partitioner="table")


@pytest.mark.parametrize("measures", [MEASURES, ""])
@pytest.mark.parametrize("partitioner", ["pipeline", "table"])
def test_an_unused_aggregate_variable_keeps_the_earliest_start(measures, partitioner):
    # SPEC §3.5 reads the whole DEFINE clause: R, S … (aggregates) are defined but not in the
    # pattern, so (P0 P0*) WITHIN 3 keeps the earliest start, as the reference does
    text = query(ast.Seq((ast.Var("P0"), ast.Repeat(ast.Var("P0"), 0, None))), "CONTINUE", 3, measures)
    checked = check(parse(text))
    assert lower(checked).queries[0].latest is False
    hwsim.run_and_compare(checked, stream([(0, 0, 0, 0, 0)] * 3 + [(1, 0, 0, 0, 2), (0, 0, 0, 0, 1)]),
                          bus_width=40, partitions=4, backpressure=0.3, seed=1, partitioner=partitioner)


def expression_nodes(value, cap: int) -> int:
    """The nodes of ``value`` walked as a tree, as Amaranth walks an expression (shared subexpressions
    once per use), counted up to ``cap``."""
    from amaranth.hdl._ast import Concat, Operator, Part, Slice, SwitchValue

    count, stack = 0, [value]
    while stack and count <= cap:
        v = stack.pop()
        count += 1
        if isinstance(v, Operator):
            stack.extend(v.operands)
        elif isinstance(v, Slice):
            stack.append(v.value)
        elif isinstance(v, Part):
            stack += [v.value, v.offset]
        elif isinstance(v, Concat):
            stack.extend(v.parts)
        elif isinstance(v, SwitchValue):
            stack.append(v.test)
            stack.extend(x for _, x in v.cases)
    return count


def test_a_large_core_is_built_from_signals_not_shared_expressions():
    # 25 states, each choosing among up to 21 predecessors: each state's winners read every other
    # candidate's conditions, and the match's winner reads theirs. Built as shared expressions,
    # Amaranth walked each use as a tree: compiling this query took over 5 minutes (its simulation
    # in the random test above, over 10), where the design is 14 s. The core's assignments, walked
    # as trees, now total about 72,000 nodes; as expressions they were millions
    from amaranth.hdl import Fragment
    from amaranth.hdl._ast import Assign

    # P1 (S{1,3} | S{1,3} | L{0,2}){1,3}
    s13, l02 = ast.Repeat(ast.Var("S"), 1, 3), ast.Repeat(ast.Var("L"), 0, 2)
    pattern = ast.Seq((ast.Var("P1"), ast.Repeat(ast.Alt((s13, s13, l02)), 1, 3)))
    design = lower(check(parse(query(pattern, "CONTINUE", None))))
    q = design.queries[0]
    assert q.nfa.n_states == 25
    frag = Fragment.get(PartialMatchCore(q, tuple_layout(design.tuple)), None)
    cap = 1_000_000
    nodes = sum(expression_nodes(st.rhs, cap) for st in frag.statements["comb"] if isinstance(st, Assign))
    assert nodes < 150_000


def test_mshape_example_in_hardware():
    q = ROOT / "examples" / "mshape" / "mshape.sql"
    checked = check(parse_file(q))
    frame = events.load_events(q.parent / "events.csv", checked.stream)
    result = hwsim.run_and_compare(checked, frame, bus_width=64, partitions=4, backpressure=0.3, seed=3)
    got = [[r["symbol"], r["seq"], *r["measures"].values()] for r in sorted(result.records, key=lambda r: r["seq"])]
    want = [row[:1] + [int(row[1])] + [int(x) for x in row[3:]] for row in events.read_matches(q.parent / "expected.csv")[1]]
    assert got == want and len(want) == 3


def test_within_alone_keeps_the_latest_start():
    # (A B* C) WITHIN 5: a later A restarts the window (SPEC §3.5: the latest start is kept)
    text = SCHEMA + """PARTITION BY k WITHIN 5 PATTERN (A B* C)
        DEFINE A AS c = 'a', B AS c != 'c', C AS c = 'c';"""
    checked = check(parse(text))
    q = lower(checked).queries[0]
    assert q.latest and q.registers[q.order_register].func == "FIRST" and q.max_length is not None
    letters = "abbbbabbcabbbbbbbc" * 3
    rows = [(i % 2, pt.LETTERS.index(x), 0, 0, 1) for i, x in enumerate(letters)]
    hwsim.run_and_compare(checked, stream(rows), bus_width=32, partitions=4)


def test_measures_of_every_kind_decode_as_the_reference_prints_them():
    text = SCHEMA + """PARTITION BY k AFTER MATCH CONTINUE
        MEASURES FIRST(c) AS fc, LAST(n) AS ln, SUM(w) AS sw, MIN(w) AS mn, w < 0 AND v > 3 AS flag, -v * 3 AS neg
        PATTERN (A B) DEFINE A AS TRUE, B AS w <= LAST(w) + 50;"""
    checked = check(parse(text))
    rows = [(0, i % 4, (i * 37) % 256, (i * 53) % 256 - 128, 1) for i in range(30)]
    result = hwsim.run_and_compare(checked, stream(rows), bus_width=16, partitions=2)
    assert {type(v) for r in result.records for v in r["measures"].values()} == {str, int}
    assert any(r["measures"]["sw"] < 0 for r in result.records)


def test_partial_matches_beyond_max_length_are_dropped_and_counted():
    text = SCHEMA + "PARTITION BY k MEASURES COUNT(*) AS n PATTERN (A R* B) DEFINE A AS TRUE, R AS v > LAST(v), B AS v = 0;"
    checked = check(parse(text))
    assert max_match_length(checked.queries[0].pattern) is None
    rows = [(0, 0, v, 0, 1) for v in list(range(1, 12)) + [0]]  # one rising run of 11, then B
    frame = stream(rows)
    hwsim.run_and_compare(checked, frame, bus_width=64, partitions=2)  # default bound: exact
    design = lower(checked, 5)
    q = design.queries[0]
    assert {r.name: r.width for r in q.registers}["count"] == 3 and not q.bounded
    data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))
    result = hwsim.simulate(design, [hwsim.beats(data, 64)], bus_width=64, partitions=2)
    assert result.counters["overflow"] > 0
    # Partial matches stop at 5 tuples: the run from tuple 0 is dropped at tuple 5, where R takes
    # the one A began at tuple 4; that one is dropped at tuple 9, where R takes A's from tuple 8,
    # and B ends it at tuple 11: a 4-tuple match, not the reference's 12
    assert [(r["seq"], r["measures"]["n"]) for r in result.records] == [(11, 4)]


def test_register_widths_follow_the_pattern_bound():
    text = SCHEMA + "PARTITION BY k MEASURES COUNT(*) AS n, SUM(v) AS s PATTERN (A B{2,3}) DEFINE A AS TRUE, B AS v > FIRST(v);"
    q = lower(check(parse(text))).queries[0]
    widths = {r.name: r.width for r in q.registers}
    assert q.bounded and q.max_length == 4
    assert widths == {"count": 3, "sum_v": 10, "first_v": 8}
    assert [m.width for m in q.measures] == [3, 10]


def test_a_comparison_in_define_is_rearranged_so_the_aggregate_stands_alone():
    # (exact: the hardware's arithmetic widens; the random corpora check it against the reference)
    from cepc.nfa.lower import isolate
    from cepc.plan import PCmp, PField

    t, a, c = PField("t"), PAgg(0), PConst(5)
    assert isolate(PCmp("<", PArith("-", t, a), c)) == PCmp(">", a, PArith("-", t, c))
    assert isolate(PCmp("<", PArith("+", t, a), c)) == PCmp("<", a, PArith("-", c, t))
    assert isolate(PCmp("<=", PArith("-", a, t), c)) == PCmp("<=", a, PArith("+", c, t))
    assert isolate(PCmp(">", c, PArith("+", a, t))) == PCmp("<", a, PArith("-", c, t))
    nested = PCmp(">=", PArith("+", PArith("-", t, a), t), c)  # (t - a) + t >= c
    assert isolate(nested) == PCmp("<=", a, PArith("-", t, PArith("-", c, t)))
    for same in (PCmp("<", PArith("+", a, PAgg(1)), c), PCmp("<", t, c), PCmp("<", a, PArith("-", t, c))):
        assert isolate(same) == same
    f5 = lower(check(parse_file(ROOT / "examples" / "finance" / "finance5" / "finance5.sql"))).queries[0]
    assert f5.predicates[0].expr == PCmp(">", PAgg(0), PArith("-", PField("time"), PConst(20000)))


def test_an_aggregate_times_a_constant_in_define_is_a_register_of_its_own():
    # MAX(v) * 3 is kept as MAX(v * 3), 2 * FIRST(w) as FIRST(w * 2) (signed), LAST(v) * 2 as
    # LAST(v * 2): the update compares and picks where it multiplied, and the table's conditions for
    # a stored state multiply nothing. Not a MIN by a negative constant (it would turn into a MAX),
    # and not in MEASURES (past the update: no register)
    text = SCHEMA + ("PARTITION BY k MEASURES MAX(v) * 3 AS m3 PATTERN (A B+) DEFINE A AS TRUE, "
                     "B AS v * 4 >= MAX(v) * 3 AND LAST(v) * 2 > v AND 2 * FIRST(w) < 7 AND MIN(v) * -2 < w;")
    q = lower(check(parse(text))).queries[0]
    regs = {r.name: r for r in q.registers}
    assert set(regs) == {"count", "max_v_x3", "last_v_x2", "first_w_x2", "min_v", "max_v"}
    assert (regs["last_v_x2"].width, regs["last_v_x2"].signed, regs["last_v_x2"].scale) == (9, False, 2)
    assert (regs["max_v_x3"].width, regs["max_v_x3"].signed, regs["max_v_x3"].scale) == (10, False, 3)
    assert (regs["first_w_x2"].width, regs["first_w_x2"].signed) == (9, True)
    names = [r.name for r in q.registers]
    b = next(p for p in q.predicates if p.name == "B").expr
    assert b.operands[0].right == PAgg(names.index("max_v_x3"))
    assert b.operands[2].left == PAgg(names.index("first_w_x2"))
    assert b.operands[1].left == PAgg(names.index("last_v_x2"))
    assert q.measures[0].expr == PArith("*", PAgg(names.index("max_v")), PConst(3))
    # finance5: MIN(price) * 1005 in DEFINE, MIN(price) AS low in MEASURES
    f5 = lower(check(parse_file(ROOT / "examples" / "finance" / "finance5" / "finance5.sql"))).queries[0]
    assert {(r.name, r.width) for r in f5.registers} >= {("min_price_x1005", 42), ("min_price", 32)}


@pytest.mark.parametrize("partitioner", ["pipeline", "table", "table2"])
def test_within_frees_partitions_that_can_never_match_again(partitioner):
    # keys that stall mid-match hold an element; with WITHIN it is freed once the window has passed
    # for the key's last tuple, so 12 keys fit 6 elements with no drop and the results stay exact
    rows = []
    for _ in range(3):
        for key in range(12):
            rows += [(key, 0, 0, 0, 1), (key, 1, 0, 0, 1)] + ([(key, 2, 0, 0, 1)] if key % 2 == 0 else [])
    pattern = "PARTITION BY k {} PATTERN (A B* C) DEFINE A AS c = 'a', B AS c = 'b', C AS c = 'c';"
    checked = check(parse(SCHEMA + pattern.format("WITHIN 10")))
    result = hwsim.run_and_compare(checked, stream(rows), bus_width=64, partitions=6, partitioner=partitioner.rstrip("2"),
                                   update_cycles=2 if partitioner == "table2" else 1)
    assert result.counters["evicted"] > 0 and len(result.records) == 18
    # without WITHIN the stalled keys keep their elements and later tuples spill
    plain = check(parse(SCHEMA + pattern.format("")))
    design = lower(plain)
    data = b"".join(design.tuple.to_bytes(r) for r in stream(rows).to_dict("records"))
    spilled = hwsim.simulate(design, [hwsim.beats(data, 64)], bus_width=64, partitions=6, partitioner=partitioner.rstrip("2"),
                             update_cycles=2 if partitioner == "table2" else 1)
    assert spilled.counters["dropped"] > 0


# --- the core's lookahead (back-to-back tuples of one key) ---------------------------------------------


class _LookaheadHarness(Elaboratable):
    """One partition's update loop twice over: ``ref`` computes its conditions from the state, ``ahead``
    takes them from the previous update's ``next_cond`` (from the state itself where ``direct``, as the
    table's lookup gives them). Both read the same state register, which ``ref``'s update writes."""

    def __init__(self, q, layout):
        self.q, self.layout = q, layout
        self.x = Signal(layout.size)  # the tuple
        self.y = Signal(layout.size)  # the tuple behind it
        self.direct = Signal()
        self.ref = PartialMatchCore(q, layout)
        self.ahead = PartialMatchCore(q, layout, lookahead=True)
        assert self.ahead.lookahead

    def elaborate(self, platform):
        m = Module()
        m.submodules.ref, m.submodules.ahead = self.ref, self.ahead
        m.submodules.decoder = decoder = PredicateDecoder(self.layout, list(self.q.predicates))
        x = data.View(self.layout, self.x)
        state = Signal(self.q.payload_width)
        cond = Signal(self.ahead.conditions.width)
        m.d.comb += decoder.tuple.eq(x)
        for core in (self.ref, self.ahead):
            m.d.comb += [core.state.eq(state), core.tuple.eq(x), core.preds.eq(decoder.preds)]
        m.d.comb += [self.ahead.next_tuple.eq(self.y),
                     self.ahead.cond.eq(Mux(self.direct, self.ahead.conditions.of(state, x), cond))]
        m.d.sync += [state.eq(self.ref.next), cond.eq(self.ahead.next_cond)]
        return m


def observable(q, word: int) -> int:
    """A partial-match core's next state as anything reads it: the vector, and the registers of each
    state that is on (an off state's are don't-cares: every use of them is gated by its bit)."""
    n = q.nfa.n_states
    out = word & ((1 << n) - 1)
    for s in range(n):
        if word >> s & 1:  # (a register kept once, not per state: read where any state is on)
            for r, reg in enumerate(q.registers):
                out |= word & (((1 << reg.width) - 1) << q.register_offset(s, r))
    return out


def _lookahead_agrees(checked, rows: list[dict], seed: int) -> int:
    """Feeds ``rows`` (one key's) through the harness; returns how many updates ran on looked-ahead
    conditions while a partial match was on."""
    design = lower(checked)
    q = design.queries[0]
    harness = _LookaheadHarness(q, tuple_layout(design.tuple))
    rng = random.Random(seed)
    words = [design.tuple.pack(r) for r in rows]
    used = [0]

    async def bench(ctx):
        for i, word in enumerate(words):
            direct = i == 0 or rng.random() < 0.1
            ctx.set(harness.x, word)
            ctx.set(harness.y, words[i + 1] if i + 1 < len(words) else 0)
            ctx.set(harness.direct, direct)
            ref, ahead = harness.ref, harness.ahead
            got = [observable(q, ctx.get(ahead.next)), ctx.get(ahead.match), ctx.get(ahead.overflow)]
            want = [observable(q, ctx.get(ref.next)), ctx.get(ref.match), ctx.get(ref.overflow)]
            assert got == want, f"tuple {i}: {got} != {want}"
            if want[1]:
                assert ctx.get(ahead.ends) == ctx.get(ref.ends), f"tuple {i}: ends"
            if not direct and ctx.get(ref.state) & ((1 << q.nfa.n_states) - 1):
                used[0] += 1
            await ctx.tick()

    sim = Simulator(harness)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return used[0]


@pytest.mark.parametrize("seed", range(12))
def test_lookahead_conditions_update_as_the_state_own(seed):
    # Back-to-back tuples of one key: the core's update on the conditions it computed for the tuple
    # behind (next_cond, picked per candidate) equals the update on conditions computed from the
    # state it wrote, over random queries reading every aggregate, with WITHIN (extend), without a
    # bound (full) and several predecessors per state (before)
    rng = random.Random(seed)
    after, within = ["SKIP PAST LAST ROW", "CONTINUE"][seed % 2], [None, 3, 12][seed % 3]
    while True:  # (a pattern with something to look ahead)
        pattern = ast.Seq((ast.Var(rng.choice(list(PLAIN))), pt.random_pattern(rng, 6, list(PLAIN) + list(AGGREGATE))))
        checked = check(parse(query(pattern, after, within)))
        if Conditions(lower(checked).queries[0]).width:
            break
    frame = stream([(0, rng.randrange(4), rng.randrange(256), rng.randrange(-128, 128), rng.randrange(3))
                    for _ in range(150)])
    assert _lookahead_agrees(checked, frame.to_dict("records"), seed) > 20


def test_lookahead_on_the_examples():
    # mshape and finance0 on one symbol's random walk of prices
    rng = random.Random(5)
    price, rows = 1000, []
    for i in range(300):
        price = max(1, price + rng.randrange(-20, 21))
        rows.append({"time": 10 * i, "symbol": "IBM", "price": price, "volume": rng.randrange(10000)})
    for name in ("mshape/mshape.sql", "finance/finance0/finance0.sql"):
        assert _lookahead_agrees(check(parse_file(ROOT / "examples" / name)), rows, 1) > 100, name


@pytest.mark.parametrize("keys, within, update_cycles", [("spacing", None, 1), ("spacing", 40, 2), (1, 40, 1),
                                                         (1, None, 2), ("spacing", 40, 3)])
def test_hazards_stall_reads_every_write_from_block_ram(keys, within, update_cycles):
    # --hazards stall: the table forwards nothing. As many keys in turn as the spacing (7; 8 with the
    # two-cycle update): each tuple waits a cycle behind the one of its key `spacing` ahead, and its
    # lookup then reads block RAM just as that one's write has reached it (a partial-match core's
    # write goes through a copy beside the banks: the longest way); spacing + 1 cycles for `spacing`
    # tuples. One key: spacing + 1 cycles a tuple. A spacing one shorter would read the entry before
    # that write (wrong partial matches: the rows differ).
    pattern = ast.Seq((ast.Var("P1"), ast.Repeat(ast.Alt((ast.Var("R"), ast.Var("F"), ast.Var("M"))), 1, None),
                       ast.Var("S"), ast.Repeat(ast.Var("L"), 0, 1), ast.Var("N")))
    checked = check(parse(query(pattern, "CONTINUE", within)))
    design = lower(checked)
    spacing = stall_spacing(update_cycles - 1)
    n = keys if isinstance(keys, int) else spacing
    rng = random.Random(n)
    rows = [(i % n, rng.randrange(4), rng.randrange(256), rng.randrange(-128, 128), 1) for i in range(24 * spacing)]
    frame = stream(rows)
    data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))
    width = design.tuple.nbytes * 8
    result = hwsim.simulate(design, [hwsim.beats(data, width)], bus_width=width, partitions=256, partitioner="table",
                            update_cycles=update_cycles, hazards="stall")
    want = expected_rows(checked, frame)
    assert hwsim.hw_rows(design, result, checked) == want and len(want) >= 10
    # (the last beat is taken while the tuples before it wait: the framer and stage 2 hold some)
    expected = len(rows) * (spacing + 1) // n
    assert expected - 5 * (spacing + 1) <= result.input_cycles <= expected + 3, (result.input_cycles, expected)


# every distance without WITHIN; with it (five times the simulation's time), one of each of the three ways a
# tuple's partial matches reach it: the lookahead (1), an older write (5), block RAM (8) (CI's time)
@pytest.mark.parametrize("keys, within, update_cycles", [
    *((k, None, u) for k in (1, 2, 3, 5, 7, 8, 13) for u in (1, 2)), *((k, 40, u) for k in (1, 5, 8) for u in (1, 2)),
    # the three-cycle update: block RAM's word (8), an older write (4, 5), the newest write (3), held (1, 2)
    *((k, None, 3) for k in (1, 2, 3, 4, 8)), (5, 40, 3)])
def test_keys_in_turn_at_a_tuple_a_cycle(keys, within, update_cycles):
    # `keys` keys in turn, a tuple every cycle: each tuple's partial matches come from the write of the
    # one `keys` ahead: the core's own lookahead (1), the table's older writes (2 to 7: a partial-match
    # core's table relays its write to the banks, a cycle later), block RAM (8, 13: other keys' ways in
    # the bucket that no write ahead touched). With WITHIN entries go stale, which the table also
    # judges at stage 3 (against the key's time), as it picks the key's state there. With the two-cycle
    # update a key's tuple waits a cycle behind one of its bucket (one key: a tuple every other
    # cycle); with more, each reads the write of the one `keys` ahead, block RAM's or the table's
    # conditions computed at the lookup from its newest write (2)
    rng = random.Random(keys)
    pattern = ast.Seq((ast.Var("P1"), ast.Repeat(ast.Alt((ast.Var("R"), ast.Var("F"), ast.Var("M"))), 1, None),
                       ast.Var("S"), ast.Repeat(ast.Var("L"), 0, 1), ast.Var("N")))
    checked = check(parse(query(pattern, "CONTINUE", within)))
    rows = [(i % keys, rng.randrange(4), rng.randrange(256), rng.randrange(-128, 128), 1) for i in range(max(160, 24 * keys))]
    result = hwsim.run_and_compare(checked, stream(rows), bus_width=256, partitions=max(8, 2 * keys), seed=keys,
                                   partitioner="table", update_cycles=update_cycles)
    assert len(result.records) >= 20


@pytest.mark.parametrize("update_cycles", [1, 2, 3])
@pytest.mark.parametrize("after", ["SKIP PAST LAST ROW", "CONTINUE"])
def test_products_of_the_tuple_carried_beside_it_update_as_the_reference(after, update_cycles):
    # The table's top computes a tuple's products (v * 4, v * 5, w * 2, and the scaled registers'
    # v * 3 ... : TupleTerms) a stage early and carries them beside the tuple; a key's tuples back to
    # back (a 256-bit bus: a tuple a cycle) read them for their own update and for the tuple behind
    from oracle import expected_rows

    text = SCHEMA + (f"PARTITION BY k AFTER MATCH {after} MEASURES COUNT(*) AS n, MAX(v) AS top "
                     "PATTERN (A B+ C) DEFINE A AS v > 50, "
                     "B AS v * 4 >= MAX(v) * 3 AND 2 * FIRST(w) <= w * 2 + 300 AND v - FIRST(v) > -120, "
                     "C AS v * 5 < MIN(v) * 4 OR 100 + LAST(w) < w - 100 OR LAST(w) * -3 > v * 2 + 150;")
    checked = check(parse(text))
    q = lower(checked).queries[0]
    assert {r.name for r in q.registers} >= {"max_v_x3", "first_w_x2", "min_v_x4", "last_w_xm3"}
    rng = random.Random(11)
    frame = stream([(rng.randrange(3), rng.randrange(4), rng.randrange(256), rng.randrange(-128, 128), 1)
                    for _ in range(400)])
    assert len(expected_rows(checked, frame)) >= 30
    hwsim.run_and_compare(checked, frame, bus_width=256, partitions=4, partitioner="table", seed=2,
                          update_cycles=update_cycles)


WIDE_PRODUCTS = ("CREATE STREAM s (t TIMESTAMP, k UINT8, x INT32, y INT32, z UINT32);\n"
                 "PARTITION BY k AFTER MATCH CONTINUE MEASURES COUNT(*) AS n, MAX(z) AS top PATTERN (A B+ C) "
                 "DEFINE A AS x > 0, "
                 "B AS x * 3 >= LAST(x) * 2 AND z * 1005 + x > MIN(z) * 1000, "
                 "C AS x * -7 < FIRST(y) OR y * 300000 > LAST(z);")


class SimulatedEcp5:
    """A platform that asks for the ECP5 primitives' models (cepc.hw.ecp5)."""
    family = "ecp5"
    simulate_primitives = True


@pytest.mark.parametrize("how", ["registers", "copies", "multiplier blocks"])
def test_staged_terms_equal_the_terms_of_the_registered_tuple(how):
    # TupleTerms.staged: the partial products registered with the tuple, summed after it, give the
    # terms of the registered tuple exactly; the fields' extremes and random values. Computed from the
    # tuple's register, from copies of the operands loaded as it is (a large die), or (ECP5) by
    # multiplier blocks whose input registers take the operands and whose output registers are the
    # partial products, in the MULT18X18D's model; a tuple held (loaded on fewer edges than the
    # partial products) as the top holds one
    design = lower(check(parse(WIDE_PRODUCTS)))
    layout = tuple_layout(design.tuple)
    terms = TupleTerms(design.queries[0], layout)

    class Staged(Elaboratable):
        def __init__(self):
            self.front, self.en, self.load = Signal(layout), Signal(), Signal()
            self.staged, self.want = Signal(terms.width), Signal(terms.width)

        def elaborate(self, platform):
            m = Module()
            tuple_, registered = Signal(layout), Signal(layout)
            with m.If(self.load):
                m.d.sync += tuple_.eq(self.front)
            with m.If(self.en):
                m.d.sync += registered.eq(tuple_)
            operands = None if how == "registers" else (self.front, self.load)
            m.d.comb += [self.staged.eq(terms.staged(m, tuple_, registered, self.en, "q", operands=operands,
                                                     blocks=how == "multiplier blocks")),
                         self.want.eq(terms.of(registered))]
            return m

    class OnEcp5(Elaboratable):
        def elaborate(self, platform):
            return Fragment.get(dut, SimulatedEcp5())

    dut = Staged()
    rng = random.Random(23)
    edges = [-(1 << 31), (1 << 31) - 1, 0, -1, 1, (1 << 17) - 1, 1 << 17, -(1 << 17), (1 << 18) + 5]

    async def bench(ctx):
        for i in range(300):
            x, y = (rng.choice(edges) if rng.random() < 0.4 else rng.randrange(-(1 << 31), 1 << 31) for _ in range(2))
            z = rng.choice([0, (1 << 32) - 1, 1 << 18, (1 << 18) - 1, rng.randrange(1 << 32)])
            ctx.set(dut.front.x, x)
            ctx.set(dut.front.y, y)
            ctx.set(dut.front.z, z)
            en = rng.random() < 0.8
            ctx.set(dut.en, en)
            ctx.set(dut.load, en and rng.random() < 0.85)
            await ctx.tick()
            assert ctx.get(dut.staged) == ctx.get(dut.want), f"cycle {i}"

    sim = Simulator(OnEcp5() if how == "multiplier blocks" else dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    blocks = [name for _, name, *_ in Fragment.get(dut, SimulatedEcp5()).subfragments if "_block" in str(name)]
    # one per pair of 18-bit slices: x * 3, x * -7, x * 2, z * 1005, z * 1000 two each, y * 300000 four
    assert len(blocks) == (14 if how == "multiplier blocks" else 0)


WIDE_SUMS = ("CREATE STREAM s (t TIMESTAMP, k UINT8, x INT64, y INT32, z UINT64);\n"
             "PARTITION BY k MEASURES COUNT(*) AS n PATTERN (A B+) "
             "DEFINE A AS x > 0, "
             "B AS t - 20000 < FIRST(t) AND x + y >= LAST(x) AND z - x < MAX(z) AND y - 7 > FIRST(y);")


def test_split_terms_equal_the_terms_of_the_registered_tuple():
    # TupleTerms.split: each sum or difference of two fields or constants wider than 32 bits added
    # across two stages (select_sum): its slices side by side from the tuple a stage early, into registers
    # loaded as the tuple's is, picked after them by their carries: the terms of the registered tuple exactly,
    # on the fields' extremes, values whose low halves carry or borrow and random ones, signed and
    # unsigned, with the tuple held (loaded on fewer edges than the terms' register); a 33-bit
    # difference (y - 7) split too, and nothing narrower
    design = lower(check(parse(WIDE_SUMS)))
    layout = tuple_layout(design.tuple)
    terms = TupleTerms(design.queries[0], layout)
    assert [s.width for s in terms.shapes] == [65, 65, 66, 33]

    class Split(Elaboratable):
        def __init__(self):
            self.front, self.en, self.load = Signal(layout), Signal(), Signal()
            self.split, self.want = Signal(terms.width), Signal(terms.width)

        def elaborate(self, platform):
            m = Module()
            tuple_ = Signal(layout)
            with m.If(self.load):
                m.d.sync += tuple_.eq(self.front)
            value = terms.split(m, self.front, tuple_, self.load, "q")
            with m.If(self.en):
                m.d.sync += [self.split.eq(value), self.want.eq(terms.of(tuple_))]
            return m

    dut = Split()
    rng = random.Random(29)
    near = [0, 1, (1 << 32) - 1, 1 << 32, (1 << 32) + 1, 20000, 19999, (1 << 63) - 1]

    def signed64():
        return rng.choice([-(1 << 63), (1 << 63) - 1, -1, 0, -(1 << 32), (1 << 32) - 1]) if rng.random() < 0.3 \
            else rng.randrange(-(1 << 63), 1 << 63)

    async def bench(ctx):
        loaded = False  # (before the first load the tuple's register and the low parts' hold no one tuple)
        for i in range(400):
            ctx.set(dut.front.t, rng.choice(near) if rng.random() < 0.4 else rng.randrange(1 << 63))
            ctx.set(dut.front.x, signed64())
            ctx.set(dut.front.y, rng.choice([-(1 << 31), (1 << 31) - 1, -1, 0, 7, 6]) if rng.random() < 0.4
                    else rng.randrange(-(1 << 31), 1 << 31))
            ctx.set(dut.front.z, rng.choice(near) if rng.random() < 0.4 else rng.randrange(1 << 64))
            load = rng.random() < 0.8
            ctx.set(dut.load, load)
            ctx.set(dut.en, load or rng.random() < 0.5)
            await ctx.tick()
            if loaded:
                assert ctx.get(dut.split) == ctx.get(dut.want), f"cycle {i}"
            loaded = loaded or load

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("update_cycles", [1, 2])
def test_wide_products_staged_as_partial_products_update_as_the_reference(update_cycles):
    # Products of wide fields (TupleTerms.staged): each operand cut into 18-bit slices, the partial
    # products registered, summed a stage later. Signed and unsigned fields, by a constant, by a
    # negative one and by a constant wider than a slice (both operands cut), and a product inside a
    # sum; values across the whole range, their extremes among them.
    from oracle import expected_rows

    checked = check(parse(WIDE_PRODUCTS))
    design = lower(checked)
    terms = TupleTerms(design.queries[0], tuple_layout(design.tuple))
    # x * 3, z * 1005, x * -7, y * 300000, and what the scaled registers take: x * 2, z * 1000
    assert len(terms.products) == 6
    rng = random.Random(17)

    def wide(signed):
        lo, hi = (-(1 << 31), 1 << 31) if signed else (0, 1 << 32)
        small = rng.randrange(-700, 700) if signed else rng.randrange(1400)
        return rng.choice([lo, hi - 1, rng.randrange(lo, hi), rng.randrange(lo, hi), small])

    rows = []
    for i in range(500):
        x, y, z = wide(True), wide(True), wide(False)
        rows.append({"t": i, "k": rng.randrange(3), "x": x, "y": y, "z": z})
    frame = pd.DataFrame(rows)
    assert len(expected_rows(checked, frame)) >= 20
    hwsim.run_and_compare(checked, frame, bus_width=256, partitions=4, partitioner="table", seed=3,
                          update_cycles=update_cycles)


@pytest.mark.parametrize("update_cycles", [1, 2])
def test_scaled_registers_and_carried_terms_of_two_queries_match_the_reference(update_cycles):
    # tests/fixtures/vhdl/scaled.sql: a scaled register named as another register is, a FIRST by a
    # negative constant, WITHIN's earliest start carried; and a query named a_terms beside a (each
    # part of the top takes a copy of `en` named after it)
    from oracle import expected_rows

    checked = check(parse_file(ROOT / "tests" / "fixtures" / "vhdl" / "scaled.sql"))
    rng = random.Random(5)
    frame = pd.DataFrame({"t": np.cumsum([rng.randrange(1, 12) for _ in range(500)]).astype(np.int64),
                          "k": [rng.randrange(3) for _ in range(500)], "d": [rng.randrange(-128, 128) for _ in range(500)],
                          "v": [rng.randrange(256) for _ in range(500)], "v_x3": [rng.randrange(256) for _ in range(500)]})
    want = expected_rows(checked, frame)
    assert {row[2] for row in want} == {"a", "a_terms"} and len(want) >= 30
    hwsim.run_and_compare(checked, frame, bus_width=256, partitions=4, partitioner="table", seed=1,
                          update_cycles=update_cycles)


@pytest.mark.parametrize("name, hazards, cycles", [
    *((name, "forward", 2) for name in ("mshape/mshape.sql", "finance/finance0/finance0.sql",
                                        "finance/finance2/finance2.sql", "finance/finance5/finance5.sql")),
    # (the largest core, and the entries that go stale; finance0 with stall: test_sim_ghdl's cycle-exact test)
    ("mshape/mshape.sql", "stall", 2), ("finance/finance2/finance2.sql", "stall", 2),
    ("finance/finance0/finance0.sql", "stall", 3),
    # the three-cycle update: the conditions computed once, from the state picked
    *((name, "forward", 3) for name in ("mshape/mshape.sql", "finance/finance0/finance0.sql",
                                        "finance/finance2/finance2.sql", "finance/finance5/finance5.sql"))])
def test_the_examples_with_the_two_cycle_update(name, hazards, cycles):
    # The two-cycle update (update_cycles 2: what `cepc synth` builds on a large die): the table's
    # lookup registered, the core's update a cycle later, the newest write's conditions computed at
    # the lookup; a tuple of the bucket of the one just before it waits a cycle (--hazards stall: of
    # any of the 8 before it, and nothing is forwarded). Three symbols' random walks, a tuple a cycle
    # (a 256-bit bus), one symbol's trades now and then in a run.
    from oracle import expected_rows

    checked = check(parse_file(ROOT / "examples" / name))
    rng = random.Random(len(name))
    prices = {"IBM": 10000, "ACME": 5000, "XYZ": 700}
    rows, t = [], 0
    while len(rows) < 500:
        symbol = rng.choice(list(prices))
        for _ in range(rng.choice([1, 1, 1, 2, 4])):  # runs of one symbol: back to back, held
            t += rng.randrange(1, 900)
            prices[symbol] = max(100, prices[symbol] + rng.choice([-30, -9, -3, 0, 2, 5, 11, 40]))
            rows.append({"time": t, "symbol": symbol, "price": prices[symbol], "volume": rng.randrange(6000)})
    frame = pd.DataFrame(rows)
    assert len(expected_rows(checked, frame)) >= 5
    hwsim.run_and_compare(checked, frame, bus_width=256, partitions=64, partitioner="table", update_cycles=cycles,
                          hazards=hazards, backpressure=0.2, seed=4)


TWO_KEYS = """CREATE STREAM s (t TIMESTAMP, k UINT8, j UINT8, v UINT8);
NAME byk PARTITION BY k AFTER MATCH CONTINUE PATTERN ( A B+ C )
DEFINE A AS v > 10, B AS v > LAST(v), C AS v < FIRST(v);
NAME byj PARTITION BY j AFTER MATCH CONTINUE PATTERN ( A B+ C )
DEFINE A AS v > 10, B AS v > LAST(v), C AS v < FIRST(v);
"""


@pytest.mark.parametrize("runs_of", ["k", "j"])
def test_the_two_cycle_update_holds_a_tuple_for_any_querys_bucket(runs_of):
    # two queries keyed by different fields: a tuple waits behind one of its bucket in either
    # query's table (runs of one key in one field, keys in turn in the other)
    checked = check(parse(TWO_KEYS))
    rng = random.Random(3)
    n = 400
    turns = [i % 2 + 4 * rng.randrange(2) for i in range(n)]
    runs = [(i // 2) % 3 for i in range(n)]
    frame = pd.DataFrame({"t": np.arange(n, dtype=np.int64), "k": runs if runs_of == "k" else turns,
                          "j": turns if runs_of == "k" else runs, "v": [rng.randrange(256) for _ in range(n)]})
    hwsim.run_and_compare(checked, frame, bus_width=256, partitions=16, partitioner="table", update_cycles=2, seed=1)


@pytest.mark.parametrize("within", [None, 40])
@pytest.mark.parametrize("keys", [2, 3])
def test_the_two_cycle_update_on_the_ice40(keys, within):
    # the UP5K's table: no copies (of the conditions' inputs among them: one register a stage)
    rng = random.Random(keys)
    pattern = ast.Seq((ast.Var("P1"), ast.Repeat(ast.Alt((ast.Var("R"), ast.Var("F"), ast.Var("M"))), 1, None),
                       ast.Var("S"), ast.Repeat(ast.Var("L"), 0, 1), ast.Var("N")))
    checked = check(parse(query(pattern, "CONTINUE", within)))
    rows = [(i % keys, rng.randrange(4), rng.randrange(256), rng.randrange(-128, 128), 1) for i in range(160)]
    result = hwsim.run_and_compare(checked, stream(rows), bus_width=256, partitions=8, seed=keys, partitioner="table",
                                   update_cycles=2, platform=hwsim.Ice40())
    assert len(result.records) >= 20


def core_with_a_flipped_condition(q, layout, core, bit):
    """``core`` (``given_cond``) on a partition state ``state`` and a tuple ``raw``, its conditions computed
    from them, with condition ``bit`` flipped while ``flip`` is high: (module, state, raw, flip)."""
    state, flip, raw = Signal(q.payload_width), Signal(), Signal(layout.size)
    m = Module()
    m.submodules.core = core
    m.submodules.decoder = decoder = PredicateDecoder(layout, list(q.predicates))
    x = data.View(layout, raw)
    m.d.comb += [decoder.tuple.eq(x), core.tuple.eq(x), core.preds.eq(decoder.preds), core.state.eq(state),
                 core.cond.eq(core.conditions.of(core.state, x) ^ (flip << bit))]
    return m, state, raw, flip


def test_min_and_max_updates_take_their_compare_from_the_conditions():
    # A MIN's or MAX's compare is one of the conditions computed before the update (Conditions.beats),
    # not in the update loop: given the conditions, finance0's core keeps MAX(price) as the condition
    # bit says, even where it says the opposite of the compare (it is then computed nowhere else)
    design = lower(check(parse_file(ROOT / "examples" / "finance" / "finance0" / "finance0.sql")))
    q = design.queries[0]
    layout = tuple_layout(design.tuple)
    core = PartialMatchCore(q, layout, given_cond=True)
    conds = core.conditions
    large, rise = q.nfa.labels.index("largeSize"), q.nfa.labels.index("priceRise")
    top = next(r for r, reg in enumerate(q.registers) if reg.func == "MAX")
    assert set(conds.beats) == {(p, top) for p in (large, rise)}
    # (mshape's MAX(price), kept by five states, is compared in its update: BEATS_MAX; with the
    # three-cycle update, whose table computes the conditions once, among them for every state)
    mshape = lower(check(parse_file(ROOT / "examples" / "mshape" / "mshape.sql"))).queries[0]
    assert not Conditions(mshape).beats and len(conds.beats) <= BEATS_MAX
    kept = {p for s in range(mshape.nfa.n_states) for p in mshape.nfa.predecessors[s]}
    assert len(kept) > BEATS_MAX
    assert set(Conditions(mshape, every_beat=True).beats) == {(p, 4) for p in kept} == {
        (p, r) for p in kept for r, reg in enumerate(mshape.registers) if reg.func == "MAX"}

    def register(s, r):
        return q.register_offset(s, r), q.registers[r].width

    last = next(r for r, reg in enumerate(q.registers) if reg.func == "LAST")
    m, state, raw, flip = core_with_a_flipped_condition(q, layout, core, conds.beats[(large, top)])
    seen = {}

    async def bench(ctx):
        # largeSize's partial match: LAST(price) 300, MAX(price) 500; a rise to 600, then one to 400
        word = 1 << large
        for r, value in ((last, 300), (top, 500)):
            lo, _ = register(large, r)
            word |= value << lo
        ctx.set(state, word)
        for price in (600, 400):
            for f in (0, 1):
                ctx.set(raw, design.tuple.pack({"time": 1, "symbol": 0, "price": price, "volume": 10}))
                ctx.set(flip, f)
                nxt = ctx.get(core.next)
                lo, width = register(rise, top)
                seen[(price, f)] = (nxt >> rise & 1, nxt >> lo & ((1 << width) - 1))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    # priceRise turns on (above LAST(price)); its MAX(price) as the bit says: the compare's, or flipped
    assert seen[(600, 0)] == (1, 600) and seen[(600, 1)] == (1, 500)
    assert seen[(400, 0)] == (1, 500) and seen[(400, 1)] == (1, 400)


def test_a_min_or_max_kept_at_two_scales_is_compared_once():
    # finance5 keeps MIN(price) (its measure) and MIN(price * 1005) (its DEFINE): a positive scale keeps
    # the order, so the tuple beats both or neither, and one compare decides both (QueryPlan.compared_by).
    # The conditions hold it for the narrower alone; flipped, both registers follow the flipped bit.
    design = lower(check(parse_file(ROOT / "examples" / "finance" / "finance5" / "finance5.sql")))
    q = design.queries[0]
    low, scaled = (next(r for r, reg in enumerate(q.registers) if reg.func == "MIN" and reg.scale == k)
                   for k in (1, 1005))
    assert q.compared_by(scaled) == q.compared_by(low) == low
    assert all(q.compared_by(r) == r for r, reg in enumerate(q.registers) if reg.func not in ("MIN", "MAX"))
    f2 = lower(check(parse_file(ROOT / "examples" / "finance" / "finance2" / "finance2.sql"))).queries[0]
    top = next(r for r, reg in enumerate(f2.registers) if (reg.func, reg.scale) == ("MAX", 1))
    assert {f2.compared_by(r) for r, reg in enumerate(f2.registers) if reg.func == "MAX"} == {top}
    layout = tuple_layout(design.tuple)
    core = PartialMatchCore(q, layout, given_cond=True)
    conds = core.conditions
    dot, on = q.nfa.labels.index("."), q.nfa.labels.index("notTooLong")
    assert set(conds.beats) == {(dot, low), (on, low)}
    m, state, raw, flip = core_with_a_flipped_condition(q, layout, core, conds.beats[(dot, low)])
    seen = {}

    def register(word, s, r):
        return word >> q.register_offset(s, r) & ((1 << q.registers[r].width) - 1)

    async def bench(ctx):
        # '.' on at time 0, its MIN(price) 500 (so MIN(price * 1005) 502,500); prices 400 and 600 at time 1
        ctx.set(state, 1 << dot | 500 << q.register_offset(dot, low) | 502500 << q.register_offset(dot, scaled))
        for price in (400, 600):
            for f in (0, 1):
                ctx.set(raw, design.tuple.pack({"time": 1, "symbol": 0, "price": price, "volume": 10}))
                ctx.set(flip, f)
                nxt = ctx.get(core.next)
                seen[(price, f)] = (nxt >> on & 1 | ctx.get(core.match) << 1, register(nxt, on, low),
                                    register(nxt, on, scaled))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    # notTooLong turns on (at 600 largeIncrease matches too, and the match clears the vector: SKIP PAST
    # LAST ROW); both of its MINs as the one bit says: the compare's, or flipped
    assert seen[(400, 0)] == (1, 400, 402000) and seen[(400, 1)] == (1, 500, 502500)
    assert seen[(600, 0)] == (2, 500, 502500) and seen[(600, 1)] == (2, 600, 603000)


def test_a_last_is_kept_once_per_partition_and_every_state_reads_it():
    # Matches are contiguous (SPEC §3.1): every partial match alive ends at the partition's tuple before,
    # so each state's LAST(price) is that tuple's price. mshape keeps it once, after each state's own
    # registers (902 bits, not 1,062), the core writes the tuple's price there whatever turns on, and
    # rise and drop, from any state, compare the tuple with it
    design = lower(check(parse_file(ROOT / "examples" / "mshape" / "mshape.sql")))
    q, layout = design.queries[0], tuple_layout(design.tuple)
    n, regs = q.nfa.n_states, q.registers
    last = next(r for r, reg in enumerate(regs) if reg.func == "LAST")
    first = next(r for r, reg in enumerate(regs) if reg.func == "FIRST" and reg.field == "price")
    assert q.shared_registers == (last,) and q.state_register_width == sum(r.width for r in regs) - 32
    assert q.payload_width == n + n * q.state_register_width + 32 == 902
    assert {q.register_offset(s, last) for s in range(n)} == {q.payload_width - 32}
    own = sorted((q.register_offset(s, r), q.register_offset(s, r) + reg.width)
                 for s in range(n) for r, reg in enumerate(regs) if r != last)
    assert all(a[1] <= b[0] for a, b in zip(own, own[1:])) and own[0][0] == n and own[-1][1] == q.payload_width - 32
    core = PartialMatchCore(q, layout)
    m = Module()
    m.submodules.core = core
    m.submodules.decoder = decoder = PredicateDecoder(layout, list(q.predicates))
    raw = Signal(layout.size)
    x = data.View(layout, raw)
    state = Signal(q.payload_width)
    m.d.comb += [decoder.tuple.eq(x), core.tuple.eq(x), core.preds.eq(decoder.preds), core.state.eq(state)]
    dot, rise, drop = (q.nfa.labels.index(name) for name in (".", "rise", "drop"))
    seen = {}

    async def bench(ctx):
        # '.' and rise on, both begun at 100; the partition's last price 300
        word = 1 << dot | 1 << rise | 300 << q.register_offset(0, last)
        for s in (dot, rise):
            word |= 100 << q.register_offset(s, first)
        ctx.set(state, word)
        for price in (200, 350):
            ctx.set(raw, design.tuple.pack({"time": 1, "symbol": 0, "price": price, "volume": 1}))
            nxt = ctx.get(core.next)
            seen[price] = (nxt >> rise & 1, nxt >> drop & 1, nxt >> q.register_offset(0, last) & 0xFFFFFFFF)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    # 200: below the last 300 (a drop from rise, no rise); 350: above it (a rise, no drop); either way
    # the tuple's price is the partition's last
    assert seen[200] == (0, 1, 200) and seen[350] == (1, 0, 350)


@pytest.mark.parametrize("update_cycles, beats", [(2, 0), (3, 5)])
def test_the_three_cycle_update_takes_every_min_and_max_compare_from_the_conditions(update_cycles, beats):
    # The two-cycle update's table computes the conditions of every state it may pick, so mshape's
    # MAX(price), kept by five states, is compared in its update (BEATS_MAX); the three-cycle update's
    # computes them once, from the key's state, and the core takes all five compares from them
    design = lower(check(parse_file(ROOT / "examples" / "mshape" / "mshape.sql")))
    top = Top(design, bus_width=64, partitions=1024, partitioner="table", update_cycles=update_cycles)
    m = top.elaborate(None)
    core = m.submodules["mshape_nfa"]
    top._MustUse__silence = True  # (elaborated by hand, to read its core)
    Fragment.get(m, None)
    assert core.given_cond and len(core.conditions.beats) == beats


@pytest.mark.parametrize("example", ["finance/finance0/finance0.sql", "finance/finance2/finance2.sql",
                                     "finance/finance5/finance5.sql", "mshape/mshape.sql"])
def test_the_conditions_read_only_the_state_bits_they_name_and_compute_apart_by_group(example):
    # The three-cycle update's table copies only Conditions.state_bits of the key's state for the
    # conditions (the rest zero): the conditions of random states equal those of the same states
    # with every other bit scrambled, and each range named is read (scrambling it changes some).
    # It computes them by Conditions.groups, apart: the groups cover every bit once, and the OR of
    # each group's alone is the whole
    design = lower(check(parse_file(ROOT / "examples" / example)))
    q, layout = design.queries[0], tuple_layout(design.tuple)
    conds = Conditions(q, every_beat=True)
    bits = conds.state_bits()
    mask = sum(((1 << (hi - lo)) - 1) << lo for lo, hi in bits)
    groups = conds.groups()
    assert sorted(i for g in groups for i in g) == list(range(conds.width)) and len(groups) > 1
    rng = random.Random(7)
    m = Module()
    state, other, raw = Signal(q.payload_width), Signal(q.payload_width), Signal(layout.size)
    x = data.View(layout, raw)
    a, b, apart = Signal(conds.width), Signal(conds.width), Signal(conds.width)
    m.d.comb += [a.eq(conds.of(state, x)), b.eq(conds.of(other, x))]
    whole = 0
    for g in groups:
        whole = whole | conds.of(state, x, only=g)
    m.d.comb += apart.eq(whole)
    differs = set()

    async def bench(ctx):
        for _ in range(300):
            word = rng.getrandbits(q.payload_width)
            ctx.set(raw, rng.getrandbits(layout.size))
            ctx.set(state, word)
            ctx.set(other, word & mask | rng.getrandbits(q.payload_width) & ~mask)
            assert ctx.get(a) == ctx.get(b) == ctx.get(apart)
            for i, (lo, hi) in enumerate(bits):  # (one range scrambled)
                ctx.set(other, word ^ (rng.getrandbits(hi - lo) << lo))
                if ctx.get(a) != ctx.get(b):
                    differs.add(i)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert differs == set(range(len(bits)))


@pytest.mark.parametrize("example, copies", [("mshape/mshape.sql", 11), ("finance/finance5/finance5.sql", 5),
                                             ("finance/finance2/finance2.sql", 1)])
def test_the_three_cycle_update_computes_the_conditions_in_groups_where_their_copies_are_few(example, copies):
    # On a large die a group of conditions each, from a copy of the tuple's inputs of its own (mshape's
    # eleven groups: 11 × 32 bits), while those copies take at most GROUPED_INPUT_BITS flip-flops: not
    # finance2's nine groups of 223 bits, computed together from one copy
    design = lower(check(parse_file(ROOT / "examples" / example)))
    top = Top(design, bus_width=64, partitions=1024, partitioner="table", update_cycles=3)
    m = top.elaborate(None)
    top._MustUse__silence = True  # (elaborated by hand, to read its table)
    table = m.submodules[f"{design.queries[0].name}_partitioner"]
    parts = table.elaborate(None)
    table._MustUse__silence = True
    names = [name for name in parts._named_submodules if name.startswith("replica_cond_in5")]
    assert len(names) == copies
    conds = Conditions(design.queries[0], every_beat=True)
    assert (len(conds.groups()) * len(table.cond_in) <= GROUPED_INPUT_BITS) == (copies > 1)
    Fragment.get(m, None)
    Fragment.get(parts, None)


@pytest.mark.parametrize("update_cycles, chunk", [(3, 8), (2, 64)])
def test_the_older_writes_lut_ram_is_read_through_a_copy_of_its_address_per_chunk(update_cycles, chunk):
    # finance0's 563-bit state: the three-cycle update reads the older write's LUT RAM at the lookup,
    # through a copy of the read address per HISTORY_CHUNK (8) bits, each beside its two
    # TRELLIS_DPR16X4s; the two-cycle update, which registers what it reads, per SELECT_CHUNK (64)
    from cepc.hw.partition.table import HISTORY_CHUNK, SELECT_CHUNK

    design = lower(check(parse_file(ROOT / "examples" / "finance" / "finance0" / "finance0.sql")))
    top = Top(design, bus_width=64, partitions=2048, partitioner="table", update_cycles=update_cycles)
    m = top.elaborate(None)
    top._MustUse__silence = True
    table = m.submodules[f"{design.queries[0].name}_partitioner"]
    parts = table.elaborate(None)
    table._MustUse__silence = True
    width = design.queries[0].payload_width
    assert chunk == (HISTORY_CHUNK if update_cycles == 3 else SELECT_CHUNK)
    copies = [n for n in parts._named_submodules if n.startswith("replica_history_read")]
    memories = [n for n in parts._named_submodules if n.startswith("history")]
    assert len(copies) == len(memories) == -(-width // chunk)
    # the three-cycle update's LUT RAM is twice as deep as the writes it holds: the half never
    # written reads zero where the key has no older write (no gate after the read)
    depths = {parts._named_submodules[n][0].depth for n in memories}
    assert depths == {16 if update_cycles == 3 else 8}
    Fragment.get(m, None)
    Fragment.get(parts, None)

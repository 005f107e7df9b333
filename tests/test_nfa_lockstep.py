"""The lock-step partial-match engine against the reference matcher (SPEC §3.4, §3.5).

Random patterns mix variables that may begin a match with variables whose DEFINE reads the
partial match (every aggregate, exact arithmetic up to UINT64 and beyond, ENUM/CHAR/BOOL
registers); every kind of measure; WITHIN with and without aggregates; both AFTER MATCH modes;
many keys. The engine is run three ways — its default split between lock-step and scalar tail,
lock-step only, scalar only — and fed in batches that carry state.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cepc import events
from cepc.lang import ast
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file
from cepc.nfa import lockstep, reference

import patterns as pt

ROOT = Path(__file__).resolve().parent.parent

SCHEMA = ("CREATE STREAM s (t TIMESTAMP, k UINT8, c ENUM('a', 'b', 'c', 'd'), v UINT8, w INT8, n CHAR(2), "
          "f BOOL, big UINT64);\n")
# variables that may begin a match (no aggregates), and variables that read the partial match
PLAIN = {"P0": "c = 'a'", "P1": "c IN ('a', 'b')", "P2": "v > 100", "P3": "c != 'd' AND w < 0",
         "P4": "f OR big > 9223372036854775808"}
AGGREGATE = {
    "R": "v > LAST(v)",
    "F": "v <= FIRST(v) + 30 AND c != 'a'",
    "S": "SUM(w) + w < 40",
    "M": "v >= MAX(v) - 60 OR COUNT(*) > 3",
    "L": "MIN(w) < w AND LAST(c) != c",
    "N": "FIRST(n) = n OR LAST(n) = 'xy'",
    "B": "big - FIRST(big) < 1000 OR NOT LAST(f)",  # UINT64 arithmetic: Python integers
    "T": "t - FIRST(t) <= 5 AND SUM(big) > 18446744073709551615",  # a SUM beyond 64 bits
    "C": "FIRST(c) = c AND LAST(f) = f",
    "K": "COUNT(*) IN (1, 3) OR v > 200",
}
MEASURES = ("COUNT(*) AS cnt, FIRST(t) AS t0, MAX(v) AS mx, SUM(w) AS sw, LAST(c) AS lc, "
            "MIN(w) - FIRST(v) AS d, v > FIRST(v) AS up, FIRST(n) AS fn, SUM(big) AS sb, LAST(f) AS lf, "
            "MIN(big) + 1 AS mb, n AS n_last, 'x' AS tag, w * -3 AS w3, NOT f AS nf")
MODES = ["SKIP PAST LAST ROW", "CONTINUE"]
EXAMPLES = ["mshape/mshape.sql", "finance/finance0/finance0.sql", "finance/finance2/finance2.sql",
            "finance/finance5/finance5.sql"]
BIG = [0, 1, 5, 1 << 62, (1 << 63) + 7, (1 << 64) - 1]


def query(pattern: ast.Pattern, after: str, within: int | None, measures: str = MEASURES,
          defines: dict | None = None) -> str:
    defines = defines or {**PLAIN, **AGGREGATE}
    used = {v.name for v in ast.pattern_vars(pattern)}
    text = ",\n  ".join(f"{name} AS {cond}" for name, cond in defines.items() if name in used) or "P0 AS TRUE"
    clauses = [f"PARTITION BY k AFTER MATCH {after}"]
    if within is not None:
        clauses.append(f"WITHIN {within}")
    if measures:
        clauses.append(f"MEASURES {measures}")
    return SCHEMA + "\n".join(clauses) + f"\nPATTERN ( {ast.format_pattern(pattern)} )\nDEFINE\n  {text};\n"


def frame(rows: list[tuple]) -> pd.DataFrame:
    """rows: (key, letter, v, w, time step, flag, big index)."""
    n = len(rows)
    return pd.DataFrame({
        "t": np.cumsum([r[4] for r in rows]).astype(np.int64) if n else np.zeros(0, np.int64),
        "k": np.array([r[0] for r in rows], dtype=np.int64),
        "c": np.array([pt.LETTERS[r[1]] for r in rows], dtype=object),
        "v": np.array([r[2] for r in rows], dtype=np.int64),
        "w": np.array([r[3] for r in rows], dtype=np.int64),
        "n": np.array([["ab", "xy", ""][r[2] % 3] for r in rows], dtype=object),
        "f": np.array([r[5] for r in rows], dtype=np.int64),
        "big": np.array([BIG[r[6]] for r in rows], dtype=np.uint64),
    })


def rows_strategy(keys: int, max_size: int):
    """Small hand-shrinkable streams, or longer seeded ones (up to ``max_size`` rows)."""
    small = st.lists(st.tuples(st.integers(0, keys - 1), st.integers(0, 3), st.integers(0, 255),
                               st.integers(-128, 127), st.integers(0, 3), st.integers(0, 1),
                               st.integers(0, len(BIG) - 1)), min_size=1, max_size=12)
    sizes = st.sampled_from([max_size // 10, max_size // 3, max_size])
    seeded = st.tuples(st.integers(0, 2 ** 32 - 1), sizes, st.integers(1, keys)).map(lambda a: seeded_rows(*a))
    return st.one_of(small, seeded)


def seeded_rows(seed: int, n: int, keys: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    cols = [rng.integers(0, keys, n), rng.integers(0, 4, n), rng.integers(0, 256, n), rng.integers(-128, 128, n),
            rng.integers(0, 4, n), rng.integers(0, 2, n), rng.integers(0, len(BIG), n)]
    return [tuple(int(c[i]) for c in cols) for i in range(n)]


def tails(variables) -> st.SearchStrategy:
    leaves = st.sampled_from([ast.Var(v) for v in variables] + [ast.AnyTuple()])

    def extend(children):
        return st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda xs: ast.Seq(tuple(xs))),
            st.lists(children, min_size=2, max_size=3).map(lambda xs: ast.Alt(tuple(xs))),
            st.tuples(children, st.sampled_from(pt.QUANTIFIERS[:-1])).map(lambda t: ast.Repeat(t[0], *t[1])),
        )

    return st.recursive(leaves, extend, max_leaves=7)


heads = st.sampled_from([ast.Var(v) for v in PLAIN] + [ast.AnyTuple()])


def shapes(head: ast.Pattern, tail: ast.Pattern, shape: int) -> ast.Pattern:
    """Where the head sits: in front, or inside a loop, so that a position that may begin a match
    also has predecessors (a new partial match then competes with older ones)."""
    if shape == 0:
        return ast.Seq((head, tail))
    if shape == 1:
        return ast.Repeat(ast.Seq((head, tail)), 1, None)
    return ast.Seq((ast.Repeat(head, 1, None), tail, ast.Repeat(ast.Seq((head, tail)), 0, 2)))


shape_ids = st.integers(0, 2)


def reference_reports(checked, df: pd.DataFrame):
    found = reference.Matcher(checked).run(df)
    return [m.row for m in found], [m.measures for m in found]


def lockstep_reports(checked, df: pd.DataFrame, **options):
    qm = reference.QueryMatcher(checked, 0)
    group = events.group_codes(df, qm.query.partition_by)
    rows, measures = lockstep.LockstepMatcher(qm, **options).match(df, group, events.grouped_order(group))
    return [int(r) for r in rows], (measures if measures is not None else [()] * len(rows))


def assert_same(checked, df, **options):
    want = reference_reports(checked, df)
    got = lockstep_reports(checked, df, **options)
    assert got[0] == want[0]
    assert got[1] == want[1]
    # and the match files are byte-identical (booleans print as 1/0 either way)
    ref_rows = events.match_rows(checked, df, reference.Matcher(checked).run(df))
    fast = [reference.Match(0, r, m) for r, m in zip(*got)]
    assert events.match_rows(checked, df, fast) == ref_rows
    return want


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(heads, tails(list(PLAIN) + list(AGGREGATE)), shape_ids, st.sampled_from(MODES),
       st.sampled_from([None, 0, 3, 12]), rows_strategy(40, 600), st.sampled_from([lockstep.LOCKSTEP_MIN, 1, 10 ** 9]))
def test_lockstep_equals_reference_with_aggregates(head, tail, shape, after, within, rows, lockstep_min):
    checked = check(parse(query(shapes(head, tail, shape), after, within)))
    assert_same(checked, frame(rows), lockstep_min=lockstep_min)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pt.patterns(), st.sampled_from(MODES), st.integers(0, 8), rows_strategy(6, 200),
       st.sampled_from([1, 10 ** 9]))
def test_within_without_aggregates_keeps_the_latest_start(pattern, after, within, rows, lockstep_min):
    # WITHIN and no aggregate in DEFINE: latest start wins (SPEC §3.5), so WITHIN is exact
    measures = "COUNT(*) AS n, FIRST(t) AS t0, LAST(c) AS c1, SUM(v) AS sv"
    text = pt.query_text(pattern, after, partition=True, measures=measures, within=within)
    text = text.replace(pt.schema(), SCHEMA)
    checked = check(parse(text))
    df = frame(rows)
    rows_found, measures_found = assert_same(checked, df, lockstep_min=lockstep_min)
    want = []
    rx = re.compile(pt.to_regex(pattern))
    for key in sorted(set(df["k"])):
        idx = np.flatnonzero(df["k"].to_numpy() == key)
        sub = "".join(df["c"].to_numpy()[idx])
        times = df["t"].to_numpy()[idx].tolist()
        last_end = -1
        for j in range(len(sub)):  # SPEC §3.2-3.5 by brute force: the shortest qualifying match
            lo = last_end + 1 if after.startswith("SKIP") else 0
            starts = [i for i in range(lo, j + 1) if rx.fullmatch(sub[i:j + 1]) and times[j] - times[i] <= within]
            if starts:
                want.append((int(idx[j]), j - max(starts) + 1))
                last_end = j
    assert sorted(want) == [(r, m[0]) for r, m in zip(rows_found, measures_found)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(heads, tails(list(PLAIN) + list(AGGREGATE)), shape_ids, st.sampled_from(MODES), st.sampled_from([None, 4]),
       rows_strategy(8, 300), st.lists(st.integers(0, 300), max_size=4))
def test_batches_carry_partial_matches(head, tail, shape, after, within, rows, cuts):
    checked = check(parse(query(shapes(head, tail, shape), after, within)))
    df = frame(rows)
    want = reference_reports(checked, df)
    qm = reference.QueryMatcher(checked, 0)
    matcher = lockstep.LockstepMatcher(qm, carry=True, lockstep_min=2)
    got_rows, got_measures = [], []
    bounds = sorted({0, len(df), *(c for c in cuts if c < len(df))})
    for lo, hi in zip(bounds, bounds[1:]):
        part = df.iloc[lo:hi].reset_index(drop=True)
        group = events.group_codes(part, ("k",))
        r, m = matcher.match(part, group)
        got_rows += [int(x) + lo for x in r]
        got_measures += m
    assert got_rows == want[0]
    assert got_measures == want[1]


def test_lockstep_and_scalar_tail_agree_on_long_runs():
    # 60 short keys run in lock-step, two long ones finish in the scalar loop
    rng = np.random.default_rng(3)
    keys = list(rng.integers(0, 60, 2500)) + [100] * 2000 + [101] * 1500
    rng.shuffle(keys)
    rows = [(int(k) % 256, int(rng.integers(0, 4)), int(rng.integers(0, 256)), int(rng.integers(-128, 128)),
             int(rng.integers(0, 4)), int(rng.integers(0, 2)), int(rng.integers(0, len(BIG)))) for k in keys]
    pattern = ast.Seq((ast.Var("P1"), ast.Repeat(ast.Alt((ast.Var("R"), ast.Var("L"))), 0, None),
                       ast.Var("M")))
    checked = check(parse(query(pattern, "SKIP PAST LAST ROW", 9)))
    df = frame(rows)
    want = assert_same(checked, df)
    assert len(want[0]) > 100
    for lockstep_min in (1, 10 ** 9):
        assert lockstep_reports(checked, df, lockstep_min=lockstep_min) == want


@pytest.mark.parametrize("example", EXAMPLES)
def test_examples_equal_their_expected_files(example):
    query_file = ROOT / "examples" / example
    checked = check(parse_file(query_file))
    df = events.load_events(query_file.parent / "events.csv", checked.stream)
    assert_same(checked, df)
    rows, measures = lockstep_reports(checked, df)
    got = events.match_rows(checked, df, [reference.Match(0, r, m) for r, m in zip(rows, measures)])
    header, want = events.read_matches(query_file.parent / "expected.csv")
    assert got == want and len(want) >= 2


@pytest.mark.parametrize("example", EXAMPLES)
def test_generated_market_data(example):
    from cepc.gen import generate

    checked = check(parse_file(ROOT / "examples" / example))
    df = generate(checked, 30000, 40, seed=5)
    want = assert_same(checked, df)
    assert 0 < len(want[0]) < len(df) // 10


def test_finance5_window_idiom_equals_within():
    # finance5's README: Hirzel's notTooLong predicate and WITHIN say the same (both prune partial
    # matches older than the window; the retention rule is the earliest start either way)
    query_file = ROOT / "examples" / "finance" / "finance5" / "finance5.sql"
    text = query_file.read_text()
    within = (text.replace("PATTERN", "WITHIN 19999\nPATTERN")
              .replace("notTooLong    AS time - FIRST(time) < 20000", "notTooLong    AS TRUE")
              .replace("largeIncrease AS time - FIRST(time) < 20000 AND", "largeIncrease AS"))
    assert within.count("20000") == 0 and "WITHIN 19999" in within
    from cepc.gen import generate

    checked = check(parse_file(query_file))
    df = generate(checked, 40000, 20, seed=8)
    idiom = assert_same(checked, df)
    assert assert_same(check(parse(within)), df) == idiom and len(idiom[0]) > 5


def test_documented_retention_examples():
    # docs/language.md, "Exactness": a dropped partial match loses a row; WITHIN's latest start
    drop = """CREATE STREAM ticks (time TIMESTAMP, price UINT16);
    MEASURES FIRST(price) AS base, COUNT(*) AS n
    PATTERN ( . X* BIG )
    DEFINE X AS TRUE, BIG AS price >= FIRST(price) + 11;"""
    ticks = pd.DataFrame({"time": np.arange(1, 5, dtype=np.int64), "price": np.array([5, 3, 4, 14], dtype=np.int64)})
    assert assert_same(check(parse(drop)), ticks) == ([], [])
    assert assert_same(check(parse(drop)), ticks.iloc[1:].reset_index(drop=True)) == ([2], [(3, 3)])
    window = """CREATE STREAM ev (time TIMESTAMP, kind ENUM('a', 'b', 'c'));
    AFTER MATCH CONTINUE WITHIN 5
    MEASURES FIRST(time) AS started, COUNT(*) AS n
    PATTERN ( A .* B )
    DEFINE A AS kind = 'a', B AS kind = 'b';"""
    ev = pd.DataFrame({"time": np.array([0, 4, 5, 8], dtype=np.int64),
                       "kind": np.array(["a", "a", "c", "b"], dtype=object)})
    assert assert_same(check(parse(window)), ev) == ([3], [(4, 3)])
    earliest = window.replace("B AS kind = 'b';", "B AS kind = 'b' AND COUNT(*) >= 1;")
    assert assert_same(check(parse(earliest)), ev) == ([], [])


def test_enum_as_categorical_gives_the_same_reports():
    # the Spark tasks hand ENUM columns over as pandas Categoricals
    pattern = ast.Seq((ast.Var("P1"), ast.Repeat(ast.Var("L"), 1, None), ast.Var("C")))
    checked = check(parse(query(pattern, "CONTINUE", None)))
    rng = np.random.default_rng(9)
    rows = [(int(rng.integers(0, 5)), int(rng.integers(0, 4)), int(rng.integers(0, 256)),
             int(rng.integers(-128, 128)), 1, int(rng.integers(0, 2)), 0) for _ in range(3000)]
    df = frame(rows)
    want = reference_reports(checked, df)
    cat = df.assign(c=pd.Categorical(df["c"], categories=list(pt.LETTERS)))
    assert lockstep_reports(checked, cat) == lockstep_reports(checked, df) == tuple(want)
    assert len(want[0]) > 20


def test_exact_arithmetic_at_64_bits():
    text = """CREATE STREAM s (t TIMESTAMP, k UINT8, a UINT64, b INT64);
    PARTITION BY k AFTER MATCH CONTINUE
    MEASURES SUM(a) AS sa, SUM(b) AS sb, MAX(a) - MIN(b) AS spread, FIRST(t) AS t0, COUNT(*) AS n
    PATTERN (X Y+)
    DEFINE X AS TRUE,
           Y AS SUM(a) + a > 36893488147419103229 OR b - LAST(b) < -9223372036854775807 OR t - FIRST(t) > 1;"""
    checked = check(parse(text))
    top, low = (1 << 64) - 1, -(1 << 63)
    df = pd.DataFrame({"t": np.array([(1 << 64) - 9 + i for i in range(8)], dtype=np.uint64),
                       "k": np.zeros(8, dtype=np.int64),
                       "a": np.array([top, top, top, 0, top, 1, top, top], dtype=np.uint64),
                       "b": np.array([(1 << 63) - 1, low, 5, low, (1 << 63) - 1, low, 0, 0], dtype=np.int64)})
    want = assert_same(checked, df)
    assert len(want[0]) >= 3
    assert any(m[0] > (1 << 65) for m in want[1])  # sums beyond 64 bits came out exact
    for lockstep_min in (1, 10 ** 9):
        assert lockstep_reports(checked, df, lockstep_min=lockstep_min) == want


@pytest.mark.parametrize("padded", [True, False])
def test_segments_padded_or_reduced(padded):
    # the winner of each position is a min over its incoming edges: over segments padded to the
    # largest in-degree (the usual case), or with reduceat where padding would cost too much
    if padded:
        pattern = ast.Seq((ast.Var("P1"), ast.Repeat(ast.Alt((ast.Var("R"), ast.Var("M"), ast.Var("K"))), 1, None),
                           ast.Var("L")))
    else:  # one position with many predecessors, many with one
        heads = ast.Alt(tuple(ast.Var(v) for v in ["P0", "P1", "P2", "P3", "P4"] * 2))
        pattern = ast.Seq((heads, ast.Var("K"), ast.Var("R")))
    checked = check(parse(query(pattern, "CONTINUE", 6)))
    qm = reference.QueryMatcher(checked, 0)
    assert lockstep.LockstepMatcher(qm).padded is padded
    rows = seeded_rows(21, 6000, 12)
    want = assert_same(checked, frame(rows))
    assert len(want[0]) > 20
    assert assert_same(checked, frame(rows), lockstep_min=1) == want


def test_no_partition_by_and_empty_input():
    text = SCHEMA + """MEASURES COUNT(*) AS n, MAX(v) AS top
    PATTERN (P2 R+ F) DEFINE P2 AS v > 100, R AS v > LAST(v), F AS v <= FIRST(v) + 30 AND c != 'a';"""
    checked = check(parse(text))
    rng = np.random.default_rng(4)
    rows = [(0, int(rng.integers(0, 4)), int(rng.integers(0, 256)), 0, 1, 0, 0) for _ in range(4000)]
    want = assert_same(checked, frame(rows))
    assert len(want[0]) > 50
    empty = frame(rows).iloc[:0]
    qm = reference.QueryMatcher(checked, 0)
    rows_found, measures = lockstep.LockstepMatcher(qm).match(empty, np.zeros(0, dtype=np.int64))
    assert len(rows_found) == 0 and measures == []


def test_too_long_a_partition_is_unsupported():
    pattern = ast.Seq((ast.Var("P0"), ast.Repeat(ast.Var("R"), 1, None)))
    checked = check(parse(query(pattern, "CONTINUE", None)))
    qm = reference.QueryMatcher(checked, 0)
    matcher = lockstep.LockstepMatcher(qm, carry=True)
    df = frame([(1, 0, 10, 0, 1, 0, 0), (1, 0, 20, 0, 1, 0, 0)])
    matcher.match(df, events.group_codes(df, ("k",)))
    assert matcher.state, "key 1 has a partial match in R+ to carry"
    for saved in matcher.state.values():
        saved["ord"] = 1 << 61  # as if 2^61 tuples of this key had gone by
    with pytest.raises(lockstep.Unsupported, match="too long"):
        matcher.match(df, events.group_codes(df, ("k",)))

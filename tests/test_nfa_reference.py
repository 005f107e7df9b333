"""The reference matcher (SPEC §3) against Python's ``re`` and hand-worked cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cepc.lang import ast
from cepc.lang.check import check
from cepc.lang.parse import parse
from cepc.nfa import reference

import patterns as pt


def frame(letters: str, keys: list[int] | None = None, times: list[int] | None = None) -> pd.DataFrame:
    n = len(letters)
    return pd.DataFrame({
        "t": np.asarray(times if times is not None else range(n), dtype=np.int64),
        "k": np.asarray(keys if keys is not None else [0] * n, dtype=np.int64),
        "c": np.array(list(letters), dtype=object),
    })


def run(text: str, df: pd.DataFrame) -> list[reference.Match]:
    return reference.Matcher(check(parse(text))).run(df)


modes = st.sampled_from(["SKIP PAST LAST ROW", "CONTINUE"])


@settings(max_examples=300, deadline=None)
@given(pt.patterns(), pt.streams(), modes)
def test_bitset_engine_agrees_with_re(pattern: ast.Pattern, stream: str, after: str):
    got = run(pt.query_text(pattern, after), frame(stream))
    want = pt.oracle(pattern, stream, skip=after.startswith("SKIP"))
    assert [m.row for m in got] == [j for j, _ in want]


@settings(max_examples=200, deadline=None)
@given(pt.patterns(), pt.streams(), modes)
def test_partial_match_engine_reports_the_longest_match(pattern, stream, after):
    # MEASURES switch to the partial-match engine; without aggregates in DEFINE the
    # retention rule keeps the earliest start, so COUNT(*) is the longest match's length.
    text = pt.query_text(pattern, after, measures="COUNT(*) AS n, FIRST(t) AS t0, LAST(c) AS c1")
    got = run(text, frame(stream))
    want = pt.oracle(pattern, stream, skip=after.startswith("SKIP"))
    assert [(m.row, m.measures) for m in got] == [(j, (j - i + 1, i, stream[j])) for j, i in want]


@settings(max_examples=200, deadline=None)
@given(pt.patterns(), st.lists(st.tuples(st.sampled_from(pt.LETTERS), st.integers(0, 3)), max_size=24),
       modes, st.integers(0, 6))
def test_within_is_exact(pattern, tuples, after, within):
    # WITHIN without aggregates keeps the latest start per state (SPEC §3.5): exact.
    stream = "".join(c for c, _ in tuples)
    times = list(np.cumsum([d for _, d in tuples])) if tuples else []
    got = run(pt.query_text(pattern, after, within=within), frame(stream, times=times))
    want = pt.oracle(pattern, stream, skip=after.startswith("SKIP"), times=times, within=within)
    assert [m.row for m in got] == [j for j, _ in want]


@settings(max_examples=150, deadline=None)
@given(pt.patterns(), st.lists(st.tuples(st.sampled_from(pt.LETTERS), st.integers(0, 2)), max_size=30), modes)
def test_partitions_are_isolated(pattern, tuples, after):
    letters = "".join(c for c, _ in tuples)
    keys = [k for _, k in tuples]
    got = run(pt.query_text(pattern, after, partition=True), frame(letters, keys=keys))
    want = []
    for key in set(keys):
        rows = [i for i, k in enumerate(keys) if k == key]
        sub = "".join(letters[i] for i in rows)
        want += [rows[j] for j, _ in pt.oracle(pattern, sub, skip=after.startswith("SKIP"))]
    assert [m.row for m in got] == sorted(want)


@pytest.mark.parametrize("measures", ["", "COUNT(*) AS n"])
def test_batches_carry_partition_state(measures):
    text = pt.query_text(ast.Seq((ast.Var("P0"), ast.Repeat(ast.Var("P3"), 0, None), ast.Var("P2"))),
                         "CONTINUE", partition=True, measures=measures)
    # key 0: a a d c → match at row 6; key 1: a c b c → matches at rows 3 and 5 (CONTINUE)
    letters, keys = "aaacdbcc", [0, 1, 0, 1, 0, 1, 0, 1]
    whole = run(text, frame(letters, keys))
    matcher = reference.Matcher(check(parse(text)))
    df = frame(letters, keys)
    first = matcher.run(df.iloc[:3].reset_index(drop=True))
    second = matcher.run(df.iloc[3:].reset_index(drop=True), seqs=np.arange(3, 8))
    assert [m.row for m in whole] == [m.row for m in first] + [m.row + 3 for m in second]
    assert [m.row for m in whole] == [3, 5, 6]


STOCK = """CREATE STREAM trades (time TIMESTAMP, sym ENUM('X', 'Y'), price UINT16);
"""


def stock_frame(prices: list[int], syms: str | None = None) -> pd.DataFrame:
    return pd.DataFrame({"time": np.arange(len(prices), dtype=np.int64) * 10,
                         "sym": np.array(list(syms or "X" * len(prices)), dtype=object),
                         "price": np.asarray(prices, dtype=np.int64)})


def test_aggregate_in_define_compares_with_previous_tuple():
    q = STOCK + """PARTITION BY sym MEASURES COUNT(*) AS n, FIRST(price) AS p0, MAX(price) AS top
    PATTERN (S UP+ DOWN) DEFINE S AS TRUE, UP AS price > LAST(price), DOWN AS price < LAST(price);"""
    got = run(q, stock_frame([5, 6, 7, 3, 4, 9, 8]))
    # 5 6 7 3 matches (rows 0–3); the next match starts after row 3: 4 9 8 (rows 4–6)
    assert [(m.row, m.measures) for m in got] == [(3, (4, 5, 7)), (6, (3, 4, 9))]


def test_aggregate_retention_keeps_earliest_start():
    # CONTINUE: at row 2 both the run from row 0 and from row 1 reach UP; the earliest is kept.
    q = STOCK + """AFTER MATCH CONTINUE MEASURES FIRST(time) AS started, SUM(price) AS total
    PATTERN (S UP UP) DEFINE S AS TRUE, UP AS price > LAST(price);"""
    got = run(q, stock_frame([1, 2, 3, 4]))
    assert [(m.row, m.measures) for m in got] == [(2, (0, 6)), (3, (10, 9))]


def test_aggregates_are_per_partition():
    q = STOCK + """PARTITION BY sym MEASURES COUNT(*) AS n
    PATTERN (S UP UP) DEFINE S AS TRUE, UP AS price > LAST(price);"""
    got = run(q, stock_frame([1, 9, 2, 8, 3, 7], "XYXYXY"))
    assert [(m.row, m.measures) for m in got] == [(4, (3,))]


def test_measure_bare_field_is_last_value_and_arithmetic_is_exact():
    q = STOCK + """MEASURES price AS last_price, LAST(price) - FIRST(price) AS gain, price * 3 + 1 AS x
    PATTERN (A B) DEFINE A AS price < 10, B AS price >= 10;"""
    got = run(q, stock_frame([3, 40]))
    assert [(m.row, m.measures) for m in got] == [(1, (40, 37, 121))]


def test_time_window_with_arithmetic_on_first():
    q = STOCK + """PATTERN (S T*) DEFINE S AS price = 1, T AS time - FIRST(time) < 25 AND price != 1;"""
    # S at row 0 (t=0); rows 1,2 within 25; matches are eager: reported at row 0 already
    got = run(q, stock_frame([1, 2, 2, 2]))
    assert [m.row for m in got] == [0]


def test_large_unsigned_values_compare_exactly():
    q = """CREATE STREAM s (v UINT64); PATTERN (A) DEFINE A AS v > 18446744073709551610;"""
    df = pd.DataFrame({"v": np.array([2**64 - 1, 2**63, 18446744073709551610], dtype=np.uint64)})
    assert [m.row for m in run(q, df)] == [0]
    q = """CREATE STREAM s (v UINT64, w INT8); PATTERN (A) DEFINE A AS v - w > 18446744073709551614;"""
    df = pd.DataFrame({"v": np.array([2**64 - 1, 2**64 - 1], dtype=np.uint64), "w": np.array([-1, 1], dtype=np.int64)})
    assert [m.row for m in run(q, df)] == [0]


def test_glushkov_positions_of_counted_repetition():
    pos = reference.positions(check(parse(pt.query_text(ast.Repeat(ast.Var("P0"), 2, 4)))).queries[0].pattern)
    assert pos.n == 4
    assert pos.first == 0b0001
    assert pos.last == 0b1110
    assert pos.follow == [0b0010, 0b0100, 0b1000, 0]


@pytest.mark.parametrize("condition, rows", [
    ("NOT TRUE", []), ("NOT FALSE", [0, 1, 2]), ("x = 1 AND NOT FALSE", [0, 2]),
    ("x = 1 OR NOT TRUE", [0, 2]), ("NOT (TRUE AND TRUE)", []), ("f = TRUE", [0]), ("NOT f", [1, 2]),
    ("TRUE", [0, 1, 2]),
])
def test_boolean_literals_and_fields(condition, rows):
    q = f"CREATE STREAM s (x UINT8, f BOOL); AFTER MATCH CONTINUE PATTERN (A) DEFINE A AS {condition};"
    df = pd.DataFrame({"x": np.array([1, 2, 1], dtype=np.int64), "f": np.array([1, 0, 0], dtype=np.int64)})
    assert [m.row for m in run(q, df)] == rows

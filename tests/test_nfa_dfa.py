"""The fast engine (lock-step DFA) against the reference matcher and Python's ``re``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cepc import events
from cepc.lang import ast
from cepc.lang.check import check
from cepc.lang.parse import parse
from cepc.nfa import dfa, reference

import patterns as pt

modes = st.sampled_from(["SKIP PAST LAST ROW", "CONTINUE"])


def keyed(letters: str, keys: list[int]) -> pd.DataFrame:
    n = len(letters)
    return pd.DataFrame({"t": np.arange(n, dtype=np.int64), "k": np.asarray(keys, dtype=np.int64),
                         "c": np.array(list(letters), dtype=object)})


def both(text: str, df: pd.DataFrame) -> tuple[list[int], list[int]]:
    checked = check(parse(text))
    ref = [m.row for m in reference.Matcher(checked).run(df)]
    qm = reference.QueryMatcher(checked, 0)
    group = events.group_codes(df, qm.query.partition_by)
    fast = dfa.FastMatcher(qm).match(df, group, events.grouped_order(group))
    return [int(r) for r in fast], ref


@settings(max_examples=300, deadline=None)
@given(pt.patterns(), st.lists(st.tuples(st.sampled_from(pt.LETTERS), st.integers(0, 40)), max_size=80), modes)
def test_fast_engine_equals_reference_over_many_keys(pattern: ast.Pattern, tuples, after):
    letters = "".join(c for c, _ in tuples)
    fast, ref = both(pt.query_text(pattern, after, partition=True), keyed(letters, [k for _, k in tuples]))
    assert fast == ref


@settings(max_examples=200, deadline=None)
@given(pt.patterns(), pt.streams(), modes)
def test_fast_engine_equals_re_on_one_stream(pattern, stream, after):
    fast, _ = both(pt.query_text(pattern, after), keyed(stream, [0] * len(stream)))
    assert fast == [j for j, _ in pt.oracle(pattern, stream, skip=after.startswith("SKIP"))]


@pytest.mark.parametrize("after", ["SKIP PAST LAST ROW", "CONTINUE"])
def test_lockstep_and_scalar_tail_agree(after):
    # 60 short keys run in lock-step, two long ones finish in the scalar loop
    rng = np.random.default_rng(7)
    keys = list(rng.integers(0, 60, 3000)) + [100] * 2500 + [101] * 1800
    rng.shuffle(keys)
    letters = "".join(rng.choice(list(pt.LETTERS), len(keys)))
    text = pt.schema() + f"PARTITION BY k AFTER MATCH {after}\nPATTERN ( P0 (P1 | P3)* P2 )\nDEFINE\n  " \
        + pt.defines() + ";\n"
    fast, ref = both(text, keyed(letters, keys))
    assert fast == ref and len(ref) > 100
    assert (np.bincount(keys) > 1000).sum() == 2 and dfa.LOCKSTEP_MIN < 60


def test_alphabet_grows_across_calls():
    checked = check(parse(pt.schema() + "PARTITION BY k PATTERN ( P0 P2 )\nDEFINE\n  " + pt.defines() + ";\n"))
    qm = reference.QueryMatcher(checked, 0)
    fm = dfa.FastMatcher(qm)
    first = keyed("aaaa", [0, 1, 0, 1])  # one predicate vector only
    assert list(fm.match(first, events.group_codes(first, ("k",)))) == []
    second = keyed("abcd", [0, 0, 1, 1])  # new vectors: the cached DFA is extended, not wrong
    assert list(fm.match(second, events.group_codes(second, ("k",)))) == [1]
    assert sorted(fm._dfa.alphabet) == [0, 1, 2]  # 'd' satisfies nothing, 'a' P0, 'b'/'c' P2


def test_state_explosion_is_bounded():
    # (0|1)* 1 (0|1){i}: the DFA needs 2^(i+1) states (Woods et al. §4.2)
    text = ("CREATE STREAM s (b UINT8);\nPATTERN ( X* O X X X X X X X X X X X X )\n"
            "DEFINE X AS b <= 1, O AS b = 1;\n")
    checked = check(parse(text))
    qm = reference.QueryMatcher(checked, 0)
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"b": rng.integers(0, 2, 4000)})
    alphabet = [int(m) for m in qm.pred_masks({"b": np.array([0, 1])}, 2)]
    with pytest.raises(dfa.DfaTooLarge):
        dfa.build(qm.pos, alphabet, qm.skip, max_entries=1000)
    group = np.zeros(len(df), dtype=np.int64)
    fast = dfa.FastMatcher(qm).match(df, group)  # 2^13 states × 2 symbols fits the default bound
    assert list(fast) == [m.row for m in reference.Matcher(checked).run(df)]


def test_symbols_beyond_62_positions_use_python_integers():
    n = 70
    text = ("CREATE STREAM s (b UINT8);\nAFTER MATCH CONTINUE PATTERN ( " + " ".join(["A"] * n) + " B )\n"
            "DEFINE A AS b < 5, B AS b = 9;\n")
    checked = check(parse(text))
    df = pd.DataFrame({"b": ([1] * n + [9]) * 3 + [9, 1]})
    qm = reference.QueryMatcher(checked, 0)
    assert qm.pred_masks({"b": df["b"].to_numpy()}, len(df)).dtype == object
    fast = dfa.FastMatcher(qm).match(df, np.zeros(len(df), dtype=np.int64))
    assert list(fast) == [m.row for m in reference.Matcher(checked).run(df)] == [70, 141, 212]

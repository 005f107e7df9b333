"""``--automaton dfa``: the powerset construction against the NFA it comes from, in software and hardware."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from amaranth.sim import Simulator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cepc.hw.nfa_core import DfaCore
from cepc.lang.check import check
from cepc.lang.parse import parse
from cepc.nfa import powerset
from cepc.nfa.lower import lower

import hwsim
import patterns as pt

modes = st.sampled_from(["SKIP PAST LAST ROW", "CONTINUE"])


def plan(pattern, after: str, partition: bool = False):
    return lower(check(parse(pt.query_text(pattern, after, partition=partition)))).queries[0]


def nfa_run(q, vectors: list[int]) -> list[bool]:
    state, out = 0, []
    for v in vectors:
        state, matched = q.nfa.step(state, v, q.skip)
        out.append(matched)
    return out


def dfa_run(dfa, vectors: list[int]) -> list[bool]:
    d, out = 0, []
    for v in vectors:
        d, matched = dfa.step(d, v)
        out.append(matched)
    return out


@settings(max_examples=300, deadline=None)
@given(pt.patterns(), modes, st.lists(st.integers(0, 15), max_size=40))
def test_dfa_reports_where_the_nfa_does(pattern, after, vectors):
    """Any predicate vectors, overlapping predicates included: the same match bit at every tuple."""
    q = plan(pattern, after)
    if q.nfa.n_states == 0:
        return
    try:
        dfa = powerset.determinize(q.nfa, q.skip)
    except powerset.DfaTooLarge:
        # (a pattern like `P0 . . . . (. . .){1,3}` with CONTINUE needs more DFA states than hardware
        # takes: refused as documented, test_dfa_too_large_is_refused_with_the_query_name; a fresh
        # clone's run drew one)
        return
    assert dfa_run(dfa, vectors) == nfa_run(q, vectors)
    assert dfa.sets[0] == 0 and all(len(row) == 2 ** len(ins) for row, ins in zip(dfa.table, dfa.inputs))


def bits_query(i: int, after: str = "CONTINUE") -> str:
    return ("CREATE STREAM bits (t TIMESTAMP, b UINT(1));\n"
            f"AFTER MATCH {after} PATTERN ( (Z | O)* O (Z | O){{{i}}} ) DEFINE Z AS b = 0, O AS b = 1;")


@pytest.mark.parametrize("i", range(7))
def test_state_explosion_of_woods_figure_3(i):
    """(0|1)* 1 (0|1){i}: 2i + 3 NFA states; the minimal DFA (reports on transitions) has 2 ** i."""
    q = lower(check(parse(bits_query(i)))).queries[0]
    assert q.nfa.n_states == 2 * i + 3
    dfa = powerset.determinize(q.nfa, q.skip)
    assert dfa.n_states == 2 ** i
    assert powerset.determinize(q.nfa, q.skip, "binary").width == max(1, i)


def test_dfa_too_large_is_refused_with_the_query_name():
    q = lower(check(parse(bits_query(8)))).queries[0]
    with pytest.raises(powerset.DfaTooLarge, match=r"^the DFA of query q0 is too large for hardware .*--automaton nfa$"):
        powerset.query_dfa(q, max_states=100)


def test_aggregates_and_measures_are_refused():
    text = pt.schema() + "MEASURES COUNT(*) AS n PATTERN (P0 P1+) DEFINE " + pt.defines() + ";"
    with pytest.raises(ValueError, match=r"^--automaton dfa does not support aggregates, MEASURES or WITHIN \(query q0\)"):
        powerset.design_dfa(lower(check(parse(text))))


@settings(max_examples=40, deadline=None)
@given(pt.patterns(max_leaves=10), modes, st.sampled_from(powerset.ENCODINGS),
       st.lists(st.integers(0, 2**16 - 1), min_size=1, max_size=24))
def test_dfa_core_is_the_plan_step_function(pattern, after, encoding, words):
    q = plan(pattern, after)
    if q.nfa.n_states == 0:
        return
    q = powerset.query_dfa(q, encoding)
    dfa, p = q.dfa, max(1, len(q.predicates))
    dut = DfaCore(q, len(q.predicates))

    async def bench(ctx):
        for word in words:
            d = word % dfa.n_states
            preds = (word >> 4) & ((1 << p) - 1)
            ctx.set(dut.state, dfa.code(d))
            ctx.set(dut.preds, preds)
            t, matched = dfa.step(d, preds)
            assert (ctx.get(dut.next), bool(ctx.get(dut.match))) == (dfa.code(t), matched)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


def keyed_frame(letters: str, keys: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"t": np.arange(len(letters), dtype=np.int64), "k": np.asarray(keys, dtype=np.int64),
                         "c": np.array(list(letters), dtype=object)})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pt.patterns(max_leaves=8),
       st.lists(st.tuples(st.sampled_from(pt.LETTERS), st.integers(0, 4)), min_size=1, max_size=30),
       modes, st.sampled_from(powerset.ENCODINGS), st.sampled_from(["pipeline", "table"]), st.integers(0, 2**16))
def test_dfa_hardware_matches_the_reference(pattern, tuples, after, encoding, partitioner, seed):
    """The whole top with DFA cores in amaranth.sim, random patterns and keys, against the reference."""
    checked = check(parse(pt.query_text(pattern, after, partition=True)))
    if lower(checked).queries[0].nfa.n_states == 0:
        return
    frame = keyed_frame("".join(c for c, _ in tuples), [k for _, k in tuples])
    hwsim.run_and_compare(checked, frame, dfa_encoding=encoding, bus_width=40,
                          partitions=5 if partitioner == "pipeline" else 8, partitioner=partitioner,
                          stall=0.2, backpressure=0.3, seed=seed)


@pytest.mark.parametrize("encoding", powerset.ENCODINGS)
def test_state_explosion_pattern_in_hardware(encoding):
    checked = check(parse(bits_query(3)))
    rng = random.Random(3)
    bits = [rng.randint(0, 1) for _ in range(60)]
    frame = pd.DataFrame({"t": np.arange(60, dtype=np.int64), "b": np.array(bits, dtype=np.int64)})
    hwsim.run_and_compare(checked, frame, dfa_encoding=encoding, bus_width=72, partitions=1)


# --- the command line --------------------------------------------------------------------------------


def test_compile_with_a_dfa_says_its_size_and_writes_it_into_the_sidecar(tmp_path, capsys):
    import json

    from cepc.cli import main

    query = tmp_path / "bits.sql"
    query.write_text(bits_query(4))
    for encoding, width in (("onehot", 15), ("binary", 4)):
        out = tmp_path / f"{encoding}.v"
        assert main(["compile", str(query), "-o", str(out), "--automaton", "dfa", "--dfa-encoding", encoding]) == 0
        assert f"query q0: DFA of 16 states (11 NFA states), {encoding} in {width} bits" in capsys.readouterr().err
        side = json.loads(out.with_suffix(".json").read_text())
        assert side["queries"][0]["dfa"] == {"states": 16, "encoding": encoding, "width": width}
        assert "As a DFA (powerset construction): 16 states" in out.read_text()


def test_compile_refuses_a_dfa_for_aggregates_and_no_decoder_with_a_dfa(tmp_path, capsys):
    from pathlib import Path

    from cepc.cli import main

    finance = Path(__file__).resolve().parent.parent / "examples" / "finance" / "finance0" / "finance0.sql"
    assert main(["compile", str(finance), "-o", str(tmp_path / "f.v"), "--automaton", "dfa"]) == 1
    err = capsys.readouterr().err
    assert "error: --automaton dfa does not support aggregates, MEASURES or WITHIN (query finance0)" in err
    assert "Traceback" not in err
    query = tmp_path / "bits.sql"
    query.write_text(bits_query(2))
    assert main(["compile", str(query), "-o", str(tmp_path / "b.v"), "--automaton", "dfa", "--no-decoder"]) == 1
    assert "--no-decoder applies to the NFA" in capsys.readouterr().err

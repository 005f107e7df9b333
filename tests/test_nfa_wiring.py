"""The wiring-algorithm NFA (Woods et al. §4.6): structure, and behaviour against Python's ``re``."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from cepc.lang import ast
from cepc.lang.check import check
from cepc.lang.parse import parse
from cepc.nfa import wiring
from cepc.nfa.lower import nfa_plan

import patterns as pt


def nfa_of(pattern_text: str, defines: str = "A AS x = 1, B AS x = 2, C AS x = 3, D AS x = 4") -> wiring.Nfa:
    q = check(parse(f"CREATE STREAM s (x UINT8); PATTERN ({pattern_text}) DEFINE {defines};")).queries[0]
    return wiring.build(q)


def edges(nfa: wiring.Nfa) -> set[tuple[str, str]]:
    return {(nfa.label(p), nfa.label(q)) for p, q in nfa.graph.edges}


def starts(nfa: wiring.Nfa) -> set[str]:
    return {nfa.label(s) for s in nfa.start}


def accepts(nfa: wiring.Nfa) -> set[str]:
    return {nfa.label(s) for s in nfa.accept}


def test_woods_figure_5_a_bstar_c():
    # Woods Fig. 4/5: A is start-activated, A and B activate B and C, C accepts.
    nfa = nfa_of("A B* C")
    assert nfa.n_states == 3
    assert starts(nfa) == {"A"}
    assert edges(nfa) == {("A", "B"), ("A", "C"), ("B", "B"), ("B", "C")}
    assert accepts(nfa) == {"C"}
    assert not nfa.nullable


def test_one_state_per_predicate_occurrence():
    nfa = nfa_of("A B | A C")
    assert sorted(nfa.label(s) for s in nfa.states) == ["A", "A.2", "B", "C"]
    assert edges(nfa) == {("A", "B"), ("A.2", "C")}


def test_plus_loops_on_itself_and_optional_passes_activation():
    nfa = nfa_of("A+ B? C")
    assert edges(nfa) == {("A", "A"), ("A", "B"), ("A", "C"), ("B", "C")}
    assert starts(nfa) == {"A"}


def test_counted_repetition_expands_to_copies():
    nfa = nfa_of("A{2,4}")
    assert nfa.n_states == 4
    assert starts(nfa) == {"A"}
    assert edges(nfa) == {("A", "A.2"), ("A.2", "A.3"), ("A.3", "A.4")}
    assert accepts(nfa) == {"A.2", "A.3", "A.4"}
    assert nfa_of("A{3,}").n_states == 3
    assert edges(nfa_of("A{3,}")) == {("A", "A.2"), ("A.2", "A.3"), ("A.3", "A.3")}


def test_nullable_prefix_start_activates_later_states():
    nfa = nfa_of("A* B")
    assert starts(nfa) == {"A", "B"}
    assert nfa_of("A*").nullable


def test_any_tuple_has_no_predicate():
    nfa = nfa_of(". A")
    dot = next(s for s in nfa.states if nfa.label(s) == ".")
    assert nfa.pred(dot) is None
    assert nfa.preds == ("A",)


def test_predicate_vector_follows_define_order():
    nfa = nfa_of("C A", "A AS x = 1, B AS x = 2, C AS x = 3")
    assert nfa.preds == ("A", "C")  # B is unused


def test_two_hundred_predicates_build_linearly():
    names = [f"P{i}" for i in range(200)]
    text = " ".join(f"{n}*" if i % 3 == 0 else n for i, n in enumerate(names))
    nfa = nfa_of(text, ", ".join(f"{n} AS x = {i % 256}" for i, n in enumerate(names)))
    assert nfa.n_states == 200


def test_marathon_matches_woods_figure():
    nfa = nfa_of("A NOTB* C | A NOTC* D | A NOTD* E",
                 "A AS x = 1, NOTB AS x != 2, C AS x = 3, NOTC AS x != 3, D AS x = 4, NOTD AS x != 4, E AS x = 5")
    assert nfa.n_states == 9 and nfa.n_edges == 12
    assert accepts(nfa) == {"C", "D", "E"}


def test_dot_output_names_every_state():
    nfa = nfa_of("A B* C")
    dot = wiring.to_dot([nfa])
    assert dot.startswith("digraph cepc {")
    for s in nfa.states:
        assert f'label="{nfa.label(s)}"' in dot


def run_nfa(nfa: wiring.Nfa, stream: str, skip: bool) -> list[int]:
    """Clock the NFA (as the hardware tables of :func:`cepc.nfa.lower.nfa_plan`) over a stream."""
    plan = nfa_plan(nfa)
    state, out = 0, []
    for j, letter in enumerate(stream):
        preds = sum(1 << i for i, name in enumerate(nfa.preds) if letter in pt.CLASSES[name])
        state, matched = plan.step(state, preds, skip)
        if matched:
            out.append(j)
    return out


@settings(max_examples=300, deadline=None)
@given(pt.patterns(), pt.streams(), st.booleans())
def test_wiring_nfa_agrees_with_re(pattern: ast.Pattern, stream: str, skip: bool):
    text = pt.query_text(pattern, "SKIP PAST LAST ROW" if skip else "CONTINUE")
    q = check(parse(text)).queries[0]
    assert q.pattern == pattern  # the text round-trips through the parser
    nfa = wiring.build(q)
    assert nfa.nullable == bool(re.fullmatch(pt.to_regex(pattern), ""))
    assert run_nfa(nfa, stream, skip) == [j for j, _ in pt.oracle(pattern, stream, skip)]

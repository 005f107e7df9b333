"""``--no-decoder``: each NFA state evaluates its own predicate; the matches are the decoder's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from amaranth.back import rtlil
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cepc import events
from cepc.hw.top import Top
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file
from cepc.nfa import powerset
from cepc.nfa.lower import lower

import hwsim
import patterns as pt

ROOT = Path(__file__).resolve().parent.parent


def keyed_frame(letters: str, keys: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"t": np.arange(len(letters), dtype=np.int64), "k": np.asarray(keys, dtype=np.int64),
                         "c": np.array(list(letters), dtype=object)})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pt.patterns(max_leaves=8),
       st.lists(st.tuples(st.sampled_from(pt.LETTERS), st.integers(0, 4)), min_size=1, max_size=30),
       st.sampled_from(["SKIP PAST LAST ROW", "CONTINUE"]), st.sampled_from(["pipeline", "table"]),
       st.integers(0, 2**16))
def test_per_state_predicates_match_the_reference(pattern, tuples, after, partitioner, seed):
    checked = check(parse(pt.query_text(pattern, after, partition=True)))
    if lower(checked).queries[0].nfa.n_states == 0:
        return
    frame = keyed_frame("".join(c for c, _ in tuples), [k for _, k in tuples])
    hwsim.run_and_compare(checked, frame, decoder=False, bus_width=40,
                          partitions=5 if partitioner == "pipeline" else 8, partitioner=partitioner,
                          stall=0.2, backpressure=0.3, seed=seed)


def test_marathon_without_decoder():
    c = check(parse_file(ROOT / "examples" / "marathon" / "marathon.sql"))
    frame = events.load_events(ROOT / "examples" / "marathon" / "events.csv", c.stream)
    hwsim.run_and_compare(c, frame, decoder=False, bus_width=64, partitions=8)


def test_one_predicate_module_per_state():
    """(A B){3}: six states, each with its own predicate module (kept apart in RTLIL, for synthesis)."""
    text = ("CREATE STREAM s (t TIMESTAMP, x UINT8);\n"
            "PATTERN ( (A B){3} ) DEFINE A AS x = 1, B AS x > 2;")
    design = lower(check(parse(text)))
    il = rtlil.convert(Top(design, partitions=1, decoder=False), name="cepc_top", emit_src=False)
    modules = [line for line in il.splitlines() if line.startswith("module ") and line.endswith("_pred")]
    assert len(modules) == 6
    il = rtlil.convert(Top(design, partitions=1), name="cepc_top", emit_src=False)
    assert not [line for line in il.splitlines() if line.startswith("module ") and line.endswith("_pred")]


def test_no_decoder_is_refused_with_a_dfa():
    text = pt.schema() + "PATTERN (P0 P1) DEFINE " + pt.defines() + ";"
    design = powerset.design_dfa(lower(check(parse(text))))
    with hwsim.unused_elaboratables() as unused:
        with pytest.raises(ValueError, match=r"^--no-decoder applies to the NFA"):
            Top(design, partitions=1, decoder=False)
    assert unused == []  # the Top that refused to be built says nothing when it is collected

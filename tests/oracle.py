"""The expected match rows of a hardware test, from two software engines that must agree.

Every test that checks the hardware checks the fast engines the Spark golden model runs — the
lock-step DFA (:mod:`cepc.nfa.dfa`) for simple queries, the lock-step partial-match engine
(:mod:`cepc.nfa.lockstep`) for queries with aggregates, MEASURES or WITHIN — against the reference
matcher on the same events, so a bug in any of the software engines shows up here as surely as
one in the hardware.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cepc import events
from cepc.lang.check import Checked
from cepc.nfa import dfa, lockstep, reference


def expected_rows(checked: Checked, frame: pd.DataFrame) -> list[list[str]]:
    """Match-file rows (SPEC §5) of the reference matcher, after asserting that the fast engine
    for each query reports the same rows, with the same measures."""
    matches = reference.Matcher(checked).run(frame, np.arange(len(frame)))
    for qi in range(len(checked.queries)):
        qm = reference.QueryMatcher(checked, qi)
        group = events.group_codes(frame, qm.query.partition_by)
        order = events.grouped_order(group)
        ref = [m for m in matches if m.query == qi]
        if qm.simple:
            fast = dfa.FastMatcher(qm).match(frame, group, order)
            assert [int(r) for r in fast] == [m.row for m in ref], \
                f"fast engine and reference disagree on query {qm.query.name}"
            continue
        rows, measures = lockstep.LockstepMatcher(qm).match(frame, group, order)
        assert [int(r) for r in rows] == [m.row for m in ref], \
            f"lock-step engine and reference disagree on the rows of query {qm.query.name}"
        if measures is not None:
            assert measures == [m.measures for m in ref], \
                f"lock-step engine and reference disagree on the measures of query {qm.query.name}"
    return events.match_rows(checked, frame, matches)

"""The expected match rows of a hardware test, from two software engines that must agree.

Every test that checks the hardware checks the fast engine (:mod:`cepc.nfa.dfa`, used by the
Spark golden model) against the reference matcher on the same events, so a bug in either of the
software engines shows up here as surely as one in the hardware.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cepc import events
from cepc.lang.check import Checked
from cepc.nfa import dfa, reference


def expected_rows(checked: Checked, frame: pd.DataFrame) -> list[list[str]]:
    """Match-file rows (SPEC §5) of the reference matcher, after asserting that the fast engine
    reports the same rows for every query it handles."""
    matches = reference.Matcher(checked).run(frame, np.arange(len(frame)))
    for qi in range(len(checked.queries)):
        qm = reference.QueryMatcher(checked, qi)
        if not qm.simple:
            continue
        group = events.group_codes(frame, qm.query.partition_by)
        fast = dfa.FastMatcher(qm).match(frame, group, events.grouped_order(group))
        ref = [m.row for m in matches if m.query == qi]
        assert [int(r) for r in fast] == ref, f"fast engine and reference disagree on query {qm.query.name}"
    return events.match_rows(checked, frame, matches)

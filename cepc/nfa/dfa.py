"""The fast engine: a DFA over the reference automaton, stepped lock-step across keys.

For queries without aggregates, measures or WITHIN (SPEC §3.1–3.3) a
partition's whole state is the set of active positions of the Glushkov
automaton (:mod:`cepc.nfa.reference`). The subset construction turns that set
into a DFA state id, built eagerly over the predicate vectors (bit sets of
satisfied positions) that actually occur in the data, so the alphabet stays
small however many predicates a query has. A DFA state also records whether
the tuple that entered it completed a match, so a report is a table lookup.

:func:`run_grouped` steps every partition at once: with the rows grouped by
key, step *t* advances the *t*-th tuple of every key that has one, in one
numpy gather (the keys sorted by run length, so the live ones are a prefix).
When few keys are left (a long run, or no PARTITION BY) it finishes them with
a tight loop over the transition table. Either way the cost per tuple is a
table lookup, not a set operation.

The construction is bounded (:data:`MAX_ENTRIES`); a pattern whose DFA
explodes (Woods et al. §4.2) raises :class:`DfaTooLarge`, and callers fall back
to the reference matcher.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .reference import Positions, QueryMatcher

MAX_ENTRIES = 1 << 20  # states × alphabet size
LOCKSTEP_MIN = 24  # keys advanced per numpy step below which the scalar loop is faster


class DfaTooLarge(Exception):
    """The subset construction exceeded :data:`MAX_ENTRIES` table entries."""


@dataclass
class Dfa:
    """A DFA over an alphabet of predicate vectors.

    ``table[s, c]`` is the state after a tuple with predicate vector
    ``alphabet[c]`` in state ``s``; ``reports[s]`` is true if entering ``s``
    completed a match. State 0 is a fresh partition.
    """

    sets: list[int]  # per state: the bit set of active positions
    alphabet: list[int]
    table: np.ndarray  # int32, states × len(alphabet)
    reports: np.ndarray  # bool per state


def build(pos: Positions, alphabet: list[int], skip: bool, max_entries: int = MAX_ENTRIES) -> Dfa:
    """Subset construction from the fresh state over ``alphabet`` (predicate vectors as position bit sets).

    ``skip``: AFTER MATCH SKIP PAST LAST ROW, a report empties the partition's state.
    """
    ids: dict[tuple[int, bool], int] = {(0, False): 0}
    sets, reports, rows = [0], [False], []
    width = max(len(alphabet), 1)
    todo = 0
    while todo < len(sets):
        active = sets[todo]
        reach = pos.first
        p = 0
        a = active
        while a:
            if a & 1:
                reach |= pos.follow[p]
            a >>= 1
            p += 1
        row = []
        for mask in alphabet:
            nxt = reach & mask
            matched = bool(nxt & pos.last)
            if matched and skip:
                nxt = 0
            key = (nxt, matched)
            s = ids.get(key)
            if s is None:
                s = ids[key] = len(sets)
                if len(sets) * width >= max_entries:
                    raise DfaTooLarge(f"more than {max_entries} DFA table entries")
                sets.append(nxt)
                reports.append(matched)
            row.append(s)
        rows.append(row)
        todo += 1
    table = np.array(rows, dtype=np.int32).reshape(len(sets), len(alphabet))
    return Dfa(sets, list(alphabet), table, np.array(reports, dtype=bool))


def run_grouped(dfa: Dfa, symbols: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """States after every tuple, for rows grouped by key.

    ``symbols[i]`` is row i's index into the alphabet; key g owns rows
    ``starts[g] … starts[g] + lengths[g] - 1`` in arrival order and begins
    fresh. Returns the state entered at each row.
    """
    n_sym = max(len(dfa.alphabet), 1)
    flat = dfa.table.reshape(-1)
    out = np.zeros(len(symbols), dtype=np.int32)
    if len(symbols) == 0:
        return out
    order = np.argsort(-lengths, kind="stable")
    starts, lengths = starts[order], lengths[order]
    state = np.zeros(len(starts), dtype=np.int64)
    t = 0
    longest = int(lengths[0])
    # live_at[t]: how many keys have a t-th tuple (lengths sorted longest first)
    live_at = np.searchsorted(-lengths, -np.arange(longest), side="left")
    while t < longest and live_at[t] >= LOCKSTEP_MIN:
        k = int(live_at[t])
        idx = starts[:k] + t
        state[:k] = flat[state[:k] * n_sym + symbols[idx]]
        out[idx] = state[:k]
        t += 1
    if t < longest:  # the few long runs left: a scalar loop over the table
        table = dfa.table.tolist()
        sym = symbols.tolist()
        for g in range(int(live_at[t])):
            s = int(state[g])
            lo = int(starts[g])
            hi = lo + int(lengths[g])
            seg = []
            for c in sym[lo + t:hi]:
                s = table[s][c]
                seg.append(s)
            out[lo + t:hi] = seg
    return out


def symbols_of(masks: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The alphabet (distinct predicate vectors) and each row's index into it."""
    if masks.dtype == object:  # more than 63 positions: Python integers
        alphabet: dict[int, int] = {}
        sym = np.fromiter((alphabet.setdefault(m, len(alphabet)) for m in masks), dtype=np.int64, count=len(masks))
        return list(alphabet), sym
    if len(masks) and 0 <= masks.min() and masks.max() < (1 << 16):  # a lookup table, no sort
        present = np.flatnonzero(np.bincount(masks))
        index = np.zeros(int(present[-1]) + 1, dtype=np.int64)
        index[present] = np.arange(len(present))
        return [int(v) for v in present], index[masks]
    values, sym = np.unique(masks, return_inverse=True)
    return [int(v) for v in values], sym.astype(np.int64).reshape(-1)


class FastMatcher:
    """One query over whole partitions at once: predicates column-wise, then the lock-step DFA.

    Only for queries the bit-set engine handles (``QueryMatcher.simple``: no
    aggregates, measures or WITHIN); each call starts every partition fresh.
    """

    def __init__(self, qm: QueryMatcher):
        if not qm.simple:
            raise ValueError(f"query {qm.query.name} needs the partial-match engine")
        self.qm = qm
        self._dfa: Dfa | None = None

    def _dfa_for(self, alphabet: list[int]) -> Dfa:
        # reuse the last DFA when it already covers this alphabet (the usual case across batches)
        if self._dfa is not None and set(alphabet) <= set(self._dfa.alphabet):
            return self._dfa
        if self._dfa is not None:
            alphabet = self._dfa.alphabet + [a for a in alphabet if a not in set(self._dfa.alphabet)]
        self._dfa = build(self.qm.pos, alphabet, self.qm.skip)
        return self._dfa

    def match(self, frame: pd.DataFrame, group: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
        """Rows (indices into ``frame``, arrival order) at which a match is reported.

        ``group`` is a dense partition code per row (:func:`cepc.events.group_codes`); ``order``
        the rows grouped by it, arrival order within (:func:`cepc.events.grouped_order`).
        """
        n = len(frame)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        cols = self.qm.columns(frame)
        alphabet, sym = symbols_of(self.qm.pred_masks(cols, n))
        dfa = self._dfa_for(alphabet)
        if dfa.alphabet != alphabet:  # renumber into the cached DFA's alphabet
            index = {a: i for i, a in enumerate(dfa.alphabet)}
            sym = np.array([index[a] for a in alphabet], dtype=np.int64)[sym]
        if order is None:
            order = np.argsort(group, kind="stable")
        lengths = np.bincount(group, minlength=int(group.max()) + 1)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        keep = lengths > 0
        states = run_grouped(dfa, sym[order], starts[keep], lengths[keep])
        return np.sort(order[dfa.reports[states]])

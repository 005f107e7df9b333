"""The reference matcher: SPEC §3 in plain Python, straight from the AST.

It deliberately does not use the wiring NFA (:mod:`cepc.nfa.wiring`): it builds
the position automaton with the classical first/last/follow sets of
McNaughton–Yamada–Glushkov, so comparing the two (and both with the hardware)
catches a bug in either. Its states are the pattern's predicate occurrences,
so the retention rule of SPEC §3.4 ("each NFA state keeps one partial match")
means the same thing here as in hardware.

Two engines share that automaton:

* a bit-set engine for queries with no aggregates, measures or WITHIN: a
  partition's state is one integer, and transitions are memoised on
  (state, predicate vector), which makes it a lazily built DFA;
* a partial-match engine that keeps, per state, the earliest-starting (or for
  WITHIN-only queries, the latest-starting) partial match with its start and
  aggregate registers.

Predicates without aggregates are evaluated column-wise over the whole batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..lang import ast
from ..lang.check import Checked
from . import evaluate

# --- the position automaton -------------------------------------------------------------


@dataclass
class Positions:
    """Glushkov automaton: ``follow[p]`` is the bit set of positions that may come after p."""

    preds: list[str | None]  # per position: DEFINE name, None for '.'
    first: int
    last: int
    follow: list[int]
    nullable: bool

    @property
    def n(self) -> int:
        return len(self.preds)


@dataclass
class _Frag:
    first: int
    last: int
    nullable: bool


class _Glushkov:
    def __init__(self):
        self.preds: list[str | None] = []
        self.follow: list[int] = []

    def _link(self, lasts: int, firsts: int) -> None:
        p = 0
        while lasts:
            if lasts & 1:
                self.follow[p] |= firsts
            lasts >>= 1
            p += 1

    def seq(self, a: _Frag, b: _Frag) -> _Frag:
        self._link(a.last, b.first)
        return _Frag(a.first | (b.first if a.nullable else 0), b.last | (a.last if b.nullable else 0),
                     a.nullable and b.nullable)

    def frag(self, p: ast.Pattern) -> _Frag:
        if isinstance(p, (ast.Var, ast.AnyTuple)):
            i = len(self.preds)
            self.preds.append(p.name if isinstance(p, ast.Var) else None)
            self.follow.append(0)
            return _Frag(1 << i, 1 << i, False)
        if isinstance(p, ast.Empty):
            return _Frag(0, 0, True)
        if isinstance(p, ast.Seq):
            out = _Frag(0, 0, True)
            for item in p.items:
                out = self.seq(out, self.frag(item))
            return out
        if isinstance(p, ast.Alt):
            parts = [self.frag(i) for i in p.items]
            first = last = 0
            for f in parts:
                first |= f.first
                last |= f.last
            return _Frag(first, last, any(f.nullable for f in parts))
        assert isinstance(p, ast.Repeat)
        if p.max is None:
            out = _Frag(0, 0, True)
            for _ in range(max(p.min - 1, 0)):
                out = self.seq(out, self.frag(p.child))
            body = self.frag(p.child)
            self._link(body.last, body.first)  # the loop
            loop = _Frag(body.first, body.last, body.nullable or p.min == 0)
            return self.seq(out, loop)
        out = _Frag(0, 0, True)
        for _ in range(p.min):
            out = self.seq(out, self.frag(p.child))
        # optional tail r (r (r)?)? ? built innermost-first is not possible left to right,
        # so build copies in order and make each one's suffix optional.
        tail = self._optional_chain(p.child, p.max - p.min)
        return self.seq(out, tail) if tail else out

    def _optional_chain(self, child: ast.Pattern, k: int) -> _Frag | None:
        if k == 0:
            return None
        head = self.frag(child)
        rest = self._optional_chain(child, k - 1)
        body = self.seq(head, rest) if rest else head
        return _Frag(body.first, body.last, True)


def positions(pattern: ast.Pattern) -> Positions:
    g = _Glushkov()
    f = g.frag(pattern)
    return Positions(g.preds, f.first, f.last, g.follow, f.nullable)


# --- matching ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """One report: the query, the index of its last tuple in the batch, and measure values."""

    query: int  # index of the query in the file
    row: int  # row of the batch holding s_j
    measures: tuple = ()


def _bits(mask: int) -> Iterable[int]:
    i = 0
    while mask:
        if mask & 1:
            yield i
        mask >>= 1
        i += 1


class QueryMatcher:
    """Matches one query over batches of tuples; keeps each partition's state between batches."""

    def __init__(self, checked: Checked, index: int):
        self.stream = checked.stream
        self.query = q = checked.queries[index]
        self.index = index
        self.pos = positions(q.pattern)
        self.skip = q.after_match == ast.SKIP_PAST_LAST_ROW
        defines = {d.name: d for d in q.defines}
        self.vector_preds = [d.name for d in q.defines if not ast.aggregates(d.expr)]
        self.agg_preds = {d.name: evaluate.scalar(d.expr) for d in q.defines if ast.aggregates(d.expr)}
        self._vector_fns = {n: evaluate.vector(defines[n].expr, self.stream) for n in self.vector_preds}
        keys: list = []
        for e in [d.expr for d in q.defines] + [m.expr for m in q.measures]:
            for a in ast.aggregates(e):
                k = evaluate.agg_key(a)
                if k not in keys:
                    keys.append(k)
        self.agg_keys = tuple(keys)
        self.measures = [evaluate.scalar(m.expr, measure=True) for m in q.measures]
        self.time = q.order_by
        self.fields = fields_read(checked.stream, q)
        self.within = q.within
        # WITHIN without aggregates in DEFINE keeps the latest start (SPEC §3.5)
        self.latest = q.within is not None and not self.agg_preds
        self.simple = not self.agg_preds and not q.measures and q.within is None
        # bit set of positions satisfied by each vector predicate, and by '.'
        self._always = sum(1 << p for p, name in enumerate(self.pos.preds) if name is None)
        self._pred_pos = [sum(1 << p for p, name in enumerate(self.pos.preds) if name == n)
                          for n in self.vector_preds]
        self._agg_pos = {p: self.agg_preds[name] for p, name in enumerate(self.pos.preds) if name in self.agg_preds}
        self._memo: dict[tuple[int, int], tuple[int, bool]] = {}
        self.state: dict = {}  # partition key → state (int bit set, or dict position → partial match)

    # one batch ----------------------------------------------------------------------

    def run(self, frame: pd.DataFrame, keys: np.ndarray, seqs: np.ndarray) -> list[Match]:
        """Feed a batch (rows in arrival order); ``keys`` are hashable partition ids per row."""
        cols = self.columns(frame)
        pred_masks = self._pred_masks(cols, len(frame))
        if self.simple:
            return self._run_simple(keys, pred_masks)
        return self._run_general(frame, keys, seqs, pred_masks)

    def columns(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """The columns the query reads (at least one, which gives constant predicates their length).
        An ENUM column held as a pandas Categorical stays one: ``=`` and ``IN`` then compare codes."""
        return {n: frame[n].array if isinstance(frame[n].dtype, pd.CategoricalDtype) else frame[n].to_numpy()
                for n in self.fields or [frame.columns[0]]}

    def _pred_masks(self, cols, n: int) -> list[int]:
        return self.pred_masks(cols, n).tolist()

    def pred_masks(self, cols, n: int) -> np.ndarray:
        """Per row, the bit set of positions whose aggregate-free predicate holds
        (int64, or Python integers beyond 62 positions)."""
        out = np.full(n, self._always, dtype=object if self.pos.n > 62 else np.int64)
        for fn, posmask in zip(self._vector_fns.values(), self._pred_pos):
            if posmask:
                hit = fn(cols)
                if out.dtype == object:
                    out[hit] = out[hit] | posmask
                else:
                    out |= np.where(hit, posmask, 0)
        return out

    def _step(self, state: int, satisfied: int) -> tuple[int, bool]:
        reach = self.pos.first
        for p in _bits(state):
            reach |= self.pos.follow[p]
        nxt = reach & satisfied
        matched = bool(nxt & self.pos.last)
        if matched and self.skip:
            nxt = 0
        return nxt, matched

    def _run_simple(self, keys, pred_masks) -> list[Match]:
        state, memo, step, out = self.state, self._memo, self._step, []
        qi = self.index
        for row, (k, m) in enumerate(zip(keys, pred_masks)):
            s = state.get(k, 0)
            r = memo.get((s, m))
            if r is None:
                r = memo[(s, m)] = step(s, m)
            state[k] = r[0]
            if r[1]:
                out.append(Match(qi, row))
        return out

    def _run_general(self, frame, keys, seqs, pred_masks) -> list[Match]:
        names = self.fields
        values = [frame[n].tolist() for n in names]
        time_col = frame[self.time].tolist() if self.time else None
        pos, out, qi = self.pos, [], self.index
        better = (lambda a, b: a > b) if self.latest else (lambda a, b: a < b)
        for row, k in enumerate(keys):
            tup = {n: v[row] for n, v in zip(names, values)}
            now = time_col[row] if time_col is not None else None
            active: dict[int, tuple] = self.state.get(k, {})
            satisfied = pred_masks[row]
            nxt: dict[int, tuple] = {}
            for q in range(pos.n):
                base = bool(satisfied >> q & 1)
                agg_pred = self._agg_pos.get(q)
                if not base and agg_pred is None:
                    continue
                best = None
                # candidates: a new partial match (q may begin a match) and those of q's predecessors
                if pos.first >> q & 1 and base:
                    best = (int(seqs[row]), now, None)
                for p, pm in active.items():
                    if not pos.follow[p] >> q & 1:
                        continue
                    if self.within is not None and now - pm[1] > self.within:
                        continue  # can never qualify: spans only grow
                    if agg_pred is not None and not agg_pred(tup, pm[2]):
                        continue
                    if best is None or better(pm[0], best[0]):
                        best = pm
                if best is None:
                    continue
                nxt[q] = (best[0], best[1], evaluate.update_aggs(best[2], self.agg_keys, tup))
            ends = [nxt[q] for q in nxt if pos.last >> q & 1]
            if ends:
                pm = ends[0]
                for e in ends[1:]:
                    if better(e[0], pm[0]):
                        pm = e
                measures = tuple(m(tup, pm[2]) for m in self.measures)
                out.append(Match(qi, row, measures))
                if self.skip:
                    nxt = {}
            self.state[k] = nxt
        return out


class Matcher:
    """All queries of a checked file over a stream of batches."""

    def __init__(self, checked: Checked):
        self.checked = checked
        self.queries = [QueryMatcher(checked, i) for i in range(len(checked.queries))]

    def run(self, frame: pd.DataFrame, seqs: np.ndarray | None = None) -> list[Match]:
        """Match one batch of tuples in arrival order; returns reports sorted by (row, query)."""
        if seqs is None:
            seqs = np.arange(len(frame))
        out: list[Match] = []
        for qm in self.queries:
            out += qm.run(frame, partition_keys(frame, qm.query.partition_by), seqs)
        out.sort(key=lambda m: (m.row, m.query))
        return out


def fields_read(stream: ast.Stream, q: ast.Query) -> list[str]:
    """The fields a query reads (keys, DEFINE, MEASURES, time), in schema order."""
    used = set(q.partition_by) | {q.order_by} - {None}
    for e in [d.expr for d in q.defines] + [m.expr for m in q.measures]:
        used |= {n.name for n in ast.walk(e) if isinstance(n, ast.FieldRef)}
    return [f.name for f in stream.fields if f.name in used]


def partition_keys(frame: pd.DataFrame, fields: tuple[str, ...]) -> list:
    """A hashable partition id per row (0 everywhere without PARTITION BY)."""
    if not fields:
        return [0] * len(frame)
    if len(fields) == 1:
        return frame[fields[0]].tolist()
    return list(zip(*(frame[f].tolist() for f in fields)))

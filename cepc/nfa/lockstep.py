"""The fast engine for partial matches: SPEC §3.4–3.5 stepped lock-step across keys.

For queries with aggregates in DEFINE, MEASURES or WITHIN a partition's state
is not a set of positions but, per position of the Glushkov automaton
(:func:`cepc.nfa.reference.positions`), at most one partial match: whether it
is active, the ordinal (index within the partition) of its first tuple, and
its aggregate registers. This module keeps that state for every key at once
as numpy arrays (keys × positions) and advances the *t*-th tuple of every key
that has one in a fixed number of array operations, whatever the number of
keys — the lock-step idea of :func:`cepc.nfa.dfa.run_grouped`, with the DFA
table lookup replaced by the retention rule:

* The automaton's edges, sorted by target, are the candidates. A candidate
  edge p → q is live when p holds a partial match, q's predicate holds (an
  aggregate-free predicate is looked up in a per-row table computed once per
  call; a predicate with aggregates is evaluated column-wise over the
  predecessors' registers, which exclude the current tuple), and WITHIN does
  not rule it out. A position that may begin a match is also offered a new
  partial match when its predicate holds.
* Retention (SPEC §3.4, §3.5): each position keeps the live candidate that
  started earliest — or latest, for a query with WITHIN and no aggregate in
  DEFINE, where a new partial match wins. One segmented ``min``/``max`` over
  the edges (start ordinal and edge index packed into one integer) picks the
  winner of every key and position at once; candidates with equal starts
  hold the same tuples, hence the same registers, so ties need no rule.
* Registers: FIRST, MIN, MAX and SUM are stored per position and gathered
  from the winning predecessor; LAST and COUNT are not stored, since every
  partial match alive before tuple t ends at the partition's previous tuple
  (LAST is that tuple's value) and COUNT is the ordinal distance to the start.
* A report takes, among the accepting positions, the partial match that
  wins the same rule; AFTER MATCH SKIP PAST LAST ROW then empties the key.
  Measures are evaluated once, column-wise, over all reports of the call.

Arithmetic is exact: every integer node gets a numpy dtype from the value
ranges of this call's data (the columns' minima and maxima, SUM bounded by
the longest run), int64 or uint64 where they fit, Python integers (object
arrays) otherwise — slower, never wrong. The one thing that must fit 64 bits
is a start ordinal times the automaton's largest in-degree; a run so long
that it does not (2^62 / in-degree tuples in one partition) raises
:class:`Unsupported` and callers use the reference engine.

When fewer than ``lockstep_min`` keys are left (a long run, or no PARTITION
BY) the remaining tuples go through a scalar loop over the same edges. With
``carry=True`` a matcher keeps each key's partial matches between calls, so
a stream may be fed in batches; by default every call starts fresh (the
Spark tasks hand it whole partitions).

The engine shares only the front end (the checked AST, its types) and the
position automaton with the reference matcher (:mod:`cepc.nfa.reference`),
which stays the definition: the tests run both on the same inputs.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..lang import ast
from ..lang.check import BoolT, IntT, StrT, expr_type
from .reference import QueryMatcher, fields_read

LOCKSTEP_MIN = 12  # keys per step below which the scalar loop is faster
_I64 = (-(1 << 63), (1 << 63) - 1)
_U64 = (0, (1 << 64) - 1)
_CMP = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
        ">=": operator.ge}
_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}
_STORED = ("FIRST", "MIN", "MAX", "SUM")  # registers kept per position; LAST and COUNT are derived

AggKey = tuple[str, str | None]


class Unsupported(Exception):
    """The call's state does not fit the engine's 64-bit encoding; use the reference engine."""


def _dtype(*ranges: tuple[int, int]) -> np.dtype:
    lo = min(r[0] for r in ranges)
    hi = max(r[1] for r in ranges)
    if _I64[0] <= lo and hi <= _I64[1]:
        return np.dtype(np.int64)
    if lo >= 0 and hi <= _U64[1]:
        return np.dtype(np.uint64)
    return np.dtype(object)


def _agg_key(a: ast.Agg) -> AggKey:
    return (a.func, a.arg.name if a.arg is not None else None)


def _bits(mask: int):
    i = 0
    while mask:
        if mask & 1:
            yield i
        mask >>= 1
        i += 1


class _Strings:
    """ENUM and CHAR values as integer codes, one table for every field (so values of two fields
    compare as their strings do) and for the whole life of a matcher (so carried registers keep
    their meaning)."""

    def __init__(self):
        self.code: dict[str, int] = {}
        self.text: list[str] = []

    def of(self, s: str) -> int:
        c = self.code.get(s)
        if c is None:
            c = self.code[s] = len(self.text)
            self.text.append(s)
        return c

    def column(self, col) -> np.ndarray:
        if isinstance(col.dtype, pd.CategoricalDtype):
            lut = np.array([self.of(str(c)) for c in col.categories] + [-1], dtype=np.int64)
            return lut[np.asarray(col.codes)]  # code -1 (missing) reads the -1 at the end
        codes, uniques = pd.factorize(np.asarray(col, dtype=object))
        lut = np.array([self.of(u) for u in uniques] or [0], dtype=np.int64)
        return lut[codes]

    def decode(self, codes) -> list[str]:
        text = self.text
        return [text[c] for c in np.asarray(codes).tolist()]


class _Compiler:
    """Compiles one checked expression to ``f(env)``.

    ``env`` maps a field name or an :data:`AggKey` to its values. Vector mode: numpy arrays
    that broadcast (keys × 1 against keys × edges), every integer node computed in a dtype that
    holds its range and its operands' (from ``leaf_range``), then cast to what its parent asked
    for. Scalar mode: Python values, so integers are exact as they are.
    """

    def __init__(self, stream: ast.Stream, leaf_range: Callable, strings: _Strings, scalar: bool = False):
        self.stream = stream
        self.leaf_range = leaf_range
        self.strings = strings
        self.scalar = scalar

    def type(self, e: ast.Expr):
        return expr_type(e, self.stream)

    def range(self, e: ast.Expr) -> tuple[int, int]:
        if isinstance(e, ast.IntLit):
            return e.value, e.value
        if isinstance(e, (ast.FieldRef, ast.Agg)):
            return self.leaf_range(e)
        if isinstance(e, ast.Neg):
            lo, hi = self.range(e.operand)
            return -hi, -lo
        assert isinstance(e, ast.Arith), e
        a, b = self.range(e.left), self.range(e.right)
        if e.op == "+":
            return a[0] + b[0], a[1] + b[1]
        if e.op == "-":
            return a[0] - b[1], a[1] - b[0]
        products = [x * y for x in a for y in b]
        return min(products), max(products)

    def _cast(self, fn, dtype):
        if self.scalar or dtype is None:
            return fn
        return lambda env: np.asarray(fn(env)).astype(dtype, copy=False)

    def integer(self, e: ast.Expr, dtype=None):
        """A closure giving ``e``'s integer values, in ``dtype`` if given (it must hold e's range)."""
        if isinstance(e, ast.IntLit):
            v = e.value
            if not self.scalar and dtype is not None and dtype.kind != "O":
                v = dtype.type(v)
            return lambda env: v
        if isinstance(e, ast.FieldRef):
            name = e.name
            return self._cast(lambda env: env[name], dtype)
        if isinstance(e, ast.Agg):
            key = _agg_key(e)
            return self._cast(lambda env: env[key], dtype)
        if isinstance(e, ast.Neg):
            own = _dtype(self.range(e), self.range(e.operand))
            inner = self.integer(e.operand, own)
            return self._cast(lambda env: -inner(env), dtype)
        assert isinstance(e, ast.Arith), e
        own = _dtype(self.range(e), self.range(e.left), self.range(e.right))
        f, a, b = _ARITH[e.op], self.integer(e.left, own), self.integer(e.right, own)
        return self._cast(lambda env: f(a(env), b(env)), dtype)

    def condition(self, e: ast.Expr):
        """A closure giving ``e``'s truth values (bool arrays, or Python bools in scalar mode)."""
        if isinstance(e, ast.BoolLit):
            v = bool(e.value)
            return lambda env: v
        if isinstance(e, (ast.FieldRef, ast.Agg)):  # a BOOL field, or FIRST/LAST of one
            key = e.name if isinstance(e, ast.FieldRef) else _agg_key(e)
            return lambda env: env[key] != 0
        if isinstance(e, ast.Compare):
            return self.compare(e.op, e.left, e.right)
        if isinstance(e, ast.Between):
            ge, le = self.compare(">=", e.operand, e.low), self.compare("<=", e.operand, e.high)
            return self._negate(lambda env: ge(env) & le(env), e.negated)
        if isinstance(e, ast.InList):
            tests = [self.compare("=", e.operand, item) for item in e.items]

            def any_of(env):
                out = tests[0](env)
                for t in tests[1:]:
                    out = out | t(env)
                return out

            return self._negate(any_of, e.negated)
        if isinstance(e, ast.BoolOp):
            parts = [self.condition(o) for o in e.operands]
            combine = operator.and_ if e.op == "AND" else operator.or_

            def bool_op(env):
                out = parts[0](env)
                for p in parts[1:]:
                    out = combine(out, p(env))
                return out

            return bool_op
        if isinstance(e, ast.Not):
            return self._negate(self.condition(e.operand), True)
        raise TypeError(f"not a condition: {type(e).__name__}")

    def _negate(self, fn, negated: bool):
        if not negated:
            return fn
        if self.scalar:
            return lambda env: not fn(env)
        return lambda env: np.logical_not(fn(env))

    def compare(self, op: str, left: ast.Expr, right: ast.Expr):
        f = _CMP[op]
        lt, rt = self.type(left), self.type(right)
        if isinstance(lt, IntT) and isinstance(rt, IntT):
            d = _dtype(self.range(left), self.range(right))
            a, b = self.integer(left, d), self.integer(right, d)
        elif isinstance(lt, BoolT):
            a, b = self.condition(left), self.condition(right)
        else:  # ENUM, CHAR and string literals: codes
            a, b = self.value(left), self.value(right)
        return lambda env: f(a(env), b(env))

    def value(self, e: ast.Expr):
        """Any expression: integers, truth values, or string codes."""
        t = self.type(e)
        if isinstance(t, IntT):
            return self.integer(e, None if self.scalar else _dtype(self.range(e)))
        if isinstance(t, BoolT):
            return self.condition(e)
        if isinstance(e, ast.StrLit):
            c = self.strings.of(e.value)
            return lambda env: c
        key = e.name if isinstance(e, ast.FieldRef) else _agg_key(e)
        return lambda env: env[key]


def _env_keys(e: ast.Expr) -> list:
    """Field names and aggregate keys an expression reads."""
    keys = []
    for node in ast.walk(e):
        k = node.name if isinstance(node, ast.FieldRef) else _agg_key(node) if isinstance(node, ast.Agg) else None
        if k is not None and k not in keys:
            keys.append(k)
    return keys


class LockstepMatcher:
    """One query with aggregates, MEASURES or WITHIN over whole partitions at once (see the
    module docstring). ``match`` returns the same reports as the reference's partial-match
    engine (:meth:`cepc.nfa.reference.QueryMatcher.run`)."""

    def __init__(self, qm: QueryMatcher, carry: bool = False, lockstep_min: int = LOCKSTEP_MIN):
        q = qm.query
        self.query, self.stream, self.pos = q, qm.stream, qm.pos
        self.carry, self.lockstep_min = carry, max(1, lockstep_min)
        self.skip = q.after_match == ast.SKIP_PAST_LAST_ROW
        self.within, self.time = q.within, q.order_by
        self.defines = {d.name: d.expr for d in q.defines}
        self.agg_preds = [d.name for d in q.defines if ast.aggregates(d.expr)]
        self.vec_preds = [d.name for d in q.defines if not ast.aggregates(d.expr)]
        self.latest = q.within is not None and not self.agg_preds  # SPEC §3.5
        self.fields = fields_read(self.stream, q)
        pos = self.pos
        n = self.n = pos.n
        # the edges, sorted by target; a position no edge enters gets one from the dummy
        # position n, never active, so every position owns a segment for the reduction
        into: list[list[int]] = [[] for _ in range(n)]
        for p in range(n):
            for t in _bits(pos.follow[p]):
                into[t].append(p)
        self.width = max((len(p) for p in into), default=1) or 1
        edges = sum(max(len(p), 1) for p in into)
        # Pad every segment to the largest in-degree (more dummy edges) when that costs little:
        # the reduction is then a min over one axis of a (positions, width, keys) array, much
        # faster than numpy's reduceat.
        self.padded = n * self.width <= 2 * edges + n
        src, dst, local = [], [], []
        for t in range(n):
            preds = into[t] or [n]
            if self.padded:
                preds = preds + [n] * (self.width - len(preds))
            src += preds
            dst += [t] * len(preds)
            local += range(len(preds))
        self.esrc = np.array(src, dtype=np.int64)
        self.edst = np.array(dst, dtype=np.int64)
        self.elocal = np.array(local, dtype=np.int64)
        self.seg = np.searchsorted(self.edst, np.arange(n)) if n else np.zeros(0, np.int64)
        # predicate table columns: aggregate-free predicates, then always-true, then always-false
        ones, zeros = len(self.vec_preds), len(self.vec_preds) + 1
        col = {name: i for i, name in enumerate(self.vec_preds)}
        kind = [name for name in pos.preds]
        self.edge_col = np.array([ones if kind[t] is None or kind[t] in self.agg_preds else col[kind[t]]
                                  for t in dst], dtype=np.int64)
        self.start_col = np.array([(ones if kind[t] is None else col.get(kind[t], zeros))
                                   if pos.first >> t & 1 else zeros for t in range(n)], dtype=np.int64)
        self.last_idx = np.array([t for t in range(n) if pos.last >> t & 1], dtype=np.int64)
        # aggregate predicates and the edges they guard
        self.agg_edges = {name: np.flatnonzero([kind[t] == name for t in dst]) for name in self.agg_preds}
        # registers
        aggs: list[AggKey] = []
        for e in list(self.defines.values()) + [m.expr for m in q.measures]:
            for a in ast.aggregates(e):
                k = _agg_key(a)
                if k not in aggs:
                    aggs.append(k)
        self.stored = [k for k in aggs if k[0] in _STORED]
        self.tkey = ("FIRST", self.time)
        if self.within is not None and self.tkey not in self.stored:
            self.stored.append(self.tkey)  # the start time, for WITHIN
        self.lasts = sorted({k[1] for e in self.defines.values() for a in ast.aggregates(e)
                             for k in [_agg_key(a)] if k[0] == "LAST"})
        step_fields = {k[1] for k in self.stored} | set(self.lasts)
        for name in self.agg_preds:
            step_fields |= {k for k in _env_keys(self.defines[name]) if isinstance(k, str)}
        self.step_fields = [f.name for f in self.stream.fields if f.name in step_fields]
        self.strings = _Strings()
        self._string_fields = {f.name for f in self.stream.fields
                               if isinstance(f.type, (ast.EnumType, ast.CharType))}
        self.state: dict = {}  # carry: key value → that key's partial matches

    # --- one call --------------------------------------------------------------------------

    def match(self, frame: pd.DataFrame, group: np.ndarray, order: np.ndarray | None = None):
        """Rows of ``frame`` (arrival order) at which a match is reported, and their measure
        tuples (None without MEASURES).

        ``group`` is a dense partition code per row (:func:`cepc.events.group_codes`); ``order``
        the rows grouped by it, arrival order within (:func:`cepc.events.grouped_order`).
        """
        rows_out = np.zeros(0, dtype=np.int64)
        measures = [] if self.query.measures else None
        if len(frame) == 0 or self.n == 0:
            return rows_out, measures
        if order is None:
            order = np.argsort(group, kind="stable")
        lengths = np.bincount(group)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        present = np.flatnonzero(lengths)
        rank = present[np.argsort(-lengths[present], kind="stable")]  # keys, longest first
        L, S0 = lengths[rank], starts[rank]
        G = len(rank)
        vals = self._values(frame)
        st = self._fresh_state(G)
        if self.carry:
            self._load(frame, order, S0, st)
        self._prepare(st, vals, int(L[0]))
        # predicate table: one column per aggregate-free predicate, then ones, then zeros
        table = np.zeros((len(frame), len(self.vec_preds) + 2), dtype=bool)
        for i, name in enumerate(self.vec_preds):
            table[:, i] = np.broadcast_to(np.asarray(self.vec_fns[name](vals), dtype=bool), len(frame))
        table[:, len(self.vec_preds)] = True
        reports: list = []
        live_at = np.searchsorted(-L, -np.arange(int(L[0])), side="left")
        t = self._lockstep(order, S0, L, live_at, vals, table, st, reports)
        if t < L[0]:
            self._scalar_tail(order, S0, L, int(live_at[t]), t, vals, table, st, reports)
        if self.carry:
            self._save(frame, order, S0, L, st)
        if not reports:
            return rows_out, measures
        rec = {k: np.concatenate([r[k] for r in reports]) for k in reports[0]}
        by_row = np.argsort(rec["row"], kind="stable")
        rec = {k: v[by_row] for k, v in rec.items()}
        if measures is not None:
            measures = self._measures(rec, vals)
        return rec["row"], measures

    # --- values, ranges, compiled predicates ---------------------------------------------

    def _values(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        out = {}
        for name in self.fields:
            col = frame[name]
            if name in self._string_fields:
                out[name] = self.strings.column(col.array if isinstance(col.dtype, pd.CategoricalDtype)
                                                else col.to_numpy())
            else:
                a = col.to_numpy()
                if a.dtype == object or a.dtype.kind not in "iu":
                    a = a.astype(np.int64) if a.dtype.kind == "b" else a
                out[name] = a
        return out

    def _field_range(self, name: str, vals) -> tuple[int, int]:
        a = vals[name]
        if len(a) == 0:
            return 0, 0
        return int(a.min()), int(a.max())

    def _fresh_state(self, G: int) -> dict:
        n1 = self.n + 1
        boxed = object if self.carry and self.state else np.int64  # carried values: typed in _prepare
        return {"active": np.zeros((G, n1), dtype=bool), "start": np.zeros((G, n1), dtype=np.int64),
                "ord": np.zeros(G, dtype=np.int64), "carried": {},
                "regs": {k: np.zeros((G, n1), dtype=boxed) for k in self.stored},
                "prev": {f: np.zeros(G, dtype=boxed) for f in self.lasts}}

    def _prepare(self, st: dict, vals, longest: int) -> None:
        """Leaf ranges from the data (and carried registers), register dtypes, compiled predicates."""
        ranges: dict = {}
        for name in self.fields:
            if name not in self._string_fields and isinstance(vals[name], np.ndarray):
                ranges[name] = self._field_range(name, vals)
        carried = st["carried"]  # key → (lo, hi) of carried register values
        for name, r in list(ranges.items()):
            c = carried.get(("VALUE", name))
            if c is not None:
                ranges[name] = (min(r[0], c[0]), max(r[1], c[1]))
        max_ord = int(st["ord"].max()) + longest + 1
        if (max_ord + 1) * self.width >= 1 << 62:
            raise Unsupported(f"a partition of {max_ord} tuples is too long for the lock-step encoding")
        self._max_ord = max_ord
        leaf: dict = {}
        for k in self.stored + [("COUNT", None)] + [("LAST", f) for f in self.lasts]:
            if k[0] == "COUNT":
                leaf[k] = (0, max_ord + 1)
            elif k[1] in self._string_fields:
                continue
            elif k[0] == "SUM":
                lo, hi = ranges[k[1]]
                c = carried.get(k, (0, 0))
                top = max(abs(lo), abs(hi)) * (longest + 1)
                leaf[k] = (min(0, c[0]) - top, max(0, c[1]) + top)
            else:
                leaf[k] = ranges[k[1]]
        # one dtype per field for its values, registers and previous value, so updates never mix
        # int64 with uint64 (numpy would go through float64)
        value_dtype = {}
        for name in self.fields:
            value_dtype[name] = np.dtype(np.int64) if name in self._string_fields else _dtype(ranges[name])
            vals[name] = vals[name].astype(value_dtype[name], copy=False)
        for k in self.stored:
            want = _dtype(leaf[k]) if k[0] == "SUM" else value_dtype[k[1]]
            st["regs"][k] = st["regs"][k].astype(want, copy=False)
        for f in self.lasts:
            st["prev"][f] = st["prev"][f].astype(value_dtype[f], copy=False)
        # Registers of inactive positions (and previous values of keys without partial matches)
        # still flow through the arithmetic, masked only afterwards: give them values inside the
        # ranges the dtypes were chosen for. Updates keep them inside (a SUM adds one value per
        # step, as a live one does).
        idle = ~st["active"]
        for k in self.stored:
            st["regs"][k][idle] = 0 if k[0] == "SUM" or k[1] in self._string_fields else leaf[k][0]
        idle_keys = ~st["active"].any(axis=1)
        for f in self.lasts:
            st["prev"][f][idle_keys] = 0 if f in self._string_fields else ranges[f][0]
        self._leaf = leaf
        self._ranges = ranges

        def leaf_range(e):
            if isinstance(e, ast.FieldRef):
                return ranges[e.name]
            k = _agg_key(e)
            if k in leaf:
                return leaf[k]
            return ranges[k[1]]  # LAST of a field only measures read: the field's own range

        self._leaf_range = leaf_range
        vec = _Compiler(self.stream, leaf_range, self.strings)
        sca = _Compiler(self.stream, leaf_range, self.strings, scalar=True)
        self.vec_fns = {name: vec.condition(self.defines[name]) for name in self.vec_preds}
        self.agg_fns = {name: vec.condition(self.defines[name]) for name in self.agg_preds}
        self.agg_scalar = {name: sca.condition(self.defines[name]) for name in self.agg_preds}
        self.agg_keys = {name: _env_keys(self.defines[name]) for name in self.agg_preds}
        self._measure_fns = [vec.value(m.expr) for m in self.query.measures]

    # --- the lock-step loop ------------------------------------------------------------------

    def _lockstep(self, order, S0, L, live_at, vals, table, st, reports) -> int:
        """Steps every key that has a t-th tuple, while at least ``lockstep_min`` do; returns the
        first step left to the scalar loop."""
        longest = int(L[0])
        t_end = 0
        while t_end < longest and live_at[t_end] >= self.lockstep_min:
            t_end += 1
        if t_end == 0:
            return 0
        # time-major layout: the rows of step t are one contiguous slice, keys in rank order
        live = live_at[:t_end].astype(np.int64)
        off = np.concatenate(([0], np.cumsum(live)))
        tm_rows = np.empty(int(off[-1]), dtype=np.int64)
        g_of = np.repeat(np.arange(len(L)), np.minimum(L, t_end))
        t_of = np.arange(len(g_of)) - np.repeat(np.concatenate(([0], np.cumsum(np.minimum(L, t_end))[:-1])),
                                                np.minimum(L, t_end))
        tm_rows[off[t_of] + g_of] = order[S0[g_of] + t_of]
        cur_tm = {f: vals[f][tm_rows] for f in self.step_fields}
        tab_tm = np.ascontiguousarray(table[tm_rows].T)  # predicates × rows

        # Position-major state for the loop (positions × keys): the segmented reduction and the
        # gathers then run along contiguous rows. Keys are columns, live keys a prefix.
        G = len(L)
        n = self.n
        active = np.ascontiguousarray(st["active"].T)
        start = np.ascontiguousarray(st["start"].T)
        regs = {k: np.ascontiguousarray(v.T) for k, v in st["regs"].items()}
        prev, ordinal = st["prev"], st["ord"]
        flat_regs = {k: v.reshape(-1) for k, v in regs.items()}
        flat_start = start.reshape(-1)
        cols = np.arange(G, dtype=np.int64)

        esrc, elocal, width = self.esrc, self.elocal, self.width
        seg_col = self.seg[:, None]
        edge_col, start_col, last_idx = self.edge_col, self.start_col, self.last_idx
        last_e = len(esrc) - 1
        latest, skip = self.latest, self.skip
        sent = np.int64(-1) if latest else np.int64(np.iinfo(np.int64).max)
        reduce = np.maximum.reduceat if latest else np.minimum.reduceat
        reduce_pad = np.max if latest else np.min
        padded = self.padded
        pick = np.argmax if latest else np.argmin
        within = self.within
        tkey, tfield = self.tkey, self.time
        if within is not None:
            tlo, thi = self._ranges[self.time]
            if thi - tlo <= within:
                within = None  # no span in this call can exceed the window
            else:
                tdiff = _dtype((tlo - thi, thi - tlo))
        agg_items = [(self.agg_fns[name], self.agg_edges[name], esrc[self.agg_edges[name]], self.agg_keys[name])
                     for name in self.agg_preds]
        stored = [(k, flat_regs[k], regs[k], k[0], k[1]) for k in self.stored]
        measured = bool(self.query.measures)
        lasts = self.lasts
        take = np.take
        for t in range(t_end):
            k = int(live[t])
            lo_, hi_ = int(off[t]), int(off[t + 1])
            tab = tab_tm[:, lo_:hi_]  # predicates × keys
            cur = {f: a[lo_:hi_] for f, a in cur_tm.items()}
            B = start[:, :k]
            now_ord = ordinal[:k] + t
            valid = take(active[:, :k], esrc, axis=0)
            valid &= take(tab, edge_col, axis=0)
            if within is not None:
                span = cur[tfield].astype(tdiff, copy=False) - take(regs[tkey][:, :k], esrc, axis=0).astype(
                    tdiff, copy=False)
                valid &= span <= within
            if agg_items and valid.any():
                for fn, rows_e, srcs, keys in agg_items:
                    env = {}
                    for key in keys:
                        if isinstance(key, str):
                            env[key] = cur[key]
                        elif key[0] == "LAST":
                            env[key] = prev[key[1]][:k]
                        elif key[0] == "COUNT":
                            env[key] = now_ord - take(B, srcs, axis=0)
                        else:
                            env[key] = take(regs[key][:, :k], srcs, axis=0)
                    valid[rows_e] &= fn(env)
            code = take(B, esrc, axis=0)
            code *= width
            code += elocal[:, None]
            code[~valid] = sent
            if padded:
                best = reduce_pad(code.reshape(n, width, k), axis=1)  # positions × keys
            else:
                best = reduce(code, self.seg, axis=0)
            edge_ok = best != sent
            fresh = take(tab, start_col, axis=0)
            if latest:
                act = edge_ok | fresh
            else:
                fresh &= ~edge_ok
                act = edge_ok | fresh
            edge = seg_col + best % width
            np.minimum(edge, last_e, out=edge)
            fidx = take(esrc, edge) * G + cols[:k]  # flat index of each winner's state
            new_start = take(flat_start, fidx)
            np.copyto(new_start, now_ord, where=fresh)
            new_regs = {}
            for key, flat, _, func, f in stored:
                v = cur[f]
                old = take(flat, fidx)
                if func == "FIRST":
                    nv = old
                elif func == "MIN":
                    nv = np.minimum(old, v.astype(old.dtype, copy=False))
                elif func == "MAX":
                    nv = np.maximum(old, v.astype(old.dtype, copy=False))
                else:
                    nv = old + v.astype(old.dtype, copy=False)
                nv = np.where(fresh, v, nv).astype(old.dtype, copy=False)
                new_regs[key] = nv
            ends = take(act, last_idx, axis=0)
            hit = ends.any(axis=0)
            if hit.any():
                hk = np.flatnonzero(hit)
                es = np.where(ends[:, hk], new_start[last_idx][:, hk], sent)
                p = last_idx[pick(es, axis=0)]
                rec = {"row": tm_rows[lo_:hi_][hk], "ord": now_ord[hk], "start": new_start[p, hk]}
                if measured:
                    for key in self.stored:
                        rec[key] = new_regs[key][p, hk]
                reports.append(rec)
                if skip:
                    act[:, hk] = False
            active[:n, :k] = act
            start[:n, :k] = new_start
            for key, _, R, _, _ in stored:
                R[:n, :k] = new_regs[key]
            for f in lasts:
                prev[f][:k] = cur[f]
        st["active"][:] = active.T
        st["start"][:] = start.T
        for k, v in regs.items():
            st["regs"][k][:] = v.T
        return t_end

    # --- the scalar tail ----------------------------------------------------------------------

    def _scalar_tail(self, order, S0, L, k: int, t0: int, vals, table, st, reports) -> None:
        n, esrc, seg = self.n, self.esrc.tolist(), self.seg.tolist()
        ends_of = [int(s) for s in self.seg[1:]] + [len(esrc)] if n else []
        edge_col, start_col, last = self.edge_col.tolist(), self.start_col.tolist(), self.last_idx.tolist()
        agg_of = {}
        for name in self.agg_preds:
            for e in self.agg_edges[name].tolist():
                agg_of[e] = (self.agg_scalar[name], self.agg_keys[name])
        latest, skip, within, time = self.latest, self.skip, self.within, self.time
        stored, lasts, tkey = self.stored, self.lasts, self.tkey
        measured = bool(self.query.measures)
        for g in range(k):
            lo, hi = int(S0[g]) + t0, int(S0[g]) + int(L[g])
            rows = order[lo:hi]
            cur = {f: vals[f][rows].tolist() for f in self.step_fields}
            tab = table[rows].tolist()
            act = st["active"][g].tolist()
            B = st["start"][g].tolist()
            R = {key: st["regs"][key][g].tolist() for key in stored}
            prev = {f: st["prev"][f][g].item() for f in lasts}
            base = int(st["ord"][g]) + t0
            found_rows, found_ord, found_start, found_regs = [], [], [], {key: [] for key in stored}
            for i in range(hi - lo):
                row_tab = tab[i]
                now_ord = base + i
                tup = {f: c[i] for f, c in cur.items()}
                now = tup[time] if within is not None else None
                nact, nB, nR = [False] * (n + 1), [0] * (n + 1), {key: [0] * (n + 1) for key in stored}
                for q in range(n):
                    best = None
                    for e in range(seg[q], ends_of[q]):
                        p = esrc[e]
                        if not act[p] or not row_tab[edge_col[e]]:
                            continue
                        if within is not None and now - R[tkey][p] > within:
                            continue
                        guard = agg_of.get(e)
                        if guard is not None:
                            env = {}
                            for key in guard[1]:
                                if isinstance(key, str):
                                    env[key] = tup[key]
                                elif key[0] == "LAST":
                                    env[key] = prev[key[1]]
                                elif key[0] == "COUNT":
                                    env[key] = now_ord - B[p]
                                else:
                                    env[key] = R[key][p]
                            if not guard[0](env):
                                continue
                        if best is None or (B[p] > B[best] if latest else B[p] < B[best]):
                            best = p
                    fresh = bool(row_tab[start_col[q]]) and (latest or best is None)
                    if fresh:
                        nact[q], nB[q] = True, now_ord
                        for key in stored:
                            nR[key][q] = tup[key[1]]
                    elif best is not None:
                        nact[q], nB[q] = True, B[best]
                        for key in stored:
                            old, v = R[key][best], tup[key[1]]
                            f = key[0]
                            nR[key][q] = old if f == "FIRST" else min(old, v) if f == "MIN" else \
                                max(old, v) if f == "MAX" else old + v
                done = [q for q in last if nact[q]]
                if done:
                    p = done[0]
                    for q in done[1:]:
                        if nB[q] > nB[p] if latest else nB[q] < nB[p]:
                            p = q
                    found_rows.append(int(rows[i]))
                    found_ord.append(now_ord)
                    found_start.append(nB[p])
                    if measured:
                        for key in stored:
                            found_regs[key].append(nR[key][p])
                    if skip:
                        nact = [False] * (n + 1)
                act, B, R = nact, nB, nR
                for f in lasts:
                    prev[f] = tup[f]
            st["active"][g] = act
            st["start"][g] = B
            for key in stored:
                st["regs"][key][g] = np.array(R[key], dtype=object).astype(st["regs"][key].dtype)
            for f in lasts:
                st["prev"][f][g] = prev[f]
            if found_rows:
                rec = {"row": np.array(found_rows, dtype=np.int64), "ord": np.array(found_ord, dtype=np.int64),
                       "start": np.array(found_start, dtype=np.int64)}
                if measured:
                    for key in stored:
                        rec[key] = np.array(found_regs[key], dtype=object).astype(st["regs"][key].dtype)
                reports.append(rec)

    # --- measures ------------------------------------------------------------------------------

    def _measures(self, rec: dict, vals) -> list[tuple]:
        rows = rec["row"]
        env = {}
        for name in self.fields:
            env[name] = vals[name][rows]
        for m in self.query.measures:
            for key in _env_keys(m.expr):
                if isinstance(key, str) or key in env:
                    continue
                if key[0] == "COUNT":
                    env[key] = rec["ord"] - rec["start"] + 1
                elif key[0] == "LAST":
                    env[key] = vals[key[1]][rows]
                else:
                    env[key] = rec[key]
        columns = []
        for m, fn in zip(self.query.measures, self._measure_fns):
            v = np.broadcast_to(np.asarray(fn(env)), (len(rows),))
            t = expr_type(m.expr, self.stream)
            if isinstance(t, (IntT, BoolT)):
                columns.append(v.tolist())
            elif isinstance(t, StrT):
                columns.append([t.value] * len(rows))
            else:
                columns.append(self.strings.decode(v))
        return list(zip(*columns))

    # --- carrying partial matches between calls ------------------------------------------------

    def _key_values(self, frame, order, S0) -> list:
        first = order[S0]
        keys = self.query.partition_by
        if not keys:
            return [0] * len(S0)
        if len(keys) == 1:
            return frame[keys[0]].to_numpy()[first].tolist()
        return list(zip(*(frame[k].to_numpy()[first].tolist() for k in keys)))

    def _load(self, frame, order, S0, st) -> None:
        if not self.state:
            return
        lo_hi: dict = {}

        def widen(key, values):
            if values:
                r = (int(min(values)), int(max(values)))
                old = lo_hi.get(key)
                lo_hi[key] = r if old is None else (min(old[0], r[0]), max(old[1], r[1]))

        for g, kv in enumerate(self._key_values(frame, order, S0)):
            saved = self.state.get(kv)
            if saved is None:
                continue
            st["active"][g], st["start"][g], st["ord"][g] = saved["active"], saved["start"], saved["ord"]
            for key, row in saved["regs"].items():
                st["regs"][key][g] = row
                if key[1] not in self._string_fields:
                    live = [v for v, a in zip(row, saved["active"]) if a]
                    widen(key if key[0] == "SUM" else ("VALUE", key[1]), live)
            for f, v in saved["prev"].items():
                st["prev"][f][g] = v
                if f not in self._string_fields:
                    widen(("VALUE", f), [v])
        st["carried"] = lo_hi

    def _save(self, frame, order, S0, L, st) -> None:
        for g, kv in enumerate(self._key_values(frame, order, S0)):
            live = st["active"][g]
            if not live.any():
                self.state.pop(kv, None)
                continue
            self.state[kv] = {  # registers of inactive positions are stale: stored as 0
                "active": live.copy(), "start": st["start"][g].copy(), "ord": int(st["ord"][g]) + int(L[g]),
                "regs": {key: [v if a else 0 for v, a in zip(st["regs"][key][g].tolist(), live)]
                         for key in self.stored},
                "prev": {f: st["prev"][f][g].item() for f in self.lasts}}

"""Evaluation of DEFINE and MEASURES expressions in software.

Two compilers over one checked expression:

* :func:`vector` evaluates over whole columns (numpy), for predicates without
  aggregates: the reference matcher evaluates them once per batch, not per tuple.
* :func:`scalar` builds a closure over one tuple and one partial match's
  aggregate registers, for predicates with aggregates and for measures.

Integer arithmetic is exact (SPEC: results widen as needed): numpy int64 or
uint64 when the value range the checker infers fits, Python integers otherwise.
ENUM and CHAR values are their strings; BOOL is 0/1.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping

import numpy as np

from ..lang import ast
from ..lang.check import BoolT, IntT, _Typer

_INT64 = (-(1 << 63), (1 << 63) - 1)
_UINT64 = (0, (1 << 64) - 1)
_CMP = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}

AggKey = tuple[str, str | None]  # (func, field) e.g. ("COUNT", None), ("MAX", "price")


def agg_key(a: ast.Agg) -> AggKey:
    return (a.func, a.arg.name if a.arg is not None else None)


class _Types:
    def __init__(self, stream: ast.Stream):
        def fail(msg, span):
            raise ValueError(f"unchecked expression: {msg}")

        self._typer = _Typer(stream, fail)

    def range(self, e: ast.Expr) -> tuple[int, int] | None:
        t = self._typer.infer(e)
        return (t.lo, t.hi) if isinstance(t, IntT) else None

    def is_bool(self, e: ast.Expr) -> bool:
        return isinstance(self._typer.infer(e), BoolT)


def _dtype_for(*ranges: tuple[int, int]) -> object:
    lo = min(r[0] for r in ranges)
    hi = max(r[1] for r in ranges)
    if _INT64[0] <= lo and hi <= _INT64[1]:
        return np.int64
    if lo >= 0 and hi <= _UINT64[1]:
        return np.uint64
    return object


def vector(e: ast.Expr, stream: ast.Stream) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """Compile an aggregate-free expression to a function of a column mapping."""
    types = _Types(stream)

    def comp(e: ast.Expr, dtype=None):
        """Closure producing an array (or a scalar for literals) of ``dtype`` for integer nodes."""
        if isinstance(e, ast.IntLit):
            v = e.value
            return lambda cols: v if dtype is object or dtype is None else dtype(v)
        if isinstance(e, ast.StrLit):
            v = e.value
            return lambda cols: v
        if isinstance(e, ast.BoolLit):
            v = e.value
            return lambda cols: v
        if isinstance(e, ast.FieldRef):
            name = e.name
            if dtype is None:
                return lambda cols: cols[name]
            return lambda cols: np.asarray(cols[name]).astype(dtype, copy=False)
        if isinstance(e, ast.Neg):
            inner = comp(e.operand, dtype)
            return lambda cols: -inner(cols)
        if isinstance(e, ast.Arith):
            d = dtype or _dtype_for(types.range(e), types.range(e.left), types.range(e.right))
            f, a, b = _ARITH[e.op], comp(e.left, d), comp(e.right, d)
            return lambda cols: f(a(cols), b(cols))
        if isinstance(e, ast.Compare):
            return compare(e.op, e.left, e.right)
        if isinstance(e, ast.Between):
            ge, le = compare(">=", e.operand, e.low), compare("<=", e.operand, e.high)
            if e.negated:
                return lambda cols: ~(ge(cols) & le(cols))
            return lambda cols: ge(cols) & le(cols)
        if isinstance(e, ast.InList):
            tests = [compare("=", e.operand, item) for item in e.items]

            def in_list(cols):
                out = tests[0](cols)
                for t in tests[1:]:
                    out = out | t(cols)
                return ~out if e.negated else out

            return in_list
        if isinstance(e, ast.BoolOp):
            parts = [as_bool(o) for o in e.operands]
            combine = operator.and_ if e.op == "AND" else operator.or_

            def bool_op(cols):
                out = parts[0](cols)
                for p in parts[1:]:
                    out = combine(out, p(cols))
                return out

            return bool_op
        if isinstance(e, ast.Not):
            inner = as_bool(e.operand)
            return lambda cols: ~inner(cols)
        raise TypeError(f"cannot vectorise {type(e).__name__}")

    def as_bool(e: ast.Expr):
        """A closure producing a bool array (never a Python bool: ``~True`` is -2)."""
        if isinstance(e, ast.FieldRef):  # a BOOL field used as a condition
            name = e.name
            return lambda cols: np.asarray(cols[name]).astype(bool)
        if isinstance(e, ast.BoolLit):
            v = e.value
            return lambda cols: np.full(_rows(cols), v, dtype=bool)
        return comp(e)

    def compare(op, left, right):
        f = _CMP[op]
        lr, rr = types.range(left), types.range(right)
        if lr is not None and rr is not None:
            d = _dtype_for(lr, rr)
            a, b = comp(left, d), comp(right, d)
        elif types.is_bool(left):
            a, b = as_bool(left), as_bool(right)
        else:  # strings: ENUM, CHAR, literals
            a, b = comp(left), comp(right)
        return lambda cols: np.asarray(f(a(cols), b(cols)), dtype=bool)

    fn = as_bool(e) if types.is_bool(e) else comp(e)

    def run(cols: Mapping[str, np.ndarray]) -> np.ndarray:
        out = fn(cols)
        return np.broadcast_to(np.asarray(out), (_rows(cols),)) if np.ndim(out) == 0 else out

    return run


def _rows(cols: Mapping[str, np.ndarray]) -> int:
    return len(next(iter(cols.values())))


def scalar(e: ast.Expr, measure: bool = False) -> Callable[[Mapping[str, object], Mapping[AggKey, object]], object]:
    """Compile an expression to ``f(row, aggs)`` over one tuple and one partial match's registers.

    In MEASURES (``measure=True``) a bare field means its value in the match's last tuple.
    """

    def comp(e: ast.Expr):
        if isinstance(e, (ast.IntLit, ast.StrLit)):
            v = e.value
            return lambda row, aggs: v
        if isinstance(e, ast.BoolLit):
            v = int(e.value)
            return lambda row, aggs: v
        if isinstance(e, ast.FieldRef):
            name = e.name
            return lambda row, aggs: row[name]
        if isinstance(e, ast.Agg):
            key = agg_key(e)
            return lambda row, aggs: aggs[key]
        if isinstance(e, ast.Neg):
            inner = comp(e.operand)
            return lambda row, aggs: -inner(row, aggs)
        if isinstance(e, ast.Arith):
            f, a, b = _ARITH[e.op], comp(e.left), comp(e.right)
            return lambda row, aggs: f(a(row, aggs), b(row, aggs))
        if isinstance(e, ast.Compare):
            f, a, b = _CMP[e.op], comp(e.left), comp(e.right)
            return lambda row, aggs: int(f(a(row, aggs), b(row, aggs)))
        if isinstance(e, ast.Between):
            x, lo, hi, neg = comp(e.operand), comp(e.low), comp(e.high), e.negated
            return lambda row, aggs: int((lo(row, aggs) <= x(row, aggs) <= hi(row, aggs)) != neg)
        if isinstance(e, ast.InList):
            x, items, neg = comp(e.operand), [comp(i) for i in e.items], e.negated
            return lambda row, aggs: int((x(row, aggs) in {i(row, aggs) for i in items}) != neg)
        if isinstance(e, ast.BoolOp):
            parts = [comp(o) for o in e.operands]
            if e.op == "AND":
                return lambda row, aggs: int(all(p(row, aggs) for p in parts))
            return lambda row, aggs: int(any(p(row, aggs) for p in parts))
        if isinstance(e, ast.Not):
            inner = comp(e.operand)
            return lambda row, aggs: int(not inner(row, aggs))
        raise TypeError(f"unknown expression {type(e).__name__}")

    return comp(e)


def update_aggs(aggs: dict[AggKey, object] | None, keys: tuple[AggKey, ...], row: Mapping[str, object]) -> dict:
    """Registers of a partial match after it takes ``row`` (``aggs`` None: the match starts here)."""
    out = {}
    for key in keys:
        func, field = key
        v = row[field] if field is not None else None
        if aggs is None:
            out[key] = 1 if func == "COUNT" else v
            continue
        old = aggs[key]
        if func == "COUNT":
            out[key] = old + 1
        elif func == "FIRST":
            out[key] = old
        elif func == "LAST":
            out[key] = v
        elif func == "MIN":
            out[key] = min(old, v)
        elif func == "MAX":
            out[key] = max(old, v)
        else:  # SUM
            out[key] = old + v
    return out

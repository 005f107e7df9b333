"""The predicate decoder (Woods et al. §5, App. A).

Pure combinational logic from a decoded tuple to one bit per predicate.
Sub-expressions are built once and shared: two predicates that compare the
same field with the same constant use one comparator. ENUM fields compare as
their codes, CHAR fields as little-endian byte strings; Amaranth's arithmetic
widens and sign-extends, so mixed signed/unsigned comparisons are exact.
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..plan import PArith, PBool, PCmp, PConst, PExpr, PField, PNeg, PredicatePlan


class PredicateDecoder(wiring.Component):
    """``preds[i]`` is predicate i of ``predicates`` applied to ``tuple``. Combinational, no latency."""

    def __init__(self, layout: data.StructLayout, predicates: list[PredicatePlan]):
        self._predicates = list(predicates)
        super().__init__({"tuple": In(layout), "preds": Out(max(1, len(self._predicates)))})
        self.shared = 0  # comparators shared between predicates, known after elaborate()

    def elaborate(self, platform):
        m = Module()
        cache: dict[PExpr, Value] = {}
        uses: dict[PExpr, int] = {}

        def build(e: PExpr) -> Value:
            uses[e] = uses.get(e, 0) + 1
            if e in cache:
                return cache[e]
            if isinstance(e, PConst):
                v = Const(e.value)
            elif isinstance(e, PField):
                v = Value.cast(getattr(self.tuple, e.name))
            elif isinstance(e, PNeg):
                v = -build(e.operand)
            elif isinstance(e, PArith):
                a, b = build(e.left), build(e.right)
                v = a + b if e.op == "+" else a - b if e.op == "-" else a * b
            elif isinstance(e, PCmp):
                a, b = build(e.left), build(e.right)
                v = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[e.op]
            elif isinstance(e, PBool):
                parts = [truth(o) for o in e.operands]
                if e.op == "not":
                    v = ~parts[0]
                else:
                    v = parts[0]
                    for p in parts[1:]:
                        v = (v & p) if e.op == "and" else (v | p)
            else:  # pragma: no cover
                raise TypeError(e)
            cache[e] = v
            return v

        def truth(e: PExpr) -> Value:
            v = build(e)
            return v.bool() if len(v) != 1 or v.shape().signed else v

        for i, p in enumerate(self._predicates):
            m.d.comb += self.preds[i].eq(truth(p.expr))
        self.shared = sum(n - 1 for e, n in uses.items() if isinstance(e, PCmp) and n > 1)
        return m

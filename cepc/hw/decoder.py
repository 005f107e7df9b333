"""The predicate decoder (Woods et al. §5, App. A).

Pure combinational logic from a decoded tuple to one bit per predicate.
Sub-expressions are built once and shared: two predicates that compare the
same field with the same constant use one comparator. ENUM fields compare as
their codes, CHAR fields as little-endian byte strings; Amaranth's arithmetic
widens and sign-extends, so mixed signed/unsigned comparisons are exact.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..plan import PredicatePlan
from .expr import ExprBuilder
from .layouts import field


class PredicateDecoder(wiring.Component):
    """``preds[i]`` is predicate i of ``predicates`` applied to ``tuple``. Combinational, no latency.

    A predicate with aggregates reads the partial match, so the NFA core evaluates it per edge;
    its bit here is 0.
    """

    def __init__(self, layout: data.StructLayout, predicates: list[PredicatePlan]):
        self._predicates = list(predicates)
        super().__init__({"tuple": In(layout), "preds": Out(max(1, len(self._predicates)))})
        self.shared = 0  # comparators shared between predicates, known after elaborate()

    def elaborate(self, platform):
        m = Module()
        build = ExprBuilder(lambda name: field(self.tuple, name))
        for i, p in enumerate(self._predicates):
            m.d.comb += self.preds[i].eq(0 if p.aggregate else build.truth(p.expr))
        self.shared = build.shared
        return m

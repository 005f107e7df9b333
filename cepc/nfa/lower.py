"""Checked AST + wiring NFA → the hardware plan (:mod:`cepc.plan`).

ENUM members become their codes, CHAR literals their little-endian byte
strings, ``BETWEEN`` and ``IN`` comparisons; what hardware cannot do yet is a
:class:`~cepc.errors.QueryError` pointing at the construct.
"""

from __future__ import annotations

from ..errors import Diagnostic, QueryError
from ..lang import ast
from ..lang.check import Checked
from ..plan import (
    DesignPlan,
    FieldPlan,
    NfaPlan,
    PArith,
    PBool,
    PCmp,
    PConst,
    PExpr,
    PField,
    PNeg,
    PredicatePlan,
    QueryPlan,
    TuplePlan,
)
from . import wiring


def tuple_plan(stream: ast.Stream) -> TuplePlan:
    fields, offset = [], 0
    for f in stream.fields:
        t = f.type
        if isinstance(t, ast.EnumType):
            fp = FieldPlan(f.name, "enum", t.width, offset, members=t.members)
        elif isinstance(t, ast.CharType):
            fp = FieldPlan(f.name, "char", t.width, offset, length=t.length)
        elif isinstance(t, ast.TimestampType):
            fp = FieldPlan(f.name, "timestamp", 64, offset)
        elif isinstance(t, ast.IntType):
            fp = FieldPlan(f.name, "int", t.width, offset)
        else:
            fp = FieldPlan(f.name, "bool" if t.is_bool else "uint", t.width, offset)
        fields.append(fp)
        offset += fp.width
    return TuplePlan(tuple(fields))


class _Lowering:
    def __init__(self, checked: Checked, tup: TuplePlan):
        self.checked = checked
        self.tuple = tup

    def unsupported(self, what: str, span) -> QueryError:
        return QueryError(Diagnostic("error", f"{what} is not supported in hardware yet", span, self.checked.source))

    def side(self, e: ast.Expr, other: ast.Expr) -> PExpr:
        """One side of a comparison; a string literal becomes the code of the ENUM/CHAR it meets."""
        if not isinstance(e, ast.StrLit):
            return self.expr(e)
        ref = other.arg if isinstance(other, ast.Agg) else other
        assert isinstance(ref, ast.FieldRef), "the checker compares strings with fields only"
        return PConst(self.tuple.field(ref.name).encode(e.value))

    def expr(self, e: ast.Expr) -> PExpr:
        if isinstance(e, ast.IntLit):
            return PConst(e.value)
        if isinstance(e, ast.BoolLit):
            return PConst(int(e.value))
        if isinstance(e, ast.FieldRef):
            return PField(e.name)
        if isinstance(e, ast.Agg):
            raise self.unsupported(f"the aggregate {e.func}", e.span)
        if isinstance(e, ast.Neg):
            return PNeg(self.expr(e.operand))
        if isinstance(e, ast.Arith):
            return PArith(e.op, self.expr(e.left), self.expr(e.right))
        if isinstance(e, ast.Compare):
            return self.compare(e.op, e.left, e.right)
        if isinstance(e, ast.Between):
            inside = PBool("and", (self.compare(">=", e.operand, e.low), self.compare("<=", e.operand, e.high)))
            return PBool("not", (inside,)) if e.negated else inside
        if isinstance(e, ast.InList):
            hit = PBool("or", tuple(self.compare("=", e.operand, i) for i in e.items))
            return PBool("not", (hit,)) if e.negated else hit
        if isinstance(e, ast.BoolOp):
            return PBool(e.op.lower(), tuple(self.expr(o) for o in e.operands))
        if isinstance(e, ast.Not):
            return PBool("not", (self.expr(e.operand),))
        raise TypeError(f"cannot lower {type(e).__name__}")  # pragma: no cover

    def compare(self, op: str, left: ast.Expr, right: ast.Expr) -> PCmp:
        return PCmp("==" if op == "=" else op, self.side(left, right), self.side(right, left))


def nfa_plan(nfa: wiring.Nfa) -> NfaPlan:
    return NfaPlan(
        labels=tuple(nfa.label(s) for s in nfa.states),
        pred=tuple(nfa.pred_index(s) for s in nfa.states),
        start=tuple(s in nfa.start for s in nfa.states),
        accept=tuple(s in nfa.accept for s in nfa.states),
        predecessors=tuple(tuple(nfa.predecessors(s)) for s in nfa.states),
    )


def lower(checked: Checked) -> DesignPlan:
    tup = tuple_plan(checked.stream)
    low = _Lowering(checked, tup)
    queries = []
    for i, q in enumerate(checked.queries):
        if q.measures:
            raise low.unsupported("MEASURES", q.clause_spans.get("measures", q.span))
        if q.within is not None:
            raise low.unsupported("WITHIN", q.clause_spans.get("within", q.span))
        nfa = wiring.build(q)
        defines = {d.name: d for d in q.defines}
        preds = tuple(PredicatePlan(name, low.expr(defines[name].expr)) for name in nfa.preds)
        queries.append(QueryPlan(q.name, i, q.partition_by, q.after_match == ast.SKIP_PAST_LAST_ROW, preds,
                                 nfa_plan(nfa), ast.format_pattern(q.pattern)))
    return DesignPlan(checked.source.name, checked.stream.name, tup, tuple(queries))

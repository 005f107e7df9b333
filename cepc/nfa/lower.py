"""Checked AST + wiring NFA → the hardware plan (:mod:`cepc.plan`).

ENUM members become their codes, CHAR literals their little-endian byte
strings, ``BETWEEN`` and ``IN`` comparisons. Aggregates become registers that
every NFA state keeps for its partial match (SPEC §3.4), sized from the
longest match the pattern allows — or ``max_length`` when the pattern is
unbounded: SUM widens by that many bits, COUNT holds it.
"""

from __future__ import annotations

from ..errors import Diagnostic, QueryError
from ..lang import ast
from ..lang.check import Checked
from ..plan import (
    DEFAULT_MAX_LENGTH,
    FLIPPED,
    DesignPlan,
    FieldPlan,
    MeasurePlan,
    NfaPlan,
    PAgg,
    PArith,
    PBool,
    PCmp,
    PConst,
    PExpr,
    PField,
    PNeg,
    PredicatePlan,
    QueryPlan,
    RegisterPlan,
    TuplePlan,
    has_aggregates,
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


def max_match_length(p: ast.Pattern) -> int | None:
    """The longest word of the pattern's language, or None when it is unbounded."""
    if isinstance(p, (ast.Var, ast.AnyTuple)):
        return 1
    if isinstance(p, ast.Empty):
        return 0
    if isinstance(p, (ast.Seq, ast.Alt)):
        parts = [max_match_length(i) for i in p.items]
        if None in parts:
            return None
        return sum(parts) if isinstance(p, ast.Seq) else max(parts)
    child = max_match_length(p.child)
    if child == 0 or p.max == 0:
        return 0
    return None if p.max is None or child is None else child * p.max


def field_range(f: FieldPlan) -> tuple[int, int]:
    if f.kind == "int":
        return -(1 << (f.width - 1)), (1 << (f.width - 1)) - 1
    return 0, (1 << f.width) - 1


def range_width(lo: int, hi: int) -> tuple[int, bool]:
    """Bits and signedness that hold every integer in [lo, hi]."""
    if lo < 0:
        return max((-lo - 1).bit_length(), hi.bit_length()) + 1, True
    return max(1, hi.bit_length()), False


class _Lowering:
    def __init__(self, checked: Checked, tup: TuplePlan):
        self.checked = checked
        self.tuple = tup
        self.registers: list[tuple[str, str | None, int]] = []  # the current query's (func, field, scale)
        self.scaling = False  # lowering a DEFINE: an aggregate times a constant is a register of its own

    def register(self, func: str, field: str | None, scale: int = 1) -> int:
        key = ("COUNT", None, 1) if func == "COUNT" else (func, field, scale)
        if key not in self.registers:
            self.registers.append(key)
        return self.registers.index(key)

    def scaled(self, e: ast.Arith) -> PExpr | None:
        """``AGG(field) * k`` (or ``k * AGG(field)``) in a DEFINE, as the register ``AGG(field * k)``:
        the partial-match update then keeps a comparison and a multiplexer where it had a multiplier
        (SPEC §3.4's values are the same: FIRST and LAST pass any constant, MIN and MAX a positive
        one, which keeps their order). None when ``e`` is not of that form. (LAST too: the update
        takes the tuple's own product, carried beside it, but the table's conditions for the tuple
        behind a stored state multiplied it: finance2's ``LAST(price) * 999``.)"""
        for agg, k in ((e.left, e.right), (e.right, e.left)):
            if not (isinstance(agg, ast.Agg) and isinstance(k, ast.IntLit) and agg.arg is not None):
                continue
            if agg.func not in ("FIRST", "LAST", "MIN", "MAX") or k.value in (0, 1):
                continue
            if self.tuple.field(agg.arg.name).kind not in ("int", "uint", "timestamp"):
                continue
            if agg.func in ("MIN", "MAX") and k.value < 0:
                continue
            return PAgg(self.register(agg.func, agg.arg.name, k.value))
        return None

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
            return PAgg(self.register(e.func, e.arg.name if e.arg is not None else None))
        if isinstance(e, ast.Neg):
            return PNeg(self.expr(e.operand))
        if isinstance(e, ast.Arith):
            if e.op == "*" and self.scaling and (scaled := self.scaled(e)) is not None:
                return scaled
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
        cmp = PCmp("==" if op == "=" else op, self.side(left, right), self.side(right, left))
        return isolate(cmp) if self.scaling else cmp


def isolate(cmp: PCmp) -> PCmp:
    """A DEFINE's comparison of a sum or difference, one of whose terms reads the partial match,
    with what reads the tuple alone, rearranged so that the aggregate stands alone:
    ``time - FIRST(time) < 20000`` becomes ``FIRST(time) > time - 20000``. The tuple's side is then
    computed before the update (:class:`~cepc.hw.nfa_core.TupleTerms`), and the update, for the tuple
    behind, compares once where it subtracted and compared. Exact: the hardware's arithmetic widens,
    so moving a term across is the same over the integers (the reference matcher reads the query)."""
    op, left, right = cmp.op, cmp.left, cmp.right
    if has_aggregates(right) and not has_aggregates(left):
        op, left, right = FLIPPED[op], right, left
    if has_aggregates(right):  # (aggregates on both sides, or none)
        return cmp
    moved = False
    while isinstance(left, PArith) and left.op in ("+", "-"):
        a, b = left.left, left.right
        if has_aggregates(a) and not has_aggregates(b):  # a ± b op r  ⟺  a op r ∓ b
            left, right = a, PArith("-" if left.op == "+" else "+", right, b)
        elif has_aggregates(b) and not has_aggregates(a):
            if left.op == "+":  # a + b op r  ⟺  b op r - a
                left, right = b, PArith("-", right, a)
            else:  # a - b op r  ⟺  b flip(op) a - r
                left, right, op = b, PArith("-", a, right), FLIPPED[op]
        else:
            break
        moved = True
    return PCmp(op, left, right) if moved else cmp


def nfa_plan(nfa: wiring.Nfa) -> NfaPlan:
    return NfaPlan(
        labels=tuple(nfa.label(s) for s in nfa.states),
        pred=tuple(nfa.pred_index(s) for s in nfa.states),
        start=tuple(s in nfa.start for s in nfa.states),
        accept=tuple(s in nfa.accept for s in nfa.states),
        predecessors=tuple(tuple(nfa.predecessors(s)) for s in nfa.states),
    )


def _registers(low: _Lowering, max_length: int) -> tuple[RegisterPlan, ...]:
    out = []
    for func, name, scale in low.registers:
        if func == "COUNT":
            out.append(RegisterPlan("COUNT", None, max(1, max_length.bit_length()), False))
            continue
        f = low.tuple.field(name)
        if func == "SUM":
            lo, hi = field_range(f)
            out.append(RegisterPlan(func, name, *range_width(min(0, lo * max_length), max(0, hi * max_length))))
        elif scale != 1:
            lo, hi = field_range(f)
            out.append(RegisterPlan(func, name, *range_width(min(lo * scale, hi * scale), max(lo * scale, hi * scale)),
                                    scale=scale))
        else:
            out.append(RegisterPlan(func, name, f.width, f.signed))
    return tuple(out)


def _measure(name: str, e: PExpr, registers: tuple[RegisterPlan, ...], tup: TuplePlan) -> MeasurePlan:
    """A measure's record width and decoding from its value range."""

    def bounds(e: PExpr) -> tuple[int, int]:
        if isinstance(e, PConst):
            return e.value, e.value
        if isinstance(e, PField):
            return field_range(tup.field(e.name))
        if isinstance(e, PAgg):
            r = registers[e.register]
            if r.func == "COUNT":
                return 0, (1 << r.width) - 1
            if r.func == "SUM":
                return (-(1 << (r.width - 1)), (1 << (r.width - 1)) - 1) if r.signed else (0, (1 << r.width) - 1)
            lo, hi = field_range(tup.field(r.field))
            return min(lo * r.scale, hi * r.scale), max(lo * r.scale, hi * r.scale)
        if isinstance(e, PNeg):
            lo, hi = bounds(e.operand)
            return -hi, -lo
        if isinstance(e, PArith):
            (a, b), (c, d) = bounds(e.left), bounds(e.right)
            if e.op == "+":
                return a + c, b + d
            if e.op == "-":
                return a - d, b - c
            products = [x * y for x in (a, b) for y in (c, d)]
            return min(products), max(products)
        return 0, 1  # a condition

    source = e.name if isinstance(e, PField) else None
    if isinstance(e, PAgg) and registers[e.register].func in ("FIRST", "LAST", "MIN", "MAX") \
            and registers[e.register].scale == 1:
        source = registers[e.register].field
    f = tup.field(source) if source is not None else None
    if f is not None and f.kind in ("enum", "char"):
        return MeasurePlan(name, e, f.width, f.kind, f.name)
    if isinstance(e, (PCmp, PBool)) or (f is not None and f.kind == "bool"):
        return MeasurePlan(name, e, 1, "bool")
    width, signed = range_width(*bounds(e))
    return MeasurePlan(name, e, width, "int" if signed else "uint")


def lower(checked: Checked, max_length: int | None = None) -> DesignPlan:
    """The hardware plan of every query. ``max_length`` (``--max-match-length``) bounds the partial
    matches of unbounded patterns that keep registers (default :data:`DEFAULT_MAX_LENGTH`)."""
    if max_length is not None and max_length < 1:
        raise ValueError(f"--max-match-length must be at least 1, not {max_length!r}")
    tup = tuple_plan(checked.stream)
    low = _Lowering(checked, tup)
    queries = []
    for i, q in enumerate(checked.queries):
        low.registers = []
        nfa = wiring.build(q)
        defines = {d.name: d for d in q.defines}
        low.scaling = True
        preds = tuple(PredicatePlan(name, low.expr(defines[name].expr)) for name in nfa.preds)
        low.scaling = False
        measures = [(m.alias, low.expr(m.expr)) for m in q.measures]
        agg_preds = any(p.aggregate for p in preds)
        # SPEC §3.5 reads the DEFINE clause, variables the pattern leaves unused included (as the
        # reference matcher does): any aggregate there keeps the earliest start
        latest = q.within is not None and not any(ast.aggregates(d.expr) for d in q.defines)
        order = start_time = None
        if agg_preds or measures or (q.within is not None and not latest):
            order = low.register("COUNT", None)  # the longest partial match started earliest
        if q.within is not None:
            start_time = low.register("FIRST", q.order_by)
            if order is None:  # WITHIN alone: the latest start time wins, and ties are the same match
                order = start_time
        bound = max_match_length(q.pattern)
        limit = max_length if max_length is not None else DEFAULT_MAX_LENGTH
        longest = limit if bound is None else min(bound, limit)
        registers = _registers(low, max(1, longest))
        queries.append(QueryPlan(
            q.name, i, q.partition_by, q.after_match == ast.SKIP_PAST_LAST_ROW, preds, nfa_plan(nfa),
            ast.format_pattern(q.pattern), registers=registers,
            measures=tuple(_measure(name, e, registers, tup) for name, e in measures),
            within=q.within, time_field=q.order_by if q.within is not None else None, latest=latest,
            order_register=order, start_time_register=start_time,
            max_length=max(1, longest) if registers else None, bounded=bound is not None and bound <= limit))
    return DesignPlan(checked.source.name, checked.stream.name, tup, tuple(queries))

"""Semantic checks: names, types, aggregates, patterns.

:func:`check` takes a parsed :class:`~cepc.lang.ast.QueryFile` and returns a
:class:`Checked` file whose queries have their time field resolved, or raises
:class:`~cepc.errors.QueryError` listing every error found. Warnings ride
along on the result.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass

from ..errors import Diagnostic, QueryError, Source, Span
from . import ast

# A pattern expands counted repetition into this many states at most.
MAX_STATES = 10_000
# Assumed bound on a match's length for value ranges before WITHIN/--max-match-length narrow it.
_COUNT_BOUND = (1 << 32) - 1


# --- expression types ---------------------------------------------------------


@dataclass(frozen=True)
class IntT:
    lo: int
    hi: int

    def describe(self) -> str:
        return "an integer"


@dataclass(frozen=True)
class BoolT:
    def describe(self) -> str:
        return "a condition"


@dataclass(frozen=True)
class EnumT:
    type: ast.EnumType
    field: str

    def describe(self) -> str:
        return f"ENUM field {self.field}"


@dataclass(frozen=True)
class CharT:
    length: int
    field: str

    def describe(self) -> str:
        return f"CHAR({self.length}) field {self.field}"


@dataclass(frozen=True)
class StrT:
    value: str

    def describe(self) -> str:
        return f"the string {self.value!r}"


ExprType = IntT | BoolT | EnumT | CharT | StrT


def field_expr_type(f: ast.FieldDef) -> ExprType:
    t = f.type
    if isinstance(t, ast.UIntType) and t.is_bool:
        return BoolT()
    if isinstance(t, (ast.UIntType, ast.IntType, ast.TimestampType)):
        return IntT(*t.range)
    if isinstance(t, ast.EnumType):
        return EnumT(t, f.name)
    return CharT(t.length, f.name)


def is_constant(e: ast.Expr) -> bool:
    return all(not isinstance(n, (ast.FieldRef, ast.Agg)) for n in ast.walk(e))


def constant_value(e: ast.Expr) -> int:
    """Value of a constant integer expression (see :func:`is_constant`)."""
    if isinstance(e, ast.IntLit):
        return e.value
    if isinstance(e, ast.Neg):
        return -constant_value(e.operand)
    if isinstance(e, ast.Arith):
        a, b = constant_value(e.left), constant_value(e.right)
        return a + b if e.op == "+" else a - b if e.op == "-" else a * b
    raise TypeError(f"not a constant integer expression: {e!r}")


class _Typer:
    """Infers expression types against a stream, reporting mistakes as diagnostics."""

    def __init__(self, stream: ast.Stream, report):
        self.stream = stream
        self.report = report

    def field(self, ref: ast.FieldRef) -> ast.FieldDef | None:
        f = self.stream.field(ref.name)
        if f is None:
            names = [x.name for x in self.stream.fields]
            # identifiers are case-sensitive: a name differing only in case is the likeliest slip
            near = [n for n in names if n.lower() == ref.name.lower()] or difflib.get_close_matches(ref.name, names, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            self.report(f"unknown field {ref.name!r} in stream {self.stream.name}{hint}", ref.span)
        return f

    def infer(self, e: ast.Expr) -> ExprType | None:
        """The type of ``e``, or None after reporting why it has none."""
        if isinstance(e, ast.IntLit):
            return IntT(e.value, e.value)
        if isinstance(e, ast.StrLit):
            return StrT(e.value)
        if isinstance(e, ast.BoolLit):
            return BoolT()
        if isinstance(e, ast.FieldRef):
            f = self.field(e)
            return field_expr_type(f) if f else None
        if isinstance(e, ast.Agg):
            return self.aggregate(e)
        if isinstance(e, ast.Neg):
            t = self.integer(e.operand, "'-'")
            return IntT(-t.hi, -t.lo) if t else None
        if isinstance(e, ast.Arith):
            return self.arith(e)
        if isinstance(e, ast.Compare):
            self.compare(e.op, e.left, e.right, e.span)
            return BoolT()
        if isinstance(e, ast.Between):
            self.compare(">=", e.operand, e.low, e.span)
            self.compare("<=", e.operand, e.high, e.span)
            return BoolT()
        if isinstance(e, ast.InList):
            for item in e.items:
                self.compare("=", e.operand, item, item.span)
            return BoolT()
        if isinstance(e, ast.BoolOp):
            for operand in e.operands:
                self.condition(operand, f"{e.op} takes conditions")
            return BoolT()
        if isinstance(e, ast.Not):
            self.condition(e.operand, "NOT takes a condition")
            return BoolT()
        raise TypeError(f"unknown expression node {e!r}")  # pragma: no cover

    def condition(self, e: ast.Expr, what: str) -> None:
        t = self.infer(e)
        if t is not None and not isinstance(t, BoolT):
            self.report(f"{what}, not {t.describe()}", e.span)

    def integer(self, e: ast.Expr, what: str) -> IntT | None:
        t = self.infer(e)
        if t is None:
            return None
        if not isinstance(t, IntT):
            self.report(f"{what} takes integers, not {t.describe()}", e.span)
            return None
        return t

    def aggregate(self, e: ast.Agg) -> ExprType | None:
        if e.func == "COUNT":
            return IntT(0, _COUNT_BOUND)
        f = self.field(e.arg)
        if f is None:
            return None
        t = field_expr_type(f)
        if e.func in ("MIN", "MAX", "SUM") and not isinstance(t, IntT):
            self.report(f"{e.func} takes an integer field, not {t.describe()}", e.arg.span)
            return None
        if e.func == "SUM":
            return IntT(min(0, t.lo * _COUNT_BOUND), max(0, t.hi * _COUNT_BOUND))
        return t

    def arith(self, e: ast.Arith) -> IntT | None:
        a = self.integer(e.left, f"'{e.op}'")
        b = self.integer(e.right, f"'{e.op}'")
        if a is None or b is None:
            return None
        if e.op == "+":
            return IntT(a.lo + b.lo, a.hi + b.hi)
        if e.op == "-":
            return IntT(a.lo - b.hi, a.hi - b.lo)
        if not (is_constant(e.left) or is_constant(e.right)):
            self.report("multiplication needs a constant on one side (hardware multiplies by constants only)",
                        e.span)
            return None
        products = [x * y for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
        return IntT(min(products), max(products))

    def compare(self, op: str, left: ast.Expr, right: ast.Expr, span: Span | None) -> None:
        lt, rt = self.infer(left), self.infer(right)
        if lt is None or rt is None:
            return
        # put the string literal (if any) on the right
        if isinstance(lt, StrT) and not isinstance(rt, StrT):
            left, right, lt, rt = right, left, rt, lt
        ordering = op not in ("=", "!=")
        if isinstance(lt, IntT) and isinstance(rt, IntT):
            for fe, other in ((left, right), (right, left)):
                f = self._value_field(fe)
                if f is not None and isinstance(other, ast.IntLit):
                    lo, hi = f.type.range
                    if not lo <= other.value <= hi:
                        self.report(f"literal {other.value} does not fit {f.type} field {f.name}", other.span)
            return
        if isinstance(lt, BoolT) and isinstance(rt, BoolT):
            if ordering:
                self.report(f"'{op}' does not order conditions; use = or !=", span)
            return
        if isinstance(lt, EnumT):
            if ordering:
                self.report(f"'{op}' does not apply to ENUM field {lt.field}; use =, != or IN", span)
            elif isinstance(rt, StrT):
                if rt.value not in lt.type.members:
                    self.report(f"{rt.value!r} is not a member of ENUM {lt.field}", right.span)
            elif not (isinstance(rt, EnumT) and rt.type == lt.type):
                self.report(f"cannot compare {lt.describe()} with {rt.describe()}", span)
            return
        if isinstance(lt, CharT):
            if ordering:
                self.report(f"'{op}' does not apply to CHAR field {lt.field}; use =, != or IN", span)
            elif isinstance(rt, StrT):
                encoded = rt.value.encode()
                if len(encoded) > lt.length:
                    self.report(f"{rt.value!r} is longer than CHAR({lt.length}) field {lt.field}", right.span)
            elif not (isinstance(rt, CharT) and rt.length == lt.length):
                self.report(f"cannot compare {lt.describe()} with {rt.describe()}", span)
            return
        if isinstance(lt, StrT) and isinstance(rt, StrT):
            self.report("comparison of two string literals", span)
            return
        self.report(f"cannot compare {lt.describe()} with {rt.describe()}", span)

    def _value_field(self, e: ast.Expr) -> ast.FieldDef | None:
        """The field whose values ``e`` takes: a field or FIRST/LAST/MIN/MAX of it."""
        if isinstance(e, ast.Agg) and e.func in ("FIRST", "LAST", "MIN", "MAX"):
            e = e.arg
        return self.stream.field(e.name) if isinstance(e, ast.FieldRef) else None


def expr_type(e: ast.Expr, stream: ast.Stream) -> ExprType:
    """Type of an expression of a checked query."""
    errors: list[str] = []
    t = _Typer(stream, lambda msg, span: errors.append(msg)).infer(e)
    if t is None or errors:
        raise ValueError(f"expression is not well-typed: {errors}")
    return t


# --- pattern analysis ------------------------------------------------------------


def nullable(p: ast.Pattern) -> bool:
    """True if the pattern matches the empty sequence."""
    if isinstance(p, (ast.Var, ast.AnyTuple)):
        return False
    if isinstance(p, ast.Empty):
        return True
    if isinstance(p, ast.Seq):
        return all(nullable(i) for i in p.items)
    if isinstance(p, ast.Alt):
        return any(nullable(i) for i in p.items)
    return p.min == 0 or nullable(p.child) if p.max != 0 else True


def only_empty(p: ast.Pattern) -> bool:
    """True if the empty sequence is the only word of the pattern."""
    if isinstance(p, (ast.Var, ast.AnyTuple)):
        return False
    if isinstance(p, ast.Empty):
        return True
    if isinstance(p, (ast.Seq, ast.Alt)):
        return all(only_empty(i) for i in p.items)
    return p.max == 0 or only_empty(p.child)


def first_vars(p: ast.Pattern) -> list[ast.Var]:
    """Variable occurrences that can match the first tuple of a match."""
    if isinstance(p, ast.Var):
        return [p]
    if isinstance(p, (ast.AnyTuple, ast.Empty)):
        return []
    if isinstance(p, ast.Alt):
        return [v for i in p.items for v in first_vars(i)]
    if isinstance(p, ast.Seq):
        out = []
        for item in p.items:
            out += first_vars(item)
            if not nullable(item):
                break
        return out
    return first_vars(p.child) if p.max != 0 else []


def expanded_size(p: ast.Pattern) -> int:
    """Number of NFA states once counted repetition is expanded."""
    if isinstance(p, (ast.Var, ast.AnyTuple)):
        return 1
    if isinstance(p, ast.Empty):
        return 0
    if isinstance(p, (ast.Seq, ast.Alt)):
        return sum(expanded_size(i) for i in p.items)
    copies = p.max if p.max is not None else max(p.min, 1)
    return copies * expanded_size(p.child)


# --- the checker ---------------------------------------------------------------------


@dataclass(frozen=True)
class Checked:
    """A query file that passed every check. Queries have ``order_by`` set to their time field (or None)."""

    source: Source
    stream: ast.Stream
    queries: tuple[ast.Query, ...]
    warnings: tuple[Diagnostic, ...] = ()

    def query(self, name: str) -> ast.Query:
        for q in self.queries:
            if q.name == name:
                return q
        raise KeyError(name)


def time_field(stream: ast.Stream, query: ast.Query) -> str | None:
    """SPEC §1: the ORDER BY field, else the stream's first TIMESTAMP field."""
    if query.order_by:
        return query.order_by
    for f in stream.fields:
        if isinstance(f.type, ast.TimestampType):
            return f.name
    return None


def check(qf: ast.QueryFile) -> Checked:
    errors: list[Diagnostic] = []
    warnings: list[Diagnostic] = []

    def error(msg: str, span: Span | None) -> None:
        errors.append(Diagnostic("error", msg, span, qf.source))

    def warn(msg: str, span: Span | None) -> None:
        warnings.append(Diagnostic("warning", msg, span, qf.source))

    stream = qf.stream
    assert stream is not None, "the parser rejects files without CREATE STREAM"
    _check_stream(stream, error)
    typer = _Typer(stream, error)

    names: dict[str, ast.Query] = {}
    checked = []
    for q in qf.queries:
        if q.name in names:
            error(f"query name {q.name!r} is used twice", q.clause_spans.get("name", q.span))
        names[q.name] = q
        _check_query(q, stream, typer, error, warn)
        checked.append(dataclasses.replace(q, order_by=time_field(stream, q)))
    if errors:
        errors.sort(key=lambda d: (d.span.line, d.span.col) if d.span else (0, 0))
        raise QueryError(errors + warnings)
    return Checked(qf.source, stream, tuple(checked), tuple(warnings))


def _check_stream(stream: ast.Stream, error) -> None:
    seen = set()
    for f in stream.fields:
        if f.name in seen:
            error(f"field {f.name!r} is declared twice in stream {stream.name}", f.span)
        seen.add(f.name)


def _check_query(q: ast.Query, stream: ast.Stream, typer: _Typer, error, warn) -> None:
    ref = q.clause_spans.get("from")
    if ref and ref[0] != stream.name:
        error(f"unknown stream {ref[0]!r}; this file declares stream {stream.name!r}", ref[1])

    keys: set[str] = set()
    for name, span in zip(q.partition_by, q.clause_spans.get("partition_fields", [None] * len(q.partition_by))):
        if stream.field(name) is None:
            typer.field(ast.FieldRef(name, span))
        elif name in keys:
            error(f"PARTITION BY names the field {name} twice", span)
        keys.add(name)

    if q.order_by:
        span = q.clause_spans.get("order_field")
        f = typer.field(ast.FieldRef(q.order_by, span))
        if f is not None and not isinstance(f.type, (ast.UIntType, ast.IntType, ast.TimestampType)):
            error(f"ORDER BY needs an integer or TIMESTAMP field, and {f.name} is {f.type}", span)

    if q.within is not None and time_field(stream, q) is None:
        error("WITHIN needs a time field: declare a TIMESTAMP field or use ORDER BY", q.clause_spans.get("within"))

    # DEFINE
    defined: dict[str, ast.Define] = {}
    for d in q.defines:
        if d.name in defined:
            error(f"{d.name} is defined twice", d.span)
            continue
        defined[d.name] = d
        t = typer.infer(d.expr)
        if t is not None and not isinstance(t, BoolT):
            error(f"DEFINE {d.name} must be a condition, not {t.describe()}", d.expr.span)

    # PATTERN
    used = set()
    for v in ast.pattern_vars(q.pattern):
        used.add(v.name)
        if v.name not in defined:
            error(f"pattern variable {v.name!r} is not defined in DEFINE", v.span)
    for d in q.defines:
        if d.name not in used:
            warn(f"{d.name} is defined but the pattern never uses it", d.span)
    if only_empty(q.pattern):
        warn("the pattern matches only the empty sequence, so this query never reports a match",
             q.clause_spans.get("pattern", q.span))
    size = expanded_size(q.pattern)
    if size > MAX_STATES:
        error(f"the pattern expands to {size} NFA states; the limit is {MAX_STATES}",
              q.clause_spans.get("pattern", q.span))
    for v in first_vars(q.pattern):
        d = defined.get(v.name)
        aggs = ast.aggregates(d.expr) if d else []
        if aggs:
            error(f"{v.name} can begin a match, where there is no partial match yet, "
                  f"but its DEFINE uses an aggregate", v.span)

    # MEASURES
    aliases: set[str] = set()
    reserved = set(q.partition_by) | {"seq", "query"}
    for m in q.measures:
        typer.infer(m.expr)
        if m.alias in aliases:
            error(f"measure name {m.alias!r} is used twice", m.span)
        elif m.alias in reserved:
            error(f"measure name {m.alias!r} clashes with a column of the match record", m.span)
        aliases.add(m.alias)

"""The abstract syntax tree of a query file.

Frozen dataclasses; every node carries a :class:`~cepc.errors.Span` that takes
no part in equality, so the compact and the ``MATCH_RECOGNIZE`` form of one
query compare equal. The parser builds these, the checker reads them, and no
later stage sees a lark tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Source, Span


def _span() -> Span | None:
    return field(default=None, compare=False, repr=False)


# --- types ------------------------------------------------------------------


@dataclass(frozen=True)
class UIntType:
    width: int

    def __str__(self) -> str:
        return "BOOL" if self.width == 1 and self.is_bool else f"UINT({self.width})"

    is_bool: bool = field(default=False, compare=False)

    @property
    def range(self) -> tuple[int, int]:
        return 0, (1 << self.width) - 1


@dataclass(frozen=True)
class IntType:
    width: int

    def __str__(self) -> str:
        return f"INT({self.width})"

    @property
    def range(self) -> tuple[int, int]:
        return -(1 << (self.width - 1)), (1 << (self.width - 1)) - 1


@dataclass(frozen=True)
class CharType:
    length: int

    def __str__(self) -> str:
        return f"CHAR({self.length})"

    @property
    def width(self) -> int:
        return 8 * self.length


@dataclass(frozen=True)
class EnumType:
    members: tuple[str, ...]

    def __str__(self) -> str:
        return "ENUM(" + ", ".join(repr(m) for m in self.members) + ")"

    @property
    def width(self) -> int:
        return max(1, (len(self.members) - 1).bit_length())

    def code(self, member: str) -> int:
        return self.members.index(member)


@dataclass(frozen=True)
class TimestampType:
    def __str__(self) -> str:
        return "TIMESTAMP"

    @property
    def width(self) -> int:
        return 64

    @property
    def range(self) -> tuple[int, int]:
        return 0, (1 << 64) - 1


Type = UIntType | IntType | CharType | EnumType | TimestampType

INTEGER_TYPES = (UIntType, IntType, TimestampType)


@dataclass(frozen=True)
class FieldDef:
    name: str
    type: Type
    span: Span | None = _span()


@dataclass(frozen=True)
class Stream:
    name: str
    fields: tuple[FieldDef, ...]
    span: Span | None = _span()

    def field(self, name: str) -> FieldDef | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    @property
    def width(self) -> int:
        """Bits of one packed tuple, before rounding up to whole bytes."""
        return sum(f.type.width for f in self.fields)


# --- expressions (DEFINE and MEASURES) ---------------------------------------


@dataclass(frozen=True)
class IntLit:
    value: int
    span: Span | None = _span()


@dataclass(frozen=True)
class StrLit:
    value: str
    span: Span | None = _span()


@dataclass(frozen=True)
class BoolLit:
    value: bool
    span: Span | None = _span()


@dataclass(frozen=True)
class FieldRef:
    name: str
    span: Span | None = _span()


@dataclass(frozen=True)
class Agg:
    """``COUNT(*)`` (``arg`` is None) or ``FIRST/LAST/MIN/MAX/SUM(field)``; ``PREV`` parses as ``LAST``."""

    func: str  # COUNT FIRST LAST MIN MAX SUM
    arg: FieldRef | None
    span: Span | None = _span()


@dataclass(frozen=True)
class Neg:
    operand: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class Arith:
    op: str  # + - *
    left: Expr
    right: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class Compare:
    op: str  # = != < <= > >=   ('<>' is normalised to '!=')
    left: Expr
    right: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class Between:
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False
    span: Span | None = _span()


@dataclass(frozen=True)
class InList:
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False
    span: Span | None = _span()


@dataclass(frozen=True)
class BoolOp:
    op: str  # AND OR
    operands: tuple[Expr, ...]
    span: Span | None = _span()


@dataclass(frozen=True)
class Not:
    operand: Expr
    span: Span | None = _span()


Expr = IntLit | StrLit | BoolLit | FieldRef | Agg | Neg | Arith | Compare | Between | InList | BoolOp | Not


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, (Neg, Not)):
        return (e.operand,)
    if isinstance(e, (Arith, Compare)):
        return (e.left, e.right)
    if isinstance(e, Between):
        return (e.operand, e.low, e.high)
    if isinstance(e, InList):
        return (e.operand, *e.items)
    if isinstance(e, BoolOp):
        return e.operands
    if isinstance(e, Agg):
        return (e.arg,) if e.arg is not None else ()
    return ()


def walk(e: Expr):
    """Every node of an expression, pre-order."""
    yield e
    for c in children(e):
        yield from walk(c)


def aggregates(e: Expr) -> list[Agg]:
    return [n for n in walk(e) if isinstance(n, Agg)]


# --- patterns ----------------------------------------------------------------


@dataclass(frozen=True)
class Var:
    """A pattern variable, defined in DEFINE."""

    name: str
    span: Span | None = _span()


@dataclass(frozen=True)
class AnyTuple:
    """``.``: any tuple."""

    span: Span | None = _span()


@dataclass(frozen=True)
class Empty:
    """``()``: the empty sequence."""

    span: Span | None = _span()


@dataclass(frozen=True)
class Seq:
    items: tuple[Pattern, ...]
    span: Span | None = _span()


@dataclass(frozen=True)
class Alt:
    items: tuple[Pattern, ...]
    span: Span | None = _span()


@dataclass(frozen=True)
class Repeat:
    """``r*`` (0, None), ``r+`` (1, None), ``r?`` (0, 1), ``r{n}``, ``r{n,}``, ``r{n,m}``."""

    child: Pattern
    min: int
    max: int | None
    span: Span | None = _span()


Pattern = Var | AnyTuple | Empty | Seq | Alt | Repeat


def pattern_vars(p: Pattern):
    """Every variable occurrence of a pattern, left to right."""
    if isinstance(p, Var):
        yield p
    elif isinstance(p, (Seq, Alt)):
        for item in p.items:
            yield from pattern_vars(item)
    elif isinstance(p, Repeat):
        yield from pattern_vars(p.child)


# --- queries -----------------------------------------------------------------


@dataclass(frozen=True)
class Define:
    name: str
    expr: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class Measure:
    expr: Expr
    alias: str
    span: Span | None = _span()


SKIP_PAST_LAST_ROW = "skip past last row"
CONTINUE = "continue"


@dataclass(frozen=True)
class Query:
    name: str
    pattern: Pattern
    defines: tuple[Define, ...]
    partition_by: tuple[str, ...] = ()
    order_by: str | None = None
    measures: tuple[Measure, ...] = ()
    within: int | None = None
    after_match: str = SKIP_PAST_LAST_ROW
    span: Span | None = _span()
    # spans of clauses, for diagnostics; not part of the query's meaning
    clause_spans: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    def define(self, name: str) -> Define | None:
        for d in self.defines:
            if d.name == name:
                return d
        return None


@dataclass(frozen=True)
class QueryFile:
    source: Source = field(compare=False, repr=False)
    stream: Stream | None
    queries: tuple[Query, ...]


def format_pattern(p: Pattern) -> str:
    """Pattern text in canonical form, e.g. ``A NOTB* C | A NOTC* D``."""

    def fmt(p: Pattern, prec: int) -> str:
        # prec: 0 alternation, 1 sequence, 2 quantified operand
        if isinstance(p, Var):
            return p.name
        if isinstance(p, AnyTuple):
            return "."
        if isinstance(p, Empty):
            return "()"
        if isinstance(p, Alt):
            text = " | ".join(fmt(i, 1) for i in p.items)
            return f"({text})" if prec > 0 else text
        if isinstance(p, Seq):
            text = " ".join(fmt(i, 2) for i in p.items)
            return f"({text})" if prec > 1 else text
        quant = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((p.min, p.max))
        if quant is None:
            quant = f"{{{p.min}}}" if p.min == p.max else f"{{{p.min},}}" if p.max is None else f"{{{p.min},{p.max}}}"
        text = fmt(p.child, 3) + quant
        return f"({text})" if prec > 2 else text

    return fmt(p, 0)

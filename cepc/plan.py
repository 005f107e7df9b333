"""The hardware plan: what the hardware stage and the emitters read.

A plain, frozen description of one design — tuple layout, predicates as a
small expression language over integers, each query's NFA as tables — built by
:mod:`cepc.nfa.lower` from the checked AST and the wiring NFA. ``cepc.hw`` and
``cepc.emit`` see only this, never AST nodes or graphs.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- the tuple ---------------------------------------------------------------------


@dataclass(frozen=True)
class FieldPlan:
    name: str
    kind: str  # uint int bool enum char timestamp
    width: int
    offset: int  # bit offset in the packed tuple (field 0 in the lowest bits)
    members: tuple[str, ...] = ()  # ENUM
    length: int = 0  # CHAR

    @property
    def signed(self) -> bool:
        return self.kind == "int"

    def encode(self, value) -> int:
        """A value of the events file → its bits on the wire."""
        if self.kind == "enum":
            return self.members.index(value)
        if self.kind == "char":
            return int.from_bytes(str(value).encode().ljust(self.length, b"\0"), "little")
        v = int(value)
        return v & ((1 << self.width) - 1)

    def decode(self, bits: int):
        """Bits on the wire → the value as the events file writes it."""
        if self.kind == "enum":
            return self.members[bits] if bits < len(self.members) else f"<invalid {bits}>"
        if self.kind == "char":
            return bits.to_bytes(self.length, "little").rstrip(b"\0").decode(errors="replace")
        if self.kind == "int" and bits >> (self.width - 1):
            return bits - (1 << self.width)
        return bits


@dataclass(frozen=True)
class TuplePlan:
    fields: tuple[FieldPlan, ...]

    @property
    def width(self) -> int:
        return sum(f.width for f in self.fields)

    @property
    def nbytes(self) -> int:
        return (self.width + 7) // 8

    def field(self, name: str) -> FieldPlan:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def pack(self, row) -> int:
        """A mapping of field values → the packed tuple as an integer (LSB-first)."""
        word = 0
        for f in self.fields:
            word |= f.encode(row[f.name]) << f.offset
        return word

    def to_bytes(self, row) -> bytes:
        return self.pack(row).to_bytes(self.nbytes, "little")

    def unpack(self, word: int) -> dict:
        return {f.name: f.decode(word >> f.offset & ((1 << f.width) - 1)) for f in self.fields}


# --- predicates: integer expressions over the tuple's fields -------------------------------


@dataclass(frozen=True)
class PConst:
    value: int


@dataclass(frozen=True)
class PField:
    name: str


@dataclass(frozen=True)
class PArith:
    op: str  # + - *
    left: PExpr
    right: PExpr


@dataclass(frozen=True)
class PNeg:
    operand: PExpr


@dataclass(frozen=True)
class PCmp:
    op: str  # == != < <= > >=
    left: PExpr
    right: PExpr


@dataclass(frozen=True)
class PBool:
    op: str  # and or not
    operands: tuple[PExpr, ...]


PExpr = PConst | PField | PArith | PNeg | PCmp | PBool


@dataclass(frozen=True)
class PredicatePlan:
    name: str  # DEFINE name
    expr: PExpr  # a condition: PCmp, PBool, PConst 0/1, or a BOOL PField


# --- automata ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NfaPlan:
    """The wiring NFA as tables: state s turns on when ``pred[s]`` holds (None: '.') and
    it is start-activated or one of ``predecessors[s]`` is on."""

    labels: tuple[str, ...]
    pred: tuple[int | None, ...]  # index into the query's predicates
    start: tuple[bool, ...]
    accept: tuple[bool, ...]
    predecessors: tuple[tuple[int, ...], ...]

    @property
    def n_states(self) -> int:
        return len(self.labels)

    def step(self, state: int, preds: int, skip: bool) -> tuple[int, bool]:
        """Software model of one clock: bit sets in, bit set and match bit out."""
        nxt = 0
        for s in range(self.n_states):
            p = self.pred[s]
            if p is not None and not preds >> p & 1:
                continue
            if self.start[s] or any(state >> q & 1 for q in self.predecessors[s]):
                nxt |= 1 << s
        matched = any(self.accept[s] and nxt >> s & 1 for s in range(self.n_states))
        return (0 if matched and skip else nxt), matched


@dataclass(frozen=True)
class QueryPlan:
    name: str
    index: int
    key_fields: tuple[str, ...]
    skip: bool  # AFTER MATCH SKIP PAST LAST ROW (else CONTINUE)
    predicates: tuple[PredicatePlan, ...]
    nfa: NfaPlan
    pattern: str = ""  # the pattern's text, for headers and reports


@dataclass(frozen=True)
class DesignPlan:
    source: str  # query file name
    stream: str
    tuple: TuplePlan
    queries: tuple[QueryPlan, ...]

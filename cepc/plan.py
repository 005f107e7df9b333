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


@dataclass(frozen=True)
class PAgg:
    """An aggregate register of a partial match (SPEC §3.4): in DEFINE the predecessor's, without
    the current tuple; in MEASURES the matched state's, with it."""

    register: int  # index into the query's ``registers``


PExpr = PConst | PField | PArith | PNeg | PCmp | PBool | PAgg

# a comparison with its sides swapped: a < b is b > a
FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def children(e: PExpr) -> tuple[PExpr, ...]:
    """The operands of an expression node (none for a leaf)."""
    if isinstance(e, (PArith, PCmp)):
        return e.left, e.right
    if isinstance(e, PNeg):
        return (e.operand,)
    if isinstance(e, PBool):
        return e.operands
    return ()


def has_aggregates(e: PExpr) -> bool:
    return isinstance(e, PAgg) or any(has_aggregates(c) for c in children(e))


@dataclass(frozen=True)
class PredicatePlan:
    name: str  # DEFINE name
    expr: PExpr  # a condition: PCmp, PBool, PConst 0/1, or a BOOL PField

    @property
    def aggregate(self) -> bool:
        """True if the predicate reads the partial match (evaluated per NFA edge, not in the decoder)."""
        return has_aggregates(self.expr)


# --- partial-match registers and measures (SPEC §3.4, §3.5) -----------------------------------

# The longest partial match a COUNT register holds when the pattern is unbounded and the
# user gives no --max-match-length.
DEFAULT_MAX_LENGTH = (1 << 16) - 1


@dataclass(frozen=True)
class RegisterPlan:
    """One register each NFA state keeps for its partial match.

    ``func`` is COUNT (the match length so far, no field), FIRST, LAST, MIN, MAX or SUM of ``field``;
    with a ``scale`` other than 1, of ``field * scale``: a DEFINE's ``MIN(price) * 1005`` is kept as
    ``MIN(price * 1005)``, the product taken from each tuple as it arrives, not from the register in
    the partial-match update (a FIRST or LAST by any constant; a MIN or MAX by a positive one, which
    keeps the order).
    """

    func: str
    field: str | None
    width: int
    signed: bool
    scale: int = 1

    @property
    def name(self) -> str:
        if self.field is None:
            return "count"
        scale = "" if self.scale == 1 else f"_x{self.scale}" if self.scale > 0 else f"_xm{-self.scale}"
        return f"{self.func.lower()}_{self.field}{scale}"

    @property
    def source(self) -> PExpr:
        """What the register aggregates, per tuple (not for COUNT)."""
        f = PField(self.field)
        return f if self.scale == 1 else PArith("*", f, PConst(self.scale))


@dataclass(frozen=True)
class MeasurePlan:
    """A MEASURES column: ``expr`` over the current tuple (the match's last) and the matched state's
    registers, emitted in ``width`` bits of the match record and decoded as ``kind``
    (``uint``/``int``/``bool``, or the ``enum``/``char`` field it reads, ``field`` naming it)."""

    name: str
    expr: PExpr
    width: int
    kind: str
    field: str | None = None


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
class DfaPlan:
    """The NFA determinised by the powerset construction (``cepc compile --automaton dfa``).

    DFA state d stands for the set ``sets[d]`` of NFA states (a bit set); state 0 is the empty set, a
    fresh partition, and is encoded as all zeros. From state d, a tuple whose predicates
    ``inputs[d][j]`` hold exactly for the bits j of ``c`` leads to ``table[d][c]``; ``reports[d][c]``
    if that tuple completes a match (with SKIP PAST LAST ROW the target is then state 0). The
    transitions read only the predicates of the NFA states d can reach, so ``table[d]`` has
    ``2 ** len(inputs[d])`` entries.
    """

    sets: tuple[int, ...]
    inputs: tuple[tuple[int, ...], ...]
    table: tuple[tuple[int, ...], ...]
    reports: tuple[tuple[bool, ...], ...]
    encoding: str = "onehot"  # onehot: one flip-flop per non-empty state; binary: ceil(log2 states) flip-flops

    @property
    def n_states(self) -> int:
        return len(self.sets)

    @property
    def width(self) -> int:
        """Bits of the encoded state."""
        if self.encoding == "onehot":
            return max(1, self.n_states - 1)
        return max(1, (self.n_states - 1).bit_length())

    def code(self, d: int) -> int:
        """The encoding of DFA state d: 0 for the empty set, else one bit (onehot) or d (binary)."""
        if self.encoding == "onehot":
            return 0 if d == 0 else 1 << (d - 1)
        return d

    def step(self, d: int, preds: int) -> tuple[int, bool]:
        """Software model of one clock on state ids: predicate bit set in, next state and match out."""
        c = sum(1 << j for j, i in enumerate(self.inputs[d]) if preds >> i & 1)
        return self.table[d][c], self.reports[d][c]


@dataclass(frozen=True)
class QueryPlan:
    name: str
    index: int
    key_fields: tuple[str, ...]
    skip: bool  # AFTER MATCH SKIP PAST LAST ROW (else CONTINUE)
    predicates: tuple[PredicatePlan, ...]
    nfa: NfaPlan
    pattern: str = ""  # the pattern's text, for headers and reports
    # partial matches (SPEC §3.4, §3.5); all empty for a query the bare state vector serves
    registers: tuple[RegisterPlan, ...] = ()  # per NFA state
    measures: tuple[MeasurePlan, ...] = ()
    within: int | None = None
    time_field: str | None = None  # WITHIN's time field
    latest: bool = False  # keep the latest-starting partial match (WITHIN without aggregates in DEFINE)
    order_register: int | None = None  # the register that orders candidates (count, or the start time)
    start_time_register: int | None = None  # FIRST(time field), for WITHIN
    max_length: int | None = None  # longest partial match the count register holds
    bounded: bool = True  # the pattern itself keeps every match within max_length
    dfa: DfaPlan | None = None  # --automaton dfa: the hardware holds this DFA's encoded state, not the NFA's vector

    @property
    def tracks_matches(self) -> bool:
        """True if each NFA state carries a partial match (registers), not just an active bit."""
        return bool(self.registers)

    @property
    def state_width(self) -> int:
        """Bits of partition state: the NFA vector with its registers, or the encoded DFA state."""
        if self.dfa is not None:
            return self.dfa.width
        return self.payload_width

    @property
    def vector_width(self) -> int:
        """The low bits of the partition state that are all zero exactly for a fresh partition."""
        return self.dfa.width if self.dfa is not None else self.nfa.n_states

    @property
    def register_width(self) -> int:
        """Bits of one partial match's registers, all of them (a match's, as :class:`PartialMatchCore`'s
        ``ends`` carries them)."""
        return sum(r.width for r in self.registers)

    def compared_by(self, r: int) -> int:
        """The register whose compare with the tuple decides MIN or MAX register r's update: r itself,
        or, where the same aggregate of the same field is also kept at another scale (finance2's
        ``MAX(price)`` beside ``MAX(price * 999)``), the narrowest of them. A scale is positive, which
        keeps the order, and every such register is taken from the same candidate's partial match: the
        tuple beats all of them or none, so one comparator decides them all."""
        reg = self.registers[r]
        if reg.func not in ("MIN", "MAX"):
            return r
        twins = [i for i, other in enumerate(self.registers) if (other.func, other.field) == (reg.func, reg.field)]
        return min(twins, key=lambda i: (self.registers[i].width, i))

    @property
    def shared_registers(self) -> tuple[int, ...]:
        """The registers a partition keeps once, not once per NFA state: every LAST. Matches are
        contiguous (SPEC §3.1): a partial match that does not take a tuple of its partition dies, so
        every one alive ends at the partition's tuple before, and each state's LAST(f) is that tuple's f."""
        return tuple(r for r, reg in enumerate(self.registers) if reg.func == "LAST")

    @property
    def state_register_width(self) -> int:
        """Bits of the registers each NFA state keeps of its own (all but :attr:`shared_registers`)."""
        shared = self.shared_registers
        return sum(reg.width for r, reg in enumerate(self.registers) if r not in shared)

    def register_offset(self, s: int, r: int) -> int:
        """Where NFA state s's register r starts in the partition state (:attr:`payload_width`)."""
        n, shared = self.nfa.n_states, self.shared_registers
        if r in shared:
            return n + n * self.state_register_width + sum(self.registers[i].width for i in shared if i < r)
        return n + s * self.state_register_width + sum(
            reg.width for i, reg in enumerate(self.registers[:r]) if i not in shared)

    @property
    def payload_width(self) -> int:
        """Bits of partition state: the state vector, then each state's registers, then the shared ones."""
        n, shared = self.nfa.n_states, self.shared_registers
        return n * (1 + self.state_register_width) + sum(self.registers[r].width for r in shared)

    @property
    def measures_width(self) -> int:
        return sum(m.width for m in self.measures)


@dataclass(frozen=True)
class DesignPlan:
    source: str  # query file name
    stream: str
    tuple: TuplePlan
    queries: tuple[QueryPlan, ...]

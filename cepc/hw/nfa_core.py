"""The NFA core: the wiring-algorithm graph made literal."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..plan import (
    NfaPlan,
    PAgg,
    PArith,
    PConst,
    PExpr,
    PField,
    PNeg,
    PredicatePlan,
    QueryPlan,
    children,
    has_aggregates,
)
from .ecp5 import RegisteredMult
from .expr import ExprBuilder, extended, ordered, select_sum, staged_sum
from .layouts import field as field_of
from .layouts import ident
from .replica import Replica

# The conditions' orderings (Conditions): no carry chain longer than this many bits (cepc.hw.expr.ordered).
# (finance5 on the ECP5-85F, whose path is a 64-bit compare's slices and their join: at 32, 0.93x at
# seed 1, a 32-bit chain; at 8, 0.95x on the mean of seeds 1-3, the join deeper, 1.03x the LUT4s; unsliced,
# Yosys' compares, which ABC maps into LUTs, 0.99x at seed 1 and finance0 0.93x; slices of even sizes, a
# 65-bit compare in four, 1.01x; each slice's <= a carry chain of its own, not an equality's LUTs, 1.09x
# the LUT4s: bench/results/synth-rounds.md)
COMPARE_CARRY = 16
SUM_SPLIT = 32  # TupleTerms.split: a wider sum is added across two stages (cepc.hw.expr.select_sum)
# A MIN's or MAX's compare is among the conditions (Conditions.beats) where a query has at most this many
# (a predecessor state's register each). Each is computed for every state the table may pick (each way's,
# each write's in flight). finance0's two took its update loop's compare out (`MAX(price)`, 32 logic
# levels from the table's `out_state` into its newest write): with the sweep's change, 118.8 → 129.0 MHz
# at seed 1; with the sliced orderings too 124.4, and 126.4 without the two (within one seed's placement
# noise: bench/results/synth-rounds.md). mshape's five made its routing far slower (42,624 of 97,032 arcs left
# after 43 minutes of routing, where its whole place and route had taken 23), and finance5's four gained
# nothing (104.5 → 105.2 MHz at seed 1, 18 % more LUT4s). With the three-cycle update the conditions
# are computed once, from the key's state picked, so every MIN's and MAX's compare is among them
# (``every_beat``): none is left in the update loop.
BEATS_MAX = 2


class OwnPredicate(wiring.Component):
    """One predicate evaluated for one NFA state (``--no-decoder``). Combinational."""

    def __init__(self, layout: data.StructLayout, predicate: PredicatePlan):
        self._predicate = predicate
        super().__init__({"tuple": In(layout), "holds": Out(1)})

    def elaborate(self, platform):
        m = Module()
        build = ExprBuilder(lambda name: field_of(self.tuple, name))
        m.d.comb += self.holds.eq(build.truth(self._predicate.expr))
        return m


class NfaCore(wiring.Component):
    """Next-state logic of one query's NFA.

    State s turns on when its predicate bit holds and it is start-activated or
    any of its predecessors is on (Woods et al. Fig. 4). Predicate bits come from the shared decoder
    (``preds``), or, given ``predicates`` (``--no-decoder``), each state evaluates its own predicate
    on ``tuple``. Combinational: ``next``
    and ``match`` follow ``state`` and ``preds`` in the same cycle, so a
    partitioner can keep one state vector per key and feed it through. With
    ``skip`` (AFTER MATCH SKIP PAST LAST ROW) a match clears ``next``.
    """

    def __init__(self, nfa: NfaPlan, n_preds: int, skip: bool, *,
                 predicates: tuple[PredicatePlan, ...] | None = None, tuple_layout: data.StructLayout | None = None):
        if nfa.n_states == 0:
            raise ValueError("an NFA needs at least one state")
        self._nfa = nfa
        self._skip = skip
        self._predicates = predicates
        ports = {
            "state": In(nfa.n_states), "preds": In(max(1, n_preds)),
            "next": Out(nfa.n_states), "match": Out(1),
        }
        if predicates is not None:  # --no-decoder: each state evaluates its own predicate on the tuple
            if tuple_layout is None:
                raise ValueError("per-transition predicates need the tuple layout")
            if any(p.aggregate for p in predicates):
                raise ValueError("per-transition predicates do not read partial matches")
            ports["tuple"] = In(tuple_layout)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        nfa = self._nfa
        raw = [None] * nfa.n_states
        for s in range(nfa.n_states):
            active = 1 if nfa.start[s] else 0
            for p in nfa.predecessors[s]:
                active = active | self.state[p]
            gate = self.preds[nfa.pred[s]] if nfa.pred[s] is not None else 1
            if self._predicates is not None and nfa.pred[s] is not None:
                # a comparator of its own per state (Woods et al. Fig. 12 without the decoder), in a
                # module of its own so that synthesis can keep it apart (keep_hierarchy)
                own = OwnPredicate(self.tuple.shape(), self._predicates[nfa.pred[s]])
                m.submodules[f"{nfa.labels[s]}_pred".replace(".", "_")] = own
                m.d.comb += own.tuple.eq(self.tuple)
                gate = own.holds
            raw[s] = active & gate if not isinstance(active, int) else (gate if active else 0)
        accepting = [raw[s] for s in range(nfa.n_states) if nfa.accept[s]]
        match = 0
        for a in accepting:
            match = match | a
        m.d.comb += self.match.eq(match)
        for s in range(nfa.n_states):
            value = raw[s] & ~self.match if self._skip else raw[s]
            m.d.comb += self.next[s].eq(value)
        return m


def packed_registers(q: QueryPlan, payload: Value, s: int) -> Value:
    """NFA state s's registers in a partition's payload (the state vector, then each state's
    registers, LSB-first, then those kept once: ``QueryPlan.shared_registers``), packed as
    :class:`PartialMatchCore`'s ``ends`` carries them."""
    return Cat(*(payload[slice(*register_bits(q, s, r))] for r in range(len(q.registers))))


def register_bits(q: QueryPlan, s: int, r: int) -> tuple[int, int]:
    """Where NFA state s's register r is in a partition's payload: bits ``[lo, hi)`` (a shared
    register's are the same for every state)."""
    lo = q.register_offset(s, r)
    return lo, lo + q.registers[r].width


def _registers(q: QueryPlan, payload: Value) -> list[list[Value]]:
    """Each NFA state's registers in a partition's payload, as values of their shapes."""
    out = []
    for s in range(q.nfa.n_states):
        row = []
        for r, reg in enumerate(q.registers):
            v = payload[slice(*register_bits(q, s, r))]
            row.append(v.as_signed() if reg.signed else v)
        out.append(row)
    return out


def window_start(q: QueryPlan) -> PExpr:
    """WITHIN's earliest start for a tuple: its time minus the window (a partial match that started
    before it is past the window: ``time - start <= within`` is ``start >= time - within``)."""
    return PArith("-", PField(q.time_field), PConst(q.within))


class TupleTerms:
    """The arithmetic a query's partial-match update takes of a tuple alone: in its DEFINE's
    aggregate predicates, each largest sub-expression that computes and reads no aggregate
    (finance5's ``price * 1000``, and ``time - 20000`` once :func:`~cepc.nfa.lower.isolate` has
    moved it across), what each scaled register aggregates (``price * 1005``: see
    :class:`~cepc.plan.RegisterPlan`), and WITHIN's :func:`window_start`. With the table
    partitioner the top computes them a stage
    before the tuple reaches the core and carries them beside it (``carried_terms``: ``terms``, and
    ``next_terms`` for the tuple behind), so no multiplier is in the cycle that updates a key's
    state; otherwise the core computes them from ``tuple``. The values are the same either way
    (the VHDL computes them in place)."""

    def __init__(self, query: QueryPlan, tuple_layout: data.StructLayout):
        found: list[PExpr] = []

        def walk(e: PExpr) -> None:
            if isinstance(e, (PArith, PNeg)) and not has_aggregates(e):
                if e not in found:
                    found.append(e)
                return
            for child in children(e):
                walk(child)

        for p in query.predicates:
            if p.aggregate:
                walk(p.expr)
        for reg in query.registers:
            if reg.scale != 1 and reg.source not in found:
                found.append(reg.source)
        if query.within is not None and window_start(query) not in found:
            found.append(window_start(query))
        self.exprs = tuple(found)
        probe = Signal(tuple_layout)
        build = ExprBuilder(lambda name: field_of(probe, name))
        self.shapes = tuple(build.value(e).shape() for e in self.exprs)
        self.width = sum(shape.width for shape in self.shapes)

    def of(self, tuple_: Value) -> Value:
        """The terms of a tuple, packed."""
        build = ExprBuilder(lambda name: field_of(tuple_, name))
        return Cat(*(build.value(e).as_unsigned() for e in self.exprs))

    def split(self, m: Module, tuple_: Value, tuple_next: Value, load: Value, name: str, at: int = SUM_SPLIT) -> Value:
        """The terms, packed, of the tuple in ``tuple_next``, a register that takes ``tuple_`` on the edges
        where ``load`` is high, each sum or difference of two of its fields or constants wider than ``at``
        bits added across the two stages (:func:`~cepc.hw.expr.select_sum`): its slices side by side from
        ``tuple_``, into registers beside ``tuple_next``, and picked after them by their carries. (finance5's
        ``time - 20000``, 65 bits, in one carry chain from the tuple's register into the terms' was its
        critical path on the UP5K once its conditions were cut: 28.4 ns, 60 logic levels; in two halves, a
        chain of 33 bits in each stage, 20.2 and 20.7 ns.) The rest of the terms is computed after it."""
        before = ExprBuilder(lambda n: field_of(tuple_, n))
        after = ExprBuilder(lambda n: field_of(tuple_next, n))
        out = []
        for k, (e, shape) in enumerate(zip(self.exprs, self.shapes)):
            width = shape.width
            simple = isinstance(e, PArith) and e.op in ("+", "-") and \
                all(isinstance(c, (PField, PConst)) for c in (e.left, e.right))
            if not simple or width <= at:
                out.append(after.value(e).as_unsigned())
                continue
            # x and y, or x and ~y (x - y is x + ~y + 1), to its width; a constant y as an int (select_sum:
            # its slices of all ones, ~20000's above its lowest, take x's slice itself, from tuple_next)
            x, right = extended(before.value(e.left), width), before.value(e.right)
            if isinstance(right, Const):
                y = ~right.value if e.op == "-" else right.value
            else:
                y = ~extended(right, width) if e.op == "-" else extended(right, width)
            out.append(select_sum(m, x, y, int(e.op == "-"), load, f"{name}_term{k}",
                                  x_next=extended(after.value(e.left), width)))
        return Cat(*out)

    def staged(self, m: Module, tuple_: Value, tuple_next: Value, en: Value, name: str,
               operands: tuple[Value, Value] | None = None, blocks: bool = False) -> Value:
        """The terms, packed, of the tuple in ``tuple_next``, a register that takes ``tuple_`` on the
        edges where ``en`` is high, with each product of the terms (``price * 1005``) computed before
        that register and registered as its partial products (its operands cut into slices of
        PRODUCT_SLICE bits: one multiplier block per pair of slices), summed after it. The rest of the
        terms is computed after it too; of nested products only the innermost are split. (finance5
        with the two-cycle update: its critical path was the tuple through a multiplier block and the
        carry chain that adds its partial products, into the register of the terms.)

        ``operands``: ``tuple_``'s own input and the enable it loads on. Each operand of a product that
        is not a constant is then taken from a copy of its own (:class:`~cepc.hw.replica.Replica`),
        loaded as ``tuple_`` is, which the placer puts beside the multiplier blocks: ``tuple_`` fans out
        across the die, and with the three-cycle update finance5's critical path was its route into a
        multiplier block (4.5 ns inside it, at 119.8 MHz).

        ``blocks`` (with ``operands``; ECP5): each pair of slices is a multiplier block whose own input
        registers take the operands and whose output register is the partial product
        (:class:`~cepc.hw.ecp5.RegisteredMult`), the same registers as the copies and the partial
        product's, so the multiplier is timed from register to register inside the block (finance5 at
        seed 1: 79 partial products' flip-flops missed 150 MHz, 3.9 ns in the block between routes of
        1.5 ns each way)."""
        before = ExprBuilder(lambda n: field_of(tuple_, n))
        known: dict[PExpr, Value] = {}

        def operand(expr: PExpr, tag: str) -> Value:
            v = before.value(expr)
            if operands is None or isinstance(v, Const):
                return v
            d, load = operands
            copy = m.submodules[f"{Replica.PREFIX}{name}_{tag}"] = Replica(len(v))
            m.d.comb += [copy.d.eq(ExprBuilder(lambda n: field_of(d, n)).value(expr).as_unsigned()), copy.en.eq(load)]
            return copy.q.as_signed() if v.shape().signed else copy.q

        blocks = blocks and operands is not None

        def part_of(a: Value, b: Value, tag: str) -> Value:
            """The partial product a × b, registered on ``en``'s edges (``blocks``: a multiplier block's
            output register, whose input registers take a and b, given a stage early, on the load's)."""
            if blocks:
                mult = m.submodules[f"{name}_{tag}_block"] = RegisteredMult(a.shape(), b.shape())
                m.d.comb += [mult.a.eq(a), mult.b.eq(b), mult.a_en.eq(operands[1]), mult.p_en.eq(en)]
                return mult.p
            part = Signal((a * b).shape(), name=f"{name}_{tag}", reset_less=True)
            with m.If(en):
                m.d.sync += part.eq(a * b)
            return part

        for k, product in enumerate(self.products):
            if blocks:  # (the operands a stage early, as the copies would take them)
                early = ExprBuilder(lambda n: field_of(operands[0], n))
                left, right = early.value(product.left), early.value(product.right)
            else:
                left, right = operand(product.left, f"product{k}_left"), operand(product.right, f"product{k}_right")
            parts = []
            for i, (a, a_at) in enumerate(_slices(left)):
                for j, (b, b_at) in enumerate(_slices(right)):
                    part = part_of(a, b, f"product{k}_part{i}{j}")
                    parts.append(part if a_at + b_at == 0 else part << (a_at + b_at))
            total = Signal((left * right).shape(), name=f"{name}_product{k}")
            m.d.comb += total.eq(sum(parts[1:], parts[0]))
            known[product] = total
        after = ExprBuilder(lambda n: field_of(tuple_next, n), known=known)
        return Cat(*(after.value(e).as_unsigned() for e in self.exprs))

    @property
    def products(self) -> list[PArith]:
        """The products among the terms that contain no other product."""
        found: list[PArith] = []

        def walk(e: PExpr) -> bool:  # whether ``e`` holds a product
            inner = [walk(child) for child in children(e)]
            if isinstance(e, PArith) and e.op == "*" and not any(inner):
                if e not in found:
                    found.append(e)
                return True
            return any(inner)
        for e in self.exprs:
            walk(e)
        return found

    def unpack(self, bits: Value) -> dict[PExpr, Value]:
        """The packed terms as the values of their expressions (for :class:`ExprBuilder`'s ``known``)."""
        out, lo = {}, 0
        for e, shape in zip(self.exprs, self.shapes):
            v = bits[lo:lo + shape.width]
            out[e] = v.as_signed() if shape.signed else v
            lo += shape.width
        return out


PRODUCT_SLICE = 18  # an ECP5 multiplier block's (MULT18X18D) operand width


def _slices(v: Value) -> list[tuple[Value, int]]:
    """``v`` as slices of at most PRODUCT_SLICE bits and where each begins: ``v`` is the sum of each
    slice shifted there (the top one signed if ``v`` is)."""
    if len(v) <= PRODUCT_SLICE:
        return [(v, 0)]
    out = []
    for lo in range(0, len(v), PRODUCT_SLICE):
        part = v[lo:lo + PRODUCT_SLICE]
        out.append((part.as_signed() if v.shape().signed and lo + PRODUCT_SLICE >= len(v) else part, lo))
    return out


class TupleInputs:
    """Some fields of a tuple (``names``) and, if carried beside it (``carried``), its
    :class:`TupleTerms`, packed: what part of the hardware reads of a tuple, so that it can read a copy
    of its own, registered from the stage before, rather than one register fanning out across the
    die. :meth:`for_conditions`: what a table's :class:`Conditions` read (with the two-cycle update,
    mshape's critical path was a 4.3 ns route from the tuple at stage 3 to an older write's
    comparators); :meth:`for_updates`: what a core's candidates read (then a 5.3 ns route from the
    core's tuple into a candidate's MIN/MAX compare)."""

    def __init__(self, query: QueryPlan, tuple_layout: data.StructLayout, names: list[str], carried: bool):
        self.layout, self.names, self.carried = tuple_layout, names, carried
        self.terms = TupleTerms(query, tuple_layout)
        probe = Signal(tuple_layout)
        self.widths = [len(field_of(probe, n)) for n in names]
        self.width = max(1, sum(self.widths) + (self.terms.width if carried else 0))

    @classmethod
    def for_conditions(cls, query: QueryPlan, tuple_layout: data.StructLayout, carried: bool, *,
                       every_beat: bool = False) -> TupleInputs:
        terms = TupleTerms(query, tuple_layout).exprs if carried else ()
        return cls(query, tuple_layout, Conditions(query, every_beat=every_beat).fields_read(terms), carried)

    @classmethod
    def for_updates(cls, query: QueryPlan, tuple_layout: data.StructLayout, carried: bool) -> TupleInputs:
        names = []
        for reg in query.registers:
            if reg.field is not None and reg.field not in names:
                names.append(reg.field)
        return cls(query, tuple_layout, names, carried)

    def pack(self, tuple_, terms: Value | None) -> Value:
        return Cat(*(field_of(tuple_, n).as_unsigned() for n in self.names), *([terms] if self.carried else []))

    def unpack(self, packed: Value) -> tuple[Value, dict[PExpr, Value] | None]:
        """The tuple (a view: its fields but ``names`` zero, never read) and its terms, from ``packed``."""
        parts, lo = {}, 0
        for n, width in zip(self.names, self.widths):
            parts[ident(n)] = packed[lo:lo + width]
            lo += width
        bits = Cat(*(parts.get(name, Const(0, Shape.cast(f.shape).width)) for name, f in self.layout))
        return data.View(self.layout, bits), self.terms.unpack(packed[lo:]) if self.carried else None


def _source(reg, field, known: dict[PExpr, Value] | None) -> Value:
    """What register ``reg`` takes of a tuple (its fields: ``field``; ``known``: its terms, if given):
    the field, or for a scaled register its product, which is of the tuple alone."""
    f = field(reg.field)
    if reg.scale != 1:
        f = known[reg.source] if known and reg.source in known else f * reg.scale
    return f


def _updated(q: QueryPlan, r: int, base: Value | None, field, known: dict[PExpr, Value] | None = None,
             beats: Value | None = None) -> Value:
    """Register r after a tuple (its fields: ``field``; ``known``: its terms, if given), from a partial
    match's value (None: a new one). For a MIN or MAX with a ``base``, ``beats`` is whether the tuple's
    value beats it (the core's compare, or a condition bit computed before: :class:`Conditions`)."""
    reg = q.registers[r]
    if reg.func == "COUNT":
        return Const(1) if base is None else base + 1
    f = _source(reg, field, known)
    if reg.func == "LAST" or base is None:
        return f
    if reg.func == "FIRST":
        return base
    if reg.func in ("MIN", "MAX"):
        assert beats is not None, "a MIN's or MAX's update is given its compare"
        return Mux(beats, f, base)
    return base + f  # SUM


def _beats(reg, value: Value, base: Value, chunk: int | None = None, inverse: Value | None = None,
           chained: bool = False, cut=None) -> Value:
    """Whether a MIN or MAX register ``reg`` holding ``base`` takes ``value`` instead (with ``chunk``,
    compared in slices, and given ``~value`` as ``inverse``, if at all, and ``chained``:
    :func:`~cepc.hw.expr.ordered`)."""
    return ordered("<" if reg.func == "MIN" else ">", value, base, chunk, (inverse, None), chained, cut)


def _better(q: QueryPlan, a: Value, b: Value, chunk: int | None = None, cut=None) -> Value:
    """Of two partial matches, by their order registers: a's is kept before b's (it started earlier;
    for WITHIN without aggregates in DEFINE, later: by count, the shorter)."""
    smaller_wins = q.latest and q.registers[q.order_register].func == "COUNT"
    return ordered("<" if smaller_wins else ">", a, b, chunk, cut=cut)


def _first_best(valid: list[Value], better) -> list[Value]:
    """One-hot: the valid candidate with the best key, the lowest index among equals.
    ``better(i, j)``: candidate i's key is better than candidate j's."""
    wins = []
    for i, v in enumerate(valid):
        w = v
        for j, vj in enumerate(valid):
            if j < i:
                w = w & (~vj | better(i, j))
            elif j > i:
                w = w & (~vj | ~better(j, i))
        wins.append(w)
    return wins


def pick(wins: list[Value], values: list[Value], width: int) -> Value:
    """The value whose bit of the one-hot ``wins`` is set (zero if none), ``width`` bits: an OR of gates."""
    out = Const(0, width)
    for w, v in zip(wins, values):
        out = out | Mux(w, v.as_unsigned(), 0)
    return out


def _any(bits: list[Value]) -> Value:
    return Cat(*bits).any() if bits else Const(0)


class Conditions:
    """The comparisons a partial-match update makes (SPEC §3.4, §3.5), as a bit vector: per edge
    p → s whose predicate reads the partial match, the predicate against p's registers (``holds``);
    with WITHIN, whether p's match started at most the window before the tuple (``extend``); with a
    COUNT bound the pattern does not keep, whether p's match is full (``full``); and per pair of
    predecessors of one state, whether the first's partial match is kept before the second's
    (``before``); per predecessor p and MIN or MAX register r, whether the tuple's value beats p's
    (``beats``: the compare of r's update). Those of at most :data:`BEATS_MAX` pairs, or with
    ``every_beat`` (the conditions computed once, not for each state the table may pick) every pair.

    They are what makes the update deep: comparators over the tuple and the registers. Given them,
    the rest (which candidate wins, its registers) is a few gates and a multiplexer (and a COUNT's
    or SUM's adder). So the table
    partitioner computes them a stage ahead, from each partial match it may pick (:meth:`of`), and
    the core computes them for the tuple behind (``next_cond``: :class:`PartialMatchCore` with
    ``lookahead``) from each candidate of its update, picked as the candidates are.
    """

    def __init__(self, query: QueryPlan, *, every_beat: bool = False):
        q, nfa = query, query.nfa
        self._q = q
        self.holds: dict[tuple[int, int], int] = {}
        self.extend: dict[int, int] = {}
        self.full: dict[int, int] = {}
        self.before: dict[tuple[int, int], int] = {}
        self.beats: dict[tuple[int, int], int] = {}
        self.count = next((i for i, r in enumerate(q.registers) if r.func == "COUNT"), None)
        n = 0
        for s in range(nfa.n_states):
            sources = nfa.predecessors[s]
            assert len(set(sources)) == len(sources), "a state's predecessors are distinct"
            idx = nfa.pred[s]
            if idx is not None and q.predicates[idx].aggregate:
                for p in sources:
                    self.holds[(s, p)] = n
                    n += 1
            for i in range(len(sources)):
                for j in range(i):
                    if (sources[i], sources[j]) not in self.before:
                        self.before[(sources[i], sources[j])] = n
                        n += 1
        sources = sorted({p for s in range(nfa.n_states) for p in nfa.predecessors[s]})
        # (a MIN or MAX kept at several scales is compared once: QueryPlan.compared_by)
        extremes = [r for r, reg in enumerate(q.registers) if reg.func in ("MIN", "MAX") and q.compared_by(r) == r]
        if len(sources) * len(extremes) > BEATS_MAX and not every_beat:  # (compared in the update instead)
            extremes = []
        for p in sources:
            if q.within is not None:
                self.extend[p] = n
                n += 1
            if self.count is not None and not q.bounded:
                self.full[p] = n
                n += 1
            for r in extremes:
                self.beats[(p, r)] = n
                n += 1
        self.width = n

    def fields_read(self, known: tuple[PExpr, ...] = ()) -> list[str]:
        """The tuple's fields the conditions read, given the values of ``known`` (its carried terms)."""
        q, names = self._q, []

        def field(name):
            if name not in names:
                names.append(name)
            return Const(0, 64)

        build = ExprBuilder(field, lambda r: Const(0, 64), {e: Const(0, 64) for e in known})
        for (s, _), _ in self.holds.items():
            build.truth(q.predicates[q.nfa.pred[s]].expr)
        if self.extend:
            build.value(window_start(q))
        for _, r in self.beats:
            reg = q.registers[r]
            if reg.source not in known:
                field(reg.field)
        return names

    def state_bits(self) -> list[tuple[int, int]]:
        """The bits of a partition state (a payload) the conditions read, as ``[lo, hi)`` ranges in
        order: the registers :meth:`of` compares (never the state vector)."""
        q, reads = self._q, set()

        def aggregates(e: PExpr):
            return [e.register] if isinstance(e, PAgg) else [r for c in children(e) for r in aggregates(c)]

        for s, p in self.holds:
            reads |= {(p, r) for r in aggregates(q.predicates[q.nfa.pred[s]].expr)}
        reads |= {(p, q.start_time_register) for p in self.extend}
        reads |= {(p, self.count) for p in self.full}
        reads |= {(c, q.order_register) for pair in self.before for c in pair}
        reads |= set(self.beats)
        return sorted({register_bits(q, p, r) for p, r in reads})  # (a shared register's once)

    def groups(self) -> list[list[int]]:
        """The conditions' bits in groups by where the update reads them: per state, the edges into it
        (``holds``, which its choice of candidate reads); per predecessor, WITHIN's, the count bound's and
        its MIN's and MAX's (``extend``, ``full``, ``beats``, which its candidates read); and the orders
        (``before``). A group computed apart from the others shares no comparator with them."""
        out: dict[tuple, list[int]] = {}
        for (s, _), i in self.holds.items():
            out.setdefault(("holds", s), []).append(i)
        for kind in (self.extend, self.full):
            for p, i in kind.items():
                out.setdefault(("of", p), []).append(i)
        for (p, _), i in self.beats.items():
            out.setdefault(("of", p), []).append(i)
        for i in self.before.values():
            out.setdefault(("before",), []).append(i)
        return list(out.values())

    def of(self, state: Value, tuple_: Value, known: dict[PExpr, Value] | None = None,
           only: list[int] | None = None, inverse: dict[str | PExpr, Value] | None = None,
           chained: bool = False, cut=None, chunk: int = COMPARE_CARRY) -> Value:
        """The conditions of the partition state ``state`` (a payload) for the tuple ``tuple_`` (and
        its :class:`TupleTerms`, if given: ``known``); with ``only``, those bits alone (the rest zero).
        ``inverse``: some of the tuple's fields (by name) and terms (by expression) inverted, registers
        of their own, which its orderings take; ``chained``: their slices' equalities from carry chains
        too (:func:`~cepc.hw.expr.ordered`). ``cut``: each compare registered (``cut(v)``, a register of
        ``v``) before what joins them, which reads the registers a cycle later: ``state`` and ``tuple_``
        then hold through both cycles (:func:`~cepc.hw.expr.ordered`). ``chunk``: the compares' slices,
        in bits."""
        inverted = {PField(k) if isinstance(k, str) else k: value for k, value in (inverse or {}).items()}
        q = self._q
        old = _registers(q, state)
        cut = cut or (lambda v: v)

        def field(name):
            return field_of(tuple_, name)

        def wanted(items):
            return [(k, i) for k, i in items.items() if only is None or i in only]

        bits: list[Value] = [Const(0)] * self.width
        builders = {}
        for (s, p), i in wanted(self.holds):
            if p not in builders:
                builders[p] = ExprBuilder(field, lambda r, p=p: old[p][r], known, chunk=chunk,
                                          inverse=inverted, chained=chained, cut=cut)
            bits[i] = builders[p].truth(q.predicates[q.nfa.pred[s]].expr)
        if wanted(self.extend):
            since = ExprBuilder(field, None, known).value(window_start(q))
        for p, i in wanted(self.extend):
            bits[i] = ordered(">=", old[p][q.start_time_register], since, chunk, cut=cut)
        for p, i in wanted(self.full):
            bits[i] = cut(old[p][self.count] == q.max_length)
        for (a, b), i in wanted(self.before):
            bits[i] = _better(q, old[a][q.order_register], old[b][q.order_register], chunk, cut)
        for (p, r), i in wanted(self.beats):
            reg = q.registers[r]
            bits[i] = _beats(reg, _source(reg, field, known), old[p][r], chunk,
                             inverted.get(PField(reg.field) if reg.scale == 1 else reg.source), chained, cut)
        return Cat(*bits) if bits else Const(0, 1)


class PartialMatchCore(wiring.Component):
    """Next partial matches of a query whose NFA states keep registers (SPEC §3.4, §3.5).

    ``state`` and ``next`` are the partition's payload: the state vector, then
    each state's registers (``QueryPlan.registers``, LSB-first). State q turns
    on when it may begin a match and its predicate holds, or when a
    predecessor p is on and q's predicate holds against p's registers — the
    DEFINE aggregates read the partial match without the current tuple — and,
    with WITHIN, p's match started at most ``within`` before this tuple. Of
    the candidates, the partial match that started earliest is kept (the
    longest, by its count register), or the latest for a WITHIN query without
    aggregates in DEFINE; candidates that tie started together and carry equal
    registers. q's registers are the winner's, updated with the tuple.

    ``match`` when an accepting state turns on; ``ends`` are then the earliest
    (latest) such state's registers, from which and the tuple :class:`Measures`
    computes the measures (the top puts a register between them), and ``ends_at``
    which accepting state that is (one-hot, in the order of the NFA's states): its
    registers are also in ``next``, where a caller that registers ``next`` anyway
    can take them after that register instead.
    ``overflow`` when a partial match of ``max_length`` tuples could have
    been extended: it is dropped instead, so results are exact while that
    never happens. Combinational, like :class:`NfaCore`.

    With ``lookahead`` (and some :class:`Conditions` to compute) the core takes the state's
    conditions for the tuple as ``cond``, computed before (by the table partitioner, a stage ahead,
    or by this core for the tuple before), and gives ``next_cond``: the conditions of ``next`` for
    ``next_tuple``, the tuple behind. For each candidate of each state they are computed beside the
    update, from the candidate's registers, and picked as the candidate is: so when back-to-back
    tuples share a key, no comparator follows the choice of the partial match, and the update loop
    (``next`` and ``next_cond`` registered, then read back) is a few gates and a multiplexer deep
    rather than a comparator, the choice, and a multiplexer.

    With ``given_cond`` alone the core takes ``cond`` and looks nowhere ahead: the table's two-cycle
    update computes the conditions of every state it may pick, its newest write's among them. With
    ``every_beat`` too (the three-cycle update: the table computes them once, from the state picked)
    every MIN's and MAX's compare is among them (:class:`Conditions`).
    """

    def __init__(self, query: QueryPlan, tuple_layout: data.StructLayout, *, lookahead: bool = False,
                 carried_terms: bool = False, given_cond: bool = False, update_inputs: TupleInputs | None = None,
                 every_beat: bool = False):
        if not query.tracks_matches:
            raise ValueError(f"query {query.name} keeps no partial-match registers; use NfaCore")
        self._q = query
        self._layout = tuple_layout
        self.conditions = Conditions(query, every_beat=every_beat and given_cond and not lookahead)
        self.lookahead = lookahead and self.conditions.width > 0
        self.given_cond = (lookahead or given_cond) and self.conditions.width > 0
        self.tuple_terms = TupleTerms(query, tuple_layout)
        ports = {
            "state": In(query.payload_width), "preds": In(max(1, len(query.predicates))),
            "tuple": In(tuple_layout),
            "next": Out(query.payload_width), "match": Out(1),
            "overflow": Out(1), "ends": Out(query.register_width),
            "ends_at": Out(max(1, sum(query.nfa.accept))),
        }
        # given ``carried_terms``, the tuple's terms (TupleTerms) come packed on ``terms`` (and
        # ``next_terms``), computed before; else the core computes them from the tuple
        self.carried_terms = carried_terms and self.tuple_terms.width > 0
        if self.carried_terms:
            ports["terms"] = In(self.tuple_terms.width)
        if self.given_cond:
            ports["cond"] = In(self.conditions.width)
        # ``update_inputs``: the candidates' updates read copies of the tuple's fields and terms
        # (TupleInputs.for_updates), one per NFA state they extend and one for new partial matches, on
        # ``inputs``
        self.update_inputs = update_inputs
        if update_inputs is not None:
            ports["inputs"] = In(update_inputs.width * (query.nfa.n_states + 1))
        if self.lookahead:
            width = self.conditions.width
            ports.update({"next_tuple": In(tuple_layout), "next_cond": Out(width)})
            if self.carried_terms:
                ports["next_terms"] = In(self.tuple_terms.width)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        q, nfa, conds = self._q, self._q.nfa, self.conditions
        n, regs = nfa.n_states, self._q.registers
        offsets = [sum(r.width for r in regs[:i]) for i in range(len(regs))]
        shared = q.shared_registers
        order = q.order_register

        def field(name: str) -> Value:
            return field_of(self.tuple, name)

        active = [self.state[s] for s in range(n)]
        old = _registers(q, self.state)
        known = self.tuple_terms.unpack(self.terms) if self.carried_terms else None
        if self.given_cond:
            cond = self.cond
        else:  # a signal, so that each use of a bit is a slice of it (see `wire` below)
            cond = Signal(max(conds.width, 1), name="cond")
            m.d.comb += cond.eq(conds.of(self.state, self.tuple, known))

        def holds(s: int, p: int | None) -> Value:
            """q = s's predicate, against p's partial match (None: no partial match yet)."""
            idx = nfa.pred[s]
            if idx is None:
                return Const(1)
            if not q.predicates[idx].aggregate:
                return self.preds[idx]
            assert p is not None, "the checker keeps aggregates off transitions that begin a match"
            return cond[conds.holds[(s, p)]]

        def wire(value: Value, name: str) -> Signal:
            """``value`` as a signal of its own. The choices below share their terms (each state's
            winners read every other candidate's conditions, the kept-before order reads the
            winners): as expressions, Amaranth walks each use as a tree of its own (its shapes and
            its conversion are not memoised), and a 25-state query took minutes to elaborate."""
            sig = Signal(len(value), name=ident(name))
            m.d.comb += sig.eq(value)
            return sig

        # a candidate's registers after the tuple, by the partial match it extends (None: a new one):
        # the same whichever state it enters
        candidates: dict[tuple[int | None, int], Value] = {}

        groups: dict[int, tuple] = {}

        def inputs_of(c: int | None) -> tuple:
            """What the candidates extending state c (None: new ones) read of the tuple."""
            ui = self.update_inputs
            if ui is None:
                return field, known
            g = 0 if c is None else c + 1
            if g not in groups:
                copy, terms = ui.unpack(self.inputs[g * ui.width:(g + 1) * ui.width])
                groups[g] = (lambda name, copy=copy: field_of(copy, name)), terms
            return groups[g]

        compares: dict[tuple[int, int], Value] = {}

        def beats(c: int, r: int) -> Value | None:
            """Whether the tuple beats the MIN or MAX register r of the partial match in state c (None:
            r is neither): one compare for each aggregate however many scales it is kept at, from the
            conditions where they have it (QueryPlan.compared_by)."""
            by = q.compared_by(r)
            if q.registers[by].func not in ("MIN", "MAX"):
                return None
            if (c, by) not in compares:
                if (c, by) in conds.beats:
                    compares[(c, by)] = cond[conds.beats[(c, by)]]
                else:
                    reg, (f, k) = q.registers[by], inputs_of(c)
                    compares[(c, by)] = wire(_beats(reg, _source(reg, f, k), old[c][by]),
                                             f"{nfa.labels[c]}_{reg.name}_beaten")
            return compares[(c, by)]

        def candidate(c: int | None, r: int) -> Value:
            if (c, r) not in candidates:
                candidates[(c, r)] = _updated(q, r, None if c is None else old[c][r], *inputs_of(c),
                                              beats=None if c is None else beats(c, r))
            return candidates[(c, r)]

        vector, new, overflow = [], [], []
        chosen_by: list[list[tuple[int | None, Value]]] = []  # per state: (candidate, picked)
        for s in range(n):
            fresh = holds(s, None) if nfa.start[s] else Const(0)
            sources = list(nfa.predecessors[s])
            valid = []
            for p in sources:
                extend = cond[conds.extend[p]] if p in conds.extend else Const(1)
                full = cond[conds.full[p]] if p in conds.full else Const(0)
                v = active[p] & holds(s, p) & extend
                overflow.append(v & full)
                valid.append(v & ~full)
            wins = _first_best(valid, lambda i, j, sources=sources: cond[conds.before[(sources[i], sources[j])]])
            took = _any(valid)
            fresh_wins = fresh & ~took if not q.latest else fresh
            if q.latest and valid:  # a new partial match is the latest of all
                wins = [w & ~fresh for w in wins]
            wins = [wire(w, f"{nfa.labels[s]}_from_{nfa.labels[p]}") for w, p in zip(wins, sources)]
            fresh_wins = wire(fresh_wins, f"{nfa.labels[s]}_fresh")
            on = Signal(name=ident(f"{nfa.labels[s]}_on"))
            m.d.comb += on.eq(fresh | took)
            vector.append(on)
            chosen_by.append(([(None, fresh_wins)] if nfa.start[s] else []) + list(zip(sources, wins)))
            regs_s = []
            for r, reg in enumerate(regs):
                if r in shared:  # (the tuple's own value: kept once, whichever state takes it)
                    regs_s.append(candidate(None, r))
                    continue
                value = Signal(Shape(reg.width, reg.signed), name=ident(f"{nfa.labels[s]}_{reg.name}"))
                if sources:
                    # every candidate's update is computed beside the predicates, and the winner's is
                    # picked: the adders and comparators of the update are off the path through the
                    # choice (pick, then update, would chain them). A state that is off keeps registers
                    # no one reads (each use of them is gated by its bit of the vector: the table's
                    # sweep leaves them as they were), so where no candidate wins they are don't-cares:
                    # the last source's candidate is taken unless another wins, and a state with one
                    # source that no partial match begins in takes its candidate with no choice at all.
                    # (Picked by an OR of gates, zero where none won, the choice was a synchronous reset
                    # of the state's registers: finance0's critical path at seed 2, `cond` through the
                    # accepting state's edge into the reset of its registers, a 3.2 ns route.)
                    chosen = candidate(sources[-1], r)
                    for w, p in zip(reversed(wins[:-1]), reversed(sources[:-1])):
                        chosen = Mux(w, candidate(p, r), chosen)
                    m.d.comb += value.eq(Mux(fresh_wins, candidate(None, r), chosen) if nfa.start[s] else chosen)
                else:  # only ever fresh (no edge into it): nothing to extend
                    m.d.comb += value.eq(candidate(None, r))
                regs_s.append(value)
            new.append(regs_s)

        # which of two new partial matches is kept before the other: by their candidates' order
        # registers, compared beside the choice and picked as the candidates are (the key of a
        # count is taken before its increment, which every candidate adds alike: a new match's is 0)
        def key(c: int | None) -> Value:
            if regs[order].func == "COUNT":
                return Const(0) if c is None else old[c][order]
            return candidate(c, order)

        kept_before: dict[tuple[int, int], Value] = {}

        def new_better(a: int, b: int) -> Value:
            if (a, b) not in kept_before:
                terms = [va & vb & _better(q, key(ca), key(cb))
                         for ca, va in chosen_by[a] for cb, vb in chosen_by[b] if ca != cb]
                kept_before[(a, b)] = wire(_any(terms), f"{nfa.labels[a]}_before_{nfa.labels[b]}")
            return kept_before[(a, b)]

        accepting = [s for s in range(n) if nfa.accept[s]]
        ends = _first_best([vector[s] for s in accepting], lambda i, j: new_better(accepting[i], accepting[j]))
        ends = [wire(e, f"{nfa.labels[s]}_ends") for e, s in zip(ends, accepting)]
        match = _any([vector[s] for s in accepting])
        m.d.comb += [self.match.eq(match), self.overflow.eq(_any(overflow))]
        if ends:
            m.d.comb += self.ends_at.eq(Cat(*ends))
        # the match's registers: the winning accepting state's (the measures follow from them and the tuple)
        for r, reg in enumerate(regs):
            m.d.comb += self.ends[offsets[r]:offsets[r] + reg.width].eq(
                candidate(None, r) if r in shared else pick(ends, [new[s][r] for s in accepting], reg.width))
        cleared = match if q.skip else Const(0)
        m.d.comb += self.next[:n].eq(Mux(cleared, 0, Cat(*vector)))
        for s in range(n):
            for r in range(len(regs)):
                if r not in shared or s == 0:  # (a shared register's bits are the same for every state)
                    m.d.comb += self.next[slice(*register_bits(q, s, r))].eq(new[s][r].as_unsigned())
        if self.lookahead:
            self._look_ahead(m, chosen_by, candidate, new_better)
        return m

    def _look_ahead(self, m: Module, chosen_by, candidate, new_better) -> None:
        """``next_cond``: the conditions of ``next`` for ``next_tuple``, each computed from every
        candidate of the state it reads and picked as that state's candidates are. Where a state
        is off, its conditions are don't-cares (every use of them is gated by the state's bit),
        and so they are wherever ``next`` is cleared by a match."""
        q, nfa, conds = self._q, self._q.nfa, self.conditions

        def later(name: str) -> Value:
            return field_of(self.next_tuple, name)

        def picked(p: int, condition) -> Value:
            return _any([v & condition(c) for c, v in chosen_by[p]])

        builders = {}
        known = self.tuple_terms.unpack(self.next_terms) if self.carried_terms else None

        def against(c: int | None) -> ExprBuilder:
            if c not in builders:
                builders[c] = ExprBuilder(later, lambda r, c=c: candidate(c, r), known, chunk=COMPARE_CARRY)
            return builders[c]

        bits: list[Value] = [Const(0)] * conds.width
        for (s, p), i in conds.holds.items():
            expr = q.predicates[nfa.pred[s]].expr
            bits[i] = picked(p, lambda c, expr=expr: against(c).truth(expr))
        if conds.extend:
            since = ExprBuilder(later, None, known).value(window_start(q))
        for p, i in conds.extend.items():
            bits[i] = picked(p, lambda c: ordered(">=", candidate(c, q.start_time_register), since, COMPARE_CARRY))
        for p, i in conds.full.items():
            bits[i] = picked(p, lambda c: candidate(c, conds.count) == q.max_length)
        for (a, b), i in conds.before.items():
            bits[i] = new_better(a, b)
        for (p, r), i in conds.beats.items():
            reg = q.registers[r]
            value = _source(reg, later, known)
            bits[i] = picked(p, lambda c, reg=reg, r=r, value=value: _beats(reg, value, candidate(c, r), COMPARE_CARRY))
        m.d.comb += self.next_cond.eq(Cat(*bits))


def computes(expr: PExpr) -> bool:
    """Whether a measure computes: more than a field, an aggregate or a constant."""
    return not isinstance(expr, (PField, PAgg, PConst))


# ``Measures(late=…)``: a sum or difference at least this wide is added across the cycles in slices
# (cepc.hw.expr.select_sum, staged_sum)
SPLIT_SUM = 24


class Measures(wiring.Component):
    """A match's MEASURES columns (``measures``, packed as the record carries them) from the
    registers of the partial match that ended (``ends``, as :class:`PartialMatchCore` gives them)
    and the match's last tuple. Combinational; with ``late`` (1, or 2), for inputs that hold through
    ``late`` + 1 cycles, each column that computes (:func:`computes`) is given in the last, from registers
    loaded at the end of the cycles before: a sum or difference of :data:`SPLIT_SUM` bits or more across
    them (``late`` 1, :func:`~cepc.hw.expr.select_sum`: its slices side by side, registered, and picked by
    their carries in the second; ``late`` 2, :func:`~cepc.hw.expr.staged_sum`: in three slices, one a
    cycle, each from the carry of the one below, registered; finance5's `time - FIRST(time)` is 65 bits,
    and in two halves, a carry chain of 33 bits in each cycle, each was 21-23 ns on the UP5K, its critical
    paths), any other whole (registered, loaded every cycle).

    ``inverse`` (with ``late``): the tuple is also given inverted (``inverse_tuple``, a register of its
    own: its fields that no measure reads are left out by synthesis), and a difference of a field and
    something else is computed as ``~(~x + y)``, its carry chains taking ``~x`` and ``y`` from registers
    as they are and the sum's inverse from their logic cells: on the iCE40 the inverter in front of a
    chain is a logic cell and a route (finance5's `took` on the UP5K, from the match's `FIRST(time)`:
    27.9 ns, its critical path)."""

    def __init__(self, query: QueryPlan, tuple_layout: data.StructLayout, *, late: int = 0,
                 inverse: bool = False):
        if late not in (0, 1, 2):
            raise ValueError(f"a measure is computed across 1 to 3 cycles (late 0 to 2), not late {late}")
        self._q = query
        self._late = int(late)
        self._inverse = inverse and late
        super().__init__({
            "ends": In(query.register_width), "tuple": In(tuple_layout),
            "measures": Out(max(1, query.measures_width)),
        } | ({"inverse_tuple": In(tuple_layout)} if self._inverse else {}))

    def elaborate(self, platform):
        m = Module()
        q, regs = self._q, self._q.registers
        offsets = [sum(r.width for r in regs[:i]) for i in range(len(regs))]
        values = []
        for r, reg in enumerate(regs):
            v = self.ends[offsets[r]:offsets[r] + reg.width]
            values.append(v.as_signed() if reg.signed else v)
        build = ExprBuilder(lambda name: field_of(self.tuple, name), lambda r: values[r])
        inverse = (lambda name: field_of(self.inverse_tuple, name)) if self._inverse else None
        columns = []
        for meas in q.measures:
            column = Signal(meas.width, name=ident(f"measure_{meas.name}"))  # .eq sign-extends a signed value
            if self._late and computes(meas.expr):
                m.d.comb += column.eq(self._later(m, build, meas, self._late, inverse))
            else:
                m.d.comb += column.eq(build.truth(meas.expr) if meas.kind == "bool" else build.value(meas.expr))
            columns.append(column)
        if columns:
            m.d.comb += self.measures.eq(Cat(*columns))
        return m

    @staticmethod
    def _later(m: Module, build: ExprBuilder, meas, late: int, inverse=None) -> Value:
        """Measure ``meas`` ``late`` cycles after its inputs, which hold through them (``inverse``: the
        inverted tuple's fields by name, if given)."""
        e, w, name = meas.expr, meas.width, ident(f"late_{meas.name}")
        if meas.kind == "bool" or not (isinstance(e, PArith) and e.op in ("+", "-") and w >= SPLIT_SUM):
            # (one register, loaded every cycle: right from the cycle after the inputs', as they hold)
            whole = Signal(w, name=name, reset_less=True)
            m.d.sync += whole.eq(build.truth(e) if meas.kind == "bool" else build.value(e))
            return whole

        # (each term modulo 2**w: the column's bits of the sum)
        x, y = extended(build.value(e.left), w), extended(build.value(e.right), w)
        carry = Const(e.op == "-", 1)  # (x - y is x + ~y + 1)
        flip = e.op == "-" and inverse is not None and isinstance(e.left, PField)
        if flip:  # x - y is ~(~x + y): ~x from the inverted tuple, extended as ~x's extension is
            nx = inverse(e.left.name)
            top = nx[-1] if nx.shape().signed else Const(1, 1)
            x, carry = Cat(nx, top.replicate(w - len(nx))) if w > len(nx) else nx.as_unsigned()[:w], Const(0, 1)
        elif e.op == "-":
            y = ~y
        total = select_sum(m, x, y, carry, Const(1), name) if late == 1 else staged_sum(m, x, y, carry, name, late + 1)
        return ~total if flip else total  # (flip: the sum's inverse, in the LUTs that read its slices)


class DfaCore(wiring.Component):
    """Next-state logic of one query's DFA (``--automaton dfa``), interchangeable with :class:`NfaCore`.

    ``state`` and ``next`` hold the encoded DFA state (:class:`~cepc.plan.DfaPlan`): all zeros is
    the empty set, a fresh partition, as for the NFA's vector. One-hot: state d ≥ 1 is bit d − 1,
    and each bit turns on when an active state's transition into it is taken (Woods et al. Fig. 3,
    right). Binary: a case over the state code, then over the predicates that state reads; an
    unused code goes to the empty state. Combinational: ``next`` and ``match`` follow ``state`` and
    ``preds`` in the same cycle.
    """

    def __init__(self, query: QueryPlan, n_preds: int):
        if query.dfa is None:
            raise ValueError(f"query {query.name} has no DFA; use NfaCore")
        self._dfa = query.dfa
        super().__init__({
            "state": In(query.dfa.width), "preds": In(max(1, n_preds)),
            "next": Out(query.dfa.width), "match": Out(1),
        })

    def _combo(self, d: int, c: int) -> Value:
        """True when the predicates state d reads hold exactly as the bits of c say."""
        ins = self._dfa.inputs[d]
        if not ins:
            return Const(1)
        return Cat(*(self.preds[i] for i in ins)) == c

    def elaborate(self, platform):
        m = Module()
        dfa = self._dfa
        if dfa.encoding == "binary":
            with m.Switch(self.state):
                for d in range(dfa.n_states):
                    with m.Case(d):
                        ins = dfa.inputs[d]
                        if not ins:
                            m.d.comb += [self.next.eq(dfa.code(dfa.table[d][0])), self.match.eq(dfa.reports[d][0])]
                            continue
                        with m.Switch(Cat(*(self.preds[i] for i in ins))):
                            for c, t in enumerate(dfa.table[d]):
                                with m.Case(c):
                                    m.d.comb += [self.next.eq(dfa.code(t)), self.match.eq(dfa.reports[d][c])]
            return m
        # one-hot: on[d] is "the current state is d"; state 0 (the empty set) is all zeros
        on = [~self.state.any()] + [self.state[d - 1] for d in range(1, dfa.n_states)]
        into: list[list[Value]] = [[] for _ in range(dfa.n_states)]
        match: list[Value] = []
        for d in range(dfa.n_states):
            # group the combinations by target: one term per (state, target) pair
            by_target: dict[int, list[int]] = {}
            for c, t in enumerate(dfa.table[d]):
                by_target.setdefault(t, []).append(c)
            for t, combos in by_target.items():
                if t == 0:
                    continue
                if len(combos) == len(dfa.table[d]):
                    into[t].append(on[d])
                else:
                    into[t].append(on[d] & Cat(*(self._combo(d, c) for c in combos)).any())
            hits = [c for c, r in enumerate(dfa.reports[d]) if r]
            if len(hits) == len(dfa.reports[d]):
                match.append(on[d])
            elif hits:
                match.append(on[d] & Cat(*(self._combo(d, c) for c in hits)).any())
        for t in range(1, dfa.n_states):
            m.d.comb += self.next[t - 1].eq(Cat(*into[t]).any() if into[t] else 0)
        m.d.comb += self.match.eq(Cat(*match).any() if match else 0)
        return m

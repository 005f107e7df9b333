"""The NFA core: the wiring-algorithm graph made literal."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..plan import NfaPlan, PredicatePlan, QueryPlan
from .expr import ExprBuilder
from .layouts import field as field_of
from .layouts import ident


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
    computes the measures (the top puts a register between them).
    ``overflow`` when a partial match of ``max_length`` tuples could have
    been extended: it is dropped instead, so results are exact while that
    never happens. Combinational, like :class:`NfaCore`.
    """

    def __init__(self, query: QueryPlan, tuple_layout: data.StructLayout):
        if not query.tracks_matches:
            raise ValueError(f"query {query.name} keeps no partial-match registers; use NfaCore")
        self._q = query
        self._layout = tuple_layout
        super().__init__({
            "state": In(query.payload_width), "preds": In(max(1, len(query.predicates))),
            "tuple": In(tuple_layout),
            "next": Out(query.payload_width), "match": Out(1),
            "overflow": Out(1), "ends": Out(query.register_width),
        })

    def elaborate(self, platform):
        m = Module()
        q, nfa = self._q, self._q.nfa
        n, regs = nfa.n_states, self._q.registers
        offsets = [sum(r.width for r in regs[:i]) for i in range(len(regs))]
        per_state = q.register_width

        def register(payload, s: int, r: int) -> Value:
            lo = n + s * per_state + offsets[r]
            v = payload[lo:lo + regs[r].width]
            return v.as_signed() if regs[r].signed else v

        def field(name: str) -> Value:
            return field_of(self.tuple, name)

        active = [self.state[s] for s in range(n)]
        old = [[register(self.state, s, r) for r in range(len(regs))] for s in range(n)]

        # what every predecessor's partial match allows: WITHIN, and room to grow
        extend = [Const(1) for _ in range(n)]
        full = [Const(0) for _ in range(n)]
        if q.within is not None:
            now = field(q.time_field)
            extend = [now - old[p][q.start_time_register] <= q.within for p in range(n)]
        count = next((i for i, r in enumerate(regs) if r.func == "COUNT"), None)
        if count is not None and not q.bounded:
            full = [old[p][count] == q.max_length for p in range(n)]

        builders = {}  # per predecessor: DEFINE aggregates over its registers

        def holds(s: int, p: int | None) -> Value:
            """q = s's predicate, against p's partial match (None: no partial match yet)."""
            idx = nfa.pred[s]
            if idx is None:
                return Const(1)
            pred = q.predicates[idx]
            if not pred.aggregate:
                return self.preds[idx]
            assert p is not None, "the checker keeps aggregates off transitions that begin a match"
            if p not in builders:
                builders[p] = ExprBuilder(field, lambda r, p=p: old[p][r])
            return builders[p].truth(pred.expr)

        order = q.order_register
        smaller_wins = q.latest and regs[order].func == "COUNT"  # latest start: the shortest

        def better(a: Value, b: Value) -> Value:
            return a < b if smaller_wins else a > b

        def first_best(valid: list[Value], keys: list[Value]) -> list[Value]:
            """One-hot: the valid candidate with the best key, the lowest index among equals."""
            wins = []
            for i, (v, k) in enumerate(zip(valid, keys)):
                w = v
                for j, (vj, kj) in enumerate(zip(valid, keys)):
                    if j < i:
                        w = w & (~vj | better(k, kj))
                    elif j > i:
                        w = w & (~vj | ~better(kj, k))
                wins.append(w)
            return wins

        def pick(wins: list[Value], values: list[Value], width: int) -> Value:
            out = Const(0, width)
            for w, v in zip(wins, values):
                out = out | Mux(w, v.as_unsigned(), 0)
            return out

        def updated(r: int, base: Value | None) -> Value:
            """Register r after the tuple, from the chosen partial match (None: a new one)."""
            reg = regs[r]
            if reg.func == "COUNT":
                return Const(1) if base is None else base + 1
            f = field(reg.field)
            if reg.func == "LAST" or base is None:
                return f
            if reg.func == "FIRST":
                return base
            if reg.func == "MIN":
                return Mux(f < base, f, base)
            if reg.func == "MAX":
                return Mux(f > base, f, base)
            return base + f  # SUM

        vector, new, overflow = [], [], []
        for s in range(n):
            fresh = Const(1) if nfa.start[s] else Const(0)
            if nfa.start[s]:
                fresh = holds(s, None)
            sources = list(nfa.predecessors[s])
            valid = []
            for p in sources:
                v = active[p] & holds(s, p) & extend[p]
                overflow.append(v & full[p])
                valid.append(v & ~full[p])
            wins = first_best(valid, [old[p][order] for p in sources])
            took = Cat(*valid).any() if valid else Const(0)
            fresh_wins = fresh & ~took if not q.latest else fresh
            if q.latest and valid:  # a new partial match is the latest of all
                wins = [w & ~fresh for w in wins]
            on = Signal(name=ident(f"{nfa.labels[s]}_on"))
            m.d.comb += on.eq(fresh | took)
            vector.append(on)
            regs_s = []
            for r, reg in enumerate(regs):
                value = Signal(Shape(reg.width, reg.signed), name=ident(f"{nfa.labels[s]}_{reg.name}"))
                if sources:
                    # every candidate's update is computed beside the predicates, and the winner's is
                    # picked: the adders and comparators of the update are off the path through the
                    # choice (pick, then update, would chain them)
                    chosen = pick(wins, [updated(r, old[p][r]) for p in sources], reg.width)[:reg.width]
                    extended = chosen.as_signed() if reg.signed else chosen
                    m.d.comb += value.eq(Mux(fresh_wins, updated(r, None), extended))
                else:  # only ever fresh (no edge into it): nothing to extend
                    m.d.comb += value.eq(updated(r, None))
                regs_s.append(value)
            new.append(regs_s)

        accepting = [s for s in range(n) if nfa.accept[s]]
        ends = first_best([vector[s] for s in accepting], [new[s][order] for s in accepting])
        match = Cat(*(vector[s] for s in accepting)).any() if accepting else Const(0)
        m.d.comb += [self.match.eq(match), self.overflow.eq(Cat(*overflow).any() if overflow else 0)]
        # the match's registers: the winning accepting state's (the measures follow from them and the tuple)
        for r, reg in enumerate(regs):
            m.d.comb += self.ends[offsets[r]:offsets[r] + reg.width].eq(
                pick(ends, [new[s][r] for s in accepting], reg.width))
        cleared = match if q.skip else Const(0)
        m.d.comb += self.next[:n].eq(Mux(cleared, 0, Cat(*vector)))
        for s in range(n):
            m.d.comb += self.next[n + s * per_state:n + (s + 1) * per_state].eq(
                Cat(*(v.as_unsigned() for v in new[s])))
        return m


class Measures(wiring.Component):
    """A match's MEASURES columns (``measures``, packed as the record carries them) from the
    registers of the partial match that ended (``ends``, as :class:`PartialMatchCore` gives them)
    and the match's last tuple. Combinational."""

    def __init__(self, query: QueryPlan, tuple_layout: data.StructLayout):
        self._q = query
        super().__init__({
            "ends": In(query.register_width), "tuple": In(tuple_layout),
            "measures": Out(max(1, query.measures_width)),
        })

    def elaborate(self, platform):
        m = Module()
        q, regs = self._q, self._q.registers
        offsets = [sum(r.width for r in regs[:i]) for i in range(len(regs))]
        values = []
        for r, reg in enumerate(regs):
            v = self.ends[offsets[r]:offsets[r] + reg.width]
            values.append(v.as_signed() if reg.signed else v)
        build = ExprBuilder(lambda name: field_of(self.tuple, name), lambda r: values[r])
        columns = []
        for meas in q.measures:
            column = Signal(meas.width, name=ident(f"measure_{meas.name}"))  # .eq sign-extends a signed value
            m.d.comb += column.eq(build.truth(meas.expr) if meas.kind == "bool" else build.value(meas.expr))
            columns.append(column)
        if columns:
            m.d.comb += self.measures.eq(Cat(*columns))
        return m


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

"""The NFA core: the wiring-algorithm graph made literal."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..plan import NfaPlan, QueryPlan
from .expr import ExprBuilder


class NfaCore(wiring.Component):
    """Next-state logic of one query's NFA.

    State s turns on when its predicate bit holds and it is start-activated or
    any of its predecessors is on (Woods et al. Fig. 4). Combinational: ``next``
    and ``match`` follow ``state`` and ``preds`` in the same cycle, so a
    partitioner can keep one state vector per key and feed it through. With
    ``skip`` (AFTER MATCH SKIP PAST LAST ROW) a match clears ``next``.
    """

    def __init__(self, nfa: NfaPlan, n_preds: int, skip: bool):
        if nfa.n_states == 0:
            raise ValueError("an NFA needs at least one state")
        self._nfa = nfa
        self._skip = skip
        super().__init__({
            "state": In(nfa.n_states), "preds": In(max(1, n_preds)),
            "next": Out(nfa.n_states), "match": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        nfa = self._nfa
        raw = [None] * nfa.n_states
        for s in range(nfa.n_states):
            active = 1 if nfa.start[s] else 0
            for p in nfa.predecessors[s]:
                active = active | self.state[p]
            gate = self.preds[nfa.pred[s]] if nfa.pred[s] is not None else 1
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

    ``match`` when an accepting state turns on; ``measures`` are then computed
    from the earliest (latest) such state's registers and the tuple.
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
            "measures": Out(max(1, query.measures_width)), "overflow": Out(1),
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
            return Value.cast(getattr(self.tuple, name))

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
            on = Signal(name=f"{nfa.labels[s]}_on".replace(".", "_"))
            m.d.comb += on.eq(fresh | took)
            vector.append(on)
            regs_s = []
            for r, reg in enumerate(regs):
                chosen = pick(wins, [old[p][r] for p in sources], reg.width)
                base = chosen.as_signed() if reg.signed else chosen
                value = Signal(Shape(reg.width, reg.signed), name=f"{nfa.labels[s]}_{reg.name}".replace(".", "_"))
                if sources:
                    m.d.comb += value.eq(Mux(fresh_wins, updated(r, None), updated(r, base)))
                else:  # only ever fresh (no edge into it): nothing to extend
                    m.d.comb += value.eq(updated(r, None))
                regs_s.append(value)
            new.append(regs_s)

        accepting = [s for s in range(n) if nfa.accept[s]]
        ends = first_best([vector[s] for s in accepting], [new[s][order] for s in accepting])
        match = Cat(*(vector[s] for s in accepting)).any() if accepting else Const(0)
        m.d.comb += [self.match.eq(match), self.overflow.eq(Cat(*overflow).any() if overflow else 0)]
        # the measures of the match: the winning accepting state's registers, and the tuple
        measure_regs = [Signal(Shape(reg.width, reg.signed), name=f"match_{reg.name}") for reg in regs]
        for r, reg in enumerate(regs):
            chosen = pick(ends, [new[s][r] for s in accepting], reg.width)
            m.d.comb += measure_regs[r].eq(chosen.as_signed() if reg.signed else chosen)
        build = ExprBuilder(field, lambda r: measure_regs[r])
        columns = []
        for meas in q.measures:
            column = Signal(meas.width, name=f"measure_{meas.name}")  # .eq sign-extends a signed value
            m.d.comb += column.eq(build.truth(meas.expr) if meas.kind == "bool" else build.value(meas.expr))
            columns.append(column)
        if columns:
            m.d.comb += self.measures.eq(Cat(*columns))
        cleared = match if q.skip else Const(0)
        m.d.comb += self.next[:n].eq(Mux(cleared, 0, Cat(*vector)))
        for s in range(n):
            m.d.comb += self.next[n + s * per_state:n + (s + 1) * per_state].eq(
                Cat(*(v.as_unsigned() for v in new[s])))
        return m

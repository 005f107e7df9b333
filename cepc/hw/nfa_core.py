"""The NFA core: the wiring-algorithm graph made literal."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..plan import NfaPlan


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

"""The pipeline stream partitioner of Woods et al. (VLDB 2010, §6).

A chain of ``depth`` elements, each free or holding (key, state vector). A
key injected at the head travels one element per cycle; on its way it drags
the element holding its key — or, until it meets that one, the first free
element — toward the tail by swapping neighbours, so that when it reaches the
tail the last element is its own, a free one, or (table full) someone else's.
Only neighbours are wired together, so depth costs area, not clock speed.

Two changes to the paper's algorithm (Fig. 7):

* the element holding the key has priority over a carried free element: a
  free element is not swapped past the key's own element, which would
  otherwise be left behind and duplicated;
* an element is freed whenever its state vector becomes all zero (after a
  SKIP PAST LAST ROW match, or when every partial match died), and a tuple
  whose fresh state would be zero needs no element at all. A zero vector is
  exactly a fresh partition, so this is free capacity, not an approximation.

Keys are injected every other cycle (so two swaps never touch one element);
the whole chain advances only when ``en`` is high (global backpressure).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


def _signature(key_width: int, state_width: int) -> dict:
    return {
        "en": In(1),
        "inject": In(1), "key": In(key_width), "slot": Out(1),
        "out_valid": Out(1), "out_key": Out(key_width), "out_state": Out(state_width),
        "out_hit": Out(1), "out_free": Out(1),
        "next_state": In(state_width),
        "occupied": Out(range(1 << 20)),
    }


class PipelinePartitioner(wiring.Component):
    """Per-key state for ``depth`` concurrent partitions.

    Protocol: when ``en`` and ``slot`` are high the caller may ``inject`` a
    ``key``. Exactly ``depth`` enabled cycles later the key appears on
    ``out_key`` with ``out_valid``; ``out_state`` is its stored vector (zero if
    it has none), ``out_hit`` says it has an element, ``out_free`` that the tail
    element is free. In that cycle the caller drives ``next_state`` and the
    partitioner stores it (allocating the free element when needed). When
    neither hit nor free and ``next_state`` is non-zero, the tuple cannot be
    placed: the caller counts it as dropped. Throughput: one key per two cycles.
    """

    def __init__(self, depth: int, key_width: int, state_width: int):
        if depth < 1:
            raise ValueError(f"the partitioner needs at least one element, not {depth}")
        self._depth, self._kw, self._sw = depth, key_width, state_width
        super().__init__(_signature(key_width, state_width))

    def elaborate(self, platform):
        m = Module()
        n, kw, sw = self._depth, self._kw, self._sw
        assoc = [Signal(name=f"e{i}_used") for i in range(n)]
        ekey = [Signal(kw, name=f"e{i}_key") for i in range(n)]
        estate = [Signal(sw, name=f"e{i}_state") for i in range(n)]
        tv = [Signal(name=f"t{i}_valid") for i in range(n)]
        tk = [Signal(kw, name=f"t{i}_key") for i in range(n)]
        slot = Signal(init=1)
        m.d.comb += self.slot.eq(slot)

        # which stages swap their element with the next one
        swap = []
        for i in range(n - 1):
            here_x = assoc[i] & (ekey[i] == tk[i])
            next_x = assoc[i + 1] & (ekey[i + 1] == tk[i])
            s = Signal(name=f"swap{i}")
            m.d.comb += s.eq(tv[i] & (here_x | (~assoc[i] & ~next_x)))
            swap.append(s)

        last = n - 1
        hit = Signal()
        m.d.comb += [
            hit.eq(assoc[last] & (ekey[last] == tk[last])),
            self.out_valid.eq(tv[last]),
            self.out_key.eq(tk[last]),
            self.out_hit.eq(hit),
            self.out_free.eq(~assoc[last]),
            self.out_state.eq(Mux(hit, estate[last], 0)),
        ]
        count = Signal(range(n + 1))
        m.d.comb += self.occupied.eq(count)

        with m.If(self.en):
            m.d.sync += [slot.eq(~slot), tv[0].eq(self.inject & slot), tk[0].eq(self.key)]
            for i in range(n - 1):
                m.d.sync += [tv[i + 1].eq(tv[i]), tk[i + 1].eq(tk[i])]
            for j in range(n):
                def take(src):
                    m.d.sync += [assoc[j].eq(assoc[src]), ekey[j].eq(ekey[src]), estate[j].eq(estate[src])]

                if j >= 1 and j < n - 1:
                    with m.If(swap[j - 1]):
                        take(j - 1)
                    with m.Elif(swap[j]):
                        take(j + 1)
                elif j >= 1:  # the tail
                    with m.If(swap[j - 1]):
                        take(j - 1)
                elif j < n - 1:  # the head
                    with m.If(swap[j]):
                        take(j + 1)
            # the tail stores the token's new state
            keep = self.next_state.any()
            with m.If(tv[last]):
                with m.If(hit):
                    m.d.sync += [estate[last].eq(self.next_state), assoc[last].eq(keep)]
                    with m.If(~keep):
                        m.d.sync += count.eq(count - 1)
                with m.Elif(~assoc[last] & keep):
                    m.d.sync += [assoc[last].eq(1), ekey[last].eq(tk[last]), estate[last].eq(self.next_state)]
                    m.d.sync += count.eq(count + 1)
        return m


class SinglePartition(wiring.Component):
    """The partitioner of a query without PARTITION BY: one state vector.

    Same protocol and latency (``depth`` enabled cycles) as
    :class:`PipelinePartitioner`, so queries with and without keys share one
    pipeline; ``out_hit`` is always high, and every cycle is a slot.
    """

    def __init__(self, depth: int, state_width: int):
        self._depth, self._sw = depth, state_width
        super().__init__(_signature(1, state_width))

    def elaborate(self, platform):
        m = Module()
        tv = [Signal(name=f"t{i}_valid") for i in range(self._depth)]
        state = Signal(self._sw)
        m.d.comb += [
            self.slot.eq(1), self.out_valid.eq(tv[-1]), self.out_key.eq(0), self.out_hit.eq(1),
            self.out_free.eq(0), self.out_state.eq(state), self.occupied.eq(state.any()),
        ]
        with m.If(self.en):
            m.d.sync += tv[0].eq(self.inject)
            for i in range(self._depth - 1):
                m.d.sync += tv[i + 1].eq(tv[i])
            with m.If(tv[-1]):
                m.d.sync += state.eq(self.next_state)
        return m

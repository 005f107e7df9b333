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

Opt-in eviction (Woods §6.3): with ``evict_after`` each element carries a
4-bit timer, set at allocation and counted down by a global tick; an element
whose timer ran out is stale and counts as free, except that a key still drags
its own stale element to the tail (so it is found, not duplicated). A stale
element reaching the tail is reclaimed — reused or freed — and pulses
``evicted`` once. This loses partial matches older than ``evict_after``
cycles, so it is exact only for patterns that cannot span that long.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

TIMER_MAX = 15  # Woods' 4-bit timer: an element lives 15 ticks at most


def _signature(key_width: int, state_width: int, expiry_width: int = 1) -> dict:
    return {
        "now": In(expiry_width), "next_expiry": In(expiry_width),
        "en": In(1),
        "inject": In(1), "key": In(key_width), "slot": Out(1),
        "out_valid": Out(1), "out_key": Out(key_width), "out_state": Out(state_width),
        "out_hit": Out(1), "out_free": Out(1),
        "next_state": In(state_width),
        "occupied": Out(range(1 << 20)),
        "evicted": Out(1),
    }


def tick_period(evict_after: int) -> int:
    """Enabled cycles per timer tick so that an element lives at most ``evict_after`` cycles."""
    return max(1, evict_after // TIMER_MAX)


class PipelinePartitioner(wiring.Component):
    """Per-key state for ``depth`` concurrent partitions.

    Protocol: when ``en`` and ``slot`` are high the caller may ``inject`` a
    ``key``. Exactly ``depth`` enabled cycles later the key appears on
    ``out_key`` with ``out_valid``; ``out_state`` is its stored state (its vector
    zero if it has none, and then the rest don't-cares), ``out_hit`` says it has
    an element, ``out_free`` that the tail element is free. In that cycle the
    caller drives ``next_state`` and the partitioner stores it (allocating the
    free element when needed). When neither hit nor free and ``next_state`` is
    non-zero, the tuple cannot be placed: the caller counts it as dropped.
    Throughput: one key per two cycles.

    The state is the partition's whole payload (``state_width`` bits): the NFA
    state vector in its low ``vector_width`` bits (default: all), then any
    partial-match registers. A zero vector is a fresh partition.

    ``ahead_state`` is the stored state the token a stage before the tail will
    find there, the cycle before it does (the key's, where it has an element):
    tokens are two stages apart, so no write to the tail lands in between, and
    a caller may compute from it, and register, what the update will read (a
    partial-match core's conditions), taking them out of the update's cycle.

    With ``key_ahead``, the key a token is injected with is on ``key`` from the enabled cycle before
    its own too (the top's stage 2 holds each tuple through two): with one element, the compare of
    the key with the element's is registered then, off the path into the tail's write.

    Exact eviction for WITHIN (``expiry_width``): when the tail stores a
    state it also stores ``next_expiry`` (the tuple's time plus the window),
    and an element whose expiry is below ``now`` (the time of the latest
    tuple the tail has taken) counts as free. Every partial match in it began
    no later than its key's last tuple, so — time being non-decreasing over
    the stream — none can ever qualify again: freeing it loses nothing. A
    stale element reaching the tail is reclaimed and pulses ``evicted``.
    """

    def __init__(self, depth: int, key_width: int, state_width: int, evict_after: int | None = None,
                 vector_width: int | None = None, expiry_width: int | None = None, key_ahead: bool = False,
                 period: int = 2):
        if depth < 1:
            raise ValueError(f"the partitioner needs at least one element, not {depth}")
        if period not in (2, 3) or period == 3 and depth != 1:
            raise ValueError(f"keys are injected every 2 cycles, or every 3 with one element, not every {period} "
                             f"with {depth}")
        self.period = period
        self._depth, self._kw, self._sw = depth, key_width, state_width
        self._vw = vector_width or state_width
        self._period = tick_period(evict_after) if evict_after else None
        self._xw = expiry_width
        self._key_ahead = key_ahead and depth == 1
        self.places_every_key = False  # a key finding every element taken is dropped
        super().__init__(_signature(key_width, state_width, expiry_width or 1) | {"ahead_state": Out(state_width)})

    def elaborate(self, platform):
        m = Module()
        n, kw, sw = self._depth, self._kw, self._sw
        assoc = [Signal(name=f"e{i}_used") for i in range(n)]
        # (an element's key, state, timer and expiry are don't-cares while it is free, as every element is
        # after a reset: they have no reset, which on the iCE40 would join the write's enable, a reset's
        # route from the host link into every bit of the element: finance0's critical path on the UP5K)
        ekey = [Signal(kw, name=f"e{i}_key", reset_less=True) for i in range(n)]
        estate = [Signal(sw, name=f"e{i}_state", reset_less=True) for i in range(n)]
        tv = [Signal(name=f"t{i}_valid") for i in range(n)]
        tk = [Signal(kw, name=f"t{i}_key") for i in range(n)]
        if self.period == 2:
            slot = Signal(init=1)
            m.d.comb += self.slot.eq(slot)
        else:  # (a ring of three flip-flops, its first the slot: a key every third cycle)
            ring = Signal(self.period, init=1)
            slot = ring[0]
            m.d.comb += self.slot.eq(slot)

        # with eviction, an element whose timer ran out is stale: it counts as free
        if self._period is not None:
            timer = [Signal(range(TIMER_MAX + 1), name=f"e{i}_timer", reset_less=True) for i in range(n)]
            live = [assoc[i] & (timer[i] != 0) for i in range(n)]
            ticks = Signal(range(self._period))
            tick = Signal()
            m.d.comb += tick.eq(ticks == self._period - 1)
            with m.If(self.en):
                m.d.sync += ticks.eq(Mux(tick, 0, ticks + 1))
        else:
            timer, live, tick = None, assoc, None
        if self._xw is not None:  # WITHIN: an element past its expiry is stale too
            expiry = [Signal(self._xw, name=f"e{i}_expiry", reset_less=True) for i in range(n)]
            live = [live[i] & ~(expiry[i] < self.now) for i in range(n)]
        else:
            expiry = None

        last = n - 1
        # Ownership is registered one stage ahead of the token, so the swap decision reads only
        # registers and the key comparators leave the element-swap path. own_here[i] / own_next[i]
        # say whether element i / i + 1 holds the key of the token at stage i. They are computed
        # the cycle before, while that token is at stage i - 1 (or being injected), against the
        # contents the elements will have after that cycle's swaps and tail write. Tokens are two
        # stages apart, so in that cycle no token sits at stage i: element i changes only by the
        # token's own swap at i - 1, element i + 1 only by the swap of the token ahead (at i + 1)
        # or, for the tail, by that token's write.
        own_here = [Signal(name=f"own{i}") for i in range(n)]
        own_next = [Signal(name=f"own_next{i}") for i in range(n - 1)]
        swap = []
        for i in range(n - 1):
            # the key's own element (live or stale) has priority over free ones
            s = Signal(name=f"swap{i}")
            m.d.comb += s.eq(tv[i] & (own_here[i] | (~live[i] & ~own_next[i])))
            swap.append(s)
        # the token at the tail owns the element there, live (registered: see `writes`). Neither needs a
        # reset: `hit` is read only with a token at the tail, and `writes`, low without one, can at most
        # write an element the reset freed, in the cycle after it
        hit, writes = Signal(reset_less=True), Signal(reset_less=True)
        # The state vector the token at the tail finds: its element's, or zero without a hit, registered
        # beside `hit` from the vector the tail will hold (`ahead_state`'s), so the core's choices read a
        # register, not the tail's vector gated by `hit` (mshape's critical path on the UP5K: `hit` into
        # the vector, through the choice of a state's registers into their write's enable, 20.98 ns).
        # The vector alone: a state's registers are read only where its bit is on.
        found = Signal(self._vw, name="found", reset_less=True)
        m.d.comb += [
            self.out_valid.eq(tv[last]),
            self.out_key.eq(tk[last]),
            self.out_hit.eq(hit),
            self.out_free.eq(~live[last]),
            self.out_state.eq(Cat(found, estate[last][self._vw:])),
            # (the tail after this cycle's swap: no token is at the tail while one is a stage before it)
            self.ahead_state.eq(Mux(swap[last - 1], estate[last - 1], estate[last]) if n >= 2 else estate[last]),
        ]

        # the tail element after this cycle: the token there stores its new state
        keep = self.next_state[:self._vw].any()
        alloc = Signal()  # the token takes the free tail element
        tail_used = Signal()
        moved = Mux(swap[last - 1], assoc[last - 1], assoc[last]) if n >= 2 else assoc[last]
        m.d.comb += [alloc.eq(tv[last] & ~hit & ~live[last] & keep), tail_used.eq(moved)]
        with m.If(tv[last]):
            with m.If(hit):
                m.d.comb += tail_used.eq(keep)
            with m.Elif(alloc):
                m.d.comb += tail_used.eq(1)
            with m.Elif(assoc[last] & ~live[last]):  # reclaim a stale element nobody needs now
                m.d.comb += tail_used.eq(0)

        def owns(j, key):  # element j holds `key` (as it is now)
            return assoc[j] & (ekey[j] == key)

        with m.If(self.en):
            for i in range(n):
                key = self.key if i == 0 else tk[i - 1]  # the token that reaches stage i next
                if i == 0:
                    m.d.sync += own_here[0].eq(owns(0, key))
                else:
                    m.d.sync += own_here[i].eq(Mux(swap[i - 1], own_here[i - 1], own_next[i - 1]))
                if i < last:
                    j = i + 1
                    if j < last:
                        m.d.sync += own_next[i].eq(Mux(swap[j], owns(j + 1, key), owns(j, key)))
                    else:
                        # (a token at the tail writes its key there, if it writes at all: see below)
                        m.d.sync += own_next[i].eq(tail_used & Mux(writes, tk[last] == key, ekey[last] == key))

        # Whether the token at the tail owns the element there, live (`hit`), and whether it writes there
        # (it owns the element, or finds it free: `writes`), decided the cycle before, from registers: the
        # token is a stage before the tail then, and no token is at the tail, so no write lands in between.
        # The write's enable reaches every bit of the element, and `found` is the state vector the core
        # reads: the ownership flags' logic before them was the UP5K's critical path (finance0: 22.1 ns,
        # then 21.4 ns through the core's choice)
        def live_after(j):  # element j's liveness after this edge (its timer ticks; `now` stays)
            alive = assoc[j]
            if timer:
                alive = alive & ~((timer[j] == 0) | tick & (timer[j] == 1))
            if expiry:
                alive = alive & ~(expiry[j] < self.now)
            return alive
        if n >= 2:
            coming, owned = tv[last - 1], Mux(swap[last - 1], own_here[last - 1], own_next[last - 1])
            alive = Mux(swap[last - 1], live_after(last - 1), live_after(last))
        elif self._key_ahead:
            # (one element, its key on `key` from the enabled cycle before the token's: whether the element
            # holds it, registered then as `own_next` is, against the key the element will hold after that
            # cycle's write; the key's compare is off the path into `hit` and `writes`)
            holds_key = Signal(name="holds_key")
            # (a key every third cycle: no write lands in that cycle, which follows the tail's, so the
            # element's key is the one to compare with, a register)
            holds = ekey[last] == self.key if self.period == 3 else Mux(writes, tk[last] == self.key, ekey[last] == self.key)
            with m.If(self.en):
                m.d.sync += holds_key.eq(holds)
            coming, owned, alive = self.inject & slot, assoc[0] & holds_key, live_after(0)
        else:
            coming, owned, alive = self.inject & slot, owns(0, self.key), live_after(0)
        with m.If(self.en):
            m.d.sync += [hit.eq(owned & alive), writes.eq(coming & (owned | ~alive)),
                         found.eq(Mux(owned & alive, self.ahead_state[:self._vw], 0))]

        count = Signal(range(n + 1))
        m.d.comb += self.occupied.eq(count)

        with m.If(self.en):
            m.d.sync += [ring.eq(ring.rotate_left(1)) if self.period == 3 else slot.eq(~slot),
                         tv[0].eq(self.inject & slot), tk[0].eq(self.key)]
            for i in range(n - 1):
                m.d.sync += [tv[i + 1].eq(tv[i]), tk[i + 1].eq(tk[i])]
            for j in range(n):
                # an element takes its neighbour's contents on a swap (at most one applies)
                moves = []
                if j >= 1:
                    moves.append((swap[j - 1], j - 1))
                if j < n - 1:
                    moves.append((swap[j], j + 1))
                used, key, state = assoc[j], ekey[j], estate[j]
                age = timer[j] if timer else None
                until = expiry[j] if expiry else None
                for cond, k in reversed(moves):
                    used, key, state = Mux(cond, assoc[k], used), Mux(cond, ekey[k], key), Mux(cond, estate[k], state)
                    if timer:
                        age = Mux(cond, timer[k], age)
                    if expiry:
                        until = Mux(cond, expiry[k], until)
                m.d.sync += [assoc[j].eq(used), ekey[j].eq(key), estate[j].eq(state)]
                if timer:
                    m.d.sync += timer[j].eq(Mux(tick & (age != 0), age - 1, age))
                if expiry:
                    m.d.sync += expiry[j].eq(until)
            # the tail stores the token's new state: in its own element, or in a free one, which it keeps
            # only if the state is not zero (a free element's key, state, timer and expiry are don't-cares,
            # so they are written whether it is kept or not: the write's enable, which reaches every bit
            # of the element, does not wait for the state's update)
            m.d.sync += assoc[last].eq(tail_used)
            with m.If(writes):
                m.d.sync += [ekey[last].eq(tk[last]), estate[last].eq(self.next_state)]
                if expiry:
                    m.d.sync += expiry[last].eq(self.next_expiry)
                if timer:
                    with m.If(~hit):
                        m.d.sync += timer[last].eq(TIMER_MAX)
            with m.If(tv[last]):
                with m.If(hit):
                    with m.If(~keep):
                        m.d.sync += count.eq(count - 1)
                with m.Elif(alloc):
                    with m.If(~assoc[last]):
                        m.d.sync += count.eq(count + 1)
                with m.Elif(assoc[last] & ~live[last]):
                    m.d.sync += count.eq(count - 1)
        # a stale element reaching the tail is reclaimed: its partition's state is lost, once
        if timer or expiry:
            m.d.comb += self.evicted.eq(self.en & tv[last] & assoc[last] & ~live[last])
        return m


class SinglePartition(wiring.Component):
    """The partitioner of a query without PARTITION BY: one state vector.

    Same protocol and latency (``depth`` enabled cycles) as
    :class:`PipelinePartitioner`, so queries with and without keys share one
    pipeline; ``out_hit`` is always high, and every cycle is a slot.
    """

    def __init__(self, depth: int, state_width: int, vector_width: int | None = None):
        self._depth, self._sw = depth, state_width
        self._vw = vector_width or state_width
        self.places_every_key = True
        super().__init__(_signature(1, state_width))

    def elaborate(self, platform):
        m = Module()
        tv = [Signal(name=f"t{i}_valid") for i in range(self._depth)]
        state = Signal(self._sw)
        m.d.comb += [
            self.slot.eq(1), self.out_valid.eq(tv[-1]), self.out_key.eq(0), self.out_hit.eq(1),
            self.out_free.eq(0), self.out_state.eq(state), self.occupied.eq(state[:self._vw].any()), self.evicted.eq(0),
        ]
        with m.If(self.en):
            m.d.sync += tv[0].eq(self.inject)
            for i in range(self._depth - 1):
                m.d.sync += tv[i + 1].eq(tv[i])
            with m.If(tv[-1]):
                m.d.sync += state.eq(self.next_state)
        return m

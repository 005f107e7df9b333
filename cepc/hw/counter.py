"""Wide counters without a wide carry chain.

A 48-bit ``c.eq(c + 1)`` is a 48-stage carry chain: on the UP5K 47 logic levels, 26.6 ns, the
critical path of network's board top (its seq counter). :func:`increment` cuts the counter into
segments of :data:`SEGMENT` bits; a segment counts when every segment below it is all ones, which
each says with a flag registered beside it. The count is exact in every cycle (no carry is late):
a segment changes only when it counts, and then its flag takes whether it is one short of all ones.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Value

SEGMENT = 16


def increment(m: Module, counter: Value, inc, segment: int = SEGMENT, name: str | None = None) -> None:
    """Add ``m.d.sync`` logic that adds 1 to ``counter`` on the cycles ``inc`` is high (wrapping).

    ``counter`` (a signal, or a slice of one: ``name`` its flags' names) must start at zero after a
    reset and be driven by nothing else: its segments' flags start at zero (not all ones) with it.
    Carry chains are at most ``segment`` bits long."""
    name = name or counter.name
    n = len(counter)
    carry = Value.cast(inc)
    for lo in range(0, n, segment):
        hi = min(lo + segment, n)
        part = counter[lo:hi]
        with m.If(carry):
            m.d.sync += part.eq(part + 1)
        if hi == n:
            break
        full = Signal(name=f"{name}_ones{lo // segment}")  # the segment is all ones
        with m.If(carry):
            m.d.sync += full.eq(part == (1 << (hi - lo)) - 2)
        carry = carry & full


def count_late(m: Module, counter: Signal, event) -> None:
    """Add 1 to ``counter`` two cycles after each cycle ``event`` is high: the event is registered
    twice first, so its logic ends in a flip-flop, not in the enables of the counter's segments, and
    the route from the design to the counter (kept beside the host link, which reads it) runs between
    two flip-flops (mshape on the ECP5-85F, seed 1: a 4.2 ns route from `overflow_event` into the
    counter's enables, 6.95 ns in all). For status counters, read long after what they count; call it
    outside any ``m.If``."""
    late = Signal(name=f"{counter.name}_event")
    later = Signal(name=f"{counter.name}_event2")
    m.d.sync += [late.eq(event), later.eq(late)]
    increment(m, counter, later)


def add(m: Module, counter: Signal, amount: Value, segment: int = SEGMENT) -> None:
    """Add ``m.d.sync`` logic that adds ``amount`` (narrower than a segment) to ``counter`` every
    cycle: the lowest segment adds it, and its carry out increments the rest (:func:`increment`)."""
    if len(counter) <= segment:
        m.d.sync += counter.eq(counter + amount)
        return
    low = counter[:segment]
    total = Signal(segment + 1, name=f"{counter.name}_low")
    m.d.comb += total.eq(low + amount)
    m.d.sync += low.eq(total[:segment])
    increment(m, counter[segment:], total[segment], segment, name=counter.name)

"""Tuple framing: a byte stream of any width in, one packed tuple per transfer out."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import COUNTER_WIDTH


class Framer(wiring.Component):
    """Cuts a stream of ``width``-bit words into tuples of ``tuple_bytes`` bytes.

    Input: AXI-Stream beats ``data`` / ``keep`` / ``last``; bytes are taken
    LSB-first, tuples may straddle beats, and ``keep`` must be contiguous from
    byte 0 (only a packet's last beat is partial). A packet whose ``last`` beat
    leaves a partial tuple has that tuple discarded and counted in ``malformed``;
    framing restarts at the next packet.

    Output: ``tuples`` carries the packed tuple (``tuple_bytes * 8`` bits).

    Throughput: one tuple per cycle when ``width`` ≥ the tuple width, else one
    per ⌈tuple/width⌉ beats; the cycle after a packet's last beat takes no
    input (it trims the packet to whole tuples). Latency: a tuple is offered
    the cycle after the beat that completes it. ``ready`` and ``tuples.valid``
    are registers.

    Timing: every candidate next byte count (with or without a beat, with or
    without a tuple leaving) and its flags are computed in parallel from
    registers; the handshake only selects among them.
    """

    def __init__(self, width: int, tuple_bytes: int):
        if width % 8 or not 8 <= width <= 512:
            raise ValueError(f"bus width must be a multiple of 8 between 8 and 512, not {width!r}")
        self._width = width
        self._wb = width // 8
        self._tb = tuple_bytes
        super().__init__({
            "data": In(width), "keep": In(self._wb), "last": In(1), "valid": In(1), "ready": Out(1),
            "tuples": Out(stream.Signature(unsigned(tuple_bytes * 8))),
            "malformed": Out(COUNTER_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        wb, tb = self._wb, self._tb
        cap = tb + wb  # bytes the buffer can hold
        buf = Signal(cap * 8)
        count = Signal(range(cap + 1))  # bytes held
        count_m = Signal(signed(len(Signal(range(cap + 1))) + 1), init=-tb)  # count - tb
        have = Signal()  # count >= tb: a whole tuple is ready
        room = Signal(init=1)  # count <= tb and not trimming: a beat fits
        trim = Signal()  # the previous beat ended a packet: round count down to whole tuples

        # bytes in this beat: keep is contiguous from byte 0
        nbytes = Signal(range(wb + 1))
        for i in range(wb + 1):
            with m.If(self.keep == ((1 << i) - 1)):
                m.d.comb += nbytes.eq(i)

        emit = Signal()
        take = Signal()
        m.d.comb += [
            self.tuples.valid.eq(have),
            self.tuples.payload.eq(buf[:tb * 8]),
            self.ready.eq(room),
            emit.eq(have & self.tuples.ready),
            take.eq(self.valid & room),
        ]

        # --- data: two insert positions computed in parallel, chosen by `emit` ----------------
        def insert(base, at):
            keep_mask = ~(Const(-1, cap * 8) << (at * 8))
            return (base & keep_mask) | (self.data << (at * 8))

        shifted = Signal.like(buf)
        m.d.comb += shifted.eq(Mux(emit, buf >> (tb * 8), buf))
        with m.If(take):
            m.d.sync += buf.eq(Mux(emit, insert(buf >> (tb * 8), count_m.as_unsigned()[:len(count)]), insert(buf, count)))
        with m.Else():
            m.d.sync += buf.eq(shifted)

        # --- byte count: candidates in parallel ------------------------------------------------
        # Each candidate next count comes with its own `count - tb`, computed from registers and
        # the input in parallel; the handshake selects one pair, and the flags are the sign and
        # zero of the selected difference — no carry chain after the selection.
        m_shape = signed(len(count) + 1)

        def pair(name, value, minus):
            c = Signal(range(cap + 1), name=f"{name}_count")
            d = Signal(m_shape, name=f"{name}_minus")
            m.d.comb += [c.eq(value), d.eq(minus)]
            return c, d

        stay = pair("stay", count, count_m)
        out1 = pair("emit", count_m, count_m - tb)
        take1 = pair("take", count + nbytes, count_m + nbytes)
        both = pair("take_emit", count_m + nbytes, count_m + nbytes - tb)

        # trim: the largest whole number of tuples in `count`; candidates are constants per k
        trim_pair = pair("trim", 0, -tb)
        trim_emit = pair("trim_emit", 0, -tb)
        for k in range(1, cap // tb + 1):
            with m.If(count >= k * tb):
                m.d.comb += [trim_pair[0].eq(k * tb), trim_pair[1].eq((k - 1) * tb),
                             trim_emit[0].eq((k - 1) * tb), trim_emit[1].eq((k - 2) * tb)]

        after, after_m = Signal.like(count), Signal(m_shape)
        with m.If(trim):
            m.d.comb += [after.eq(Mux(emit, trim_emit[0], trim_pair[0])),
                         after_m.eq(Mux(emit, trim_emit[1], trim_pair[1]))]
        with m.Elif(take):
            m.d.comb += [after.eq(Mux(emit, both[0], take1[0])), after_m.eq(Mux(emit, both[1], take1[1]))]
        with m.Else():
            m.d.comb += [after.eq(Mux(emit, out1[0], stay[0])), after_m.eq(Mux(emit, out1[1], stay[1]))]

        negative = after_m[-1]
        zero = after_m == 0
        m.d.sync += [
            count.eq(after),
            count_m.eq(after_m),
            have.eq(~negative),
            # a packet's last beat blocks the next cycle's input, when the packet is trimmed
            room.eq((negative | zero) & ~(take & self.last)),
            trim.eq(take & self.last),
        ]
        with m.If(trim & (trim_pair[0] != count)):
            m.d.sync += self.malformed.eq(self.malformed + 1)
        return m

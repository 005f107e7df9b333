"""Tuple framing: a byte stream of any width in, one packed tuple per transfer out."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, unsigned
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
    per ⌈tuple/width⌉ beats. Latency: a tuple is offered the cycle after the
    beat that completes it. ``s_ready`` depends on registered state only.
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
        count = Signal(range(cap + 1))

        # keep is contiguous from byte 0: the beat's byte count is its number of ones
        nbytes = Signal(range(wb + 1))
        for i in range(wb + 1):
            mask = (1 << i) - 1
            with m.If(self.keep == mask if i < wb else self.keep == (1 << wb) - 1):
                m.d.comb += nbytes.eq(i)

        emit = Signal()
        m.d.comb += [
            self.tuples.valid.eq(count >= tb),
            self.tuples.payload.eq(buf[:tb * 8]),
            emit.eq(self.tuples.valid & self.tuples.ready),
            self.ready.eq(count <= tb),
        ]
        take = Signal()
        m.d.comb += take.eq(self.valid & self.ready)

        after_emit = Signal.like(count)
        shifted = Signal.like(buf)
        m.d.comb += [
            after_emit.eq(Mux(emit, count - tb, count)),
            shifted.eq(Mux(emit, buf >> (tb * 8), buf)),
        ]
        # bytes above after_emit are don't-care: mask them before inserting the beat
        keep_mask = Signal.like(buf)
        m.d.comb += keep_mask.eq(~(Const(-1, len(buf)) << (after_emit * 8)))
        inserted = Signal.like(buf)
        m.d.comb += inserted.eq((shifted & keep_mask) | (self.data << (after_emit * 8)))

        total = Signal.like(count)
        m.d.comb += total.eq(after_emit + nbytes)
        # at the end of a packet keep whole tuples only: the largest multiple of tb ≤ total
        whole = Signal.like(count)
        for k in range(1, cap // tb + 1):
            with m.If(total >= k * tb):
                m.d.comb += whole.eq(k * tb)

        with m.If(take):
            m.d.sync += buf.eq(inserted)
            with m.If(self.last):
                m.d.sync += count.eq(whole)
                with m.If(whole != total):
                    m.d.sync += self.malformed.eq(self.malformed + 1)
            with m.Else():
                m.d.sync += count.eq(total)
        with m.Else():
            m.d.sync += [buf.eq(shifted), count.eq(after_emit)]
        return m



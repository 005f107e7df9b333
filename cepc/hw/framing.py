"""Tuple framing: a byte stream of any width in, one packed tuple per transfer out."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .counter import count_late
from .layouts import COUNTER_WIDTH
from .replica import Replica, small_die

SERIAL_CHUNK = 5  # bytes of the byte-serial framer's registers per copy of their enables (on a large die)


class Framer(wiring.Component):
    """Cuts a stream of ``width``-bit words into tuples of ``tuple_bytes`` bytes.

    Input: AXI-Stream beats ``data`` / ``keep`` / ``last``; bytes are taken
    LSB-first, tuples may straddle beats, and ``keep`` must be contiguous from
    byte 0 (only a packet's last beat is partial). A packet whose ``last`` beat
    leaves a partial tuple has that tuple discarded and counted in ``malformed``;
    framing restarts at the next packet.

    Output: ``tuples`` carries the packed tuple (``tuple_bytes * 8`` bits).

    Throughput: the input's, a beat per cycle, up to one tuple per cycle; the
    buffer holds two tuples and a beat, so a consumer that takes a tuple
    every other cycle still gets one every other cycle from a bus narrower
    than a tuple. The cycle after a packet's last beat takes no input (it
    trims the packet to whole tuples). Latency: a tuple is offered the cycle
    after the beat that completes it. ``ready`` and ``tuples.valid`` are
    registers.

    An 8-bit bus (the host link's) gets a byte-serial framer instead: bytes
    shift into an assembly register and a whole tuple moves to the output
    register; it takes a byte every cycle, with no trim cycle after a packet.
    Unless ``buffered`` (default: off the iCE40), it has no output register:
    the tuple is offered from the assembly register, which takes no byte
    until it is taken, so a tuple takes a cycle more than its bytes. The
    host link's UART brings a byte in far more cycles than that, and the
    iCE40 saves a logic cell per bit of the tuple (finance2: 160).

    Timing: every candidate next byte count (with or without a beat, with or
    without a tuple leaving), its differences from one and two tuples, and
    so the flags, are computed in parallel from registers; the handshake only
    selects among them.
    """

    def __init__(self, width: int, tuple_bytes: int, buffered: bool | None = None):
        if width % 8 or not 8 <= width <= 512:
            raise ValueError(f"bus width must be a multiple of 8 between 8 and 512, not {width!r}")
        self._width = width
        self._wb = width // 8
        self._tb = tuple_bytes
        self._buffered = buffered
        super().__init__({
            "data": In(width), "keep": In(self._wb), "last": In(1), "valid": In(1), "ready": Out(1),
            "tuples": Out(stream.Signature(unsigned(tuple_bytes * 8))),
            "malformed": Out(COUNTER_WIDTH),
            "malformed_pulse": Out(1),  # a cycle a tuple counted in ``malformed`` (as it is counted)
        })

    def elaborate(self, platform):
        # data registers without a reset, only off the iCE40 (see cepc.hw.partition.table's `bare`)
        bare = not small_die(platform)
        if self._wb == 1:
            buffered = not small_die(platform) if self._buffered is None else self._buffered
            return self._elaborate_serial(bare, copies=not small_die(platform), buffered=buffered)
        m = Module()
        wb, tb = self._wb, self._tb
        # Two tuples and a beat: a beat may arrive while a whole tuple waits for its consumer
        # and the next one is partly in (with room for one tuple only, a tuple every other cycle
        # from a bus narrower than a tuple would take three cycles).
        cap = 2 * tb + wb  # bytes the buffer can hold
        buf = Signal(cap * 8, reset_less=bare)  # (data: only `count` says what it holds)
        count = Signal(range(cap + 1))  # bytes held
        m_shape = signed(len(count) + 2)  # down to -3 tb
        count_m = Signal(m_shape, init=-tb)  # count - tb
        count_m2 = Signal(m_shape, init=-2 * tb)  # count - 2 tb
        have = Signal()  # count >= tb: a whole tuple is ready
        room = Signal(init=1)  # count <= 2 tb and not trimming: a beat fits
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
        # Each candidate next count comes with its own `count - tb` and `count - 2 tb`, computed
        # from registers and the input in parallel; the handshake selects one triple, and the
        # flags are the sign and zero of the selected differences — no carry chain after the
        # selection.
        def triple(name, value, minus, minus2):
            c = Signal(range(cap + 1), name=f"{name}_count")
            d = Signal(m_shape, name=f"{name}_minus")
            d2 = Signal(m_shape, name=f"{name}_minus2")
            m.d.comb += [c.eq(value), d.eq(minus), d2.eq(minus2)]
            return c, d, d2

        stay = triple("stay", count, count_m, count_m2)
        out1 = triple("emit", count_m, count_m2, count_m2 - tb)
        take1 = triple("take", count + nbytes, count_m + nbytes, count_m2 + nbytes)
        both = triple("take_emit", count_m + nbytes, count_m2 + nbytes, count_m2 + nbytes - tb)

        # trim: the largest whole number of tuples in `count`; candidates are constants per k
        trim_k = triple("trim", 0, -tb, -2 * tb)
        trim_emit = triple("trim_emit", 0, -tb, -2 * tb)
        for k in range(1, cap // tb + 1):
            with m.If(count >= k * tb):
                m.d.comb += [trim_k[0].eq(k * tb), trim_k[1].eq((k - 1) * tb), trim_k[2].eq((k - 2) * tb),
                             trim_emit[0].eq((k - 1) * tb), trim_emit[1].eq((k - 2) * tb),
                             trim_emit[2].eq((k - 3) * tb)]

        after, after_m, after_m2 = Signal.like(count), Signal(m_shape), Signal(m_shape)

        def select(a, b):
            m.d.comb += [x.eq(Mux(emit, u, v)) for x, u, v in zip((after, after_m, after_m2), a, b)]

        with m.If(trim):
            select(trim_emit, trim_k)
        with m.Elif(take):
            select(both, take1)
        with m.Else():
            select(out1, stay)

        m.d.sync += [
            count.eq(after),
            count_m.eq(after_m),
            count_m2.eq(after_m2),
            have.eq(~after_m[-1]),
            # a beat fits while at most two tuples are held (count <= 2 tb); a packet's last beat
            # blocks the next cycle's input, when the packet is trimmed
            room.eq((after_m2[-1] | (after_m2 == 0)) & ~(take & self.last)),
            trim.eq(take & self.last),
        ]
        m.d.comb += self.malformed_pulse.eq(count_late(m, self.malformed, trim & (trim_k[0] != count)))
        return m

    def _elaborate_serial(self, bare: bool, copies: bool, buffered: bool):
        """An 8-bit bus: bytes shift into an assembly register, a whole tuple moves to the output
        register. No trim cycle: a packet's last beat resets the byte count at once.

        The assembly and output registers' clock enables (a byte arrives; it completes a tuple) reach
        every bit of both, some 300 flip-flops for network's 19-byte tuple: on a large die (``copies``)
        each run of SERIAL_CHUNK bytes takes them from registers of its own, copies of ``room`` and of
        "the next byte completes a tuple", so the byte count, ``room`` and the output's valid stay a
        small loop of their own (network's critical path ran from ``room`` through the enables'
        logic into the count, 7.4–9.9 ns, most of it routing).

        Not ``buffered``: the assembly register is the output; while it holds a whole tuple (``out_valid``)
        it takes no byte."""
        m = Module()
        tb = self._tb
        asm = Signal(tb * 8, reset_less=bare)  # the tuple being assembled, its newest byte at the top
        n = Signal(range(tb))  # bytes assembled
        out = Signal(tb * 8, reset_less=bare) if buffered else asm  # (data: `out_valid` says when)
        out_valid = Signal()
        room = Signal(init=1)
        at_last = Signal(init=int(tb == 1))  # n == tb - 1: the next byte completes a tuple
        m.d.comb += [self.ready.eq(room), self.tuples.valid.eq(out_valid), self.tuples.payload.eq(out)]

        byte = Signal()  # a byte arrives
        complete = Signal()  # ... and completes a tuple
        ends = Signal()  # ... or the packet ends
        m.d.comb += [byte.eq(self.valid & room & self.keep[0]), complete.eq(byte & at_last),
                     ends.eq(self.valid & room & self.last)]
        # the output register after this cycle
        valid_next = Signal()
        m.d.comb += valid_next.eq(complete | (out_valid & ~self.tuples.ready))

        def after(place):
            """Whether the count is ``place`` after this cycle's byte (a packet's end aside). The
            handshake selects among comparisons of the register n, made beside it: no adder or
            comparison follows the handshake (the host link's byte, and the partitioners' `slot`
            through the output's ready, into `room` and the malformed count was a critical path)."""
            return Mux(complete, int(place == 0), Mux(byte, n == place - 1, n == place))

        # a packet ends: a partial tuple is discarded and counted
        m.d.comb += self.malformed_pulse.eq(count_late(m, self.malformed, ends & ~after(0)))
        with m.If(ends):
            m.d.sync += n.eq(0)
        with m.Else():
            m.d.sync += n.eq(Mux(complete, 0, Mux(byte, n + 1, n)))
        m.d.sync += out_valid.eq(valid_next)
        # a byte fits next cycle unless it would complete a tuple while the output is still full (not
        # buffered: unless the output, the assembly register, is full)
        room_next, at_last_next = Signal(), Signal()
        m.d.comb += [room_next.eq(~valid_next | ~after(tb - 1) if buffered else ~valid_next),
                     at_last_next.eq(Mux(ends, int(tb == 1), after(tb - 1)))]
        m.d.sync += [room.eq(room_next), at_last.eq(at_last_next)]

        # the data: each run of bytes shifts (and moves to the output) on enables of its own
        lanes = [asm[8 * i:8 * (i + 1)] for i in range(tb)]
        shifted = lanes[1:] + [self.data]  # the assembly register after a byte
        for c, lo in enumerate(range(0, tb, SERIAL_CHUNK)):
            hi = min(lo + SERIAL_CHUNK, tb)
            if copies:
                room_c = m.submodules[f"{Replica.PREFIX}room{c}"] = Replica(1, init=1)
                last_c = m.submodules[f"{Replica.PREFIX}at_last{c}"] = Replica(1, init=int(tb == 1))
                m.d.comb += [room_c.d.eq(room_next), room_c.en.eq(1), last_c.d.eq(at_last_next), last_c.en.eq(1)]
                byte_c = self.valid & room_c.q & self.keep[0]
                complete_c = byte_c & last_c.q
            else:
                byte_c, complete_c = byte, complete
            with m.If(byte_c):
                m.d.sync += [lanes[i].eq(shifted[i]) for i in range(lo, hi)]
            if buffered:
                with m.If(complete_c):
                    m.d.sync += [out[8 * i:8 * (i + 1)].eq(shifted[i]) for i in range(lo, hi)]
        return m

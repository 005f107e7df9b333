"""The UART host link: a compiled :class:`~cepc.hw.top.Top` behind the protocol of :mod:`cepc.protocol`.

```
rx ─► UART ─► SLIP ─► frame check (CRC, seq) ─► receive buffer (BRAM) ─► drain ─► Top s_t*
                                  │ STATUS / RESET                 committed frames, one packet each
tx ◄─ UART ◄─ SLIP ◄─ frame builder (CRC) ◄── STATUS > ACK > MATCHES (Top m_t*) > SPILL (Top spill_t*)
```

Board independent: the board top (:mod:`cepc.hw.board_top`) adds the clock,
reset and pins; the cocotb bench of ``cepc run`` drives this component's
``rx`` and ``tx`` directly.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .. import protocol as P
from .top import Top
from .uart import UartRx, UartTx

LINK_COUNTER_WIDTH = 32


def crc16_byte(crc: Value, byte: Value) -> Value:
    """CRC-16/CCITT-FALSE of ``crc`` extended by ``byte`` (MSB first): an XOR network."""
    bits = [crc[i] for i in range(16)]
    for i in reversed(range(8)):
        fb = bits[15] ^ byte[i]
        bits = [fb] + [bits[k - 1] ^ fb if k in (5, 12) else bits[k - 1] for k in range(1, 16)]
    return Cat(*bits)


class HostLink(wiring.Component):
    """A compiled design behind a UART speaking :mod:`cepc.protocol`.

    ``rx``/``tx``: the UART lines (8N1, ``clock_hz / baud`` cycles per bit).
    ``activity`` pulses on each UART byte either way, ``error`` stays high once a
    frame was discarded or a tuple dropped or malformed (until a RESET frame).

    Frames are stored whole in a ``buffer_bytes`` receive buffer (a power of
    two) and checked before any byte reaches the design, so a corrupt frame
    is never parsed; at most ``buffer_frames`` accepted frames wait in it.
    The design sees each frame as one packet on an 8-bit bus. A RESET frame
    resets the design (one cycle of its synchronous reset), the buffer, the
    sequence numbers and the counters, and is answered with a STATUS frame.
    """

    def __init__(self, top: Top, *, clock_hz: int, baud: int, divisor: int, buffer_bytes: int = 4096,
                 buffer_frames: int = 16, design_id: int = 0):
        if top.bus_width != 8:
            raise ValueError(f"the host link feeds the design one byte per cycle: its bus width must be 8, "
                             f"not {top.bus_width}")
        if buffer_bytes < 256 or buffer_bytes & (buffer_bytes - 1) or buffer_bytes >= 1 << 16:
            raise ValueError(f"the receive buffer must be a power of two from 256 to 32768 bytes, not {buffer_bytes}")
        if not 1 <= buffer_frames <= 255:
            raise ValueError(f"the receive buffer holds 1 to 255 frames, not {buffer_frames}")
        self.top = top
        self.clock_hz, self.baud, self.divisor = int(clock_hz), int(baud), divisor
        self.buffer_bytes, self.buffer_frames = buffer_bytes, buffer_frames
        self.design_id = design_id & 0xFFFFFFFF
        self.record_bytes = top.record_width // 8
        self.tuple_bytes = top.tuple_width // 8
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "activity": Out(1), "error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        top = self.top
        k = (self.buffer_bytes - 1).bit_length()  # address bits
        # A RESET frame raises `soft_rst` for one cycle; it resets everything below (the design,
        # the link, the UARTs, the frame being sent: the host ignores what it receives until the
        # STATUS frame that answers the RESET).
        soft_rst = Signal()
        m.submodules.design = top
        m.submodules.uart_rx = urx = UartRx(self.divisor)
        m.submodules.uart_tx = utx = UartTx(self.divisor)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx)]
        m.d.comb += self.activity.eq(urx.valid | (utx.bytes.valid & utx.bytes.ready))

        # --- link state (reset by a RESET frame) ----------------------------------------------------
        rx_frames = Signal(LINK_COUNTER_WIDTH)
        rx_crc_errors = Signal(LINK_COUNTER_WIDTH)
        rx_rejected = Signal(LINK_COUNTER_WIDTH)
        tx_frames = Signal(LINK_COUNTER_WIDTH)
        expect = Signal(8)  # seq of the next TUPLES frame to accept
        drained = Signal(8)  # TUPLES frames passed into the design
        ack_pending = Signal()
        status_pending = Signal(init=1)  # announce ourselves after configuration and after a RESET
        sticky_error = Signal()
        m.d.comb += self.error.eq(sticky_error)
        with m.If((top.dropped != 0) | (top.malformed != 0)):
            m.d.sync += sticky_error.eq(1)

        # --- receive buffer: write pointer, commit pointer, read pointer (k + 1 bits) ---------------
        m.submodules.buffer = mem = Memory(shape=8, depth=self.buffer_bytes, init=[])
        wr = mem.write_port()
        rd = mem.read_port()
        wptr = Signal(k + 1)
        commit = Signal(k + 1)
        rptr = Signal(k + 1)
        frames = SyncFIFO(width=k + 1, depth=self.buffer_frames)  # end pointer of each accepted frame
        m.submodules.frames = frames
        full = Signal()
        m.d.comb += full.eq((wptr - rptr)[:k + 1] == self.buffer_bytes)

        # --- SLIP decoder ------------------------------------------------------------------------------
        esc = Signal()
        byte = Signal(8)
        byte_valid = Signal()
        end = Signal()
        bad_escape = Signal()
        m.d.comb += byte.eq(urx.data)
        with m.If(urx.valid):
            with m.If(urx.data == P.END):
                m.d.comb += end.eq(1)
                m.d.sync += esc.eq(0)
            with m.Elif(esc):
                m.d.sync += esc.eq(0)
                with m.If(urx.data == P.ESC_END):
                    m.d.comb += [byte.eq(P.END), byte_valid.eq(1)]
                with m.Elif(urx.data == P.ESC_ESC):
                    m.d.comb += [byte.eq(P.ESC), byte_valid.eq(1)]
                with m.Else():
                    m.d.comb += bad_escape.eq(1)
            with m.Elif(urx.data == P.ESC):
                m.d.sync += esc.eq(1)
            with m.Else():
                m.d.comb += byte_valid.eq(1)

        # --- frame check --------------------------------------------------------------------------------
        pos = Signal(range(3))  # bytes of the frame so far: 0, 1, 2 or more
        ftype = Signal(8)
        fseq = Signal(8)
        crc = Signal(16, init=0xFFFF)
        body = Signal(range(self.buffer_bytes + 2))  # bytes after the header (payload + CRC), saturating
        bad = Signal()  # bad escape or UART framing error inside the frame
        over = Signal()  # a TUPLES frame that did not fit the buffer
        with m.If(urx.error | bad_escape):
            m.d.sync += bad.eq(1)
        with m.If(byte_valid):
            m.d.sync += crc.eq(crc16_byte(crc, byte))
            with m.If(pos == 0):
                m.d.sync += [ftype.eq(byte), pos.eq(1)]
            with m.Elif(pos == 1):
                m.d.sync += [fseq.eq(byte), pos.eq(2)]
            with m.Else():
                with m.If(body != self.buffer_bytes + 1):
                    m.d.sync += body.eq(body + 1)
                with m.If(ftype == P.TUPLES):
                    with m.If(full | over):
                        m.d.sync += over.eq(1)
                    with m.Else():
                        m.d.comb += [wr.addr.eq(wptr[:k]), wr.data.eq(byte), wr.en.eq(1)]
                        m.d.sync += wptr.eq(wptr + 1)

        good = Signal()
        m.d.comb += good.eq(~bad & (crc == 0) & (pos == 2) & (body >= P.CRC_BYTES))
        accept = Signal()
        m.d.comb += accept.eq(good & (ftype == P.TUPLES) & ~over & (fseq == expect) & (body > P.CRC_BYTES)
                              & frames.w_rdy)
        new_commit = Signal(k + 1)
        m.d.comb += new_commit.eq(Mux(accept, wptr - P.CRC_BYTES, commit))
        with m.If(end):
            m.d.sync += [pos.eq(0), crc.eq(0xFFFF), body.eq(0), bad.eq(0), over.eq(0)]
            with m.If((pos != 0) | bad):  # not an empty frame
                m.d.sync += [wptr.eq(new_commit), commit.eq(new_commit)]
                m.d.comb += [frames.w_data.eq(new_commit), frames.w_en.eq(accept)]
                with m.If(accept):
                    m.d.sync += [expect.eq(expect + 1), rx_frames.eq(rx_frames + 1), ack_pending.eq(1)]
                with m.Elif(~good):
                    m.d.sync += [rx_crc_errors.eq(rx_crc_errors + 1), ack_pending.eq(1), sticky_error.eq(1)]
                with m.Elif(ftype == P.STATUS_REQUEST):
                    m.d.sync += status_pending.eq(1)
                with m.Elif(ftype == P.RESET):
                    m.d.sync += soft_rst.eq(1)
                with m.Else():
                    m.d.sync += [rx_rejected.eq(rx_rejected + 1), ack_pending.eq(1), sticky_error.eq(1)]

        # --- drain: committed bytes into the design, one packet per frame --------------------------------
        o_valid = Signal()
        o_last = Signal()
        advance = Signal()
        last_byte = Signal()
        m.d.comb += [
            last_byte.eq((rptr + 1)[:k + 1] == frames.r_data),
            advance.eq((rptr != commit) & (~o_valid | top.s_tready)),
            rd.addr.eq(rptr[:k]), rd.en.eq(advance),
            top.s_tdata.eq(rd.data), top.s_tkeep.eq(1), top.s_tvalid.eq(o_valid), top.s_tlast.eq(o_last),
        ]
        with m.If(advance):
            m.d.sync += [rptr.eq(rptr + 1), o_valid.eq(1), o_last.eq(last_byte)]
            m.d.comb += frames.r_en.eq(last_byte)
        with m.Elif(top.s_tready):
            m.d.sync += o_valid.eq(0)
        with m.If(o_valid & top.s_tready & o_last):
            m.d.sync += [drained.eq(drained + 1), ack_pending.eq(1)]

        # idle: nothing in the buffer or the design for longer than its latency
        quiet_limit = top.latency + 32
        quiet = Signal(range(quiet_limit + 1))
        busy = (rptr != commit) | o_valid | top.m_tvalid | top.spill_tvalid
        with m.If(busy):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != quiet_limit):
            m.d.sync += quiet.eq(quiet + 1)
        idle = Signal()
        m.d.comb += idle.eq(quiet == quiet_limit)

        # --- status words (protocol.STATUS_WORDS) ----------------------------------------------------------
        def counter(value):
            return Value.cast(value)[:48]

        info = Cat(Const(P.VERSION, 8), idle, Const(0, 7), expect, drained, Const(self.tuple_bytes, 16))
        words = [
            info,
            Cat(Const(self.design_id, 32), Const(self.record_bytes, 16)),
            Cat(Const(self.clock_hz, 32), Const(self.buffer_bytes, 16)),
            Cat(Const(self.baud, 32), Const(self.buffer_frames, 8), Const(0, 8)),
            *(counter(getattr(top, name)) for name in P.DESIGN_COUNTERS),
            rx_frames, rx_crc_errors, rx_rejected, tx_frames,
        ]
        assert len(words) == len(P.STATUS_WORDS)

        # --- frame builder -------------------------------------------------------------------------------------
        # One byte at a time (`out`, or a raw END), through the SLIP escaper into the UART.
        unit_bits = max(top.record_width, top.tuple_width, 48)
        pay = Signal(unit_bits)  # the unit (record, tuple, status word, ACK) being sent, low byte first
        left = Signal(range(unit_bits // 8 + 1))  # bytes of the unit still to send
        units = Signal(range(max(P.MAX_RECORDS_PER_FRAME, len(words)) + 1))  # units sent or started
        kind = Signal(8)
        tx_seq = Signal(8)
        tx_crc = Signal(16, init=0xFFFF)
        out = Signal(8)
        out_valid = Signal()
        out_end = Signal()
        take = Signal()  # the escaper takes `out` this cycle
        escaping = Signal()
        escaped = Signal(8)
        special = Signal()
        m.d.comb += [
            special.eq((out == P.END) | (out == P.ESC)),
            utx.bytes.valid.eq(escaping | out_valid),
            utx.bytes.payload.eq(Mux(escaping, escaped, Mux(out_end, P.END, Mux(special, P.ESC, out)))),
            take.eq(~escaping & out_valid & utx.bytes.ready),
        ]
        with m.If(utx.bytes.ready & escaping):
            m.d.sync += escaping.eq(0)
        with m.If(take & ~out_end & special):
            m.d.sync += [escaping.eq(1), escaped.eq(Mux(out == P.END, P.ESC_END, P.ESC_ESC))]

        def start(frame_kind, first, n_bytes):
            m.d.sync += [kind.eq(frame_kind), pay.eq(first), left.eq(n_bytes), units.eq(1), tx_crc.eq(0xFFFF)]
            m.next = "type"

        more_status = units != len(words)
        more_matches = top.m_tvalid & (units != P.MAX_RECORDS_PER_FRAME)
        more_spill = top.spill_tvalid & (units != P.MAX_RECORDS_PER_FRAME)
        status_word = Signal(48)
        with m.Switch(units):
            for i, w in enumerate(words):
                with m.Case(i):
                    m.d.comb += status_word.eq(w)

        with m.FSM(name="tx"):
            with m.State("idle"):
                with m.If(status_pending):
                    m.d.sync += status_pending.eq(0)
                    start(P.STATUS, words[0], P.STATUS_WORD_BYTES)
                with m.Elif(ack_pending):
                    m.d.sync += ack_pending.eq(0)
                    start(P.ACK, Cat(expect, drained), 2)
                with m.Elif(top.m_tvalid):
                    m.d.comb += top.m_tready.eq(1)
                    start(P.MATCHES, top.m_tdata, self.record_bytes)
                with m.Elif(top.spill_tvalid):
                    m.d.comb += top.spill_tready.eq(1)
                    start(P.SPILL, top.spill_tdata, self.tuple_bytes)
            with m.State("type"):
                m.d.comb += [out.eq(kind), out_valid.eq(1)]
                with m.If(take):
                    m.d.sync += tx_crc.eq(crc16_byte(tx_crc, out))
                    m.next = "seq"
            with m.State("seq"):
                m.d.comb += [out.eq(tx_seq), out_valid.eq(1)]
                with m.If(take):
                    m.d.sync += tx_crc.eq(crc16_byte(tx_crc, out))
                    m.next = "payload"
            with m.State("payload"):
                m.d.comb += [out.eq(pay[:8]), out_valid.eq(1)]
                with m.If(take):
                    m.d.sync += [tx_crc.eq(crc16_byte(tx_crc, out)), pay.eq(pay >> 8), left.eq(left - 1)]
                    with m.If(left == 1):  # the unit's last byte: another unit, or the CRC
                        m.next = "crc_hi"
                        with m.Switch(kind):
                            with m.Case(P.STATUS):
                                with m.If(more_status):
                                    m.d.sync += [pay.eq(status_word), left.eq(P.STATUS_WORD_BYTES),
                                                 units.eq(units + 1)]
                                    m.next = "payload"
                            with m.Case(P.MATCHES):
                                with m.If(more_matches):
                                    m.d.comb += top.m_tready.eq(1)
                                    m.d.sync += [pay.eq(top.m_tdata), left.eq(self.record_bytes), units.eq(units + 1)]
                                    m.next = "payload"
                            with m.Case(P.SPILL):
                                with m.If(more_spill):
                                    m.d.comb += top.spill_tready.eq(1)
                                    m.d.sync += [pay.eq(top.spill_tdata), left.eq(self.tuple_bytes),
                                                 units.eq(units + 1)]
                                    m.next = "payload"
            with m.State("crc_hi"):
                m.d.comb += [out.eq(tx_crc[8:]), out_valid.eq(1)]
                with m.If(take):
                    m.next = "crc_lo"
            with m.State("crc_lo"):
                m.d.comb += [out.eq(tx_crc[:8]), out_valid.eq(1)]
                with m.If(take):
                    m.next = "end"
            with m.State("end"):
                m.d.comb += [out_end.eq(1), out_valid.eq(1)]
                with m.If(take):
                    m.d.sync += tx_seq.eq(tx_seq + 1)
                    m.d.sync += tx_frames.eq(tx_frames + 1)
                    m.next = "idle"

        outer = Module()
        outer.submodules.link = ResetInserter(soft_rst)(m)
        return outer

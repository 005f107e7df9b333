"""The UART host link: a compiled :class:`~cepc.hw.top.Top` behind the protocol of :mod:`cepc.protocol`.

```
            link clock domain ("link")                                              ┊ design's ("sync")
rx ─► UART ─► SLIP ─► frame check (CRC, seq) ─► receive buffer (BRAM) ─► drain ─► CDC ─► Top s_t*
                                  │ STATUS / RESET                 committed frames ┊ one packet each
tx ◄─ UART ◄─ SLIP ◄─ frame builder (CRC) ◄── STATUS > ACK > MATCHES ◄─────────── CDC ◄─ Top m_t*
                                                             > SPILL ◄─────────── CDC ◄─ Top spill_t*
                                                  status words 4-9 ◄─ Fetch ◄──── ┊ Top's counters
```

The link runs in its own clock domain, ``link``, the design in ``sync``: the link moves a byte every
ten bit times and needs a few tens of MHz; clocked apart, its decisions never limit the design's
clock. Words cross one at a time (:mod:`cepc.hw.cdc`). The link's clock must not be faster than the
design's (the idle check counts link cycles for the design's latency).

Board independent: the board top (:mod:`cepc.hw.board_top`) adds the clock,
reset and pins; the cocotb bench of ``cepc run`` drives this component's
``rx`` and ``tx`` directly.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, DomainRenamer, Module, Mux, ResetInserter, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer, PulseSynchronizer
from amaranth.lib.wiring import In, Out

from .. import protocol as P
from . import ecp5, refusing
from .cdc import Fetch, StreamCDC
from .counter import CounterBank, has_spram, increment
from .replica import Replica, small_die
from .top import COUNTERS, Top
from .uart import UartRx, UartTx

LINK_COUNTER_WIDTH = 32
assert COUNTERS == P.DESIGN_COUNTERS  # (the top's ports and its count_pulses, in the protocol's order)
# link cycles the link's reset is held after its cause: the design's reset, a synchronised copy of
# it, then overlaps it (cepc.hw.cdc)
RESET_HOLD = 4
LINGER = 8


def crc16_byte(crc: Value, byte: Value) -> Value:
    """CRC-16/CCITT-FALSE of ``crc`` extended by ``byte`` (MSB first): an XOR network."""
    bits = [crc[i] for i in range(16)]
    for i in reversed(range(8)):
        fb = bits[15] ^ byte[i]
        bits = [fb] + [bits[k - 1] ^ fb if k in (5, 12) else bits[k - 1] for k in range(1, 16)]
    return Cat(*bits)


class HostLink(wiring.Component):
    """A compiled design behind a UART speaking :mod:`cepc.protocol`.

    Two clock domains: ``link`` (the link, ``link_hz``) and ``sync`` (the design, ``clock_hz``; it
    must not be slower than the link's).
    ``rx``/``tx``: the UART lines (8N1, ``divisor`` link cycles per bit: ``link_hz / baud``).
    ``reset`` (link domain): resets the link and the design (registered, like a RESET frame).
    ``activity`` pulses on each UART byte either way, ``error`` stays high once a
    frame was discarded or a tuple dropped or malformed (until a RESET frame).

    Frames are stored whole in a ``buffer_bytes`` receive buffer (a power of
    two) and checked before any byte reaches the design, so a corrupt frame
    is never parsed; at most ``buffer_frames`` accepted frames wait in it.
    The design sees each frame as one packet on an 8-bit bus. A RESET frame
    resets the design (one cycle of its synchronous reset), the buffer, the
    sequence numbers and the counters, and is answered with a STATUS frame.

    ``held``: records and spilled tuples cross to the link where the design's FIFOs hold them, with
    no register of their own (:class:`~cepc.hw.cdc.StreamCDC`); default: on a small die (iCE40).
    ``counter_bank``: the status counters, the design's and the link's, are kept in a RAM on the design's
    side (:class:`~cepc.hw.counter.CounterBank`), the design's from what its ``count_pulses`` say (a
    :class:`~cepc.hw.top.Top` built with ``count_pulses``), not read from its counters; default: where the
    device has a single-port RAM nothing else uses (the UP5K's).
    """

    def __init__(self, top: Top, *, clock_hz: int, baud: int, divisor: int, buffer_bytes: int = 4096,
                 buffer_frames: int = 16, design_id: int = 0, link_hz: int | None = None,
                 held: bool | None = None, counter_bank: bool | None = None):
        link_hz = clock_hz if link_hz is None else link_hz
        with refusing(self):
            if top.bus_width != 8:
                raise ValueError(f"the host link feeds the design one byte per cycle: its bus width must be 8, "
                                 f"not {top.bus_width}")
            if buffer_bytes < 256 or buffer_bytes & (buffer_bytes - 1) or buffer_bytes >= 1 << 16:
                raise ValueError(f"the receive buffer must be a power of two from 256 to 32768 bytes, not {buffer_bytes}")
            if not 1 <= buffer_frames <= 255:
                raise ValueError(f"the receive buffer holds 1 to 255 frames, not {buffer_frames}")
            if link_hz > clock_hz:
                raise ValueError(f"the link's clock ({link_hz / 1e6:g} MHz) must not be faster than the design's "
                                 f"({clock_hz / 1e6:g} MHz)")
        self.top = top
        self.clock_hz, self.link_hz, self.baud, self.divisor = int(clock_hz), int(link_hz), int(baud), divisor
        self.buffer_bytes, self.buffer_frames = buffer_bytes, buffer_frames
        self.design_id = design_id & 0xFFFFFFFF
        self.held = held
        self.counter_bank = counter_bank
        self.record_bytes = top.record_width // 8
        self.tuple_bytes = top.tuple_width // 8
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "activity": Out(1), "error": Out(1),
                          "reset": In(1)})

    def elaborate(self, platform):
        m = Module()
        top = self.top
        k = (self.buffer_bytes - 1).bit_length()  # address bits
        # `m` is the link's logic, written in `sync` and moved into the `link` domain at the end.
        # A RESET frame sets `reset_pending`; once the transmitter is between frames (so no frame is
        # cut short on the wire), `soft_rst` rises and resets everything below: the design, the link
        # and its counters, the UARTs, the crossings. Their reset is a register (the `reset` input or
        # `soft_rst`, held RESET_HOLD cycles), so a board top whose domains have no reset of their own
        # drives every flip-flop's reset straight from a flip-flop: one for the link, and one for the
        # design, a synchronised copy of the link's.
        # Registers that hold data only while a flag of theirs says so (bytes, words, addresses, the
        # status pipeline) have no reset: the reset's two copies then reach the link's control state,
        # not hundreds of data flip-flops across the die.
        soft_rst = Signal()
        reset_pending = Signal()
        # the crossings (added to the outer module, with both domains' resets, at the end): bytes into
        # the design; its records and spilled tuples out; its status counters read one word at a time.
        # Records and spills cross in a register of the design's side each, beside its FIFOs, except on
        # a small die (iCE40), short of logic cells: there the link reads each where the design's output
        # FIFOs hold it (`held`: the top keeps a record it offers until it is taken) and pops it once
        # sent. On the ECP5-85F, those hundreds of bits read from the FIFOs by the link's logic across
        # the die left finance0 too congested to route
        feed = StreamCDC(9, "link", "sync")
        held = small_die(platform) if self.held is None else self.held
        records = StreamCDC(len(top.m_tdata), "sync", "link", held=held)
        spills = StreamCDC(len(top.spill_tdata), "sync", "link", held=held)
        # the design's status counters: read from its counters, or (a bank) kept in a RAM from its pulses
        pulses = getattr(top, "count_amounts", None) is not None
        banked = (has_spram(platform) if self.counter_bank is None else self.counter_bank) and pulses
        if self.counter_bank and not pulses:
            raise ValueError("the design's counters are kept in a bank only from its count_pulses")
        # (and with a bank, the link's own counters too: what they count crosses to the design's side,
        # a pulse at a time, and is kept there with the design's)
        fetched = P.DESIGN_COUNTERS + P.LINK_COUNTERS if banked else P.DESIGN_COUNTERS
        bank = CounterBank(top.count_amounts + [1] * len(P.LINK_COUNTERS), 48) if banked else None
        counters = Fetch(48, len(fetched), "link", "sync", bank=bank)
        link_counted = Signal(len(P.LINK_COUNTERS))  # (banked) what the link's counters count this cycle

        def count(name):  # one more on the link's counter `name`
            if bank is not None:
                m.d.comb += link_counted[P.LINK_COUNTERS.index(name)].eq(1)
            else:
                increment(m, {"rx_frames": rx_frames, "rx_crc_errors": rx_crc_errors, "rx_rejected": rx_rejected,
                              "tx_frames": tx_frames}[name], 1)
        m.d.comb += [
            records.i_valid.eq(top.m_tvalid), records.i_data.eq(top.m_tdata), top.m_tready.eq(records.i_ready),
            spills.i_valid.eq(top.spill_tvalid), spills.i_data.eq(top.spill_tdata),
            top.spill_tready.eq(spills.i_ready),
        ]
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
        nak_pending = Signal()  # the next ACK says a frame was missed (go back to `expect`)
        nak_sent = Signal()  # one NAK per gap: none again until a frame is accepted
        status_pending = Signal(init=1)  # announce ourselves after configuration and after a RESET
        sticky_error = Signal()
        m.d.comb += self.error.eq(sticky_error)
        # the design's trouble (a tuple dropped or malformed), decided on its side, seen on the link's
        trouble, trouble_seen = Signal(), Signal()
        with m.If(trouble_seen):
            m.d.sync += sticky_error.eq(1)

        # --- receive buffer: write pointer, commit pointer, read pointer (k + 1 bits) ---------------
        # each byte carries a ninth bit: the last byte of its frame (set when the frame is committed)
        # Writes are registered on their way to the RAM (its pins are far). Reads take two cycles:
        # the read itself, then a register — on ECP5 the block RAM's own output register (its
        # clock-to-out without it, 5.8 ns, is most of a 150 MHz cycle), elsewhere a flip-flop.
        w_en, w_addr, w_data = Signal(), Signal(k, reset_less=True), Signal(9, reset_less=True)
        m.d.sync += w_en.eq(0)
        r_addr = Signal(k)
        r_data = Signal(9)  # the byte at r_addr two cycles ago
        m.submodules.buffer = buf = ecp5.RegisteredRam(9, self.buffer_bytes)
        m.d.comb += [buf.w_en.eq(w_en), buf.w_addr.eq(w_addr), buf.w_data.eq(w_data), buf.r_addr.eq(r_addr),
                     buf.r_en.eq(1), buf.o_en.eq(1), r_data.eq(buf.r_data)]
        wptr = Signal(k + 1)
        commit = Signal(k + 1)
        rptr = Signal(k + 1)
        queued = Signal(range(self.buffer_frames + 1))  # accepted frames not yet drained
        recent = Signal(24, reset_less=True)  # the last three bytes written: a frame's last payload byte and its CRC
        full = Signal()  # a register: bytes arrive ten bit times apart, pointers move between them
        m.d.sync += full.eq((wptr - rptr)[:k + 1] == self.buffer_bytes)

        # --- SLIP decoder (its outputs are registers) ----------------------------------------------------
        esc = Signal()
        byte = Signal(8, reset_less=True)
        byte_valid = Signal()
        end = Signal()
        bad_byte = Signal()  # an invalid escape or a UART framing error
        m.d.sync += [byte_valid.eq(0), end.eq(0), bad_byte.eq(urx.error)]
        with m.If(urx.valid):
            with m.If(urx.data == P.END):
                m.d.sync += [end.eq(1), esc.eq(0)]
            with m.Elif(esc):
                m.d.sync += [esc.eq(0), byte.eq(Mux(urx.data == P.ESC_END, P.END, P.ESC))]
                with m.If((urx.data == P.ESC_END) | (urx.data == P.ESC_ESC)):
                    m.d.sync += byte_valid.eq(1)
                with m.Else():
                    m.d.sync += bad_byte.eq(1)
            with m.Elif(urx.data == P.ESC):
                m.d.sync += esc.eq(1)
            with m.Else():
                m.d.sync += [byte.eq(urx.data), byte_valid.eq(1)]

        # --- frame check --------------------------------------------------------------------------------
        pos = Signal(range(3))  # bytes of the frame so far: 0, 1, 2 or more
        ftype = Signal(8, reset_less=True)
        fseq = Signal(8, reset_less=True)
        crc = Signal(16, init=0xFFFF)
        body = Signal(range(self.buffer_bytes + 2))  # bytes after the header (payload + CRC), saturating
        bad = Signal()  # bad escape or UART framing error inside the frame
        over = Signal()  # a TUPLES frame that did not fit the buffer
        with m.If(bad_byte):
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
                        m.d.sync += [w_addr.eq(wptr[:k]), w_data.eq(byte), w_en.eq(1)]
                        m.d.sync += [wptr.eq(wptr + 1), recent.eq(Cat(recent[8:], byte))]

        # The verdict on a frame takes two cycles (bytes come ten bit times apart, so nothing else
        # changes meanwhile): at END the checks are registered, the cycle after they are acted on.
        decide = Signal()  # the cycle after END
        f_frame = Signal()  # not an empty frame
        f_good = Signal()  # CRC right, long enough, no bad byte
        f_take = Signal()  # a TUPLES frame to accept, if good
        f_ahead = Signal()  # a TUPLES frame at or after the expected seq (not an old copy)
        f_kind = Signal(8, reset_less=True)
        last_addr = Signal(k + 1, reset_less=True)  # the frame's last payload byte
        end_commit = Signal(k + 1, reset_less=True)  # the commit pointer if it is accepted
        m.d.sync += decide.eq(end)
        with m.If(end):
            m.d.sync += [
                pos.eq(0), crc.eq(0xFFFF), body.eq(0), bad.eq(0), over.eq(0),
                f_frame.eq((pos != 0) | bad),
                f_good.eq(~bad & (crc == 0) & (pos == 2) & (body >= P.CRC_BYTES)),
                f_take.eq((ftype == P.TUPLES) & ~over & (fseq == expect) & (body > P.CRC_BYTES)
                          & (queued != self.buffer_frames)),
                f_ahead.eq((ftype == P.TUPLES) & ~(fseq - expect)[7]),
                f_kind.eq(ftype),
                last_addr.eq(wptr - 3), end_commit.eq(wptr - P.CRC_BYTES),
            ]
        accept = Signal()
        m.d.comb += accept.eq(decide & f_frame & f_good & f_take)
        with m.If(decide & f_frame):
            with m.If(accept):
                m.d.sync += [wptr.eq(end_commit), expect.eq(expect + 1),
                             ack_pending.eq(1), nak_sent.eq(0)]
                count("rx_frames")
                # mark the frame's last payload byte (three bytes back) as its last
                m.d.sync += [w_addr.eq(last_addr[:k]), w_data.eq(Cat(recent[:8], 1)), w_en.eq(1)]
            with m.Else():
                m.d.sync += wptr.eq(commit)  # roll the frame back
                with m.If(~f_good):
                    m.d.sync += sticky_error.eq(1)
                    count("rx_crc_errors")
                with m.Elif(f_kind == P.STATUS_REQUEST):
                    m.d.sync += status_pending.eq(1)
                with m.Elif(f_kind == P.RESET):
                    m.d.sync += reset_pending.eq(1)
                with m.Else():
                    m.d.sync += sticky_error.eq(1)
                    count("rx_rejected")
                    # one NAK per gap
                    with m.If(f_ahead & ~nak_sent):
                        m.d.sync += [nak_pending.eq(1), nak_sent.eq(1), ack_pending.eq(1)]
        # the frame becomes readable once its last byte's mark is in the RAM
        published = Signal()
        m.d.sync += published.eq(accept)
        with m.If(published):
            m.d.sync += commit.eq(end_commit)

        # --- drain: committed bytes into the design, one packet per frame --------------------------------
        # The read port reads `rptr` every cycle (no enable: its fan-out to the block RAMs would be
        # a long path); a byte is issued by moving `rptr` on, and lands in `o_data` two cycles
        # after. One byte at a time: a byte every four cycles is still far more than the UART brings.
        inflight = Signal(2)  # a byte issued one / two cycles ago
        o_valid = Signal()
        o_data = Signal(9, reset_less=True)
        issue = Signal()
        drain_last = Signal()
        # whether committed bytes wait, registered (the compare and the pointer's carry chain would
        # otherwise be one path): a cycle late, which is safe, as `commit` only moves on and, after a
        # byte is issued, `inflight` holds the next issue back until `pending` has caught up
        pending = Signal()
        m.d.sync += pending.eq(rptr != commit)
        m.d.comb += [
            issue.eq(pending & ~o_valid & ~inflight.any()),
            r_addr.eq(rptr[:k]),
            feed.i_valid.eq(o_valid), feed.i_data.eq(o_data),
            drain_last.eq(o_valid & feed.i_ready & o_data[8]),
        ]
        m.d.sync += inflight.eq(Cat(issue, inflight[0]))
        with m.If(issue):
            m.d.sync += rptr.eq(rptr + 1)
        with m.If(inflight[1]):
            m.d.sync += [o_data.eq(r_data), o_valid.eq(1)]
        with m.Elif(feed.i_ready):
            m.d.sync += o_valid.eq(0)
        with m.If(drain_last):
            m.d.sync += [drained.eq(drained + 1), ack_pending.eq(1)]
        m.d.sync += queued.eq(queued + accept - drain_last)

        # idle: nothing in the buffer, the crossings or the design for longer than its latency (counted
        # in link cycles, no shorter than the design's: the design's side says it is busy through a
        # register and a synchroniser, a few link cycles late, well inside the count)
        quiet_limit = top.latency + 32
        quiet = Signal(range(quiet_limit + 1))
        design_busy, design_busy_seen = Signal(), Signal()
        busy = (rptr != commit) | inflight.any() | o_valid | feed.i_busy | records.o_valid | spills.o_valid | \
            design_busy_seen
        with m.If(busy):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != quiet_limit):
            m.d.sync += quiet.eq(quiet + 1)
        idle = Signal()
        m.d.comb += idle.eq(quiet == quiet_limit)

        # --- status words (protocol.STATUS_WORDS) ----------------------------------------------------------
        info = Cat(Const(P.VERSION, 8), idle, Const(0, 7), expect, drained, Const(self.tuple_bytes, 16))
        words = [
            info,
            Cat(Const(self.design_id, 32), Const(self.record_bytes, 16)),
            Cat(Const(self.clock_hz, 32), Const(self.buffer_bytes, 16)),
            Cat(Const(self.baud, 32), Const(self.buffer_frames, 8), Const(0, 8)),
            *(counters.word for _ in fetched),  # the one fetched (below)
            *(() if bank is not None else (rx_frames, rx_crc_errors, rx_rejected, tx_frames)),
        ]
        assert len(words) == len(P.STATUS_WORDS)

        # --- frame builder -------------------------------------------------------------------------------------
        # The frame FSM loads one byte at a time into `ob` (or a raw END); the SLIP escaper sends
        # it into the UART, and the CRC takes each data byte as the escaper takes it. Records and
        # spilled tuples are sent straight from the design's output registers, a byte at a time
        # (one-hot byte selects), and taken (popped) after their last byte: a record counted in
        # `matches_out` is always in a frame already under way, so a STATUS frame never counts a
        # record the host has not received.
        ob = Signal(8, reset_less=True)
        ob_valid = Signal()
        ob_end = Signal()  # a raw END, not escaped, not in the CRC
        take = Signal()  # the escaper takes `ob` this cycle
        ob_crc = Signal()  # a byte the CRC takes (not an END, not the CRC's own bytes)
        load = Signal()  # the FSM may load `ob` this cycle: when it is empty, a flip-flop (loading it also
        # in the cycle the escaper takes it would put the UART's ready into every transition's logic;
        # a byte is ten bit times on the wire, so the cycle this costs is never waited for)
        escaping = Signal()
        escaped = Signal(8, reset_less=True)
        special = Signal()
        tx_crc = Signal(16, init=0xFFFF)
        m.d.comb += [
            special.eq((ob == P.END) | (ob == P.ESC)),
            utx.bytes.valid.eq(escaping | ob_valid),
            utx.bytes.payload.eq(Mux(escaping, escaped, Mux(ob_end, P.END, Mux(special, P.ESC, ob)))),
            take.eq(~escaping & ob_valid & utx.bytes.ready),
            load.eq(~ob_valid),
        ]
        with m.If(utx.bytes.ready & escaping):
            m.d.sync += escaping.eq(0)
        with m.If(take):
            m.d.sync += ob_valid.eq(0)
            with m.If(ob_crc):
                m.d.sync += tx_crc.eq(crc16_byte(tx_crc, ob))
            with m.If(~ob_end):
                with m.If(special):
                    m.d.sync += [escaping.eq(1), escaped.eq(Mux(ob == P.END, P.ESC_END, P.ESC_ESC))]

        def emit(value, end=False, crc=True):
            m.d.sync += [ob.eq(value), ob_valid.eq(1), ob_end.eq(end), ob_crc.eq(crc and not end)]

        pay = Signal(48, reset_less=True)  # the status word or ACK being sent, low byte first
        units = Signal(range(max(P.MAX_RECORDS_PER_FRAME, len(words)) + 1))  # units started
        kind = Signal(8, reset_less=True)
        tx_seq = Signal(8)
        staged = Signal(8, reset_less=True)  # the payload byte to send next
        # the status word of the next unit, loaded into `pay` when `units` moves on to it: the link's
        # clock is slow (its Fmax well above its target on every board: 37-45 of 12 MHz on the UP5K,
        # 110-140 of 60 on the ECP5-85F), so the multiplexer is one step, into `pay` (its words are
        # mostly constants; the six design counters' are the one fetched). The design's counters (words 4-9) come through `counters`, fetched from the
        # design's side when `units` moves on; `status_ready` says the word has come. A word is sent
        # many cycles after `units` moves on (a byte takes link_hz / baud × 10 cycles), so this is
        # never waited for in practice; "next" checks it.
        status_word = Signal(48)
        with m.Switch(units):
            for i, w in enumerate(words):
                with m.Case(i):
                    m.d.comb += status_word.eq(w)
        units_then = Signal.like(units)  # the unit the fetch was started for
        m.d.sync += units_then.eq(units)
        first_counter = P.STATUS_WORDS.index(P.DESIGN_COUNTERS[0])
        # (a unit that is not a design counter fetches whatever its index wraps to, unused)
        m.d.comb += [counters.start.eq(units != units_then), counters.index.eq(units - first_counter)]
        settled = Signal(2)  # the fetched word has been in `counters.word` for one, two cycles
        m.d.sync += settled.eq(Cat(counters.ready & ~counters.start, settled[0]))
        status_ready = Signal()
        m.d.comb += status_ready.eq(settled.all())
        # one-hot byte selects over the record and the spilled tuple
        record_sel = Signal(self.record_bytes, init=1)
        spill_sel = Signal(self.tuple_bytes, init=1)
        pay_left = Signal(range(P.STATUS_WORD_BYTES + 1))
        # after a record (or tuple) is taken, the next one the design has ready crosses in at most
        # three cycles of each clock (cepc.hw.cdc), six link cycles as the link's is the slower:
        # "next" waits up to LINGER cycles for it, so a frame carries the records that are ready
        # rather than ending after each one
        linger = Signal(range(LINGER + 1))

        def select(sel, data, n):
            acc = 0
            for i in range(n):
                acc = acc | (Value.cast(data)[8 * i:8 * i + 8] & sel[i].replicate(8))
            return acc

        # the selected bytes, registered every cycle (a wide AND-OR each): a byte is staged a cycle
        # after its select moves (the "settle" state)
        record_byte, spill_byte = Signal(8, reset_less=True), Signal(8, reset_less=True)
        m.d.sync += [record_byte.eq(select(record_sel, records.o_data, self.record_bytes)),
                     spill_byte.eq(select(spill_sel, spills.o_data, self.tuple_bytes))]

        def start(frame_kind, first=0):
            m.d.sync += [kind.eq(frame_kind), pay.eq(first), pay_left.eq(P.ACK_BYTES if frame_kind == P.ACK else 6),
                         units.eq(1), tx_crc.eq(0xFFFF), record_sel.eq(1), spill_sel.eq(1)]
            m.next = "begin"

        with m.FSM(name="tx"):
            with m.State("idle"):
                m.d.sync += soft_rst.eq(reset_pending & ~ob_valid & ~escaping & utx.bytes.ready)
                with m.If(~ob_valid & ~reset_pending):
                    with m.If(status_pending):
                        m.d.sync += status_pending.eq(0)
                        start(P.STATUS, words[0])
                    with m.Elif(ack_pending):
                        m.d.sync += [ack_pending.eq(0), nak_pending.eq(0)]
                        start(P.ACK, Cat(expect, drained, nak_pending))
                    with m.Elif(records.o_valid):
                        start(P.MATCHES)
                    with m.Elif(spills.o_valid):
                        start(P.SPILL)
            with m.State("begin"):  # an END first: whatever came before (a frame cut by a RESET) ends
                with m.If(load):
                    emit(0, end=True)
                    m.next = "type"
            with m.State("type"):
                with m.If(load):
                    emit(kind)
                    m.next = "seq"
            with m.State("seq"):
                with m.If(load):
                    emit(tx_seq)
                    m.next = "payload"
            with m.State("payload"):  # the next byte into a register first (a wide multiplexer)
                with m.Switch(kind):
                    with m.Case(P.MATCHES):
                        m.d.sync += staged.eq(record_byte)
                    with m.Case(P.SPILL):
                        m.d.sync += staged.eq(spill_byte)
                    with m.Default():  # STATUS, ACK
                        m.d.sync += staged.eq(pay[:8])
                m.next = "emit"
            with m.State("settle"):  # the selected byte registers catch up with the selects
                m.next = "payload"
            with m.State("emit"):
                with m.If(load):
                    emit(staged)
                    m.next = "settle"
                    with m.Switch(kind):
                        with m.Case(P.MATCHES):
                            m.d.sync += record_sel.eq(record_sel.rotate_left(1))
                            with m.If(record_sel[-1]):
                                m.next = "pop"
                        with m.Case(P.SPILL):
                            m.d.sync += spill_sel.eq(spill_sel.rotate_left(1))
                            with m.If(spill_sel[-1]):
                                m.next = "pop"
                        with m.Default():  # STATUS, ACK
                            m.d.sync += [pay.eq(pay >> 8), pay_left.eq(pay_left - 1)]
                            with m.If(pay_left == 1):
                                m.next = "next"
            with m.State("pop"):  # the record or tuple is sent: take it from the design
                m.d.comb += [records.o_ready.eq(kind == P.MATCHES), spills.o_ready.eq(kind == P.SPILL)]
                m.d.sync += linger.eq(LINGER)
                m.next = "next"
            with m.State("next"):  # another unit in this frame, or the CRC
                m.next = "crc_hi"
                with m.Switch(kind):
                    with m.Case(P.STATUS):
                        with m.If(units != len(words)):
                            with m.If(status_ready):
                                m.d.sync += [pay.eq(status_word), pay_left.eq(P.STATUS_WORD_BYTES),
                                             units.eq(units + 1)]
                                m.next = "payload"
                            with m.Else():
                                m.next = "next"
                    with m.Case(P.MATCHES):
                        with m.If(records.o_valid & (units != P.MAX_RECORDS_PER_FRAME)):
                            m.d.sync += units.eq(units + 1)
                            m.next = "payload"
                        with m.Elif(linger != 0):
                            m.d.sync += linger.eq(linger - 1)
                            m.next = "next"
                    with m.Case(P.SPILL):
                        with m.If(spills.o_valid & (units != P.MAX_RECORDS_PER_FRAME)):
                            m.d.sync += units.eq(units + 1)
                            m.next = "payload"
                        with m.Elif(linger != 0):
                            m.d.sync += linger.eq(linger - 1)
                            m.next = "next"
            with m.State("crc_hi"):
                with m.If(~ob_valid & ~escaping):  # the last data byte is in the CRC
                    emit(tx_crc[8:], crc=False)
                    m.next = "crc_lo"
            with m.State("crc_lo"):
                with m.If(load):
                    emit(tx_crc[:8], crc=False)
                    m.next = "end"
            with m.State("end"):
                with m.If(load):
                    emit(0, end=True)
                    m.d.sync += tx_seq.eq(tx_seq + 1)
                    count("tx_frames")
                    m.next = "idle"

        # The resets: the link's is a register of its cause (the `reset` input or `soft_rst`), held
        # RESET_HOLD link cycles after it; the design's a register of a synchronised copy of it, so
        # the two overlap (both sides of every crossing are reset together). Each is a module of its
        # own, kept apart, so neither net reaches the other's flip-flops across the die.
        outer = Module()
        rl = Module()  # link domain, written in `sync`
        hold = Signal(range(RESET_HOLD + 1))
        cause = Signal()
        rl.d.comb += cause.eq(self.reset | soft_rst)
        with rl.If(cause):
            rl.d.sync += hold.eq(RESET_HOLD)
        with rl.Elif(hold != 0):
            rl.d.sync += hold.eq(hold - 1)
        rl.submodules[f"{Replica.PREFIX}rst_link"] = rst_link = Replica(1, init=1)
        rl.d.comb += [rst_link.d.eq(cause | (hold != 0)), rst_link.en.eq(1)]
        outer.submodules.link_reset = DomainRenamer("link")(rl)
        rst_seen = Signal(init=1)
        outer.submodules.rst_sync = FFSynchronizer(rst_link.q, rst_seen, init=1)
        outer.submodules[f"{Replica.PREFIX}rst_design"] = rst_design = Replica(1, init=1)
        outer.d.comb += [rst_design.d.eq(rst_seen), rst_design.en.eq(1)]
        resets = {"link": rst_link.q, "sync": rst_design.q}

        # the byte from the crossing into a register beside the design's framer (the crossing sits by
        # the link: its handshake with the framer's ready was a route across the die), then the design
        inlet = Module()
        byte_valid = Signal()
        byte = Signal(9, reset_less=True)
        inlet.d.comb += feed.o_ready.eq(~byte_valid)
        with inlet.If(~byte_valid & feed.o_valid):
            inlet.d.sync += [byte_valid.eq(1), byte.eq(feed.o_data)]
        with inlet.Elif(top.s_tready):
            inlet.d.sync += byte_valid.eq(0)
        outer.submodules.inlet = ResetInserter(resets)(inlet)

        # the design's side: its trouble and whether it holds anything, registered, then seen by the link
        flags = Module()
        busy = top.m_tvalid | top.spill_tvalid | records.i_busy | spills.i_busy | feed.o_valid | byte_valid
        if bank is not None:  # (a tuple dropped or malformed since the reset: a flag set as it is counted)
            counted = dict(zip(P.DESIGN_COUNTERS, bank.counts(top.count_pulses)))
            with flags.If(counted["dropped"].any() | counted["malformed"].any()):
                flags.d.sync += trouble.eq(1)
            busy = busy | bank.busy  # (counts not yet in the bank's RAM: the status is not final)
        else:  # (each counter's 16-bit segments are compared with zero into registers first: two 48-bit
            # compares were a path across the UP5K)
            nonzero = Signal(6)
            flags.d.sync += nonzero.eq(Cat(*(counter[i:i + 16].any() for counter in (top.dropped, top.malformed)
                                             for i in range(0, 48, 16))))
            flags.d.sync += trouble.eq(nonzero.any())
        flags.d.sync += design_busy.eq(busy)
        flags.submodules.trouble_sync = FFSynchronizer(trouble, trouble_seen, o_domain="link", reset_less=False)
        flags.submodules.busy_sync = FFSynchronizer(design_busy, design_busy_seen, o_domain="link",
                                                    reset_less=False)
        outer.submodules.flags = ResetInserter(resets)(flags)
        outer.d.comb += [
            top.s_tdata.eq(byte[:8]), top.s_tkeep.eq(1), top.s_tlast.eq(byte[8]), top.s_tvalid.eq(byte_valid),
        ]
        if bank is not None:
            outer.submodules.counter_bank = ResetInserter(resets)(bank)
            crossed = []
            for i, name in enumerate(P.LINK_COUNTERS):  # (a toggle, synchronised, its change a pulse)
                cross = outer.submodules[f"{name}_pulse"] = ResetInserter(resets)(PulseSynchronizer("link", "sync"))
                outer.d.comb += cross.i.eq(link_counted[i])
                crossed.append(cross.o)
            outer.d.comb += bank.inc.eq(Cat(top.count_pulses, *crossed))
        else:
            outer.d.comb += [counters.values[i].eq(getattr(top, name)[:48]) for i, name in enumerate(P.DESIGN_COUNTERS)]
        for name, cdc in (("feed", feed), ("records", records), ("spills", spills), ("counters", counters)):
            outer.submodules[name] = ResetInserter(resets)(cdc)
        outer.submodules.link = DomainRenamer("link")(ResetInserter(rst_link.q)(m))
        if "rst" in top.signature.members:  # a netlist made elsewhere (cepc.hw.netlist): its reset is a port
            outer.d.comb += top.rst.eq(rst_design.q)
            outer.submodules.design = top
        else:
            outer.submodules.design = ResetInserter(rst_design.q)(top)
        return outer


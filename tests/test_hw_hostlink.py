"""The UART host link in amaranth.sim, driven at its pins: UART, CRC, frames, credits, errors."""

from __future__ import annotations

import binascii
import random
from pathlib import Path

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from cepc import events
from cepc import protocol as P
from cepc.hw.hostlink import HostLink, crc16_byte
from cepc.hw.top import Top
from cepc.hw.uart import UartRx, UartTx, divisor
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file
from cepc.nfa.lower import lower
from cepc.simulate import decode_record

from hwsim import Ice40, OnPlatform

ROOT = Path(__file__).resolve().parent.parent
DIV = 4  # link clock cycles per UART bit
DESIGN_NS = 10  # the design's clock period in the whole-link tests; the link's is LINK_NS by default
LINK_NS = 20


def uart_bits(data: bytes):
    for b in data:
        yield from [0, *((b >> i) & 1 for i in range(8)), 1]


# --- UART and CRC ----------------------------------------------------------------------------


@settings(max_examples=10, deadline=None)
@given(st.binary(min_size=1, max_size=12), st.integers(4, 9))
def test_uart_loopback(data, div):
    m = Module()
    m.submodules.tx = tx = UartTx(div)
    m.submodules.rx = rx = UartRx(div)
    m.d.comb += rx.rx.eq(tx.tx)
    got = []

    async def bench(ctx):
        for b in data:
            ctx.set(tx.bytes.payload, b)
            ctx.set(tx.bytes.valid, 1)
            await ctx.tick().until(tx.bytes.ready)
        ctx.set(tx.bytes.valid, 0)
        for _ in range(12 * div):
            await ctx.tick()

    async def sink(ctx):
        async for _, _, valid, byte, error in ctx.tick().sample(rx.valid, rx.data, rx.error):
            assert not error
            if valid:
                got.append(byte)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_process(sink)
    sim.run()
    assert bytes(got) == data


def test_uart_receiver_flags_a_missing_stop_bit():
    rx = UartRx(DIV)
    seen = []

    async def bench(ctx):
        bits = [1, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 1, 1] + list(uart_bits(b"\x5a"))  # stop bit low
        for bit in bits:
            ctx.set(rx.rx, bit)
            for _ in range(DIV):
                await ctx.tick()
                seen.append((ctx.get(rx.valid), ctx.get(rx.data), ctx.get(rx.error)))
        for _ in range(3 * DIV):
            await ctx.tick()
            seen.append((ctx.get(rx.valid), ctx.get(rx.data), ctx.get(rx.error)))

    sim = Simulator(rx)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert sum(e for _, _, e in seen) == 1
    assert [d for v, d, _ in seen if v] == [0x5A]


def test_baud_divisor_is_checked():
    assert divisor(150e6, 3_000_000) == 50 and divisor(51e6, 3_000_000) == 17
    with pytest.raises(ValueError, match=r"^1000000 baud is \+5.0% off at 10.5 MHz \(divisor 10\)"):
        divisor(10.5e6, 1_000_000)
    with pytest.raises(ValueError, match="needs at least 4 clock cycles per bit"):
        divisor(10e6, 3_000_000)


@given(st.integers(0, 0xFFFF), st.integers(0, 255))
def test_crc_step_is_binascii_crc_hqx(crc, byte):
    c, b = Signal(16), Signal(8)
    m = Module()
    out = Signal(16)
    m.d.comb += out.eq(crc16_byte(c, b))
    result = []

    async def bench(ctx):
        ctx.set(c, crc)
        ctx.set(b, byte)
        result.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert result == [binascii.crc_hqx(bytes([byte]), crc)]


# --- the whole link ----------------------------------------------------------------------------


def marathon():
    checked = check(parse_file(ROOT / "examples" / "marathon" / "marathon.sql"))
    frame = events.load_events(ROOT / "examples" / "marathon" / "events.csv", checked.stream)
    return checked, lower(checked), frame


def run_link(design, wire: list[bytes], *, partitions=6, buffer_bytes=256, buffer_frames=4, gap=0,
             tail_cycles=10000, link_ns=LINK_NS, held=None, platform=None, counter_bank=False):
    """Send ``wire`` (chunks of bytes, or a number of idle bit times; ``gap`` idle bit times
    after each chunk) into a HostLink, its link clocked every ``link_ns`` and its design every
    DESIGN_NS; return the frames it sent back (None for a bad one) and the design's counters.
    ``tail_cycles``: link cycles to wait after the last byte; ``platform``: elaborated as for it
    (:class:`~hwsim.Ice40`: as for the iCEBreaker); ``counter_bank``: the design's counters kept in RAM
    (as on the UP5K), the status frames' from there."""
    top = Top(design, bus_width=8, partitions=partitions, count_pulses=counter_bank)
    link_hz = 1_000_000_000 // link_ns
    dut = HostLink(top, clock_hz=1_000_000_000 // DESIGN_NS, link_hz=link_hz, baud=link_hz // DIV, divisor=DIV,
                   buffer_bytes=buffer_bytes, buffer_frames=buffer_frames, design_id=0xC0FFEE, held=held,
                   counter_bank=counter_bank)
    received = bytearray()
    done = []

    async def sender(ctx):
        ctx.set(dut.rx, 1)
        await ctx.tick("link").repeat(40)
        for chunk in wire:
            if isinstance(chunk, int):  # idle bit times
                await ctx.tick("link").repeat(chunk * DIV)
                continue
            for bit in uart_bits(chunk):
                ctx.set(dut.rx, bit)
                await ctx.tick("link").repeat(DIV)
            ctx.set(dut.rx, 1)
            await ctx.tick("link").repeat(gap * DIV + 1)
        await ctx.tick("link").repeat(tail_cycles)
        # the design's counters, and the error LED (a frame discarded, a tuple dropped or malformed)
        done.append({**{name: ctx.get(getattr(top, name)) for name in P.DESIGN_COUNTERS}, "error": ctx.get(dut.error)})

    async def receiver(ctx):  # a UART receiver as a per-cycle state machine (no nested awaits)
        state = {"count": None, "byte": 0}
        async for _, _, tx in ctx.tick("link").sample(dut.tx):
            n = state["count"]
            if n is None:
                if not tx:
                    state["count"], state["byte"] = 0, 0  # a start bit began on this edge
                continue
            n += 1
            state["count"] = n
            bit, phase = divmod(n - DIV // 2, DIV)
            if phase == 0 and 1 <= bit <= 8:
                state["byte"] |= tx << (bit - 1)
            elif phase == 0 and bit == 9:
                received.append(state["byte"])
                state["count"] = None

    sim = Simulator(dut if platform is None else OnPlatform(dut, platform))
    sim.add_clock(DESIGN_NS * 1e-9, domain="sync")
    sim.add_clock(link_ns * 1e-9, domain="link")
    sim.add_testbench(sender)
    sim.add_process(receiver)
    sim.run()
    return [P.parse_frame(b) for b in P.SlipDecoder().feed(bytes(received))], done[0]


def frames_record_bytes(design) -> bytes:
    top = Top(design, bus_width=8, partitions=1)
    top._MustUse__silence = True
    return bytes(top.record_width // 8)


def decoded(design, frames) -> list[tuple]:
    rb = len(frames_record_bytes(design))
    rows = []
    for f in frames:
        if f is not None and f.kind == P.MATCHES:
            assert len(f.payload) % rb == 0
            for i in range(0, len(f.payload), rb):
                r = decode_record(design, int.from_bytes(f.payload[i:i + rb], "little"))
                rows.append((r["runner"], r["seq"]))
    return sorted(rows, key=lambda r: r[1])


def statuses(frames) -> list[P.Status]:
    return [P.parse_status(f.payload) for f in frames if f is not None and f.kind == P.STATUS]


def acks(frames) -> list[tuple]:
    return [P.parse_ack(f.payload) for f in frames if f is not None and f.kind == P.ACK]


def tuple_frames(design, frame, per_frame):
    data = [design.tuple.to_bytes(r) for r in frame.to_dict("records")]
    return [b"".join(data[i:i + per_frame]) for i in range(0, len(data), per_frame)]


EXPECTED = [(2, 3), (4, 13)]  # examples/marathon/expected.csv


# the link's clock: slower, the same, no ratio; records crossing in a register, or held in the FIFOs
# (each clock once, and held once: CI's time)
@pytest.mark.parametrize("link_ns,held", [(LINK_NS, False), (DESIGN_NS, False), (37, True)])
def test_tuples_in_frames_come_back_as_match_records(link_ns, held):
    checked, design, frame = marathon()
    payloads = tuple_frames(design, frame, 5)
    wire = [P.frame(P.TUPLES, i, p) for i, p in enumerate(payloads)] + [P.frame(P.STATUS_REQUEST, 0)]
    frames, counters = run_link(design, wire, link_ns=link_ns, held=held)
    assert counters.pop("error") == 0  # nothing dropped, malformed or discarded
    assert None not in frames[1:]  # (the first may be cut: the power-on STATUS)
    assert decoded(design, frames) == EXPECTED
    assert counters["tuples_in"] == len(frame) and counters["matches_out"] == 2
    last = statuses(frames)[-1]
    assert last.design_id == 0xC0FFEE and last.tuple_bytes == 13 and last.record_bytes == 9
    assert (last.buffer_bytes, last.buffer_frames, last.baud, last.clock_hz) == \
        (256, 4, 1_000_000_000 // link_ns // DIV, 100_000_000)
    # the design's counters, fetched across the clock domains, each in its own word (a record is
    # counted once it has been sent: the STATUS may go out before the last MATCHES frame)
    fetched = {k: last.counters[k] for k in P.DESIGN_COUNTERS}
    assert 1 <= fetched.pop("matches_out") <= counters.pop("matches_out")
    assert fetched == counters
    assert last.accepted == len(payloads) and last.counters["rx_frames"] == len(payloads)
    assert acks(frames)[-1][:2] == (len(payloads), len(payloads))  # everything accepted and drained
    # board frames are numbered without gaps
    seqs = [f.seq for f in frames if f is not None]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


@pytest.mark.parametrize("bank", [False, True], ids=["counters", "counters in RAM"])
def test_a_corrupt_frame_is_counted_and_never_parsed(bank):
    checked, design, frame = marathon()
    rows = frame.to_dict("records")
    good = P.frame(P.TUPLES, 0, b"".join(design.tuple.to_bytes(r) for r in rows[:4]))  # runner 2: SI, then Queens
    bad = bytearray(good)
    bad[10] ^= 0x04  # one bit of a tuple: the CRC catches it
    wire = [bytes(bad), P.frame(P.STATUS_REQUEST, 0)]
    frames, counters = run_link(design, wire, counter_bank=bank)
    s = statuses(frames)[-1]
    assert s.counters["rx_crc_errors"] == 1 and s.counters["rx_frames"] == 0 and s.accepted == 0
    assert counters["tuples_in"] == 0 and decoded(design, frames) == []
    # the same frame, intact, afterwards: taken as frame 0
    frames, counters = run_link(design, [bytes(bad), good, P.frame(P.STATUS_REQUEST, 0)], counter_bank=bank)
    assert counters["tuples_in"] == 4 and decoded(design, frames) == [(2, 3)]
    assert statuses(frames)[-1].counters["rx_crc_errors"] == 1
    # (every status: the board's frames numbered as they were sent, counted as far as the last one)
    sent = statuses(frames)
    assert all(st.counters["tx_frames"] == f.seq for st, f in zip(sent, (f for f in frames if f is not None
                                                                             and f.kind == P.STATUS)))


def test_line_noise_and_bad_escapes_are_counted():
    checked, design, frame = marathon()
    noise = bytes([P.END, 0x55, P.ESC, 0x01, 0x77, P.END, 0x13, 0x37, P.END])
    frames, counters = run_link(design, [noise, P.frame(P.STATUS_REQUEST, 0)])
    assert statuses(frames)[-1].counters["rx_crc_errors"] == 2
    assert counters["tuples_in"] == 0


# (and with every counter kept in RAM, as on the UP5K: the link's own cross to the design's side)
@pytest.mark.parametrize("bank", [False, True], ids=["counters", "counters in RAM"])
def test_out_of_sequence_frames_are_rejected_with_one_nak(bank):
    checked, design, frame = marathon()
    p = tuple_frames(design, frame, 5)
    # frame 0 is lost on the way: 1 and 2 arrive, are rejected, one NAK; then 0, 1, 2 again; then an old copy
    wire = [P.frame(P.TUPLES, 1, p[1]), P.frame(P.TUPLES, 2, p[2]), P.frame(P.TUPLES, 0, p[0]),
            P.frame(P.TUPLES, 1, p[1]), P.frame(P.TUPLES, 2, p[2]), P.frame(P.TUPLES, 1, p[1]),
            P.frame(P.STATUS_REQUEST, 0)]
    frames, counters = run_link(design, wire, counter_bank=bank)
    naks = [a for a in acks(frames) if a[2]]
    assert naks == [(0, 0, True)]
    s = statuses(frames)[-1]
    assert s.counters["rx_rejected"] == 3 and s.counters["rx_frames"] == 3 and s.accepted == 3
    assert counters["tuples_in"] == 14 and decoded(design, frames) == EXPECTED


def test_a_frame_that_overflows_the_buffer_is_rejected_whole():
    checked, design, frame = marathon()
    data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))  # 182 bytes
    wire = [P.frame(P.TUPLES, 0, data + data), P.frame(P.TUPLES, 0, data), P.frame(P.STATUS_REQUEST, 0)]
    frames, counters = run_link(design, wire, buffer_bytes=256)
    s = statuses(frames)[-1]
    assert s.counters["rx_rejected"] == 1 and s.accepted == 1
    assert counters["tuples_in"] == 14 and decoded(design, frames) == EXPECTED


# as for the large die and for the small (the iCEBreaker's: the link holds its records in FIFOs)
# (and with the design's counters kept in RAM, as on the UP5K: its counts come back from there)
@pytest.mark.parametrize("platform,bank", [(None, False), (Ice40(), False), (Ice40(), True)],
                         ids=["large die", "small die", "counters in RAM"])
def test_reset_clears_the_design_and_the_link(platform, bank):
    checked, design, frame = marathon()
    p = tuple_frames(design, frame, 7)
    # the host waits for the STATUS that answers a RESET before it sends on
    wire = [P.frame(P.TUPLES, 0, p[0]), P.frame(P.RESET, 0), 1500, P.frame(P.TUPLES, 0, p[0]),
            P.frame(P.TUPLES, 1, p[1]), P.frame(P.STATUS_REQUEST, 0)]
    frames, counters = run_link(design, wire, tail_cycles=12000, platform=platform, counter_bank=bank)
    after = statuses(frames)
    fresh = [s for s in after if s.counters["tx_frames"] == 0 and s.accepted == 0]
    assert len(fresh) >= 2  # the power-on STATUS and the answer to RESET
    assert after[-1].counters["tuples_in"] == 14 and after[-1].counters["rx_frames"] == 2
    assert counters["tuples_in"] == 14
    # the answer to RESET starts a new numbering of the board's frames
    i = next(i for i, f in enumerate(frames) if f is not None and f.kind == P.STATUS and f.seq == 0 and i > 0)
    assert [f.seq for f in frames[i:]] == list(range(len(frames) - i))


@pytest.mark.parametrize("bank", [False, True], ids=["counters", "counters in RAM"])
def test_a_partial_tuple_in_a_frame_counts_as_malformed(bank):
    checked, design, frame = marathon()
    rows = frame.to_dict("records")
    data = b"".join(design.tuple.to_bytes(r) for r in rows)
    wire = [P.frame(P.TUPLES, 0, data[:4 * 13 + 5]), P.frame(P.TUPLES, 1, data[4 * 13:]), 2000,
            P.frame(P.STATUS_REQUEST, 0)]
    frames, counters = run_link(design, wire, counter_bank=bank)
    assert counters["malformed"] == 1 and counters["tuples_in"] == 14
    status = statuses(frames)[-1]  # (asked for once the tuples are in)
    assert status.counters["malformed"] == 1 and status.counters["tuples_in"] == 14 and status.idle
    assert counters["error"] == 1  # the design's trouble reaches the link's error LED
    assert decoded(design, frames) == EXPECTED  # the partial tuple did not shift the next frame


@pytest.mark.parametrize("held", [False, True])
def test_backpressure_from_a_busy_transmitter_loses_nothing(held):
    # every tuple matches: the records outrun the UART, the design stalls, the buffer fills
    q = check(parse("CREATE STREAM s (k UINT8, x UINT8); PARTITION BY k AFTER MATCH CONTINUE PATTERN (A) "
                    "DEFINE A AS x > 0;"))
    design = lower(q)
    rng = random.Random(1)
    data = [bytes([rng.randrange(4), 1 + rng.randrange(200)]) for _ in range(120)]
    payloads = [b"".join(data[i:i + 40]) for i in range(0, 120, 40)]
    wire = [P.frame(P.TUPLES, i, p) for i, p in enumerate(payloads)]
    frames, counters = run_link(design, wire, buffer_bytes=256, buffer_frames=4, tail_cycles=60000, held=held)
    rb = len(frames_record_bytes(design))
    records = []
    per_frame = []
    for f in frames:
        if f is not None and f.kind == P.MATCHES:
            assert len(f.payload) % rb == 0 and len(f.payload) // rb <= P.MAX_RECORDS_PER_FRAME
            per_frame.append(len(f.payload) // rb)
            records += [decode_record(design, int.from_bytes(f.payload[i:i + rb], "little"))["seq"]
                        for i in range(0, len(f.payload), rb)]
    assert counters["tuples_in"] == 120 and sorted(records) == list(range(120))
    # records waiting in the design fill frames (the next crosses while "next" lingers for it)
    assert max(per_frame) == P.MAX_RECORDS_PER_FRAME

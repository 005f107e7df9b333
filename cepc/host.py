"""``cepc run``: stream events to a board over its UART and collect the matches.

The host side of :mod:`cepc.protocol`. It opens the port with pyserial
(``serial_for_url``: a device such as ``/dev/ttyUSB0``, a pty, or a
``socket://host:port`` bridge), resets the board, checks that the bitstream
was built from the same query (the design id of the STATUS frame), then sends
the packed tuples in TUPLES frames inside the board's credit window, and
decodes MATCHES and SPILL frames as they come. It ends when every frame has
been drained into the design, the board reports itself idle, and the host
has received as many records and spilled tuples as the board's counters say
it sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from . import protocol as P
from .errors import CepcError


def design_of(checked, max_length: int | None = None):
    """(design plan, design id, record bytes) of a checked query file, as a board built from it has."""
    from .emit.verilog import sidecar
    from .errors import UsageError
    from .hw.top import Top
    from .nfa.lower import lower

    try:
        design = lower(checked, max_length)
    except ValueError as e:
        raise UsageError(str(e)) from None
    top = Top(design, bus_width=8, partitions=1)
    top._MustUse__silence = True  # only read for its layouts, never elaborated
    return design, P.design_id(sidecar(design, top, {})), top.record_width // 8


class LinkError(CepcError):
    """The board did not answer as the protocol says."""


@dataclass
class RunResult:
    records: list[int]  # match records as integers (m_tdata), in arrival order
    spilled: list[int]  # spilled tuples as integers
    status: P.Status  # the board's last status
    host: dict = field(default_factory=dict)  # the host's own counters
    seconds: float = 0.0


@dataclass
class RunOptions:
    port: str
    baud: int = 3_000_000
    timeout: float = 10.0  # seconds without progress before giving up
    retry: float = 0.5  # seconds without an accepted frame before sending again from the first unaccepted
    frame_bytes: int = 240  # payload of a TUPLES frame, at most (rounded down to whole tuples)
    poll: float = 0.02  # seconds between STATUS requests at the end


def _unwrap(ref: int, seq8: int) -> int:
    """The absolute frame number ≥ ref - 128 whose low 8 bits are ``seq8``."""
    return ref + ((seq8 - ref) + 128) % 256 - 128


class _Link:
    def __init__(self, port: str, baud: int):
        try:
            import serial
        except ImportError:  # pragma: no cover - a dependency
            raise CepcError("pyserial is not installed (pip install pyserial)") from None
        try:
            self.port = serial.serial_for_url(port, baudrate=baud, timeout=0, write_timeout=10)
        except (serial.SerialException, ValueError) as e:
            raise LinkError(f"cannot open {port}: {e}") from None
        self.decoder = P.SlipDecoder()
        self.bad = 0  # frames the host received with a bad CRC or escape

    def send(self, kind: int, seq: int = 0, payload: bytes = b"") -> None:
        self.port.write(P.frame(kind, seq, payload))

    def receive(self, wait: float = 0.002) -> list[P.Frame]:
        data = self.port.read(65536)
        if not data:
            time.sleep(wait)
            data = self.port.read(65536)
        frames = []
        for body in self.decoder.feed(data):
            f = P.parse_frame(body)
            if f is None:
                self.bad += 1
            else:
                frames.append(f)
        return frames

    def close(self) -> None:
        self.port.close()


def run(payloads: list[bytes], tuple_bytes: int, record_bytes: int, design_id: int, opts: RunOptions,
        progress: Callable[[str], None] = lambda s: None) -> RunResult:
    """Send ``payloads`` (packed tuples, ``tuple_bytes`` each) through the board on ``opts.port``."""
    t0 = time.perf_counter()
    link = _Link(opts.port, opts.baud)
    try:
        return _run(link, payloads, tuple_bytes, record_bytes, design_id, opts, progress, t0)
    finally:
        link.close()


def _reset(link: _Link, opts: RunOptions) -> tuple[P.Status, int]:
    """RESET the board; its answer is a STATUS frame. Returns it and the board's next frame seq."""
    link.port.reset_input_buffer()
    deadline = time.perf_counter() + opts.timeout
    while time.perf_counter() < deadline:
        link.send(P.RESET)
        resend = time.perf_counter() + max(opts.retry, 0.2)
        while time.perf_counter() < resend:
            for f in link.receive():
                if f.kind == P.STATUS and len(f.payload) == P.STATUS_BYTES:
                    status = P.parse_status(f.payload)
                    if status.counters["tx_frames"] == 0 and status.accepted == 0:  # fresh from the RESET
                        link.bad = 0
                        return status, (f.seq + 1) & 0xFF
    raise LinkError(f"no answer from a cepc board on {opts.port} within {opts.timeout:g} s "
                    f"(is the bitstream loaded, and the baud rate {opts.baud:,}?)")


def _run(link: _Link, payloads, tuple_bytes, record_bytes, design_id, opts, progress, t0) -> RunResult:
    status, rx_seq = _reset(link, opts)
    if status.version != P.VERSION:
        raise LinkError(f"the board speaks protocol version {status.version}, this cepc {P.VERSION}")
    if status.design_id != design_id:
        raise LinkError(f"the board runs another design (id {status.design_id:08x}; this query compiles to "
                        f"{design_id:08x}): synthesise this query for the board (cepc synth) and load it")
    if status.tuple_bytes != tuple_bytes or status.record_bytes != record_bytes:
        raise LinkError(f"the board takes {status.tuple_bytes}-byte tuples and sends {status.record_bytes}-byte "
                        f"records; this query has {tuple_bytes} and {record_bytes}")

    per_frame = max(1, min(opts.frame_bytes, status.buffer_bytes - P.CRC_BYTES) // tuple_bytes)
    frames = [b"".join(payloads[i:i + per_frame]) for i in range(0, len(payloads), per_frame)]
    cost = [len(f) + P.CRC_BYTES for f in frames]  # buffer bytes while received
    records: list[int] = []
    spilled: list[int] = []
    host = {"frames": len(frames), "sent": 0, "retransmitted": 0, "lost": 0, "bad": 0}
    nxt = accepted = drained = 0  # absolute frame numbers
    last_progress = last_accept = time.perf_counter()
    last_poll = 0.0
    done = False
    while not done:
        now = time.perf_counter()
        # send within the window: frames and bytes not yet drained
        while nxt < len(frames) and nxt - drained < status.buffer_frames and \
                sum(cost[drained:nxt + 1]) <= status.buffer_bytes:
            link.send(P.TUPLES, nxt, frames[nxt])
            host["sent"] += 1
            nxt += 1
        # go back N: the board threw away a frame (bad CRC on the way, or out of sequence)
        if accepted < nxt and now - last_accept > opts.retry:
            host["retransmitted"] += nxt - accepted
            nxt = accepted
            last_accept = now
        if drained == len(frames) and now - last_poll > opts.poll:
            link.send(P.STATUS_REQUEST)
            last_poll = now
        for f in link.receive():
            if f.kind in (P.MATCHES, P.SPILL, P.ACK, P.STATUS):
                if f.seq != rx_seq:
                    host["lost"] += (f.seq - rx_seq) % 256
                rx_seq = (f.seq + 1) & 0xFF
            if f.kind == P.MATCHES:
                records += [int.from_bytes(f.payload[i:i + record_bytes], "little")
                            for i in range(0, len(f.payload) - record_bytes + 1, record_bytes)]
                last_progress = now
            elif f.kind == P.SPILL:
                spilled += [int.from_bytes(f.payload[i:i + tuple_bytes], "little")
                            for i in range(0, len(f.payload) - tuple_bytes + 1, tuple_bytes)]
                last_progress = now
            elif f.kind in (P.ACK, P.STATUS):
                nak = False
                if f.kind == P.ACK:
                    acc8, drn8, nak = P.parse_ack(f.payload)
                else:
                    status = P.parse_status(f.payload)
                    acc8, drn8 = status.accepted, status.drained
                a, d = _unwrap(accepted, acc8), _unwrap(drained, drn8)
                if a > accepted:
                    accepted, last_accept, last_progress = a, now, now
                if d > drained:
                    drained, last_progress = d, now
                    progress(f"{drained}/{len(frames)} frames, {len(records)} matches")
                if nak and accepted < nxt:  # a frame was lost on the way: send again from there
                    host["retransmitted"] += nxt - accepted
                    nxt, last_accept = accepted, now
                if nxt < accepted:  # an ACK overtook a rewind
                    nxt = accepted
                if f.kind == P.STATUS and drained == len(frames) and status.idle:
                    c = status.counters
                    if c["matches_out"] == len(records) and c["dropped"] == len(spilled):
                        done = True
                    elif host["lost"]:
                        done = True  # records were lost on the way; reported below
        if not done and now - last_progress > opts.timeout:
            raise LinkError(f"the board stopped answering on {opts.port}: {drained} of {len(frames)} frames drained, "
                            f"{len(records)} records received after {now - t0:.1f} s")
    host["bad"] = link.bad
    return RunResult(records, spilled, status, host, time.perf_counter() - t0)

"""The host link protocol between ``cepc run`` and a board top: the one place it is defined.

Both ends import this module: the board top (:mod:`cepc.hw.hostlink`) for its
constants and status layout, the host tool (:mod:`cepc.host`) for framing,
checking and decoding. docs/synthesis.md describes the same protocol for
people.

Bytes on the UART are SLIP-framed (RFC 1055): a frame ends with ``END``
(0xC0); ``END`` and ``ESC`` inside a frame are sent as ``ESC ESC_END`` and
``ESC ESC_ESC``. Both sides also send ``END`` before each frame, so line noise
or a frame cut short (by a RESET) before it forms a separate, rejected frame;
empty frames are ignored. Unescaped, a frame is::

    type (1 byte) | seq (1 byte) | payload (0 … n bytes) | CRC-16 (2 bytes, big-endian)

The CRC is CRC-16/CCITT-FALSE (polynomial 0x1021, initial value 0xFFFF, no
reflection, no final XOR) over type, seq and payload, so the CRC over the
whole frame including its CRC is zero. A frame with a bad CRC, an invalid
escape, a UART framing error inside, or too few bytes is discarded and
counted; it is never parsed.

Host → board: ``TUPLES`` (payload: whole packed tuples, SPEC §1), ``STATUS``
(a status request) and ``RESET`` (reset the design, its counters and the
link). Board → host: ``MATCHES`` (payload: whole match records), ``SPILL``
(tuples the partitioner could not place), ``ACK`` and ``STATUS``.

Flow control is a window of credits, go-back-N style: the board accepts a
``TUPLES`` frame only if its seq is the one it expects next (``accepted``),
stores it whole in its receive buffer, checks the CRC, and only then passes
its tuples to the design, as one AXI-Stream packet. Each frame is
acknowledged twice in ``ACK`` frames: when it is accepted, and when it has
been drained into the design (``drained``). The host keeps at most
``buffer_frames`` frames and ``buffer_bytes`` bytes (payload + CRC) sent but
not drained, so the buffer can never overflow, even while the design stalls
on a slow output. A lost or rejected frame shows as ``accepted`` not moving:
the host sends every frame from ``accepted`` on again. The board says so at
once with a NAK (an ACK with flag bit 0 set) when a good TUPLES frame arrives
at or after the one it expects without being taken (a gap: the one before was
lost); it sends one NAK per gap. Old copies (before ``accepted``) are dropped
silently. A frame lost last of all is found by the host's retry timeout.
"""

from __future__ import annotations

import binascii
import json
import zlib
from dataclasses import dataclass

# --- SLIP --------------------------------------------------------------------------------
END, ESC, ESC_END, ESC_ESC = 0xC0, 0xDB, 0xDC, 0xDD

# --- frame types -----------------------------------------------------------------------------
TUPLES, STATUS_REQUEST, RESET = 0x01, 0x02, 0x03
MATCHES, SPILL, ACK, STATUS = 0x81, 0x82, 0x83, 0x84

VERSION = 1
HEADER_BYTES = 2  # type, seq
CRC_BYTES = 2
MAX_RECORDS_PER_FRAME = 16  # the board closes a MATCHES or SPILL frame after this many
ACK_BYTES = 3  # accepted, drained, flags (bit 0: NAK)

# --- status ---------------------------------------------------------------------------------
# The STATUS payload is a list of 48-bit little-endian words (6 bytes each), in this order.
# The first four pack small fields (lowest bits first); the rest are counters.
STATUS_WORD_BYTES = 6
STATUS_WORDS = (
    # word 0: version 8 | flags 8 (bit 0: idle) | accepted 8 | drained 8 | tuple_bytes 16
    "info",
    # word 1: design_id 32 | record_bytes 16
    "design",
    # word 2: clock_hz 32 | buffer_bytes 16
    "clock",
    # word 3: baud 32 | buffer_frames 8 | 0
    "link",
    # design counters (SPEC §4)
    "tuples_in", "matches_out", "dropped", "malformed", "evicted", "overflow",
    # link counters (32 bits, zero-extended)
    "rx_frames",  # TUPLES frames accepted
    "rx_crc_errors",  # frames discarded for a bad CRC, a bad escape, a UART framing error, too short
    "rx_rejected",  # good frames not taken: out of sequence, buffer full, too long, unknown type
    "tx_frames",  # frames the board sent
)
DESIGN_COUNTERS = ("tuples_in", "matches_out", "dropped", "malformed", "evicted", "overflow")
LINK_COUNTERS = ("rx_frames", "rx_crc_errors", "rx_rejected", "tx_frames")
STATUS_BYTES = len(STATUS_WORDS) * STATUS_WORD_BYTES


def crc16(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF): ``binascii.crc_hqx`` is exactly this."""
    return binascii.crc_hqx(data, crc)


def frame(kind: int, seq: int, payload: bytes = b"") -> bytes:
    """A whole frame as sent on the wire: leading END, escaped body with CRC, trailing END."""
    body = bytes([kind, seq & 0xFF]) + payload
    body += crc16(body).to_bytes(2, "big")
    return bytes([END]) + slip_escape(body) + bytes([END])


def slip_escape(data: bytes) -> bytes:
    return data.replace(bytes([ESC]), bytes([ESC, ESC_ESC])).replace(bytes([END]), bytes([ESC, ESC_END]))


class SlipDecoder:
    """Incremental SLIP decoder: ``feed(bytes)`` yields each frame's unescaped body, or None
    for a frame with an invalid escape. Empty frames (two ENDs in a row) are skipped."""

    def __init__(self):
        self._buf = bytearray()
        self._esc = False
        self._bad = False

    def feed(self, data: bytes):
        for b in data:
            if b == END:
                if self._buf or self._bad:
                    yield None if self._bad else bytes(self._buf)
                self._buf.clear()
                self._esc = self._bad = False
            elif self._esc:
                self._esc = False
                if b == ESC_END:
                    self._buf.append(END)
                elif b == ESC_ESC:
                    self._buf.append(ESC)
                else:
                    self._bad = True
            elif b == ESC:
                self._esc = True
            else:
                self._buf.append(b)


@dataclass(frozen=True)
class Frame:
    kind: int
    seq: int
    payload: bytes


def parse_frame(body: bytes | None) -> Frame | None:
    """An unescaped frame body → Frame, or None if it is too short or its CRC is wrong."""
    if body is None or len(body) < HEADER_BYTES + CRC_BYTES or crc16(body) != 0:
        return None
    return Frame(body[0], body[1], body[HEADER_BYTES:-CRC_BYTES])


@dataclass(frozen=True)
class Status:
    version: int
    idle: bool
    accepted: int
    drained: int
    tuple_bytes: int
    design_id: int
    record_bytes: int
    clock_hz: int
    buffer_bytes: int
    baud: int
    buffer_frames: int
    counters: dict  # DESIGN_COUNTERS and LINK_COUNTERS by name


def parse_status(payload: bytes) -> Status:
    if len(payload) != STATUS_BYTES:
        raise ValueError(f"a status payload has {STATUS_BYTES} bytes, not {len(payload)}")
    words = [int.from_bytes(payload[i:i + STATUS_WORD_BYTES], "little")
             for i in range(0, STATUS_BYTES, STATUS_WORD_BYTES)]
    info, design, clock, link = words[:4]
    counters = dict(zip(STATUS_WORDS[4:], words[4:]))
    return Status(
        version=info & 0xFF, idle=bool(info >> 8 & 1), accepted=info >> 16 & 0xFF, drained=info >> 24 & 0xFF,
        tuple_bytes=info >> 32 & 0xFFFF, design_id=design & 0xFFFFFFFF, record_bytes=design >> 32 & 0xFFFF,
        clock_hz=clock & 0xFFFFFFFF, buffer_bytes=clock >> 32 & 0xFFFF, baud=link & 0xFFFFFFFF,
        buffer_frames=link >> 32 & 0xFF, counters=counters)


def parse_ack(payload: bytes) -> tuple[int, int, bool]:
    """(accepted, drained, nak) of an ACK frame."""
    if len(payload) != ACK_BYTES:
        raise ValueError(f"an ACK payload has {ACK_BYTES} bytes, not {len(payload)}")
    return payload[0], payload[1], bool(payload[2] & 1)


def design_id(sidecar: dict) -> int:
    """A 32-bit fingerprint of what the host must agree on with a bitstream: the tuple wire
    format, the match record layout and the queries (names, patterns, keys, measures)."""
    wire = {
        "input": [[f["name"], f["kind"], f["offset"], f["width"]] for f in sidecar["input"]["fields"]],
        "record": {k: v for k, v in sidecar["match_record"].items()},
        "queries": [[q["name"], q["pattern"], q["key"], q.get("measures", [])] for q in sidecar["queries"]],
    }
    return zlib.crc32(json.dumps(wire, sort_keys=True).encode())


__all__ = ["crc16", "frame", "slip_escape", "SlipDecoder", "Frame", "parse_frame", "Status", "parse_status",
           "parse_ack", "design_id"]

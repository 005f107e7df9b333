"""The host link protocol (cepc.protocol): CRC, SLIP, frames, status words, design id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cepc import protocol as P
from cepc.emit.verilog import sidecar
from cepc.hw.top import Top
from cepc.lang.check import check
from cepc.lang.parse import parse_file
from cepc.nfa.lower import lower

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")


def test_crc_is_ccitt_false():
    assert P.crc16(b"123456789") == 0x29B1  # the catalogue check value of CRC-16/CCITT-FALSE
    body = bytes([P.TUPLES, 7]) + b"\x00\xc0\xdb"
    assert P.crc16(body + P.crc16(body).to_bytes(2, "big")) == 0  # the residue the board checks


def decode_all(wire: bytes) -> list:
    return list(P.SlipDecoder().feed(wire))


@given(st.integers(0, 255), st.integers(0, 255), st.binary(max_size=300))
def test_frames_round_trip_through_slip(kind, seq, payload):
    wire = P.frame(kind, seq, payload)
    assert wire[0] == P.END and wire[-1] == P.END and P.END not in wire[1:-1]
    (body,) = decode_all(wire)
    assert P.parse_frame(body) == P.Frame(kind, seq, payload)


@settings(max_examples=300)
@given(st.binary(min_size=1, max_size=64), st.data())
def test_every_single_bit_error_is_detected_never_parsed(payload, data):
    wire = bytearray(P.frame(P.TUPLES, 3, payload))
    i = data.draw(st.integers(1, len(wire) - 2))  # not the delimiters themselves
    wire[i] ^= 1 << data.draw(st.integers(0, 7))
    frames = [P.parse_frame(b) for b in decode_all(bytes(wire))]
    # a flipped bit may split the frame (a new END) or break an escape: nothing parses as good
    assert all(f is None for f in frames)


def test_slip_decoder_handles_bad_escapes_and_empty_frames():
    wire = bytes([P.END, P.END, 1, P.ESC, 0x42, 2, P.END]) + P.frame(P.STATUS_REQUEST, 0)
    bodies = decode_all(wire)
    assert bodies[0] is None  # ESC followed by neither ESC_END nor ESC_ESC
    assert P.parse_frame(bodies[1]) == P.Frame(P.STATUS_REQUEST, 0, b"")
    assert len(bodies) == 2  # the empty frames are skipped


def test_short_frames_are_rejected():
    assert P.parse_frame(b"\x01\x02\x03") is None
    assert P.parse_frame(None) is None


def test_status_words_decode_by_their_layout():
    words = [0] * len(P.STATUS_WORDS)
    words[0] = 1 | 1 << 8 | 5 << 16 | 4 << 24 | 13 << 32
    words[1] = 0xDEADBEEF | 9 << 32
    words[2] = 150_000_000 | 8192 << 32
    words[3] = 3_000_000 | 32 << 32
    for i in range(4, len(P.STATUS_WORDS)):
        words[i] = (i * 1_000_003) % (1 << 48)
    payload = b"".join(w.to_bytes(6, "little") for w in words)
    s = P.parse_status(payload)
    assert (s.version, s.idle, s.accepted, s.drained, s.tuple_bytes) == (1, True, 5, 4, 13)
    assert (s.design_id, s.record_bytes, s.clock_hz, s.buffer_bytes) == (0xDEADBEEF, 9, 150_000_000, 8192)
    assert (s.baud, s.buffer_frames) == (3_000_000, 32)
    assert s.counters["tuples_in"] == 4 * 1_000_003 and s.counters["tx_frames"] == 13 * 1_000_003
    with pytest.raises(ValueError, match="status payload has 84 bytes"):
        P.parse_status(payload[:-1])


def test_ack_payload():
    assert P.parse_ack(bytes([7, 5, 1])) == (7, 5, True)
    with pytest.raises(ValueError, match="ACK payload has 3 bytes, not 2"):
        P.parse_ack(b"\x01\x02")


def side(example: str, **top) -> dict:
    design = lower(check(parse_file(ROOT / "examples" / example)))
    top = Top(design, **top)
    top._MustUse__silence = True  # (only its figures are read: never elaborated)
    return sidecar(design, top, {})


def test_design_id_follows_the_wire_format_not_the_build_options():
    a = P.design_id(side("marathon/marathon.sql", bus_width=8, partitions=4))
    b = P.design_id(side("marathon/marathon.sql", bus_width=64, partitions=256))
    assert a == b
    # the SQL:2016 form of the same query lowers to the same design
    assert a == P.design_id(side("marathon/marathon_sql.sql", bus_width=8, partitions=1))
    assert a != P.design_id(side("network/network.sql", bus_width=8, partitions=4))
    assert json.dumps(a)  # a plain integer

"""Protobuf on the wire, by hand where it pays: varints and length-delimited fields (views
and stream messages are built from cached bytes, since protobuf fields concatenate), and the
well-known time types."""

from __future__ import annotations

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp


def timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def duration(seconds: float) -> Duration:
    """A time left, never negative."""
    left = Duration()
    left.FromNanoseconds(int(max(0.0, seconds) * 1e9))
    return left


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_VARINTS: tuple[bytes, ...] = tuple(_encode_varint(v) for v in range(16384))


def varint(value: int) -> bytes:
    """A protobuf base-128 varint (value >= 0)."""
    return _VARINTS[value] if value < 16384 else _encode_varint(value)


def tag(number: int, wire_type: int) -> bytes:
    """A field's key: its number and wire type (0 varint, 2 length-delimited)."""
    return varint(number << 3 | wire_type)


def field(number: int, body: bytes) -> bytes:
    """A length-delimited field: its tag, its length, its bytes."""
    return varint(number << 3 | 2) + varint(len(body)) + body

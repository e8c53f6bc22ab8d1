"""One record inside a magic-2 batch: its bytes, decoded and encoded (after decompression).

One record (all varints are zigzag, protobuf-style; varint <= 5 bytes, varlong <= 10)::

    length          varint   bytes that follow
    attributes      int8     unused, 0
    timestampDelta  varlong  from baseTimestamp
    offsetDelta     varint   from baseOffset
    keyLength       varint   -1 = null
    key             bytes
    valueLength     varint   -1 = null
    value           bytes
    headersCount    varint
    headers         headerKeyLength varint, headerKey (UTF-8), headerValueLength varint
                    (-1 = null), headerValue

Control batches (isControl) hold one record whose key is ``version int16, type int16``
(type 0 ABORT, 1 COMMIT) and whose value is ``version int16, coordinatorEpoch int32``.

A record is at least 7 bytes (every field one byte): ``MIN_RECORD_SIZE_BYTES``.
Decoding is bounded by the declared lengths and raises ``CorruptRecordError`` (Kafka:
CORRUPT_MESSAGE) for anything that does not fit; it never reads past a record's end.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.compression import CorruptRecordError

__all__ = [
    "MIN_RECORD_SIZE_BYTES",
    "ControlRecordKey",
    "ControlType",
    "NewRecord",
    "Record",
    "decode_control_key",
    "decode_record",
    "encode_control_key",
    "encode_control_value",
    "encode_record",
]

MIN_RECORD_SIZE_BYTES = 7  # length, attributes, ts, offset, key, value, headers: 1 byte each
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    """The ``type`` in a control record's key (Kafka's ``ControlRecordType``)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record. ``offset`` and ``timestamp`` are absolute (ms for timestamp)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


class NewRecord(NamedTuple):
    """A record to write with ``build_batch``.

    ``timestamp_ms`` None means now; ``offset_delta`` None means its index in the batch
    (give it to keep the offsets of a compacted batch).
    """

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp_ms: int | None = None
    offset_delta: int | None = None


class ControlRecordKey(NamedTuple):
    """A control record's key: version int16, type int16 (``ControlType``)."""

    version: int
    type: int


def _read_varint(data: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Read a zigzag varint (max_bytes 5) or varlong (max_bytes 10) at ``pos``, before ``end``."""
    if pos < end and data[pos] < 0x80:  # fast path: one byte
        b = data[pos]
        return (b >> 1) ^ -(b & 1), pos + 1
    raw = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError(f"varint cut at byte {pos} of the records")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes before byte {pos}")


def decode_record(
    data: bytes, pos: int, base_offset: int, base_timestamp: int, index: int
) -> tuple[Record, int]:
    start = pos
    length, pos = _read_varint(data, pos, len(data), 5)
    if length < MIN_RECORD_SIZE_BYTES - 1 or length > len(data) - pos:
        raise CorruptRecordError(
            f"record {index} at byte {start} claims {length} bytes, {len(data) - pos} remain"
        )
    end = pos + length  # nothing below reads past `end`
    pos += 1  # attributes, unused
    ts_delta, pos = _read_varint(data, pos, end, 10)
    offset_delta, pos = _read_varint(data, pos, end, 5)
    key, pos = _read_bytes(data, pos, end, index, "key")
    value, pos = _read_bytes(data, pos, end, index, "value")
    header_count, pos = _read_varint(data, pos, end, 5)
    if header_count < 0 or header_count * 2 > end - pos:
        raise CorruptRecordError(
            f"record {index} at byte {start} claims {header_count} headers in {end - pos} bytes"
        )
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(header_count):
        hkey, pos = _read_bytes(data, pos, end, index, "header key")
        if hkey is None:
            raise CorruptRecordError(f"record {index} has a null header key")
        try:
            hkey_str = hkey.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError(f"record {index} has a header key that is not UTF-8") from None
        hvalue, pos = _read_bytes(data, pos, end, index, "header value")
        headers.append((hkey_str, hvalue))
    if pos != end:
        raise CorruptRecordError(
            f"record {index} at byte {start} declares {length} bytes but uses {pos - start}"
        )
    return Record(base_offset + offset_delta, base_timestamp + ts_delta, key, value, headers), end


def _read_bytes(
    data: bytes, pos: int, end: int, index: int, what: str
) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos, end, 5)
    if length == -1:
        return None, pos
    if length < 0 or length > end - pos:
        raise CorruptRecordError(
            f"record {index}: {what} length {length} at byte {pos} does not fit the record"
        )
    return data[pos : pos + length], pos + length


def _write_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw & ~0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(value))
        out += value


def encode_record(out: bytearray, rec: NewRecord, ts_delta: int, offset_delta: int) -> None:
    body = bytearray(b"\x00")  # attributes
    _write_varint(body, ts_delta)
    _write_varint(body, offset_delta)
    _write_bytes(body, rec.key)
    _write_bytes(body, rec.value)
    _write_varint(body, len(rec.headers))
    for hkey, hvalue in rec.headers:
        _write_bytes(body, hkey.encode("utf-8"))
        _write_bytes(body, hvalue)
    _write_varint(out, len(body))
    out += body


def encode_control_key(control_type: ControlType) -> bytes:
    """A control record's key: version 0, type."""
    return _CONTROL_KEY.pack(0, int(control_type))


def encode_control_value(coordinator_epoch: int) -> bytes:
    """A transaction marker's value: version 0, coordinatorEpoch."""
    return _CONTROL_VALUE.pack(0, coordinator_epoch)


def decode_control_key(key: bytes | None) -> ControlRecordKey:
    """Decode a control record's key (version int16, type int16)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(f"control record key {key!r} is shorter than 4 bytes")
    version, ctype = _CONTROL_KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"control record key has negative version {version}")
    return ControlRecordKey(int(version), int(ctype))

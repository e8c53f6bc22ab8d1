"""Decode a batch's records straight into column lists (the executor's hot loop).

``protocol.records.RecordBatch.records()`` builds a ``Record`` per record; for a bulk read
that object costs more than the bytes. ``add_batch_columns`` walks the same layout
(Kafka's ``DefaultRecord``; varints are zigzag, as in ``protocol.record_codec``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    | keyLength varint | key | valueLength varint | value
    | headerCount varint | (headerKeyLength varint | headerKey | headerValueLength varint | headerValue)*

and appends key, value, offset, timestamp (ms) and headers to caller-owned lists for the
records whose offset is in ``[start, end)``. One- and two-byte varints (nearly all of them)
are decoded inline. Bad data raises ``CorruptRecordError`` (what ``records()`` raises),
never reads past the buffer, and every loop is bounded by the record count or the buffer
length.
"""

from __future__ import annotations

from typing import Any, Final

from protocol.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, CompressionType, decompress
from protocol.records import HEADER_SIZE_BYTES, CorruptRecordError, RecordBatch, TimestampType

_MAX_VARINT_BYTES: Final = 10


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (up to 10 bytes) at ``pos``: (value, position after it)."""
    result = 0
    shift = 0
    for _ in range(_MAX_VARINT_BYTES):
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {_MAX_VARINT_BYTES} bytes at byte {pos}")


class Columns:
    """Column lists for one Arrow batch (see ``spark_ingest.rows``)."""

    __slots__ = ("headers", "keys", "offsets", "timestamps_ms", "types", "values")

    def __init__(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps_ms: list[int] = []
        self.types: list[int] = []
        self.headers: list[list[dict[str, Any]] | None] = []

    def __len__(self) -> int:
        return len(self.offsets)


def add_batch_columns(batch: RecordBatch, start: int, end: int, cols: Columns, want_headers: bool,
                      max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> None:
    """Append the records of ``batch`` with offsets in ``[start, end)`` to ``cols``."""
    count = batch.records_count
    body = batch.buffer[HEADER_SIZE_BYTES:]
    codec = batch.compression
    data = bytes(body) if codec is CompressionType.NONE else decompress(codec, body, max_decompressed_bytes)
    size = len(data)
    if count < 0 or count * 7 > size:
        raise CorruptRecordError(f"recordsCount {count} does not fit {size} bytes of records")
    base_offset = batch.base_offset
    log_append = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    base_ts = batch.base_timestamp
    ts_type = 1 if log_append else 0
    keys, values, offsets = cols.keys, cols.values, cols.offsets
    stamps, types, headers = cols.timestamps_ms, cols.types, cols.headers
    pos = 0
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif data[pos + 1] < 0x80:  # two bytes: the usual length of a value or record
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                length, pos = _varint(data, pos)
            record_end = pos + length
            if length < 6 or record_end > size:
                raise CorruptRecordError(f"record length {length} at byte {pos} does not fit the batch")
            pos += 1  # attributes (unused)
            b = data[pos]
            if b < 0x80:
                ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif data[pos + 1] < 0x80:  # two bytes: the usual length of a value or record
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                ts_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                ts_delta, pos = _varint(data, pos)
            b = data[pos]
            if b < 0x80:
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                offset_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                offset_delta, pos = _varint(data, pos)
            offset = base_offset + offset_delta
            if offset < start or offset >= end:
                pos = record_end
                continue
            b = data[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif data[pos + 1] < 0x80:  # two bytes: the usual length of a value or record
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                n, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                n, pos = _varint(data, pos)
            if n < 0:
                key = None
            else:
                key = data[pos:pos + n]
                pos += n
            b = data[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif data[pos + 1] < 0x80:  # two bytes: the usual length of a value or record
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                n, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                n, pos = _varint(data, pos)
            if n < 0:
                value = None
            else:
                value = data[pos:pos + n]
                pos += n
            if pos > record_end:
                raise CorruptRecordError(f"record at offset {offset} overruns its length")
            keys.append(key)
            values.append(value)
            offsets.append(offset)
            stamps.append(batch.max_timestamp if log_append else base_ts + ts_delta)
            types.append(ts_type)
            if want_headers:
                headers.append(_headers(data, pos, record_end))
            pos = record_end
    except IndexError:
        raise CorruptRecordError(f"records of the batch at offset {base_offset} are cut") from None
    if pos != size:
        raise CorruptRecordError(f"{size - pos} bytes left after the {count} records of the batch")


def _headers(data: bytes, pos: int, record_end: int) -> list[dict[str, Any]] | None:
    count, pos = _varint(data, pos)
    if count < 0 or count > record_end - pos:
        raise CorruptRecordError(f"header count {count} does not fit the record")
    if count == 0:
        return None
    out: list[dict[str, Any]] = []
    for _ in range(count):
        n, pos = _varint(data, pos)
        if n < 0 or pos + n > record_end:
            raise CorruptRecordError("header key does not fit the record")
        try:
            key = data[pos:pos + n].decode()
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not UTF-8") from None
        pos += n
        n, pos = _varint(data, pos)
        value = None
        if n >= 0:
            if pos + n > record_end:
                raise CorruptRecordError("header value does not fit the record")
            value = data[pos:pos + n]
            pos += n
        out.append({"key": key, "value": value})
    if pos != record_end:
        raise CorruptRecordError("record length does not match its fields")
    return out

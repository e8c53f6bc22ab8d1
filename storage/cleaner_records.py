"""The records of a batch as the cleaner needs them: offsets, keys, tombstones, and the
bytes to copy when a batch is rewritten.

A record (after decompression; layout in ``protocol.record_codec``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headersCount varint | headers

``parse_records`` walks a batch's record bytes once and returns, per record,
``(timestamp_delta, offset_delta, key, has_value, tail_start, end)``, where
``data[tail_start:end]`` is everything from ``keyLength`` on (key, value, headers). A rewrite
keeps that tail byte for byte and only re-encodes the length, timestamp delta and offset
delta (``encode_record_with_tail``), so headers and values are never decoded.

Bad input raises ``CorruptRecordError``: a varint that runs past its record or is too long,
a length that does not fit, or bytes left over after the declared count.
"""

from __future__ import annotations

from protocol.compression import CorruptRecordError

MIN_RECORD_SIZE_BYTES = 7

ParsedRecord = tuple[int, int, bytes | None, bool, int, int]


def _varint(data: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint at ``pos`` (at most ``max_bytes`` bytes, none at or past ``end``)."""
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


def parse_records(data: bytes, count: int) -> list[ParsedRecord]:
    """Every record of a batch body (see the module docstring); ``count`` from its header.

    Varints of one or two bytes (values up to 8191 after zigzag: every length, delta and
    size of a record below 8 KiB) are decoded inline; longer ones go through ``_varint``.
    """
    size = len(data)
    if count < 0 or count * MIN_RECORD_SIZE_BYTES > size:
        raise CorruptRecordError(f"recordsCount {count} does not fit {size} bytes of records")
    try:
        return _parse(data, count, size)
    except IndexError:
        raise CorruptRecordError("a record runs past the end of the batch") from None


def _parse(data: bytes, count: int, size: int) -> list[ParsedRecord]:
    out: list[ParsedRecord] = []
    append = out.append
    pos = 0
    for index in range(count):
        # length
        b = data[pos] if pos < size else 0x80
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 1 < size and data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            length = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            length, pos = _varint(data, pos, size, 5)
        end = pos + length
        if length < MIN_RECORD_SIZE_BYTES - 1 or end > size:
            raise CorruptRecordError(f"record {index} claims {length} bytes, {size - pos} remain")
        pos += 1  # attributes
        # timestampDelta
        b = data[pos]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            ts_delta = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            ts_delta, pos = _varint(data, pos, end, 10)
        # offsetDelta
        b = data[pos]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            offset_delta = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            offset_delta, pos = _varint(data, pos, end, 5)
        tail = pos
        # keyLength, key
        b = data[pos]
        if b < 0x80:
            key_len = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            key_len = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            key_len, pos = _varint(data, pos, end, 5)
        key: bytes | None
        if key_len == -1:
            key = None
        elif 0 <= key_len <= end - pos:
            key = data[pos : pos + key_len]
            pos += key_len
        else:
            raise CorruptRecordError(f"record {index}: key length {key_len} does not fit")
        # valueLength (only whether it is null: -1 is the one-byte 0x01)
        if pos >= end:
            raise CorruptRecordError(f"record {index} ends before its value")
        has_value = data[pos] != 0x01
        if pos > end - 1 or tail >= end:
            raise CorruptRecordError(f"record {index} is cut")
        append((ts_delta, offset_delta, key, has_value, tail, end))
        pos = end
    if pos != size:
        raise CorruptRecordError(f"{size - pos} bytes left after the {count} records")
    return out


def _put_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw & ~0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def encode_record_with_tail(
    out: bytearray, ts_delta: int, offset_delta: int, tail: bytes | memoryview
) -> None:
    """Append one record: new length, attributes 0, ``ts_delta``, ``offset_delta``, then the
    original bytes from ``keyLength`` on."""
    head = bytearray(b"\x00")
    _put_varint(head, ts_delta)
    _put_varint(head, offset_delta)
    _put_varint(out, len(head) + len(tail))
    out += head
    out += tail

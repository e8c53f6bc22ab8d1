"""The log cleaner's per-record loops: the offset map's key scan, the filter's record
selection and the re-encoding of kept records.

This module is plain typed Python, written so that mypyc can compile it
(``scripts/build-native`` builds ``storage.cleaner_scan_native`` from this very file and
``storage.cleaner_native`` loads it when its source hash matches, else this module). Keep
it self-contained: ints, ``bytes``, ``dict``, ``list``, ``bytearray`` and ``hashlib``, no
classes of other modules on the hot path.

Records (after decompression; layout in ``protocol.record_codec``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headersCount varint | headers

Batches in a chunk (layout in ``protocol.batch_header``): baseOffset int64 @0, batchLength
int32 @8, attributes int16 @21, lastOffsetDelta int32 @23, recordsCount int32 @57, records
from byte 61. A chunk holds whole batches only (``storage.cleaner_engine.read_chunks``).

Offset map keys (``storage.offset_map``): a key of at most ``MAX_RAW_KEY_BYTES`` bytes is
stored as it is, a longer one as its 16-byte MD5 digest (Kafka stores every key so).

Every read is bounded by the end of its record and of its batch; bad input raises
``CorruptRecordError`` (a varint that runs past its record or is too long, a length that
does not fit, records left over or missing).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from protocol.compression import CorruptRecordError

MAX_RAW_KEY_BYTES = 15
ENTRY_OVERHEAD_BYTES = 120  # a dict slot, the key's bytes object and the offset's int
MIN_RECORD_SIZE_BYTES = 7
BATCH_HEADER_BYTES = 61
LOG_OVERHEAD_BYTES = 12
ATTR_COMPRESSION_MASK = 0x07
ATTR_CONTROL = 0x20

# A decompressed batch body: (chunk, batch position, batch size, attributes) -> records.
BodyOf = Callable[[bytes, int, int, int], bytes]


def _varint(data: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """The zigzag varint at ``pos`` (at most ``max_bytes`` bytes, none at or past ``end``):
    (value, position after it)."""
    if pos >= end:
        raise CorruptRecordError(f"varint cut at byte {pos} of the records")
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw = b & 0x7F
    shift = 7
    pos += 1
    i = 1
    while i < max_bytes:
        if pos >= end:
            raise CorruptRecordError(f"varint cut at byte {pos} of the records")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        i += 1
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes before byte {pos}")


def _int32(data: bytes, pos: int) -> int:
    v = (data[pos] << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3]
    return v - 0x100000000 if v & 0x80000000 else v


def _int64(data: bytes, pos: int) -> int:
    hi = (data[pos] << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3]
    lo = (data[pos + 4] << 24) | (data[pos + 5] << 16) | (data[pos + 6] << 8) | data[pos + 7]
    v = (hi << 32) | lo
    return v - 0x10000000000000000 if hi & 0x80000000 else v


def map_key(data: bytes, pos: int, key_len: int) -> bytes:
    """The offset map's key for the key bytes ``data[pos:pos + key_len]``."""
    if key_len <= MAX_RAW_KEY_BYTES:
        return data[pos : pos + key_len]
    return hashlib.md5(data[pos : pos + key_len], usedforsecurity=False).digest()


def _check_count(count: int, size: int) -> None:
    if count < 0 or count * MIN_RECORD_SIZE_BYTES > size:
        raise CorruptRecordError(f"recordsCount {count} does not fit {size} bytes of records")


def map_records(data: bytes, pos: int, end: int, count: int, base_offset: int,
                start_offset: int, entries: dict[bytes, int], used_bytes: int,
                budget_bytes: int) -> tuple[int, int, int, bool, bool]:
    """Put key -> offset of every keyed record at or after ``start_offset`` of the records
    ``data[pos:end]`` (``count`` of them) into ``entries``, while the entries' memory stays
    within ``budget_bytes`` (each new key counts ``ENTRY_OVERHEAD_BYTES`` plus its map
    key's length; checked before each put, as Kafka checks its map's size).

    Returns (used bytes, largest offset put or -1, records without a key, full, in order):
    ``full`` means the map stopped before a record that it had no room for; ``in order``
    that the records' offsets increased (Kafka requires it; ``select_records`` relies on it
    unless told otherwise)."""
    _check_count(count, end - pos)
    latest = -1
    nulls = 0
    previous = -1
    in_order = True
    index = 0
    while index < count:
        index += 1
        length, pos = _varint(data, pos, end, 5)
        rec_end = pos + length
        if length < MIN_RECORD_SIZE_BYTES - 1 or rec_end > end:
            raise CorruptRecordError(f"record {index - 1} claims {length} bytes, {end - pos} remain")
        pos += 1  # attributes
        _, pos = _varint(data, pos, rec_end, 10)  # timestampDelta
        offset_delta, pos = _varint(data, pos, rec_end, 5)
        key_len, pos = _varint(data, pos, rec_end, 5)
        if key_len < -1 or key_len > rec_end - pos:
            raise CorruptRecordError(f"record {index - 1}: key length {key_len} does not fit")
        offset = base_offset + offset_delta
        if offset <= previous:
            in_order = False
        previous = offset
        if key_len == -1:
            if offset >= start_offset:
                nulls += 1
        elif offset >= start_offset:
            if used_bytes > budget_bytes:
                return used_bytes, latest, nulls, True, in_order
            key = map_key(data, pos, key_len)
            n = len(entries)
            entries[key] = offset
            if len(entries) != n:
                used_bytes += ENTRY_OVERHEAD_BYTES + len(key)
            if offset > latest:
                latest = offset
        pos = rec_end
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the {count} records")
    return used_bytes, latest, nulls, False, in_order


def map_chunk(chunk: bytes, start_offset: int, entries: dict[bytes, int], used_bytes: int,
              budget_bytes: int, body_of: BodyOf) -> tuple[int, int, int, int, bool, bool]:
    """``map_records`` over every data batch of ``chunk`` whose last offset is at or after
    ``start_offset`` (``body_of`` decompresses a compressed one).

    Returns (used bytes, largest offset seen or -1, records read, records without a key,
    full, offsets in order: in each batch and from batch to batch). The largest offset counts every batch passed
    whole (control batches too, as Kafka's ``updateLatestOffset``) and, when the map fills
    up, the last offset put."""
    latest = -1
    messages = 0
    nulls = 0
    in_order = True
    previous_last = -1
    pos = 0
    size = len(chunk)
    while pos < size:  # each turn moves past one whole batch
        if size - pos < BATCH_HEADER_BYTES:
            raise CorruptRecordError(f"{size - pos} bytes at byte {pos} are no batch")
        batch_size = _int32(chunk, pos + 8) + LOG_OVERHEAD_BYTES
        batch_end = pos + batch_size
        if batch_size < BATCH_HEADER_BYTES or batch_end > size:
            raise CorruptRecordError(f"batch length {batch_size - 12} at byte {pos}")
        base = _int64(chunk, pos)
        attributes = (chunk[pos + 21] << 8) | chunk[pos + 22]
        last = base + _int32(chunk, pos + 23)
        count = _int32(chunk, pos + 57)
        if base <= previous_last:
            in_order = False
        previous_last = last
        if last >= start_offset and not attributes & ATTR_CONTROL and count != 0:
            if attributes & ATTR_COMPRESSION_MASK:
                body = body_of(chunk, pos, batch_size, attributes)
                used_bytes, put_latest, n_null, full, ordered = map_records(
                    body, 0, len(body), count, base, start_offset, entries, used_bytes,
                    budget_bytes)
            else:
                used_bytes, put_latest, n_null, full, ordered = map_records(
                    chunk, pos + BATCH_HEADER_BYTES, batch_end, count, base, start_offset,
                    entries, used_bytes, budget_bytes)
            nulls += n_null
            in_order = in_order and ordered
            if put_latest > latest:
                latest = put_latest
            if full:
                return used_bytes, latest, messages, nulls, True, in_order
            messages += count
        if last >= start_offset and last > latest:
            latest = last
        pos = batch_end
    return used_bytes, latest, messages, nulls, False, in_order


def select_records(data: bytes, pos: int, end: int, count: int, base_offset: int,
                   first_dirty_offset: int, latest_offset: int, kept_offsets: list[int],
                   kept_index: int, entries: dict[bytes, int], retain_deletes: bool,
                   by_offset: bool, out: list[int]) -> tuple[int, int, int, bool]:
    """Which records of ``data[pos:end]`` (``count``, offsets ``base_offset`` + delta) the
    cleaning keeps (Kafka's ``shouldRetainRecord``):

    - past ``latest_offset`` (the offset map's end): kept;
    - in the mapped dirty range [``first_dirty_offset``, ``latest_offset``]: kept if it is
      its key's latest, i.e. its offset is among the map's values (``kept_offsets``,
      sorted; ``kept_index`` is where to look from, records' offsets increasing; looked up
      again if they do not) — every keyed record of that range is in the map, so a record
      without a key or with a newer value is not. Only ``by_offset``: when the map saw
      offsets out of order, the rule below holds for this range too;
    - below ``first_dirty_offset`` (cleaned before): kept unless the map holds its key
      with a later offset; a record without a key is dropped;

    and a kept tombstone (null value) below the map's end only while ``retain_deletes``.

    For each kept record appends (timestampDelta, offsetDelta, start of keyLength, end) to
    ``out``. Returns (records kept, the next ``kept_index``, records without a key dropped
    below the dirty range, any kept record is a tombstone)."""
    _check_count(count, end - pos)
    kept = 0
    nulls = 0
    tombstones = False
    n_kept = len(kept_offsets)
    index = 0
    while index < count:
        index += 1
        length, pos = _varint(data, pos, end, 5)
        rec_end = pos + length
        if length < MIN_RECORD_SIZE_BYTES - 1 or rec_end > end:
            raise CorruptRecordError(f"record {index - 1} claims {length} bytes, {end - pos} remain")
        pos += 1  # attributes
        ts_delta, pos = _varint(data, pos, rec_end, 10)
        offset_delta, pos = _varint(data, pos, rec_end, 5)
        tail = pos
        key_len, pos = _varint(data, pos, rec_end, 5)
        if key_len < -1 or key_len > rec_end - pos:
            raise CorruptRecordError(f"record {index - 1}: key length {key_len} does not fit")
        key_pos = pos
        if key_len > 0:
            pos += key_len
        if pos >= rec_end:
            raise CorruptRecordError(f"record {index - 1} ends before its value")
        has_value = data[pos] != 0x01  # valueLength -1 is the one byte 0x01
        offset = base_offset + offset_delta
        if offset > latest_offset:
            keep = True
        elif by_offset and offset >= first_dirty_offset:
            if kept_index > 0 and kept_offsets[kept_index - 1] >= offset:
                kept_index = _bisect_left(kept_offsets, offset)  # offsets went back: look again
            while kept_index < n_kept and kept_offsets[kept_index] < offset:
                kept_index += 1
            keep = (kept_index < n_kept and kept_offsets[kept_index] == offset
                    and (has_value or retain_deletes))
        elif key_len == -1:
            nulls += 1
            keep = False
        else:
            found = entries.get(map_key(data, key_pos, key_len), -1)
            keep = offset >= found and (has_value or retain_deletes)
        if keep:
            kept += 1
            out.append(ts_delta)
            out.append(offset_delta)
            out.append(tail)
            out.append(rec_end)
            if not has_value:
                tombstones = True
        pos = rec_end
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the {count} records")
    return kept, kept_index, nulls, tombstones


def _bisect_left(values: list[int], x: int) -> int:
    lo = 0
    hi = len(values)
    while lo < hi:
        mid = (lo + hi) // 2
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _put_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _varint_size(value: int) -> int:
    raw = (value << 1) ^ (value >> 63)
    n = 1
    while raw >= 0x80:
        raw >>= 7
        n += 1
    return n


def encode_records(data: bytes, spans: list[int], old_base_timestamp: int,
                   new_base_timestamp: int, out: bytearray) -> int:
    """Append the records ``spans`` names (as ``select_records`` lists them) to ``out``,
    each as: new length, attributes 0, its timestamp against ``new_base_timestamp``, its
    offsetDelta, then its original bytes from keyLength on (key, value and headers are
    copied, never decoded). Returns the largest record timestamp (-1 if none)."""
    max_ts = -1
    i = 0
    n = len(spans)
    while i + 3 < n:
        ts = old_base_timestamp + spans[i]
        if ts > max_ts:
            max_ts = ts
        ts_delta = ts - new_base_timestamp
        offset_delta = spans[i + 1]
        tail = spans[i + 2]
        end = spans[i + 3]
        _put_varint(out, 1 + _varint_size(ts_delta) + _varint_size(offset_delta) + end - tail)
        out.append(0)
        _put_varint(out, ts_delta)
        _put_varint(out, offset_delta)
        out += data[tail:end]
        i += 4
    return max_ts

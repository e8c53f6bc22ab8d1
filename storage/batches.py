"""Produce-path checks on incoming batches, and what an append reports.

``validate_batches`` is the gate between a request's bytes and the log: it runs
``protocol.records.scan_batches`` (whole batches, magic 2, CRC32C computed in C) and then
reads each 61-byte header once (``protocol.records.read_header``: one ``struct`` call) to
check Kafka's per-batch rules without touching records:

- ``max.message.bytes``: a larger batch is MESSAGE_TOO_LARGE (``RecordTooLargeError``);
- ``recordsCount`` must be >= 1 and equal ``lastOffsetDelta + 1`` (Kafka's
  "Inconsistent batch offset range"), else CORRUPT_MESSAGE (``InvalidRecordError``);
- legacy magic 0/1: UNSUPPORTED_FOR_MESSAGE_FORMAT; anything else malformed:
  CORRUPT_MESSAGE.

A client's produce batch arrives already walked by ``broker.record_validation`` (the same
rules, Kafka's client-facing codes); for it ``verify_crc`` is the only check left here.

Compressed batches are not decompressed (no per-record work on the produce path), so
inner records are trusted as Kafka's clients wrote them.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import NamedTuple

from protocol import checksum
from protocol.records import (
    ATTR_TIMESTAMP_TYPE,
    LOG_OVERHEAD_BYTES,
    BatchHeader,
    RecordBatch,
    StopReason,
    batch_crc,
    read_header,
    scan_batches,
)
from storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnsupportedMessageFormatError,
)
from storage.naming import TopicPartition
from storage.offsets import LONG_MAX, Offset

_ATTRIBUTES = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")


def now_ms() -> int:
    return int(time.time() * 1000)


class AppendInfo(NamedTuple):
    """What an append did (Kafka's ``LogAppendInfo``)."""

    first_offset: Offset
    last_offset: Offset
    max_timestamp: int
    offset_of_max_timestamp: Offset
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: Offset
    valid_bytes: int
    batch_count: int
    records_count: int
    needs_flush: bool  # flush.messages reached or a segment rolled: call flush() off-loop


def writable_buffer(records: bytes | bytearray | memoryview) -> bytearray | memoryview:
    """The buffer to patch: a bytearray or writable memoryview as is, else one copy."""
    if isinstance(records, bytearray):
        return records
    if isinstance(records, memoryview) and not records.readonly:
        return records
    return bytearray(records)


def validate_batches(
    buf: bytearray | memoryview, *, max_message_bytes: int, where: TopicPartition,
    check_counts: bool = True,
) -> tuple[list[RecordBatch], list[BatchHeader]]:
    """The batch views and headers of ``buf``; raises the matching ``StorageError``.
    ``check_counts=False`` (a follower's copy of a leader's log) admits the batches
    compaction leaves: fewer records than the offset range, or none."""
    result = scan_batches(buf, True)
    if result.stop_reason is StopReason.UNSUPPORTED_MAGIC:
        raise UnsupportedMessageFormatError(f"{where}: {result.message}")
    if result.stop_reason is not None:
        raise InvalidRecordError(f"{where}: {result.message}")
    if not result.batches:
        raise InvalidRecordError(f"{where}: no record batches")
    heads: list[BatchHeader] = []
    pos = 0
    for _ in result.batches:
        head = read_header(buf, pos)
        size = head.batch_length + LOG_OVERHEAD_BYTES
        if size > max_message_bytes:
            raise RecordTooLargeError(
                f"{where}: batch of {size} bytes is above max.message.bytes {max_message_bytes}"
            )
        count = head.records_count
        if not check_counts:
            if count < 0 or head.last_offset_delta < 0:
                raise InvalidRecordError(
                    f"{where}: batch holds {count} records, lastOffsetDelta "
                    f"{head.last_offset_delta}"
                )
        elif count < 1 or count != head.last_offset_delta + 1:
            raise InvalidRecordError(
                f"{where}: batch holds {count} records but its lastOffsetDelta is "
                f"{head.last_offset_delta}"
            )
        heads.append(head)
        pos += size
    return result.batches, heads


def check_timestamps(
    heads: Sequence[BatchHeader], now: int, *, before_max_ms: int, after_max_ms: int,
    where: TopicPartition,
) -> None:
    """``message.timestamp.before.max.ms`` / ``after.max.ms`` (CreateTime topics), checked
    on each batch's base and max timestamps: INVALID_TIMESTAMP when out of range."""
    if before_max_ms == LONG_MAX and after_max_ms == LONG_MAX:
        return
    for head in heads:
        for ts in (head.base_timestamp, head.max_timestamp):
            if now - ts > before_max_ms or ts - now > after_max_ms:
                raise InvalidTimestampError(
                    f"{where}: timestamp {ts} is out of range (now {now}, "
                    f"before.max.ms {before_max_ms}, after.max.ms {after_max_ms})"
                )


def verify_crc(batch: memoryview, head: BatchHeader, *, where: TopicPartition) -> None:
    """The CRC32C check ``scan_batches`` makes, for one batch whose header the caller has
    already checked: CORRUPT_MESSAGE (``InvalidRecordError``) with the scan's words."""
    actual = batch_crc(batch)
    if actual != head.crc:
        raise InvalidRecordError(f"{where}: batch at byte {head.position}: stored CRC "
                                 f"{head.crc:#010x}, computed {actual:#010x}")


def stamp_log_append_time(buf: bytearray | memoryview, head: BatchHeader,
                          timestamp_ms: int) -> None:
    """Kafka's ``setMaxTimestamp(LOG_APPEND_TIME, now)`` on the batch ``head`` describes in
    ``buf``: timestamp type bit, maxTimestamp, new CRC (attributes @21, maxTimestamp @35,
    crc @17 over bytes 21..end, from the batch's start)."""
    pos = head.position
    _ATTRIBUTES.pack_into(buf, pos + 21, head.attributes | ATTR_TIMESTAMP_TYPE)
    _INT64.pack_into(buf, pos + 35, timestamp_ms)
    with memoryview(buf) as view:
        _UINT32.pack_into(buf, pos + 17, checksum.crc32c(view[pos + 21:pos + head.size_bytes]))

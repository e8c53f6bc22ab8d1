"""Which batches and records a cleaning keeps, and the bytes it writes for them (Kafka's
``Cleaner.cleanInto`` filter with ``MemoryRecords.filterTo``).

Per batch (``BatchFilter.filter_chunk``), in Kafka's order:

1. Transactions (``TxnTracker``): a control batch can be discarded once no batch of its
   transaction was seen (COMMIT) or its aborted data is gone (ABORT); transactional data of
   an aborted transaction is discarded. This log keeps no transaction index (no aborted
   transactions can be written to it), so every transaction counts as committed.
2. Batch retention: the last data batch of an active producer (or its last marker) is kept
   even when it empties (sequence numbers survive); so is the batch that ends at the
   cleaning round's upper bound (the last offset survives). A discardable control batch
   whose delete horizon passed is dropped whole; any other batch that empties is dropped.
3. Records: a record at an offset past the offset map's latest offset is kept; a keyed
   record is kept when it is the key's latest (offset >= the map's) and it has a value, or
   it is a tombstone whose batch has no delete horizon yet or one still in the future.
   Records without a key are dropped (counted as invalid). Control records are kept.
   In the range the offset map covers, "the key's latest" is "its offset is one of the
   map's offsets" (every keyed record of that range went into the map), so a data batch
   there with none of those offsets is dropped, or kept empty, without reading its
   records (``BatchFilter._may_keep``); the others go through
   ``storage.cleaner_scan.select_records`` (compiled when built).

Output: a batch that keeps every record and needs no new delete horizon is copied byte for
byte. Otherwise it is rebuilt like Kafka's ``MemoryRecordsBuilder``: same base offset,
lastOffsetDelta (so the last sequence stays), producer id/epoch/base sequence, leader
epoch, timestamp type, transactional/control bits and compression codec (recompressed);
the first time a batch with tombstones (or a discardable marker) is cleaned its delete
horizon is set to ``now + delete.retention.ms``: attribute bit 6, stored as the base
timestamp. Otherwise the base timestamp is the first kept record's. Record timestamps,
offsets, keys, values and headers are unchanged; maxTimestamp is the largest kept record
timestamp (the original for LogAppendTime). A batch kept empty is a bare 61-byte header
(recordsCount 0, no compression, base timestamp -1, the original maxTimestamp).
"""

from __future__ import annotations

import bisect
import enum
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from protocol import checksum
from protocol.batch_header import (
    HEADER,
    HEADER_SIZE_BYTES,
    LOG_OVERHEAD_BYTES,
    BatchHeader,
    read_header,
)
from protocol.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, compress, decompress
from protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CorruptRecordError,
)
from storage.cleaner_native import scan
from storage.cleaner_records import parse_records
from storage.cleaner_stats import CleanerStats, LastRecord
from storage.offset_map import OffsetMap
from storage.segment import BatchMeta

NO_TIMESTAMP = -1
_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_ABORT = 0
_CONTROL_COMMIT = 1
_CRC_START = 21


class BatchRetention(enum.Enum):
    DELETE = 0  # drop the batch without looking at its records
    RETAIN_EMPTY = 1  # keep the batch, as a bare header if no record is kept
    DELETE_EMPTY = 2  # drop the batch if no record is kept


@dataclass(slots=True)
class TxnTracker:
    """Kafka's ``CleanedTransactionMetadata`` without aborted transactions (see above)."""

    ongoing_committed: set[int] = field(default_factory=set)

    def on_control_batch(self, head_attributes: int, producer_id: int, count: int,
                         control_type: int | None) -> bool:
        """True if the marker may be discarded."""
        if count == 0 or control_type is None:
            return True  # an empty control batch was cleaned already
        if control_type == _CONTROL_ABORT:
            return True  # no aborted data of it is known to remain
        if control_type == _CONTROL_COMMIT:
            if producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_data_batch(self, attributes: int, producer_id: int) -> bool:
        """True if the batch belongs to an aborted transaction (never, see above)."""
        if attributes & ATTR_TRANSACTIONAL:
            self.ongoing_committed.add(producer_id)
        return False


def batch_body(buf: bytes | memoryview, attributes: int) -> bytes:
    """The record bytes of the batch in ``buf`` (decompressed, bounded)."""
    codec = attributes & ATTR_COMPRESSION_MASK
    raw = buf[HEADER_SIZE_BYTES:]
    if codec == 0:
        return bytes(raw)
    return decompress(codec, raw, DEFAULT_MAX_DECOMPRESSED_BYTES)


def control_type_of(buf: bytes | memoryview, attributes: int, count: int) -> int | None:
    """The type (ABORT 0, COMMIT 1, ...) of a control batch's first record, None if empty."""
    if count == 0:
        return None
    records = parse_records(batch_body(buf, attributes), count)
    key = records[0][2]
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record without a valid key")
    return int(_CONTROL_KEY.unpack_from(key, 0)[1])


def empty_batch_header(
    base_offset: int, last_offset_delta: int, leader_epoch: int, attributes: int,
    max_timestamp: int, producer_id: int, producer_epoch: int, base_sequence: int,
) -> bytes:
    """Kafka's ``DefaultRecordBatch.writeEmptyHeader``: 61 bytes, no records."""
    attrs = attributes & (ATTR_TIMESTAMP_TYPE | ATTR_TRANSACTIONAL | ATTR_CONTROL)
    out = bytearray(HEADER_SIZE_BYTES)
    HEADER.pack_into(out, 0, base_offset, HEADER_SIZE_BYTES - LOG_OVERHEAD_BYTES, leader_epoch,
                     2, 0, attrs, last_offset_delta, NO_TIMESTAMP, max_timestamp, producer_id,
                     producer_epoch, base_sequence, 0)
    _UINT32.pack_into(out, 17, checksum.crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)


class BatchFilter:
    """One cleaning's filter over the batches of the segments it recopies."""

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        now_ms: int,
        delete_retention_ms: int,
        active_producers: Mapping[int, LastRecord],
        upper_bound_offset: int,
        stats: CleanerStats,
        first_dirty_offset: int = 0,
    ) -> None:
        self.map = offset_map
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.active_producers = active_producers
        self.upper_bound_offset = upper_bound_offset
        self.first_dirty_offset = first_dirty_offset
        self.stats = stats
        self.txn = TxnTracker()

    def _is_last_batch_of_producer(self, producer_id: int, last_offset: int, is_control: bool,
                                   producer_epoch: int) -> bool:
        last = self.active_producers.get(producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return last_offset == last.last_data_offset
        return is_control and producer_epoch == last.producer_epoch

    def filter_chunk(self, chunk: bytes, out: bytearray) -> list[BatchMeta]:
        """Filter the whole batches of ``chunk`` into ``out``; metas of the batches written."""
        metas: list[BatchMeta] = []
        pos = 0
        end = len(chunk)
        stats = self.stats
        while pos < end:  # each turn moves past one whole batch
            head = read_header(chunk, pos)
            size = head.batch_length + LOG_OVERHEAD_BYTES
            if size < HEADER_SIZE_BYTES or pos + size > end:
                raise CorruptRecordError(f"batch length {head.batch_length} at byte {pos}")
            stats.bytes_read += size
            written = self._filter_batch(chunk, head, size, out)
            if written is not None:
                metas.append(written)
            pos += size
        return metas

    def _filter_batch(self, chunk: bytes, head: BatchHeader, size: int,
                      out: bytearray) -> BatchMeta | None:
        stats = self.stats
        pos = head.position
        base_offset, attributes = head.base_offset, head.attributes
        last_offset_delta = head.last_offset_delta
        is_control = bool(attributes & ATTR_CONTROL)
        last_offset = base_offset + last_offset_delta
        count = head.records_count
        pid = head.producer_id
        if is_control:
            can_discard = self.txn.on_control_batch(
                attributes, pid, count,
                control_type_of(memoryview(chunk)[pos : pos + size], attributes, count))
            horizon_set = bool(attributes & ATTR_DELETE_HORIZON)
            discard_records = can_discard and horizon_set and head.base_timestamp <= self.now_ms
        else:
            can_discard = self.txn.on_data_batch(attributes, pid)
            discard_records = can_discard
        last_of_producer = pid >= 0 and self._is_last_batch_of_producer(
            pid, last_offset, is_control, head.producer_epoch)
        if last_of_producer or last_offset + 1 == self.upper_bound_offset:
            retention = BatchRetention.RETAIN_EMPTY
        elif discard_records:
            retention = BatchRetention.DELETE
        else:
            retention = BatchRetention.DELETE_EMPTY
        marker_for_empty_txn = can_discard and is_control
        if retention is BatchRetention.DELETE:
            return None
        stats.messages_read += count
        has_horizon = bool(attributes & ATTR_DELETE_HORIZON)
        horizon = head.base_timestamp if has_horizon else NO_TIMESTAMP
        retain_deletes = not has_horizon or self.now_ms < horizon
        spans: list[int] = []
        kept = 0
        tombstones = False
        body = b""
        if discard_records:
            pass
        elif is_control:
            body = batch_body(memoryview(chunk)[pos : pos + size], attributes)
            kept, tombstones = _keep_all(body, count, spans)
        elif self._may_keep(base_offset, last_offset):
            if attributes & ATTR_COMPRESSION_MASK:
                body = batch_body(memoryview(chunk)[pos : pos + size], attributes)
                data, start, end = body, 0, len(body)
            else:
                data, start, end = chunk, pos + HEADER_SIZE_BYTES, pos + size
            omap = self.map
            kept_offsets = omap.kept_offsets()
            first = bisect.bisect_left(kept_offsets, max(base_offset, self.first_dirty_offset))
            kept, _, nulls, tombstones = scan.select_records(
                data, start, end, count, base_offset, self.first_dirty_offset,
                omap.latest_offset, kept_offsets, first, omap.entries, retain_deletes,
                omap.in_order, spans)
            stats.invalid_messages_read += nulls
            body = data  # spans are positions in it
        if kept:
            need_horizon = (tombstones or marker_for_empty_txn) and not has_horizon
            if kept == count and not need_horizon:
                out += memoryview(chunk)[pos : pos + size]
                stats.messages_written += count
                stats.bytes_written += size
                return BatchMeta(size, last_offset, head.max_timestamp)
            if need_horizon:
                horizon = self.now_ms + self.delete_retention_ms
            data_out, max_ts = self._rebuild(head, body, spans, kept, horizon)
            out += data_out
            stats.messages_written += kept
            stats.bytes_written += len(data_out)
            return BatchMeta(len(data_out), last_offset, max_ts)
        if retention is BatchRetention.RETAIN_EMPTY:
            data_out = empty_batch_header(base_offset, last_offset_delta,
                                          head.partition_leader_epoch, attributes,
                                          head.max_timestamp, pid, head.producer_epoch,
                                          head.base_sequence)
            out += data_out
            stats.bytes_written += len(data_out)
            return BatchMeta(len(data_out), last_offset, head.max_timestamp)
        return None

    def _may_keep(self, base_offset: int, last_offset: int) -> bool:
        """False when no record of a data batch can survive, known without reading it:
        the batch lies inside the mapped dirty range and none of its offsets is a key's
        latest (a dirty log is mostly such batches)."""
        omap = self.map
        if (base_offset < self.first_dirty_offset or last_offset > omap.latest_offset
                or not omap.in_order):
            return True
        kept_offsets = omap.kept_offsets()
        i = bisect.bisect_left(kept_offsets, base_offset)
        return i < len(kept_offsets) and kept_offsets[i] <= last_offset

    @staticmethod
    def _rebuild(head: BatchHeader, body: bytes, spans: list[int], kept: int,
                 horizon: int) -> tuple[bytes, int]:
        old_base_ts = head.base_timestamp
        log_append = bool(head.attributes & ATTR_TIMESTAMP_TYPE)
        first_ts = old_base_ts + spans[0]
        new_base_ts = horizon if horizon >= 0 else first_ts
        payload = bytearray()
        max_ts = scan.encode_records(body, spans, old_base_ts, new_base_ts, payload)
        codec = head.attributes & ATTR_COMPRESSION_MASK
        data = bytes(payload) if codec == 0 else compress(codec, payload)
        attrs = head.attributes & (ATTR_COMPRESSION_MASK | ATTR_TIMESTAMP_TYPE
                                   | ATTR_TRANSACTIONAL | ATTR_CONTROL)
        if horizon >= 0:
            attrs |= ATTR_DELETE_HORIZON
        if log_append:
            max_ts = head.max_timestamp
        size = HEADER_SIZE_BYTES + len(data)
        out = bytearray(size)
        HEADER.pack_into(out, 0, head.base_offset, size - LOG_OVERHEAD_BYTES,
                         head.partition_leader_epoch, 2, 0, attrs, head.last_offset_delta,
                         new_base_ts, max_ts, head.producer_id, head.producer_epoch,
                         head.base_sequence, kept)
        out[HEADER_SIZE_BYTES:] = data
        _UINT32.pack_into(out, 17, checksum.crc32c(memoryview(out)[_CRC_START:]))
        return bytes(out), max_ts


def _keep_all(body: bytes, count: int, spans: list[int]) -> tuple[int, bool]:
    """Every record of a control batch is kept: their spans, and whether any is a
    tombstone (a control record always has a value)."""
    tombstones = False
    for ts_delta, offset_delta, _, has_value, tail, end in parse_records(body, count):
        spans += (ts_delta, offset_delta, tail, end)
        tombstones = tombstones or not has_value
    return count, tombstones


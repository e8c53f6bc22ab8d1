"""A partition's log: ordered segments, offset assignment, reads as file slices, truncation.

Offsets: ``log_start_offset <= recovery_point <= log_end_offset`` and
``log_start_offset <= high watermark <= log_end_offset`` (the broker owns the HW and
passes it in as ``upper_bound``). ``recovery_point`` is the offset below which every byte
is fsynced; recovery after an unclean stop starts from the segment that holds it.

Append (leader): ``append(records, leader_epoch)`` validates the request's bytes with
``scan_batches`` (CRC32C in C, sizes, magic; ``append_client_batch`` takes one batch whose
header the broker has already checked and verifies only its CRC), assigns offsets by patching each batch's
baseOffset and partitionLeaderEpoch in place (no per-record work, compressed or not),
writes all bytes with one ``pwrite`` loop, and indexes every ``index.interval.bytes``.
Buffer contract: a writable buffer (``bytearray`` / writable ``memoryview``) is patched
in place; read-only ``bytes`` are copied once here, except a client's single batch
(``append_client_batch``), whose header alone is copied and patched, and written before
the rest of the request's bytes in one ``pwritev``.

Topic id: ``record_topic_id`` keeps it in memory; ``partition.metadata`` is written later
(``storage.partition_metadata``: by the log manager's batched flush, and at the latest by
the first append, flush or close, before any log data can reach the disk).

Flushing: appends never fsync. ``AppendInfo.needs_flush`` says that ``flush.messages`` is
reached or a segment rolled; the broker then calls ``flush()`` from a thread pool (it
fsyncs outside the lock, so appends continue meanwhile). ``flush.ms`` is checked by
``LogManager.flush_due``.

Deleted segments are renamed ``*.deleted`` and their files stay open for
``file.delete.delay.ms`` so slices already handed to the network still send;
``delete_pending_files`` closes and unlinks them.

I/O errors (``storage.log_dir_failure`` sorts them): an append or a roll that fails is
undone (segment bytes cut, index entries dropped, a half-made segment removed) before the
error is raised, so the log end offset never moves past what is in the file and no
offset is handed out twice. On a full disk the log stays online and the call raises
``LogIOError``; any other error, or an undo that fails, takes the log dir offline and
raises ``LogDirOfflineError`` (both are KAFKA_STORAGE_ERROR). Truncation, a failed fsync
and a failure while closing cannot be undone and take the dir offline; a retention
delete that fails keeps the segments it could not rename.

Thread-safety: every method takes the log's lock (an ``RLock``); appends and reads are
cheap enough for the event loop, ``flush``/retention/close are for a thread pool.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from protocol.batch_header import HeaderFields
from protocol.fileslice import FileSlice
from protocol.records import ATTR_CONTROL, HEADER_SIZE_BYTES, BatchHeader, batch_crc
from storage.batches import (
    AppendInfo,
    check_timestamps,
    now_ms,
    stamp_log_append_time,
    validate_batches,
    verify_crc,
    writable_buffer,
)
from storage.checkpoints import DirSyncError, fsync_dir
from storage.config import LogConfig
from storage.epoch_cache import LeaderEpochCache
from storage.errors import (
    CorruptSegmentError,
    InconsistentTopicIdError,
    InvalidRecordError,
    LogClosedError,
    LogDirOfflineError,
    LogIOError,
    NonContiguousOffsetsError,
    OffsetOutOfRangeError,
    StorageError,
)
from storage.flush_stats import LOG_FLUSH_STATS
from storage.index import TimestampOffset
from storage.log_dir_failure import LogDirFailureChannel, is_disk_full
from storage.naming import SWAP_SUFFIX, TopicPartition, index_file, log_file, time_index_file
from storage.offsets import LONG_MAX, LeaderEpoch, Offset
from storage.partition_metadata import PartitionMetadataFile
from storage.retention import SegmentInfo, segments_to_delete
from storage.segment import BatchMeta, LogSegment, SegmentMark

__all__ = ["AppendInfo", "Log", "now_ms"]

log = logging.getLogger(__name__)

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")  # a batch's first 16 bytes
# NamedTuples built once per produce request: their own __new__ is Python code,
# tuple.__new__ builds the same object in C.
_new_tuple = tuple.__new__
# A client batch at least this large is written without copying it (its header patched in a
# copy, see _append_one_as_leader); a smaller one is copied whole, which costs less than the
# split's calls (a P5 produce's batch is ~170 bytes).
HEADER_ONLY_MIN_BYTES = 4096
MAX_PENDING_DELETES = 100_000
MAX_CORRUPT_REPORTS = 1000  # corrupt spots logged per log (each once)


class GroupAppend(NamedTuple):
    """What ``Log.append_client_batches`` did: each batch's first offset, in order."""

    first_offsets: list[int]
    log_start_offset: int
    needs_flush: bool  # flush.messages reached: call flush() off-loop


class CleanableSegment(NamedTuple):
    """A non-active segment as the cleaner sees it (``Log.cleaning_view``)."""

    segment: LogSegment
    base_offset: int
    next_offset: int  # base offset of the following segment
    size_bytes: int
    largest_timestamp: int  # -1 unless asked for
    first_batch_timestamp: int  # -1 unless asked for


class CleaningView(NamedTuple):
    segments: list[CleanableSegment]  # every segment but the active one, oldest first
    active_base_offset: int
    active_size_bytes: int
    log_end_offset: int
    log_start_offset: int
    truncations: int
    config: LogConfig


class Log:
    """One partition's log. Open with ``storage.loader.load_log`` or ``LogManager``."""

    def __init__(
        self,
        directory: Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_end_offset: int,
        log_start_offset: int,
        recovery_point: int,
        epoch_cache: LeaderEpochCache,
        topic_id: bytes | None = None,
        clock_ms: Callable[[], int] = now_ms,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        if not segments:
            raise ValueError("a log needs at least one segment")
        self.dir = directory
        self.topic_partition = topic_partition
        self.config = config
        self.topic_id = topic_id  # set by record_topic_id; read by anyone
        self._metadata_file = PartitionMetadataFile(directory)
        # Its directory was made for it just now (LogManager): nothing else is in it, so
        # whoever opens per-partition state there may skip looking (read once, then clear).
        self.fresh_directory = False
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._leo = log_end_offset
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._epoch_cache = epoch_cache
        self._clock_ms = clock_ms
        self._lock = threading.RLock()
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._bound_cache: tuple[int, LogSegment, int] | None = None
        self._dir_dirty = True  # fsync the directory entries on the first flush
        self._truncations = 0  # bumped by every truncation: a cleaning that saw another aborts
        self._lowest_truncation: int | None = None  # lowest offset truncated to, for the cleaner
        self._last_flush_ms = clock_ms()
        self._closed = False
        self._offline = False  # the log dir failed: no more reads or writes
        self._corrupt_reported: set[str] = set()
        self._log_dir = directory.parent
        self._failures = failure_channel if failure_channel is not None else LogDirFailureChannel()
        for seg in segments[:-1]:
            seg.seal_file()  # sealed: the open-file budget may close their files
        segments[-1].make_active()

    # ------------------------------------------------------------------ state
    @property
    def log_end_offset(self) -> Offset:
        return Offset(self._leo)

    @property
    def log_start_offset(self) -> Offset:
        return Offset(self._log_start_offset)

    @property
    def recovery_point(self) -> Offset:
        return Offset(self._recovery_point)

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    @property
    def segment_base_offsets(self) -> list[int]:
        with self._lock:
            return list(self._bases)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(s.size_bytes for s in self._segments)

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    def latest_epoch(self) -> LeaderEpoch | None:
        with self._lock:
            return self._epoch_cache.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[LeaderEpoch, Offset]:
        """OffsetForLeaderEpoch's answer: (epoch, end offset), (-1, -1) if unknown."""
        with self._lock:
            return self._epoch_cache.end_offset_for(epoch, self._leo)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> bool:
        """Record that leader ``epoch`` starts at ``start_offset`` (a new leader does this
        at its log end offset, Kafka's ``maybeAssignEpochStartOffset``). In memory; the
        checkpoint is written by the next ``flush`` (or close). True if it changed."""
        with self._lock:
            return self._epoch_cache.assign(epoch, start_offset)

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config

    @property
    def log_dir(self) -> Path:
        """The log directory (``log.dirs`` entry) this partition lives in."""
        return self._log_dir

    @property
    def offline(self) -> bool:
        return self._offline

    def mark_offline(self) -> None:
        """The log dir failed: refuse every read and write from now on. Takes no lock (a
        failing thread may hold another log's lock); calls already inside finish."""
        self._offline = True

    def record_topic_id(self, topic_id: bytes) -> bool:
        """Give the log its topic id (at creation, or later when it had none: Kafka's
        ``assignTopicId``); ``partition.metadata`` is written later (see the module
        docstring). False if the log already had this id; InconsistentTopicIdError if it
        has another."""
        with self._lock:
            if self.topic_id is not None:
                if self.topic_id != topic_id:
                    raise InconsistentTopicIdError(
                        f"{self.topic_partition}: topic id {topic_id.hex()} given to a log "
                        f"of topic id {self.topic_id.hex()}")
                return False
            self._metadata_file.record(topic_id)
            self.topic_id = topic_id
            return True

    @property
    def topic_id_unwritten(self) -> bool:
        """A topic id is recorded and ``partition.metadata`` not written yet."""
        return self._metadata_file.dirty

    def write_topic_id(self) -> bool:
        """Write ``partition.metadata`` if a recorded topic id waits for it (blocking:
        fsyncs; the log's lock is not held meanwhile, appends go on); False if nothing was
        waiting or the log is closed. A full disk raises ``LogIOError`` (retried by the
        next call); any other error takes the log dir offline. A close meanwhile writes
        the file itself first (the file's own lock orders the two writers)."""
        if not self._metadata_file.dirty:
            return False
        with self._lock:
            if self._closed or self._offline:
                return False
        try:
            return self._metadata_file.maybe_flush()
        except OSError as exc:
            with self._lock:
                if self._closed:
                    raise LogClosedError(f"partition.metadata of {self.topic_partition}: "
                                         f"log closed ({exc})") from exc
                raise self._io_error("writing partition.metadata", exc,
                                     undone=not isinstance(exc, DirSyncError)) from exc

    def _check_open(self) -> None:
        if self._offline:
            raise LogDirOfflineError(
                f"log {self.topic_partition} is offline (log dir {self._log_dir} failed)")
        if self._closed:
            raise LogClosedError(f"log {self.topic_partition} is closed")

    def io_failed(self, what: str, exc: OSError) -> StorageError:
        """Sort an I/O error of a file the broker keeps in this partition's directory (a
        producer-state snapshot) whose write was undone: a full disk is logged (rate
        limited), anything else takes the log dir offline. Returns the error to raise. On a
        log closed meanwhile (its partition deleted, its directory renamed) the error is no
        disk failure: ``LogClosedError``, nothing reported."""
        with self._lock:
            if self._closed:
                return LogClosedError(f"{what} of {self.topic_partition}: log closed ({exc})")
            return self._io_error(what, exc, undone=True)

    def _io_error(self, what: str, exc: OSError, *, undone: bool) -> StorageError:
        """The error to raise for ``exc``: ``LogIOError`` for a full disk whose operation
        was undone, else the log dir goes offline (``LogDirOfflineError``)."""
        where = f"{what} of {self.topic_partition}"
        if undone and is_disk_full(exc):
            self._failures.report_full(self._log_dir, where, exc)
            return LogIOError(f"{where} failed: {exc}")
        self._offline = True
        self._failures.fail(self._log_dir, where, exc)
        return LogDirOfflineError(f"{where} failed: {exc}; log dir {self._log_dir} is offline")

    def _append_to(self, segment: LogSegment, buf: bytearray | memoryview,
                   metas: Sequence[tuple[int, int, int]],
                   head: bytearray | None = None, first_offsets: Sequence[int] | None = None,
                   leader_epoch: int = -1) -> None:
        """Write and index ``metas``' batches, or leave the segment as it was and raise
        (``head``, ``first_offsets``, ``leader_epoch``: see ``LogSegment.append``)."""
        try:
            mark: SegmentMark = segment.mark()
        except OSError as exc:  # opening the indexes wrote something: state unknown
            raise self._io_error("append", exc, undone=False) from exc
        try:
            segment.append(buf, metas, head, first_offsets, leader_epoch)
        except OSError as exc:
            try:
                segment.rollback(mark)
            except OSError as undo_exc:
                raise self._io_error(f"undoing a failed append ({exc})", undo_exc,
                                     undone=False) from exc
            raise self._io_error("append", exc, undone=True) from exc

    # ------------------------------------------------------------------ appends
    def append(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        allow_control: bool = False,
        now_ms: int | None = None,
    ) -> AppendInfo:
        """Append a produce request's batches as leader: assign offsets from the log end
        offset and stamp ``leader_epoch``. Raises a ``StorageError`` with Kafka's code for
        bad input; nothing is written then. ``allow_control`` admits transaction markers
        (the coordinator's writes), which clients may not send."""
        buf = writable_buffer(records)
        _, heads = validate_batches(
            buf, max_message_bytes=self.config.max_message_bytes, where=self.topic_partition
        )
        return self._append_as_leader(buf, heads, leader_epoch, allow_control, now_ms)

    def append_client_batch(self, batch: memoryview, head: BatchHeader, leader_epoch: int, *,
                            now_ms: int | None = None) -> AppendInfo:
        """``append`` of one client batch the broker has already walked (its header read
        and checked, as ``validate_batches`` checks it: magic 2, whole, within
        ``max.message.bytes``, recordsCount = lastOffsetDelta + 1): only its CRC32C is
        verified here (CORRUPT_MESSAGE), so the bytes are scanned once per produce."""
        if batch_crc(batch) != head.crc:  # (verify_crc, with its call only on a mismatch)
            verify_crc(batch, head, where=self.topic_partition)  # raises, in the scan's words
        return self._append_one_as_leader(batch, head, leader_epoch, now_ms)

    def check_client_batch(self, batch: memoryview, head: BatchHeader, now: int) -> None:
        """What ``append_client_batch`` checks in one client batch before writing it: its
        CRC32C, the timestamp bounds, no control batch; the same errors, raised. For a
        group of batches, each checked alone before they are written together
        (``append_client_batches``)."""
        if batch_crc(batch) != head.crc:
            verify_crc(batch, head, where=self.topic_partition)
        self._check_client_head(head, now, self.config.message_timestamp_type == "LogAppendTime")

    def _check_client_head(self, head: BatchHeader, now: int, append_time: bool) -> None:
        """A client batch's timestamp bounds (unless the log stamps it: ``append_time``) and
        that it is no control batch; the same errors, raised."""
        config = self.config
        if not append_time and (
            config.message_timestamp_before_max_ms != LONG_MAX
            or config.message_timestamp_after_max_ms != LONG_MAX
        ):
            check_timestamps(
                (head,), now,
                before_max_ms=config.message_timestamp_before_max_ms,
                after_max_ms=config.message_timestamp_after_max_ms,
                where=self.topic_partition,
            )
        if head.attributes & ATTR_CONTROL:
            raise InvalidRecordError(
                f"{self.topic_partition}: clients may not write control batches"
            )

    def append_checked_client_batch(self, batch: memoryview, head: BatchHeader,
                                    leader_epoch: int, now: int) -> AppendInfo:
        """``append_client_batch`` of a batch ``check_client_batch`` has passed (its CRC is
        not computed again)."""
        return self._append_one_as_leader(batch, head, leader_epoch, now)

    def append_client_batches(self, batches: Sequence[tuple[memoryview, HeaderFields]],
                              leader_epoch: int, now: int) -> GroupAppend | None:
        """Client batches, each a buffer holding one batch whole with its header's fields
        (``HeaderFields``, as ``read_single_batch`` reads them: a ``BatchHeader`` less its
        position) and passed by ``check_client_batch``, appended as
        ``append_checked_client_batch`` would append them one after the other (the same
        offsets, bytes, index entries, epochs; each batch's AppendInfo would hold its first
        offset from ``first_offsets``, the batch's own last offset and max timestamp, this
        log start offset, no LogAppendTime) with one write, one roll check and one index
        check. ``needs_flush``: one of those AppendInfos would have asked for a flush.

        None, and nothing done, where one after the other could differ or would cost more:
        a LogAppendTime topic (each batch stamped), a batch of ``HEADER_ONLY_MIN_BYTES`` or
        more (written without a copy alone), an empty active segment (its roll time comes
        from the first batch), or a segment that would roll by size, time, full indexes or
        offset range before the last batch; the caller appends them one by one then. All or
        nothing: on a write error none of them is in the log (the segment rolled back, a
        ``StorageError`` raised)."""
        config = self.config
        if config.message_timestamp_type == "LogAppendTime":
            return None
        if self._metadata_file.dirty:  # rare: the batched write has not come yet
            self.write_topic_id()
        with self._lock:
            self._check_open()
            first = self._leo
            segment = self._segments[-1]
            if segment.size_bytes == 0:  # (its roll time comes from its first batch)
                return None
            # Format: the batches back to back, each its request's bytes with baseOffset
            # (int64 @0) and partitionLeaderEpoch (int32 @12) set; the CRC covers neither.
            buf = bytearray().join([batch for batch, _ in batches])
            metas: list[tuple[int, int, int]] = []  # BatchMeta's fields, a plain tuple each
            firsts: list[int] = []
            pos = 0
            offset = first
            max_ts = -1
            for batch, f in batches:  # f: baseOffset, batchLength, ..., by index
                length = f[1]  # batchLength
                size = length + 12
                if len(batch) != size or size >= HEADER_ONLY_MIN_BYTES:
                    return None
                # baseOffset, batchLength (as it is), partitionLeaderEpoch: one call
                _OFFSET_LENGTH_EPOCH.pack_into(buf, pos, offset, length, leader_epoch)
                firsts.append(offset)
                offset += f[6] + 1  # lastOffsetDelta
                ts = f[8]  # maxTimestamp
                if ts > max_ts:
                    max_ts = ts
                metas.append((size, offset - 1, ts))
                pos += size
            # Kafka's shouldRoll before each batch, at once: the size and offsets of the
            # whole group, its largest timestamp, and room in both indexes for an entry per
            # batch (each is asked before a batch, with at most one entry per batch added).
            if segment.should_roll(pos, max_ts, offset - 1, now, config.segment_bytes,
                                   config.segment_ms - config.segment_jitter_ms,
                                   len(batches) - 1):
                return None
            self._append_to(segment, buf, metas, None, firsts, leader_epoch)
            self._epoch_cache.assign(leader_epoch, first)
            self._leo = offset
            return _new_tuple(GroupAppend, (
                firsts, self._log_start_offset,
                offset - self._recovery_point >= config.flush_messages))

    def _append_one_as_leader(self, batch: memoryview, head: BatchHeader,
                              leader_epoch: int, now_ms: int | None) -> AppendInfo:
        """``_append_as_leader`` of one batch (a client's, control batches refused), without
        its per-batch loops and lists: the same checks, writes and answer, in the same
        order (tests/unit/test_storage_append_one.py compares the two).

        A read-only ``batch`` (the request's bytes) at the start of its buffer, of at least
        ``HEADER_ONLY_MIN_BYTES``, is not copied: its offsets and epoch are patched in a
        copy of its 61-byte header, written before the rest of it in one ``pwritev`` (a
        smaller one is copied whole: that costs less than the calls the split takes). A LogAppendTime stamp changes the CRC
        over the whole batch: then the batch is copied (``writable_buffer``) and patched."""
        now = self._clock_ms() if now_ms is None else now_ms
        config = self.config
        append_time = config.message_timestamp_type == "LogAppendTime"
        self._check_client_head(head, now, append_time)
        size = head.batch_length + 12
        valid_bytes = head.position + size
        delta = head.last_offset_delta
        ts = now if append_time else head.max_timestamp
        if self._metadata_file.dirty:  # rare: the batched write has not come yet
            self.write_topic_id()
        with self._lock:
            self._check_open()
            first = self._leo
            last = first + delta
            segment, rolled = self._maybe_roll(
                valid_bytes, now if append_time else (ts if ts > -1 else -1), last, now)
            pos = head.position
            meta = [(size, last, ts)]  # BatchMeta's fields
            if (batch.readonly and pos == 0 and not append_time
                    and size >= HEADER_ONLY_MIN_BYTES):
                header = bytearray(batch[:HEADER_SIZE_BYTES])
                _INT64.pack_into(header, 0, first)
                _INT32.pack_into(header, 12, leader_epoch)
                self._append_to(segment, batch, meta, header)
            else:
                buf = bytearray(batch) if batch.readonly else batch  # writable_buffer, inline
                _INT64.pack_into(buf, pos, first)
                _INT32.pack_into(buf, pos + 12, leader_epoch)
                if append_time:
                    stamp_log_append_time(buf, head, now)
                self._append_to(segment, buf, meta)
            self._epoch_cache.assign(leader_epoch, first)
            self._leo = last + 1
            max_ts, offset_of_max = (ts, last) if ts > -1 else (-1, first)
            return self._append_info(first, last + 1, max_ts, offset_of_max,
                                     now if append_time else -1, valid_bytes, 1, delta + 1,
                                     rolled)

    def _append_as_leader(self, buf: bytearray | memoryview, heads: Sequence[BatchHeader],
                          leader_epoch: int, allow_control: bool,
                          now_ms: int | None) -> AppendInfo:
        now = self._clock_ms() if now_ms is None else now_ms
        config = self.config
        append_time = config.message_timestamp_type == "LogAppendTime"
        if not append_time and (
            config.message_timestamp_before_max_ms != LONG_MAX
            or config.message_timestamp_after_max_ms != LONG_MAX
        ):
            check_timestamps(
                heads, now,
                before_max_ms=config.message_timestamp_before_max_ms,
                after_max_ms=config.message_timestamp_after_max_ms,
                where=self.topic_partition,
            )
        last_head = heads[-1]
        valid_bytes = last_head.position + last_head.batch_length + 12
        total_records = 0
        max_ts_in = -1
        for head in heads:
            if head.attributes & ATTR_CONTROL and not allow_control:
                raise InvalidRecordError(
                    f"{self.topic_partition}: clients may not write control batches"
                )
            total_records += head.last_offset_delta + 1
            if head.max_timestamp > max_ts_in:
                max_ts_in = head.max_timestamp
        if append_time:
            max_ts_in = now
        if self._metadata_file.dirty:  # rare: the batched write has not come yet
            self.write_topic_id()
        with self._lock:
            self._check_open()
            first = self._leo
            segment, rolled = self._maybe_roll(valid_bytes, max_ts_in, first + total_records - 1, now)
            offset = first
            metas: list[tuple[int, int, int]] = []  # BatchMeta's fields, a plain tuple each
            max_ts, offset_of_max = -1, first
            for head in heads:
                pos = head.position
                _INT64.pack_into(buf, pos, offset)
                _INT32.pack_into(buf, pos + 12, leader_epoch)
                ts = head.max_timestamp
                if append_time:
                    stamp_log_append_time(buf, head, now)
                    ts = now
                last = offset + head.last_offset_delta
                if ts > max_ts:
                    max_ts, offset_of_max = ts, last
                metas.append((head.batch_length + 12, last, ts))
                offset = last + 1
            self._append_to(segment, buf, metas)
            self._epoch_cache.assign(leader_epoch, first)
            self._leo = offset
            return self._append_info(first, offset, max_ts, offset_of_max, now if append_time else -1,
                                     valid_bytes, len(heads), total_records, rolled)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs.

        The first batch must start at the log end offset and each next batch right after
        the previous (compacted topics: strictly after); the leader epoch cache learns
        each new epoch from the batches.
        """
        buf = writable_buffer(records)
        _, heads = validate_batches(
            buf, max_message_bytes=self.config.max_message_bytes, where=self.topic_partition,
            check_counts=False,
        )
        gaps = self.config.compacts
        if self._metadata_file.dirty:
            self.write_topic_id()
        with self._lock:
            self._check_open()
            expected = self._leo
            for head in heads:
                base = head.base_offset
                if base != expected and not (gaps and base > expected):
                    raise NonContiguousOffsetsError(
                        f"{self.topic_partition}: follower batch starts at {base}, "
                        f"expected {expected}"
                    )
                expected = base + head.last_offset_delta + 1
            last_head = heads[-1]
            valid_bytes = last_head.position + last_head.batch_length + 12
            max_ts_in = max(h.max_timestamp for h in heads)
            first = heads[0].base_offset
            if first > self._leo and self._segments[-1].size_bytes == 0:
                try:
                    self._replace_empty_active(first)
                except OSError as exc:
                    raise self._io_error(f"restart at offset {first}", exc, undone=False) from exc
            segment, rolled = self._maybe_roll(valid_bytes, max_ts_in, expected - 1, self._clock_ms())
            if first > self._leo and not segment.can_hold_offset(first):
                segment, rolled = self._roll(self._clock_ms(), base_offset=first), True
            metas: list[BatchMeta] = []
            max_ts, offset_of_max = -1, first
            count = 0
            for head in heads:
                last = head.base_offset + head.last_offset_delta
                ts = head.max_timestamp
                if ts > max_ts:
                    max_ts, offset_of_max = ts, last
                metas.append(BatchMeta(head.batch_length + 12, last, ts))
                count += head.last_offset_delta + 1
            self._append_to(segment, buf, metas)
            latest = self._epoch_cache.latest_epoch()
            for head in heads:  # the epochs are learnt only once the batches are in
                epoch = head.partition_leader_epoch
                if epoch >= 0 and epoch != latest:
                    self._epoch_cache.assign(epoch, head.base_offset)
                    latest = self._epoch_cache.latest_epoch()
            self._leo = expected
            return self._append_info(first, expected, max_ts, offset_of_max, -1, valid_bytes,
                                     len(heads), count, rolled)

    def _append_info(
        self, first: int, next_offset: int, max_ts: int, offset_of_max: int, append_time: int,
        valid_bytes: int, batch_count: int, records: int, rolled: bool,
    ) -> AppendInfo:
        needs_flush = rolled or self._leo - self._recovery_point >= self.config.flush_messages
        # Once per produce request: the offsets go in as they are (ints), not through
        # Offset(), a NewType whose call costs about as much as a Python function call.
        return _new_tuple(AppendInfo, (
            first, next_offset - 1, max_ts, offset_of_max, append_time,
            self._log_start_offset, valid_bytes, batch_count, records, needs_flush,
        ))

    # ------------------------------------------------------------------ rolling
    def _maybe_roll(
        self, size_bytes: int, max_timestamp: int, last_offset: int, now: int
    ) -> tuple[LogSegment, bool]:
        """Kafka's ``shouldRoll``: full by size, old by ``segment.ms``, full indexes, or
        offsets that no longer fit an int32 relative to the base offset."""
        seg = self._segments[-1]
        cfg = self.config
        if seg.should_roll(size_bytes, max_timestamp, last_offset, now, cfg.segment_bytes,
                           cfg.segment_ms - cfg.segment_jitter_ms):
            return self._roll(now), True
        return seg, False

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active is empty)."""
        with self._lock:
            self._check_open()
            if self._segments[-1].size_bytes == 0:
                return self._segments[-1]
            return self._roll(self._clock_ms() if now_ms is None else now_ms)

    def _roll(self, now: int, base_offset: int | None = None) -> LogSegment:
        """New active segment at ``base_offset`` (default: the log end offset). All or
        nothing: on an I/O error the new files are removed and the old segment is active
        again (its indexes grown back) before the error is raised."""
        base = self._leo if base_offset is None else base_offset
        old = self._segments[-1]
        new: LogSegment | None = None
        try:
            new = self._new_segment(base, now)
            old.on_become_inactive()
        except OSError as exc:
            try:
                if new is not None:
                    new.abandon()
                for path in (log_file(self.dir, base), index_file(self.dir, base),
                             time_index_file(self.dir, base)):
                    path.unlink(missing_ok=True)
                old.make_active()
            except OSError as undo_exc:
                raise self._io_error(f"undoing a failed roll ({exc})", undo_exc,
                                     undone=False) from exc
            raise self._io_error(f"roll to offset {base}", exc, undone=True) from exc
        self._segments.append(new)
        self._bases.append(base)
        self._dir_dirty = True
        log.info("%s: rolled new segment at offset %d", self.topic_partition, base)
        return new

    def _new_segment(self, base: int, now: int) -> LogSegment:
        """Open the empty segment files for ``base`` (their handles are closed again if
        sizing the indexes fails; the caller removes the files)."""
        seg = LogSegment.open(
            self.dir,
            base,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size_bytes=self.config.segment_index_bytes,
            now_ms=now,
        )
        if seg.size_bytes != 0:
            seg.close()
            raise StorageError(f"{seg.log_path} already exists and holds data")
        try:
            seg.make_active()
        except OSError:
            seg.abandon()
            raise
        return seg

    def _replace_empty_active(self, base: int) -> None:
        """A follower jumps past a gap: the empty active segment restarts at ``base``."""
        old = self._segments.pop()
        self._bases.pop()
        self._bound_cache = None
        self._truncations += 1
        old.delete_files()
        self._segments.append(self._new_segment(base, self._clock_ms()))
        self._bases.append(base)
        self._dir_dirty = True
        self._leo = base

    # ------------------------------------------------------------------ reads
    def _empty_slice(self) -> FileSlice:
        active = self._segments[-1]
        return FileSlice(active.file, active.size_bytes, 0)

    def read(
        self,
        offset: int,
        max_bytes: int,
        upper_bound: int | None = None,
        *,
        min_one_batch: bool = True,
    ) -> FileSlice:
        """Bytes from the batch that holds ``offset`` to a batch boundary at or below
        ``upper_bound`` (the high watermark for consumers; None = log end offset, for
        followers) and at most ``max_bytes`` — but at least one whole batch when one is
        available and ``min_one_batch`` (Kafka's rule: a consumer never stalls on a batch
        larger than its fetch size). Raises ``OffsetOutOfRangeError`` outside
        [log start offset, log end offset]; empty slice when nothing is readable yet.
        """
        with self._lock:
            if self._closed or self._offline:
                self._check_open()
            leo = self._leo
            if offset < self._log_start_offset or offset > leo:
                raise OffsetOutOfRangeError(
                    f"{self.topic_partition}: offset {offset} is outside "
                    f"[{self._log_start_offset}, {leo}]"
                )
            bound = leo if upper_bound is None else min(upper_bound, leo)
            if offset >= bound:
                return self._empty_slice()
            i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
            n = len(self._segments)
            try:
                while i < n:  # at most one turn per segment
                    seg = self._segments[i]
                    head = seg.translate_offset(offset)
                    seg_next = self._bases[i + 1] if i + 1 < n else leo
                    if head is None:
                        i += 1
                        continue
                    if head.base_offset >= bound:
                        return self._empty_slice()
                    if bound >= seg_next:
                        max_position = seg.size_bytes
                    else:
                        max_position = self._bound_position(seg, bound)
                    if max_position <= head.position:
                        return self._empty_slice()
                    got = seg.read(head, max_bytes, max_position, min_one_batch=min_one_batch)
                    if got.position + got.length > seg.verified_bytes:
                        return self._verified(seg, got, offset)
                    return got
            except CorruptSegmentError as exc:  # a batch header that does not parse
                self._report_corrupt(str(exc), offset)
                raise
            return self._empty_slice()

    def _verified(self, seg: LogSegment, got: FileSlice, offset: int) -> FileSlice:
        """``got`` cut before the first batch whose CRC (or header) is broken; raises
        ``CorruptSegmentError`` (CORRUPT_MESSAGE) when that is its first batch."""
        begin = got.position
        valid_end, why = seg.verify(begin, begin + got.length)
        if valid_end == begin + got.length:
            return got
        if valid_end > begin:
            return FileSlice(got.file, begin, valid_end - begin)
        f = seg.file
        stored = os.pread(f.fileno(), 8, begin)  # baseOffset lies outside the CRC
        base = f" (base offset {_INT64.unpack(stored)[0]})" if len(stored) == 8 else ""
        message = f"{seg.log_path}: corrupt batch at byte {begin}{base}: {why}"
        self._report_corrupt(message, offset)
        raise CorruptSegmentError(message)

    def _report_corrupt(self, message: str, offset: int) -> None:
        """One log line per corrupt spot (bounded), not one per fetch that meets it."""
        if message in self._corrupt_reported or len(self._corrupt_reported) >= MAX_CORRUPT_REPORTS:
            return
        self._corrupt_reported.add(message)
        log.error("%s: %s (reading offset %d); fetches there answer CORRUPT_MESSAGE",
                  self.topic_partition, message, offset)

    def _bound_position(self, seg: LogSegment, bound: int) -> int:
        """Position of the batch holding ``bound`` (the HW), cached: the HW moves far less
        often than consumers read, and an append-only file never moves a boundary (every
        truncation clears the cache)."""
        cached = self._bound_cache
        if cached is not None and cached[0] == bound and cached[1] is seg:
            return cached[2]
        head = seg.translate_offset(bound)
        position = seg.size_bytes if head is None else head.position
        self._bound_cache = (bound, seg, position)
        return position

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """ListOffsets by time: the first record with timestamp >= ``timestamp`` at or after
        the log start offset, as (timestamp, offset); None if every record is older."""
        with self._lock:
            self._check_open()
            for seg in self._segments:
                if seg.size_bytes == 0 or seg.largest_timestamp < timestamp:
                    continue
                found = seg.find_offset_by_timestamp(timestamp, self._log_start_offset)
                if found is not None:
                    return TimestampOffset(found[0], Offset(found[1]))
            return None

    def max_timestamp_and_offset(self) -> TimestampOffset:
        """ListOffsets MAX_TIMESTAMP (-3): the largest batch timestamp and its offset."""
        with self._lock:
            best = TimestampOffset(-1, Offset(-1))
            for seg in self._segments:
                mts = seg.max_timestamp_so_far
                if mts.timestamp > best.timestamp:
                    best = mts
            return best

    # ------------------------------------------------------------------ truncation
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after ``offset`` (follower truncation). Returns False
        when ``offset`` is at or past the log end offset (nothing to do). An I/O error
        takes the log dir offline (a half-done truncation cannot be undone)."""
        if offset < 0:
            raise OffsetOutOfRangeError(f"{self.topic_partition}: cannot truncate to {offset}")
        with self._lock:
            self._check_open()
            if offset >= self._leo:
                return False
            if offset <= self._segments[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            log.info("%s: truncating to offset %d (log end offset %d)",
                     self.topic_partition, offset, self._leo)
            self._truncations += 1
            self._note_truncation(offset)
            now = self._clock_ms()
            self._bound_cache = None
            try:
                while self._segments[-1].base_offset > offset:  # bounded by the segment count
                    self._schedule_delete(self._segments[-1], now)
                    self._segments.pop()
                    self._bases.pop()
                seg = self._segments[-1]
                seg.make_active()  # writable indexes first, so truncation rewrites the files
                seg.truncate_to(offset)
                self._leo = seg.read_next_offset()
                self._recovery_point = min(self._recovery_point, self._leo)
                self._log_start_offset = min(self._log_start_offset, self._leo)
                self._epoch_cache.truncate_from_end(self._leo)
                self._epoch_cache.flush()
            except OSError as exc:
                raise self._io_error(f"truncation to offset {offset}", exc,
                                     undone=False) from exc
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log, empty, at ``offset``. An I/O error
        takes the log dir offline."""
        if offset < 0:
            raise OffsetOutOfRangeError(f"{self.topic_partition}: cannot start at {offset}")
        with self._lock:
            self._check_open()
            log.info("%s: truncating fully, log restarts at offset %d", self.topic_partition, offset)
            self._truncations += 1
            self._note_truncation(offset)
            now = self._clock_ms()
            self._bound_cache = None
            try:
                for seg in self._segments:
                    self._schedule_delete(seg, now)
                new = self._new_segment(offset, now)
            except OSError as exc:  # the list keeps its (renamed) segments: reads fail
                raise self._io_error(f"truncation to restart at offset {offset}", exc,
                                     undone=False) from exc
            self._segments = [new]
            self._bases = [offset]
            self._dir_dirty = True
            self._leo = self._log_start_offset = self._recovery_point = offset
            self._epoch_cache.clear()
            try:
                self._epoch_cache.flush()
            except OSError as exc:
                raise self._io_error(f"truncation to restart at offset {offset}", exc,
                                     undone=False) from exc

    # ------------------------------------------------------------------ retention
    def delete_records(self, offset: int, high_watermark: int | None = None) -> Offset:
        """DeleteRecords: move the log start offset up to ``offset`` (<= the HW). Whole
        segments below it go in the next retention pass. Returns the log start offset."""
        with self._lock:
            self._check_open()
            hw = self._leo if high_watermark is None else high_watermark
            if offset < 0 or offset > hw:
                raise OffsetOutOfRangeError(
                    f"{self.topic_partition}: cannot delete records before {offset} "
                    f"(high watermark {hw})"
                )
            if offset > self._log_start_offset:
                self._log_start_offset = offset
                self._epoch_cache.truncate_from_start(offset)
                log.info("%s: log start offset now %d", self.topic_partition, offset)
            return Offset(self._log_start_offset)

    def delete_old_segments(
        self, now_ms: int | None = None, high_watermark: int | None = None
    ) -> int:
        """One retention pass (see ``storage.retention``); returns segments deleted. A
        segment whose files cannot be renamed stays (and the ones after it): a full disk
        raises ``LogIOError``, anything else takes the log dir offline."""
        with self._lock:
            self._check_open()
            now = self._clock_ms() if now_ms is None else now_ms
            hw = self._leo if high_watermark is None else high_watermark
            infos = [
                SegmentInfo(
                    s.base_offset,
                    self._bases[i + 1] if i + 1 < len(self._bases) else self._leo,
                    s.size_bytes,
                    s.largest_timestamp if i + 1 < len(self._segments) else LONG_MAX,
                )
                for i, s in enumerate(self._segments)
            ]
            decision = segments_to_delete(
                infos, self.config, now_ms=now, high_watermark=hw,
                log_start_offset=self._log_start_offset,
            )
            n = decision.delete_count
            if n == 0:
                return 0
            doomed = self._segments[:n]
            failure: OSError | None = None
            done = 0
            for seg in doomed:
                try:
                    self._schedule_delete(seg, now)
                except OSError as exc:
                    failure = exc
                    break
                done += 1
            del self._segments[:done]
            del self._bases[:done]
            if done:
                self._log_start_offset = max(self._log_start_offset, self._bases[0])
                self._epoch_cache.truncate_from_start(self._log_start_offset)
                log.info("%s: deleted %d segment(s) %s: %s; log start offset now %d",
                         self.topic_partition, done, [s.base_offset for s in doomed[:done]],
                         decision.reason, self._log_start_offset)
            if failure is not None:
                raise self._io_error("retention delete", failure, undone=True) from failure
            return done

    def _schedule_delete(self, seg: LogSegment, now: int) -> None:
        """Rename ``seg``'s files ``*.deleted`` (OSError: nothing renamed) and queue them."""
        seg.mark_deleted()
        self._pending_deletes.append((now + self.config.file_delete_delay_ms, seg))
        if len(self._pending_deletes) > MAX_PENDING_DELETES:
            _, oldest = self._pending_deletes.pop(0)
            _delete_files(oldest)

    def delete_pending_files(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Close and unlink segments whose ``file.delete.delay.ms`` passed (blocking)."""
        now = self._clock_ms() if now_ms is None else now_ms
        with self._lock:
            due = [s for t, s in self._pending_deletes if force or t <= now]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if not (force or t <= now)]
        for seg in due:
            _delete_files(seg)
        return len(due)

    # ------------------------------------------------------------------ cleaning
    def _note_truncation(self, offset: int) -> None:
        if self._lowest_truncation is None or offset < self._lowest_truncation:
            self._lowest_truncation = offset

    @property
    def truncations(self) -> int:
        """How many truncations the log has seen (a cleaning compares before and after)."""
        return self._truncations

    def take_lowest_truncation(self) -> int | None:
        """The lowest offset the log was truncated to since the last call (the cleaner
        clamps its checkpoint to it, Kafka's ``maybeTruncateCheckpoint``), else None."""
        with self._lock:
            lowest, self._lowest_truncation = self._lowest_truncation, None
            return lowest

    def dup_segment_fds(self, segments: list[LogSegment]) -> list[int] | None:
        """A private descriptor for each segment's file (the cleaner reads through them
        with ``pread``; the segments' own state is never touched off the lock); None if
        any segment left the log."""
        with self._lock:
            if self._closed or any(seg.deleted or seg.closed for seg in segments):
                return None
            files = [seg.file for seg in segments]  # held while their descriptors are copied
            return [os.dup(f.fileno()) for f in files]

    def cleaning_view(self, *, largest_timestamps: bool, first_timestamps: bool) -> CleaningView:
        """What the cleaner plans with, read under the lock: every segment but the active
        one, with sizes and (when asked) the timestamps the compaction lags need."""
        with self._lock:
            self._check_open()
            infos = []
            n = len(self._segments)
            for i, seg in enumerate(self._segments[:-1]):
                infos.append(CleanableSegment(
                    seg, seg.base_offset, self._bases[i + 1] if i + 1 < n else self._leo,
                    seg.size_bytes,
                    seg.largest_timestamp if largest_timestamps else -1,
                    seg.first_batch_timestamp() if first_timestamps else -1,
                ))
            return CleaningView(infos, self._segments[-1].base_offset,
                                self._segments[-1].size_bytes, self._leo,
                                self._log_start_offset, self._truncations, self.config)

    def replace_segments(
        self, new: LogSegment, old: list[LogSegment], truncations: int,
        step: Callable[[str], None] = lambda _: None,
    ) -> bool:
        """Swap the cleaned segment ``new`` (files ``*.cleaned``, flushed) in for ``old``
        (Kafka's ``replaceSegments``). False, with nothing changed, if the log was truncated
        since the cleaning read it (``truncations`` is what ``cleaning_view`` said) or any old
        segment left the log (retention); the caller then deletes ``new``.

        Under the lock, renames only (readers and appenders wait microseconds): ``.cleaned``
        -> ``.swap``; the old segments -> ``.deleted`` (their files stay open for
        ``file.delete.delay.ms``, so slices already handed to ``sendfile`` still send);
        ``.swap`` -> the live names. A crash at any point is completed or undone by the
        loader (``storage.loader``). ``step`` is called after each stage (test hook).
        The directory is fsynced after the lock is released."""
        with self._lock:
            if self._closed or truncations != self._truncations or not old:
                return False
            try:
                first = next(i for i, s in enumerate(self._segments) if s is old[0])
            except StopIteration:
                return False
            last = first + len(old)
            if last >= len(self._segments) or any(
                    a is not b for a, b in zip(self._segments[first:last], old, strict=True)):
                return False  # never the active segment; the old ones must be contiguous
            try:
                new.rename_suffix(SWAP_SUFFIX)
                step("swap-renamed")
                now = self._clock_ms()
                for seg in old:
                    self._schedule_delete(seg, now)
                step("old-deleted")
                new.rename_suffix("")
            except OSError as exc:  # half a swap: the loader completes or undoes it
                raise self._io_error("segment swap", exc, undone=False) from exc
            self._segments[first:last] = [new]
            self._bases[first:last] = [new.base_offset]
            new.seal_file()
            self._bound_cache = None
            self._dir_dirty = True
            step("swap-done")
        try:
            fsync_dir(self.dir)
        except OSError as exc:
            with self._lock:
                raise self._io_error("segment swap", exc, undone=False) from exc
        return True

    # ------------------------------------------------------------------ flushing
    def flush(self, up_to: int | None = None, *, sync_log_dir: bool = True) -> None:
        """fsync everything below ``up_to`` (default: the log end offset) and advance the
        recovery point. Blocking; runs the fsyncs outside the lock. A failed fsync takes
        the log dir offline (what reached the disk is unknown after one); a full disk
        while writing the epoch checkpoint raises ``LogIOError`` and leaves the recovery
        point where it was. ``partition.metadata`` is written first if it waits.

        Order: segment files, the leader epoch checkpoint (temp file fsynced, renamed),
        then, when a file was added to the partition directory since the last flush (a
        segment, the checkpoint, ``mark_dir_dirty``), one fsync of that directory and one
        of the log dir for the partition directory's own entry. ``sync_log_dir=False``
        leaves that last one to the caller (``LogManager.shutdown`` writes checkpoints in
        each log dir afterwards, which fsync it once for all its logs)."""
        self.write_topic_id()
        with self._lock:
            if self._closed or self._offline:
                return
            target = self._leo if up_to is None else min(up_to, self._leo)
            start = self._recovery_point
            if target <= start and not self._epoch_cache.is_dirty and not self._dir_dirty:
                self._last_flush_ms = self._clock_ms()
                return  # nothing new since the last flush
            segs = [
                s for i, s in enumerate(self._segments)
                if (self._bases[i + 1] if i + 1 < len(self._bases) else LONG_MAX) > start
                and s.base_offset < max(target, start + 1)
            ]
            try:  # index entries kept in memory reach their files before anything is synced
                for seg in segs:
                    seg.write_index_entries()
            except OSError as exc:  # nothing moved: a full disk leaves the log online
                raise self._io_error("flush (index entries)", exc, undone=True) from exc
            dir_dirty, self._dir_dirty = self._dir_dirty, False
        started_ns = time.monotonic_ns()
        try:
            for seg in segs:
                try:
                    seg.flush()
                except (ValueError, OSError) as skipped:
                    # Deleted (files closed or renamed) or the log closed meanwhile, by another
                    # thread: ValueError, EBADF when the close came between fileno() and
                    # fsync, ENOENT when a closed file was opened again by its old name. The
                    # lock waits for a deletion under way to finish before it is judged.
                    if isinstance(skipped, OSError):
                        with self._lock:
                            gone = seg.deleted or seg.closed or self._closed
                        if not gone:
                            raise
                    log.debug("%s: flush skipped %s: %s", self.topic_partition, seg, skipped)
        except OSError as exc:  # one name per exception type (mypyc: protocol.native)
            with self._lock:
                if self._closed:  # closed (deleted, renamed) by another thread meanwhile
                    log.debug("%s: flush after close: %s", self.topic_partition, exc)
                    return
                raise self._io_error("flush", exc, undone=False) from exc
        with self._lock:
            if self._offline:
                return
            try:  # its rename shares the directory fsync below when there is one
                dir_dirty |= self._epoch_cache.flush(sync_dir=not dir_dirty)
            except OSError as exc:  # the old checkpoint stands; retried on the next flush
                raise self._io_error("leader epoch checkpoint", exc,
                                     undone=not isinstance(exc, DirSyncError)) from exc
        try:
            if dir_dirty:
                fsync_dir(self.dir)
                if sync_log_dir:
                    fsync_dir(self.dir.parent)
        except OSError as exc:
            with self._lock:
                if self._closed:
                    log.debug("%s: flush after close: %s", self.topic_partition, exc)
                    return
                raise self._io_error("flush", exc, undone=False) from exc
        LOG_FLUSH_STATS.record(time.monotonic_ns() - started_ns)
        with self._lock:
            if self._offline:
                return
            self._recovery_point = max(self._recovery_point, target)
            self._last_flush_ms = self._clock_ms()

    def mark_dir_dirty(self) -> None:
        """A file was put in the partition directory without a directory fsync (e.g. a
        producer-state snapshot at shutdown): the next flush (or close) makes its entry
        durable."""
        with self._lock:
            self._dir_dirty = True

    def flush_due(self, now_ms: int) -> bool:
        """True when ``flush.ms`` has passed since the last flush and data is unflushed."""
        return (
            not self._offline
            and self._leo > self._recovery_point
            and now_ms - self._last_flush_ms >= self.config.flush_ms
        )

    def close(self, *, sync_log_dir: bool = True) -> None:
        """Flush, write the epoch checkpoint, trim indexes, close files (blocking). If that
        meets an I/O error (or the dir is offline) the files are closed without writing
        and the log dir is offline: its next start recovers it. ``sync_log_dir``: as for
        ``flush``."""
        with self._lock:
            if self._closed:
                return
            try:
                if self._offline:
                    raise LogDirOfflineError(f"log dir {self._log_dir} is offline")
                self.flush(sync_log_dir=sync_log_dir)
                for seg in self._segments:
                    seg.close()
            except (StorageError, OSError) as exc:
                if not self._offline:
                    self._offline = True
                    self._failures.fail(self._log_dir, f"close of {self.topic_partition}", exc)
                for seg in self._segments:
                    seg.abandon()
            self._closed = True
        self.delete_pending_files(force=True)

    def close_and_delete_files(self) -> None:
        """Close and remove every segment file (the partition directory is the caller's)."""
        with self._lock:
            self._closed = True
            for seg in self._segments:
                _delete_files(seg)
        self.delete_pending_files(force=True)

    def abandon(self) -> None:
        """Close file handles as a crash would: no flush, no trim, no checkpoint."""
        with self._lock:
            self._closed = True
            for seg in self._segments:
                seg.abandon()
            for _, seg in self._pending_deletes:
                seg.abandon()
            self._pending_deletes = []

    def __repr__(self) -> str:
        return (f"Log({self.topic_partition}, start={self._log_start_offset}, "
                f"end={self._leo}, segments={len(self._segments)})")


def _delete_files(seg: LogSegment) -> None:
    """Unlink a deleted segment's files; a failure is logged (start-up removes leftover
    ``*.deleted`` files)."""
    try:
        seg.delete_files()
    except OSError as exc:
        log.warning("%s: cannot remove deleted segment files: %s", seg.directory, exc)

"""One log segment: a ``.log`` file of record batches plus its ``.index`` and ``.timeindex``.

The ``.log`` file is a plain concatenation of magic-2 record batches, exactly as the
producer sent them after the log patched baseOffset and partitionLeaderEpoch (layout in
``protocol.records``). Files are named by the segment's base offset (20 digits).

Writes go through ``storage.fileio`` (``pwrite`` at the tracked end of the file, one call
per append); reads return ``FileSlice`` regions for ``sendfile``. Batch boundaries are found by reading
three header fields (``baseOffset`` @0, ``batchLength`` @8, ``lastOffsetDelta`` @23,
``maxTimestamp`` @35) from an mmap of the file, or with ``pread`` for the newest bytes not
yet mapped (or when the map was evicted); the map is refreshed once per
``_REMAP_STEP_BYTES`` of growth, not per append. The heads of the newest batches
(``RECENT_HEADS``, read from the appended bytes as they are written) are kept in memory, so
a read at the log's tail (a consumer that is caught up, a parked fetch woken by an append)
finds its batch without walking from the offset index and without a ``pread``.

Open files: the active segment keeps its ``.log`` open (appends, ``sendfile``). Everything
else is bounded per process, not per segment: the indexes hold no descriptor
(``storage.index``); a sealed segment's ``.log`` file and any segment's ``.log`` map (one
descriptor each: Python's ``mmap`` keeps a duplicate) are registered with
``storage.map_budget.MAPS``, which drops the oldest beyond its bound; ``file`` opens the
file again on next use. A dropped file object closes when its last reference goes, so
a ``FileSlice`` already handed to ``sendfile`` keeps its file open, and code here holds
the object in a local for as long as it uses the descriptor (``f = self.file``), never
``self.file.fileno()`` alone: a drop from another thread in between could close it.

Indexes are opened lazily (a clean start of thousands of partitions touches no index
until it is used); an index that fails its sanity check is rebuilt from the log. When
the segment rolls its indexes are trimmed and sealed: read-only, mapped on demand.

Appends are undone with ``mark`` / ``rollback``: ``mark()`` notes the file size and index
entry counts (and the in-memory state derived from them), ``rollback(mark)`` cuts the
file back, drops (and zeroes) the index entries added since, and restores that state. The
owning ``Log`` does this when an append fails half-way, so a failed append leaves no bytes
and no index entry behind.

Thread-safety: none of its own; the owning ``Log`` serialises every call under its lock.
Blocking calls (``flush``, ``recover``, ``delete``) are meant for a thread pool.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, NamedTuple

from protocol.batch_header import HEAD_TO_MAX_TIMESTAMP
from protocol.fileslice import FileSlice
from protocol.records import LOG_OVERHEAD_BYTES, RecordBatch, StopReason, scan_batches
from storage import fileio
from storage.errors import CorruptIndexError, CorruptSegmentError
from storage.index import OffsetIndex, TimeIndex, TimestampOffset
from storage.map_budget import MAPS
from storage.naming import DELETED_SUFFIX, index_file, log_file, time_index_file
from storage.offsets import INT32_MAX, NO_TIMESTAMP, Offset

log = logging.getLogger(__name__)
# A NamedTuple's own __new__ is Python code; tuple.__new__ builds the same object in C
# (index_batch runs once per appended batch).
_new_tuple = tuple.__new__

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp: the first 43 bytes of a batch header (protocol.batch_header).
_HEAD = HEAD_TO_MAX_TIMESTAMP
_HEAD_BYTES = _HEAD.size
# Of those 43 bytes, what a BatchHead keeps of a batch just written: baseOffset,
# partitionLeaderEpoch, lastOffsetDelta, maxTimestamp (the rest skipped: fewer objects).
_RECENT_HEAD = struct.Struct(">q4xi7xi8xq")
assert _RECENT_HEAD.size == _HEAD_BYTES
_REMAP_STEP_BYTES = 8 * 1024 * 1024
_MAX_SCAN_BATCHES = 1 << 24  # bound on batch walks inside one segment (>= any real count)
_TAIL_READ_BYTES = 4 * 1024 * 1024  # start-up reads at most this much of a segment's tail
_INDEX_ENTRY = struct.Struct(">ii")
# Heads of the newest batches kept per segment: a consumer at the tail reads one of the last
# few batches appended. A sealed segment keeps none.
RECENT_HEADS = 8
_WHY = {  # what a corrupt batch found by ``verify`` is, in a log line
    StopReason.CRC_MISMATCH: "its CRC does not match its bytes",
    StopReason.CORRUPT: "its header does not parse",
    StopReason.TRUNCATED: "it is cut short",
    StopReason.BAD_MAGIC: "its magic byte is not 2",
    StopReason.UNSUPPORTED_MAGIC: "its magic byte is not 2",
    StopReason.TOO_LARGE: "it is too large",
}


def _with_suffix(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix) if suffix else path


class BatchMeta(NamedTuple):
    """What the segment needs to know about each appended batch. ``LogSegment.append``
    takes plain ``(size_bytes, last_offset, max_timestamp)`` tuples too: the log's appends
    make those (a NamedTuple made with ``tuple.__new__`` costs ~1,300 instructions more)."""

    size_bytes: int
    last_offset: int
    max_timestamp: int


class SegmentMark(NamedTuple):
    """A segment's state before an append (``LogSegment.mark``)."""

    size_bytes: int
    offset_index_entries: int
    time_index_entries: int
    bytes_since_last_index_entry: int
    max_ts_and_offset: TimestampOffset | None
    rolling_based_ts: int | None


class BatchHead(NamedTuple):
    position: int
    base_offset: int
    size_bytes: int
    last_offset: int
    max_timestamp: int
    partition_leader_epoch: int


class _UnmadeHeads(NamedTuple):
    """What the newest batches' heads are made from after a group append (``LogSegment``'s
    ``_recent_heads``): the group's first position, each batch's base offset and
    (size, last offset, max timestamp), and the epoch all were written with."""

    position: int
    first_offsets: Sequence[int]
    metas: Sequence[tuple[int, int, int]]
    leader_epoch: int


class LogSegment:
    """A segment of a partition's log. Create with ``LogSegment.open``."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size_bytes: int,
        now_ms: int,
        suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size_bytes = max_index_size_bytes
        self.suffix = suffix  # "" for a live segment, ".cleaned" / ".swap" while cleaning
        self.log_path = _with_suffix(log_file(directory, base_offset), suffix)
        fd = fileio.open_new(self.log_path, os.O_RDWR)
        self._file: BinaryIO | None = os.fdopen(fd, "r+b", buffering=0)
        self._closed = False
        self._file_budgeted = False  # sealed: the map budget may drop the open file
        self._size = os.fstat(fd).st_size
        self._mm: mmap.mmap | None = None
        self._mapped_bytes = 0
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._writable_indexes = False
        self._bytes_since_last_index_entry = 0
        self._max_ts_and_offset: TimestampOffset | None = None  # loaded lazily
        self._rolling_based_ts: int | None = None
        self.created_ms = now_ms
        self.deleted = False
        # Bytes from the start of the file known to be whole batches with good CRCs: what
        # this process appended (its CRCs were checked on the way in) or recovered. Reads
        # past it check the CRCs they return once (``verify``).
        self._verified_bytes = 0
        # Invariant: the heads of the last len(_recent) batches of the file, in file order,
        # the last one ending at _size (cleared whenever the file is cut or sealed); or,
        # after a group append of at least RECENT_HEADS batches, _recent empty and what
        # they are made from when first read (_recent_heads: no heads made per append).
        self._recent: deque[BatchHead] = deque(maxlen=RECENT_HEADS)
        self._unmade_recent: _UnmadeHeads | None = None

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size_bytes: int,
        now_ms: int | None = None,
        suffix: str = "",
    ) -> LogSegment:
        return cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_size_bytes=max_index_size_bytes,
            now_ms=int(time.time() * 1000) if now_ms is None else now_ms,
            suffix=suffix,
        )

    # ------------------------------------------------------------------ the .log file
    @property
    def file(self) -> BinaryIO:
        """The open ``.log`` file, opened again if the map budget dropped it. Hold the
        returned object while its descriptor is in use (see the module docstring)."""
        f = self._file
        if f is None:
            if self._closed:
                raise ValueError(f"{self.log_path} is closed")
            f = os.fdopen(os.open(self.log_path, os.O_RDWR), "r+b", buffering=0)
            self._file = f
            if self._file_budgeted:
                MAPS.mapped(self.evict_file)
        return f

    @property
    def closed(self) -> bool:
        return self._closed

    def evict_file(self) -> None:
        """The map budget drops the open file (a sealed segment's)."""
        if not self._closed:
            self._file = None

    def seal_file(self) -> None:
        """The segment takes no more appends: its open file counts against the budget."""
        if not self._file_budgeted and not self._closed:
            self._file_budgeted = True
            if self._file is not None:
                MAPS.mapped(self.evict_file)

    def _unseal_file(self) -> None:
        if self._file_budgeted:
            self._file_budgeted = False
            MAPS.unmapped(self.evict_file)

    def _close_file(self) -> None:
        self._closed = True
        self._unseal_file()
        f = self._file
        if f is not None:  # (None: dropped by the budget; ``file`` raises ValueError)
            f.close()

    # ------------------------------------------------------------------ indexes
    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._load_indexes(writable=self._writable_indexes)
        assert self._offset_index is not None
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._load_indexes(writable=self._writable_indexes)
        assert self._time_index is not None
        return self._time_index

    def make_active(self) -> None:
        """Open the indexes writable at ``segment.index.bytes`` (this segment takes appends)."""
        self._writable_indexes = True
        self._unseal_file()
        oi, ti = self._offset_index, self._time_index
        if oi is None or ti is None:  # (loaded together)
            if self._size == 0:
                self._load_indexes(writable=True)  # a new segment: create its index files now
            return
        # Each index on its own: a roll that failed half-way (undone now) may have sealed
        # one, whose file then holds all its entries, and left the other writable, whose
        # newest entries are still only in memory.
        if not oi.writable:
            oi.close()
            self._offset_index = oi = OffsetIndex(oi.path, self.base_offset,
                                                  self.max_index_size_bytes, writable=True)
        if not ti.writable:
            ti.close()
            self._time_index = ti = TimeIndex(ti.path, self.base_offset,
                                              self.max_index_size_bytes, writable=True)
        oi.resize(self.max_index_size_bytes)
        ti.resize(self.max_index_size_bytes)

    def _index_paths(self) -> tuple[Path, Path]:
        return (_with_suffix(index_file(self.directory, self.base_offset), self.suffix),
                _with_suffix(time_index_file(self.directory, self.base_offset), self.suffix))

    def _load_indexes(self, *, writable: bool) -> None:
        idx_path, tidx_path = self._index_paths()
        # Missing indexes are normal for an empty (new) segment; otherwise rebuilt.
        missing = [p.name for p in (idx_path, tidx_path) if not p.exists() and self._size > 0]
        if not writable and missing:
            writable = True  # rebuilding needs a writable file
        self._offset_index = OffsetIndex(
            idx_path, self.base_offset, self.max_index_size_bytes, writable=writable
        )
        self._time_index = TimeIndex(
            tidx_path, self.base_offset, self.max_index_size_bytes, writable=writable
        )
        problem: str | None = f"missing {', '.join(missing)}" if missing else None
        if problem is None:
            try:
                self._offset_index.sanity_check()
                self._time_index.sanity_check()
                self._check_index_against_log()
            except CorruptIndexError as exc:
                problem = str(exc)
        if problem is not None and self._size > 0:
            log.warning("%s: rebuilding indexes (%s)", self.log_path, problem)
            if not writable:
                self._close_indexes()
                self._offset_index = OffsetIndex(
                    idx_path, self.base_offset, self.max_index_size_bytes, writable=True
                )
                self._time_index = TimeIndex(
                    tidx_path, self.base_offset, self.max_index_size_bytes, writable=True
                )
            self.rebuild_indexes()
            if not self._writable_indexes:
                self._offset_index.seal()
                self._time_index.seal()
        elif problem is not None:
            self._offset_index.reset()
            self._time_index.reset()

    def _check_index_against_log(self) -> None:
        assert self._offset_index is not None
        last = self._offset_index.last_entry()
        if self._offset_index.entries and last.position >= self._size:
            raise CorruptIndexError(
                f"{self._offset_index.path}: entry position {last.position} is past the end "
                f"of the log ({self._size} bytes)"
            )

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from the batches in the file (headers only, no CRC)."""
        oi, ti = self.offset_index, self.time_index
        oi.reset()
        ti.reset()
        self._bytes_since_last_index_entry = 0
        self._max_ts_and_offset = TimestampOffset(NO_TIMESTAMP, Offset(self.base_offset))
        for head in self.iter_heads(0):
            self.index_batch(head.position, head.size_bytes, head.last_offset, head.max_timestamp)

    def reset_indexes(self) -> None:
        """Open both indexes writable and empty (recovery rebuilds them from the log)."""
        self._close_indexes()
        self._writable_indexes = True
        for path in self.paths()[1:]:
            path.unlink(missing_ok=True)  # start from empty files: no stale entries to zero
        idx_path, tidx_path = self._index_paths()
        self._offset_index = OffsetIndex(
            idx_path,
            self.base_offset,
            self.max_index_size_bytes,
            writable=True,
        )
        self._time_index = TimeIndex(
            tidx_path,
            self.base_offset,
            self.max_index_size_bytes,
            writable=True,
        )
        self._offset_index.reset()
        self._time_index.reset()
        self._bytes_since_last_index_entry = 0
        self._max_ts_and_offset = TimestampOffset(NO_TIMESTAMP, Offset(self.base_offset))

    def _close_indexes(self) -> None:
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close()
        self._offset_index = None
        self._time_index = None

    # ------------------------------------------------------------------ sizes
    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def max_timestamp_so_far(self) -> TimestampOffset:
        """(largest batch max timestamp, last offset of its batch) seen in this segment."""
        if self._max_ts_and_offset is None:
            self._max_ts_and_offset = self.time_index.last_entry()
        return self._max_ts_and_offset

    @property
    def largest_timestamp(self) -> int:
        """Kafka's ``largestTimestamp``: max batch timestamp, else the file's mtime."""
        ts = self.max_timestamp_so_far.timestamp
        return ts if ts >= 0 else self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return int(os.stat(self.log_path).st_mtime * 1000)

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka's ``timeWaitedForRoll``: message time minus the first batch's, else age."""
        if self._rolling_based_ts is None and self._size > 0:
            head = self.head_at(0)
            self._rolling_based_ts = head.max_timestamp
        if self._rolling_based_ts is not None and self._rolling_based_ts >= 0:
            return message_timestamp - self._rolling_based_ts
        return now_ms - self.created_ms

    def can_hold_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def should_roll(self, size_bytes: int, max_timestamp: int, last_offset: int, now_ms: int,
                    max_segment_bytes: int, roll_ms: int, more_index_entries: int = 0) -> bool:
        """Kafka's ``LogSegment.shouldRoll`` before an append of ``size_bytes`` whose batches
        end at ``last_offset`` with ``max_timestamp``: never when empty; else when full by
        size, older than ``roll_ms`` (``time_waited_for_roll``), its indexes full, or the
        offsets past an int32 from its base. Asked before every append: one call.

        ``more_index_entries``: asked at once for a group of batches appended together
        (``size_bytes`` in all, ``max_timestamp`` the largest of theirs), the indexes must
        have room for this many entries more (one per batch but the last: an append adds
        at most one to each per batch), so that it is true where it could be true before
        any of them."""
        size = self._size
        if size == 0:
            return False
        if size > max_segment_bytes - size_bytes:
            return True
        based = self._rolling_based_ts
        waited = (max_timestamp - based if based is not None and based >= 0
                  else self.time_waited_for_roll(now_ms, max_timestamp))
        if waited > roll_ms or not 0 <= last_offset - self.base_offset <= INT32_MAX:
            return True
        oi, ti = self._offset_index, self._time_index  # once per append: no property calls
        if oi is None or ti is None:
            oi, ti = self.offset_index, self.time_index
        return oi.full_after(more_index_entries) or ti.full_after(more_index_entries)

    # ------------------------------------------------------------------ appends
    def append(self, data: bytes | bytearray | memoryview,
               batches: Sequence[tuple[int, int, int]],
               head: bytearray | None = None,
               first_offsets: Sequence[int] | None = None, leader_epoch: int = -1) -> None:
        """Write ``data`` (whole batches, offsets assigned) at the end in one ``pwrite``
        loop, then index it: one offset-index entry per ``index.interval.bytes``.

        ``head``: the first batch's header as written, in place of ``data``'s first
        ``len(head)`` bytes (a read-only request buffer whose offsets are assigned in a
        copy of its header only: one ``pwritev``, the records not copied).

        ``first_offsets``: each batch's base offset, all written with ``leader_epoch``
        (a group of client batches): then the newest batches' heads are made from these
        and ``batches`` when first read, not read back from ``data`` now."""
        if not batches:
            return
        start = self._size
        if start == 0:
            self._rolling_based_ts = batches[0][2]  # (size_bytes, last_offset, max_timestamp)
        f = self._file
        if f is None:  # (self.file reopens it: once per append, not a property call)
            f = self.file
        if head is None:
            fileio.pwrite_all(f.fileno(), data, start, self.log_path)
        else:
            with memoryview(data) as view:
                fileio.pwritev_all(f.fileno(), head, view[len(head):], start, self.log_path)
        self._size = start + len(data)
        if self._verified_bytes == start:  # the caller checked these batches' CRCs
            self._verified_bytes = self._size
        position = start
        recent = self._recent
        if first_offsets is not None and len(batches) >= RECENT_HEADS:
            # Every head kept now is one of these batches': made when read, if ever.
            if recent:
                recent.clear()
            self._unmade_recent = _new_tuple(_UnmadeHeads, (start, first_offsets, batches,
                                                            leader_epoch))
            keep_from = len(batches)
        else:
            if self._unmade_recent is not None:
                self._make_recent()
            keep_from = len(batches) - RECENT_HEADS  # the heads of the batches before fall out
        interval = self.index_interval_bytes
        # index_batch's state in locals, written back around its calls and at the end
        current = self._max_ts_and_offset or self.max_timestamp_so_far
        top = current.timestamp
        since = self._bytes_since_last_index_entry
        for k, meta in enumerate(batches):
            size, last_offset, max_timestamp = meta
            if max_timestamp > top or since > interval:
                self._bytes_since_last_index_entry = since
                self.index_batch(position, size, last_offset, max_timestamp)
                since = self._bytes_since_last_index_entry
                top = self.max_timestamp_so_far.timestamp
            else:  # index_batch with nothing to change but the byte count, inline
                since += size
            if k >= keep_from:
                # The head as head_at would read it back from the file: the same bytes.
                base, epoch, delta, max_ts = _RECENT_HEAD.unpack_from(
                    data if head is None or position != start else head, position - start)
                recent.append(_new_tuple(BatchHead, (position, base, size, base + delta, max_ts,
                                                     epoch)))
            position += size
        self._bytes_since_last_index_entry = since

    def _recent_heads(self) -> deque[BatchHead]:
        """The heads of the newest batches (``_recent``), made first if a group append left
        them unmade."""
        if self._unmade_recent is not None:
            self._make_recent()
        return self._recent

    def _make_recent(self) -> None:
        """``_recent`` from what the last group append left (``_unmade_recent``): each
        batch's head as ``head_at`` would read it from the file (the offsets, epoch and
        timestamp that append wrote)."""
        unmade = self._unmade_recent
        assert unmade is not None
        self._unmade_recent = None
        position, firsts, metas, epoch = unmade
        recent = self._recent
        keep_from = len(metas) - RECENT_HEADS
        for k, (size, last_offset, max_timestamp) in enumerate(metas):
            if k >= keep_from:
                recent.append(_new_tuple(BatchHead, (position, firsts[k], size, last_offset,
                                                     max_timestamp, epoch)))
            position += size

    def mark(self) -> SegmentMark:
        """The state an append can change, for ``rollback`` (opens the indexes)."""
        oi, ti = self._offset_index, self._time_index  # once per append: no property calls
        if oi is None or ti is None:
            oi, ti = self.offset_index, self.time_index
        return _new_tuple(SegmentMark, (self._size, oi.entries, ti.entries,
                                        self._bytes_since_last_index_entry,
                                        self._max_ts_and_offset, self._rolling_based_ts))

    def rollback(self, mark: SegmentMark) -> None:
        """Undo everything appended since ``mark``: index entries first (they point into the
        file), then the file is cut back to its old size. Raises ``OSError`` if the disk
        refuses even that (the caller then takes the log dir offline)."""
        self._recent.clear()
        self._unmade_recent = None
        self.offset_index.truncate_to_entries(mark.offset_index_entries)
        self.time_index.truncate_to_entries(mark.time_index_entries)
        self._bytes_since_last_index_entry = mark.bytes_since_last_index_entry
        self._max_ts_and_offset = mark.max_ts_and_offset
        self._rolling_based_ts = mark.rolling_based_ts
        if self._mapped_bytes > mark.size_bytes:
            self._drop_map()
        # Always cut: a failed write may have extended the file past what _size says.
        f = self.file
        fileio.ftruncate(f.fileno(), mark.size_bytes, self.log_path)
        self._size = mark.size_bytes
        self._verified_bytes = min(self._verified_bytes, mark.size_bytes)

    def index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        """Account one batch already in the file at ``position`` (Kafka's per-batch rule:
        an entry points at the batch, with the batch's last offset)."""
        current = self._max_ts_and_offset
        if current is None:
            current = self.max_timestamp_so_far
        if max_timestamp > current.timestamp:
            self._max_ts_and_offset = _new_tuple(TimestampOffset, (max_timestamp, last_offset))
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            mts = self.max_timestamp_so_far
            self.time_index.maybe_append(mts.timestamp, mts.offset)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def on_become_inactive(self) -> None:
        """On roll: write the final time index entry, trim both indexes."""
        mts = self.max_timestamp_so_far
        if mts.timestamp >= 0:
            self.time_index.maybe_append(mts.timestamp, mts.offset, skip_full_check=True)
        self.offset_index.seal()
        self.time_index.seal()
        self._writable_indexes = False
        self._recent.clear()
        self._unmade_recent = None
        self.seal_file()

    # ------------------------------------------------------------------ batch walks
    def _buffer_for(self, end: int) -> mmap.mmap | None:
        """The map if it covers ``end`` (mapping or remapping when due), else None: the
        caller then reads with ``pread``."""
        if end <= self._mapped_bytes:
            return self._mm
        if self._size - self._mapped_bytes >= _REMAP_STEP_BYTES or (
            self._mm is None and self._size > 0 and self._mapped_bytes == 0
        ):
            mm = self._remap()
            if mm is not None and end <= len(mm):
                return mm
        return None

    def _remap(self) -> mmap.mmap | None:
        """Map the whole file now (registered with the map budget); None when empty."""
        self._drop_map()
        if self._size == 0 or self._closed:
            return None
        f = self.file
        mm = mmap.mmap(f.fileno(), self._size, access=mmap.ACCESS_READ)
        self._mm = mm
        self._mapped_bytes = self._size
        MAPS.mapped(self.evict_map)
        return mm

    def _drop_map(self) -> None:
        """Forget the map (any views of it keep it alive until they go)."""
        MAPS.unmapped(self.evict_map)
        self._mm = None
        self._mapped_bytes = 0

    def evict_map(self) -> None:
        """The map budget drops this segment's map; reads ``pread`` or map again."""
        self._mm = None
        self._mapped_bytes = 0

    def mapped_view(self) -> memoryview:
        """A read-only view of the whole file (recovery scans, the dump tool).

        The caller must release every view taken from it before the segment is truncated.
        """
        mm = self._remap()
        if mm is None:
            return memoryview(b"")
        return memoryview(mm)

    def head_at(self, position: int) -> BatchHead:
        """Header fields of the batch at ``position`` (which must be a batch boundary)."""
        end = position + _HEAD_BYTES
        if end > self._mapped_bytes:
            for recent in self._recent_heads():
                if recent.position == position:
                    return recent
        mm = self._mm if end <= self._mapped_bytes else self._buffer_for(end)
        if mm is not None:
            fields = _HEAD.unpack_from(mm, position)
        else:
            f = self.file
            raw = os.pread(f.fileno(), _HEAD_BYTES, position)
            if len(raw) < _HEAD_BYTES:
                raise CorruptSegmentError(f"{self.log_path}: no batch header at byte {position}")
            fields = _HEAD.unpack(raw)
        base_offset, batch_length = fields[0], fields[1]
        size = batch_length + LOG_OVERHEAD_BYTES
        if batch_length < 49 or position + size > self._size:
            raise CorruptSegmentError(
                f"{self.log_path}: bad batch length {batch_length} at byte {position}"
            )
        return _new_tuple(BatchHead, (position, base_offset, size, base_offset + fields[6],
                                      fields[8], fields[2]))

    def iter_heads(self, start_position: int, end_position: int | None = None) -> list[BatchHead]:
        """Heads of the batches from ``start_position`` up to ``end_position`` (or the end)."""
        end = self._size if end_position is None else min(end_position, self._size)
        out: list[BatchHead] = []
        pos = start_position
        for _ in range(_MAX_SCAN_BATCHES):
            if pos >= end:
                break
            head = self.head_at(pos)
            out.append(head)
            pos += head.size_bytes
        return out

    def read_next_offset(self) -> int:
        """Kafka's ``readNextOffset``: the offset after the last batch (the base offset when
        empty), found by walking headers from the last index entry to the end.

        Before the indexes are open (start-up) it reads the last entry of the ``.index``
        file and the file's tail with ``pread``, so a clean start maps nothing.
        """
        if self._size == 0:
            return self.base_offset
        start: int
        if self._offset_index is not None:
            start = self._offset_index.last_entry().position
        else:
            start = self._last_index_position_on_disk()
        if self._size - start <= _TAIL_READ_BYTES and self._mm is None:
            return self._next_offset_from_tail(start)
        heads = self.iter_heads(start)
        return heads[-1].last_offset + 1 if heads else self.base_offset

    def _last_index_position_on_disk(self) -> int:
        """Position of the ``.index`` file's last entry if it looks sane, else 0."""
        try:
            fd = os.open(index_file(self.directory, self.base_offset), os.O_RDONLY)
        except FileNotFoundError:
            return 0
        try:
            size = os.fstat(fd).st_size
            if size < 8 or size % 8:
                return 0
            relative, position = _INDEX_ENTRY.unpack(os.pread(fd, 8, size - 8))
        finally:
            os.close(fd)
        return position if relative >= 0 and 0 <= position < self._size else 0

    def _next_offset_from_tail(self, start: int) -> int:
        """Walk the headers of ``[start, end)`` read with one ``pread``."""
        f = self.file
        tail = os.pread(f.fileno(), self._size - start, start)
        pos = 0
        next_offset = self.base_offset
        end = len(tail)
        for _ in range(_MAX_SCAN_BATCHES):
            if pos >= end:
                break
            if end - pos < _HEAD_BYTES:
                raise CorruptSegmentError(f"{self.log_path}: no batch header at byte {start + pos}")
            fields = _HEAD.unpack_from(tail, pos)
            size = fields[1] + LOG_OVERHEAD_BYTES
            if fields[1] < 49 or pos + size > end:
                raise CorruptSegmentError(
                    f"{self.log_path}: bad batch length {fields[1]} at byte {start + pos}"
                )
            next_offset = fields[0] + fields[6] + 1
            pos += size
        return next_offset

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHead | None:
        """The first batch at or after ``start_position`` whose last offset is >= ``offset``
        (the batch that holds ``offset``), found from the offset index; None if none.
        An offset among the newest batches (a read at the tail) is found among their
        heads kept in memory."""
        recent = self._recent_heads()
        if recent and offset >= recent[0].base_offset:
            # Every batch before recent[0] ends below its base offset, so below ``offset``.
            for head in recent:
                if head.last_offset >= offset and head.position >= start_position:
                    return head
            return None
        index = self._offset_index or self.offset_index
        pos: int = index.lookup(offset).position
        if pos < start_position:
            pos = start_position
        size = self._size
        for _ in range(_MAX_SCAN_BATCHES):
            if pos >= size:
                return None
            head = self.head_at(pos)
            if head.last_offset >= offset:
                return head
            pos += head.size_bytes
        return None

    def boundary_at_or_below(self, limit_position: int, start_position: int) -> int:
        """The largest batch boundary <= ``limit_position`` and >= ``start_position``."""
        if limit_position >= self._size:
            return self._size
        index = self._offset_index or self.offset_index
        pos: int = index.lookup_position(limit_position).position
        if pos < start_position:
            pos = start_position
        for _ in range(_MAX_SCAN_BATCHES):
            head = self.head_at(pos)
            if pos + head.size_bytes > limit_position:
                return pos
            pos += head.size_bytes
        return pos

    def read(
        self, start: BatchHead, max_bytes: int, max_position: int, *, min_one_batch: bool
    ) -> FileSlice:
        """The region from the batch ``start`` to a batch boundary <= ``max_position`` and
        <= ``start + max_bytes``; at least the first batch when ``min_one_batch``."""
        begin = start.position
        end_limit = min(max_position, begin + max(max_bytes, 0))
        end = (max_position if end_limit >= max_position
               else self._boundary_after(start, end_limit))
        if end <= begin and min_one_batch and begin + start.size_bytes <= max_position:
            end = begin + start.size_bytes
        return FileSlice(self.file, begin, max(end - begin, 0))

    def _boundary_after(self, start: BatchHead, limit_position: int) -> int:
        """``boundary_at_or_below(limit_position, start.position)``, looked for first from
        the batch ``start`` and the one after it (a consumer's fetch of large batches, one
        or two of which fill its limit, is answered without the offset index); the index
        where more batches fit (or the one after is unreadable)."""
        first_end = start.position + start.size_bytes
        if first_end > limit_position:
            return start.position
        if first_end < self._size:
            try:
                after = self.head_at(first_end)
            except CorruptSegmentError:
                return self.boundary_at_or_below(limit_position, start.position)
            if first_end + after.size_bytes > limit_position:
                return first_end
        return self.boundary_at_or_below(limit_position, first_end)

    @property
    def verified_bytes(self) -> int:
        return self._verified_bytes

    def mark_verified(self, size_bytes: int) -> None:
        """Recovery checked every batch up to ``size_bytes``."""
        self._verified_bytes = min(max(self._verified_bytes, size_bytes), self._size)

    def verify(self, begin: int, end: int) -> tuple[int, str]:
        """Check the CRCs of the batches in ``[begin, end)`` (``begin`` a batch boundary)
        not checked before: (end of the run of valid batches from ``begin``, why it stopped
        short, "" if it did not). Extends ``verified_bytes`` when the run touches it."""
        if end <= self._verified_bytes:
            return end, ""
        start = self._verified_bytes if begin <= self._verified_bytes else begin
        mm = self._buffer_for(end)
        data: bytes | memoryview
        if mm is not None:
            data = memoryview(mm)[start:end]
        else:
            f = self.file
            data = os.pread(f.fileno(), end - start, start)
        try:
            result = scan_batches(data, True, keep_batches=False)
        finally:
            if isinstance(data, memoryview):
                data.release()
        valid_end = start + result.valid_bytes
        if begin <= self._verified_bytes:
            self._verified_bytes = max(self._verified_bytes, valid_end)
        if result.stop_reason is None:
            return end, ""
        return valid_end, _WHY.get(result.stop_reason, result.stop_reason.value)

    def read_batch_bytes(self, head: BatchHead) -> bytes:
        f = self.file
        return os.pread(f.fileno(), head.size_bytes, head.position)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with timestamp >= ``timestamp`` and
        offset >= ``start_offset``; decodes only the one batch that holds it."""
        ts_entry = self.time_index.lookup(timestamp)
        pos: int = self.offset_index.lookup(max(ts_entry.offset, start_offset)).position
        size = self._size
        for _ in range(_MAX_SCAN_BATCHES):
            if pos >= size:
                return None
            head = self.head_at(pos)
            if head.max_timestamp >= timestamp and head.last_offset >= start_offset:
                batch = RecordBatch(self.read_batch_bytes(head))
                for record in batch.records():
                    if record.timestamp >= timestamp and record.offset >= start_offset:
                        return record.timestamp, record.offset
            pos += head.size_bytes
        return None

    # ------------------------------------------------------------------ truncation
    def truncate_to_position(self, position: int) -> int:
        """Cut the file at ``position`` (a batch boundary); returns bytes removed."""
        removed = self._size - position
        if removed <= 0:
            return 0
        self._recent.clear()
        self._unmade_recent = None
        self._drop_map()
        f = self.file
        fileio.ftruncate(f.fileno(), position, self.log_path)
        self._size = position
        self._verified_bytes = min(self._verified_bytes, position)
        if position == 0:
            self._rolling_based_ts = None
        return removed

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding ``offset`` and every later one; returns bytes removed.
        Truncation offsets are batch boundaries in practice (replication truncates to
        epoch end offsets and high watermarks, which are)."""
        head = self.translate_offset(offset)
        if head is None:
            return 0
        position = head.position  # as Kafka: the batch holding ``offset`` goes whole
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = self.truncate_to_position(position)
        self._max_ts_and_offset = self.time_index.last_entry()
        last_index_pos = self.offset_index.last_entry().position
        self._bytes_since_last_index_entry = self._size - last_index_pos if self._size else 0
        return removed

    # ------------------------------------------------------------------ lifecycle
    def write_index_entries(self) -> None:
        """Write the index entries still only in memory to the index files (no fsync;
        under the owner's lock: a full disk here fails the flush before anything moved)."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.write_entries()

    def flush(self) -> None:
        """fsync the log and what was written to the indexes (blocking; writes nothing, so
        it may run beside appends: ``write_index_entries`` first)."""
        f = self.file
        fileio.fsync(f.fileno(), self.log_path)
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.sync()

    def close(self) -> None:
        """Write the final time index entry, trim and close everything (Kafka's close)."""
        if self._closed:
            return
        if self._time_index is not None and self._time_index.writable:
            mts = self.max_timestamp_so_far
            if mts.timestamp >= 0 and mts.timestamp > self._time_index.last_entry().timestamp:
                self._time_index.maybe_append(mts.timestamp, mts.offset, skip_full_check=True)
        self._close_indexes()
        self._drop_map()
        self._close_file()

    def abandon(self) -> None:
        """Close handles without the final index entry or trimming (crash simulation)."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.abandon()
        self._offset_index = None
        self._time_index = None
        self._drop_map()
        if not self._closed:
            self._close_file()

    def paths(self) -> list[Path]:
        return [self.log_path, *self._index_paths()]

    def rename_suffix(self, suffix: str) -> None:
        """Rename the segment's files to ``suffix`` (Kafka's ``changeFileSuffixes``): the
        ``.log`` first, then the indexes, so an index never carries a suffix its log lacks.
        Open handles follow the files (a rename keeps the inode)."""
        old = self.paths()
        self.suffix = suffix
        new = [_with_suffix(log_file(self.directory, self.base_offset), suffix),
               *self._index_paths()]
        for src, dst in zip(old, new, strict=True):
            if src.exists():
                fileio.replace(src, dst)
        self.log_path = new[0]
        for idx, path in ((self._offset_index, new[1]), (self._time_index, new[2])):
            if idx is not None:
                idx.path = path

    def first_batch_timestamp(self) -> int:
        """maxTimestamp of the first batch (Kafka's ``getFirstBatchTimestamp``), -1 if empty."""
        if self._size == 0:
            return NO_TIMESTAMP
        return self.head_at(0).max_timestamp

    def mark_deleted(self) -> None:
        """Rename the files to ``*.deleted`` (Kafka's async delete); the file stays open so
        slices already handed out still send. ``delete_files`` finishes the job later.

        All or nothing: if a rename fails, the ones done are renamed back and the
        ``OSError`` is raised (a second failure there propagates: the dir goes offline)."""
        if self.deleted:
            return
        self._close_indexes()
        done: list[Path] = []
        try:
            for path in self.paths():
                if path.exists():
                    fileio.replace(path, path.with_name(path.name + DELETED_SUFFIX))
                    done.append(path)
        except OSError:
            for path in reversed(done):
                fileio.replace(path.with_name(path.name + DELETED_SUFFIX), path)
            raise
        # From now on the segment's names are the .deleted ones: a cleaned segment with the
        # same base offset may take the live names while these files wait for deletion.
        self.suffix += DELETED_SUFFIX
        self.log_path = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        self.deleted = True

    def delete_files(self) -> None:
        """Close and unlink every file of this segment (after ``mark_deleted`` or not)."""
        self._close_indexes()
        self._drop_map()
        if not self._closed:
            self._close_file()
        for path in self.paths():
            path.unlink(missing_ok=True)
            if not self.deleted:
                path.with_name(path.name + DELETED_SUFFIX).unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self._size})"


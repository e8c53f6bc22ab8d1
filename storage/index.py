"""Sparse, mmap'd indexes of one segment: the offset index and the time index.

Both are files of fixed-size big-endian entries, in Kafka's layout byte for byte
(``OffsetIndex.java``, ``TimeIndex.java``), named after the segment's base offset:

``.index`` (offset index), 8 bytes per entry::

    @0  relativeOffset  int32   offset - segment base offset (the last offset of a batch)
    @4  position        int32   byte position of that batch in the segment's .log file

``.timeindex`` (time index), 12 bytes per entry::

    @0  timestamp       int64   largest timestamp seen so far in the segment (ms)
    @8  relativeOffset  int32   last offset of the batch holding that timestamp

Entries are sparse: the segment adds one every ``index.interval.bytes`` (4096) of log.
Both sequences are strictly increasing (offsets, and timestamps), which is what makes
binary search on the mapped bytes valid. A writable (active) index is preallocated to
``segment.index.bytes`` (10 MiB, rounded down to whole entries) and trimmed to the used
size when the segment rolls or the log closes; after an unclean stop an untrimmed file
ends in zero entries, which ``sanity_check`` detects (the segment then rebuilds it).

Appends and truncation write with ``pwrite`` into the preallocated file (the first write
to a page of a shared mapping costs milliseconds on ext4; ``pwrite`` costs microseconds,
and the map sees the same page-cache pages). Lookups binary-search the mmap directly (``struct.unpack_from``; nothing is copied); the
offset index first narrows the range with a 1/64 in-memory sample (see ``OffsetIndex``).

Thread-safety: none of its own. An index belongs to one segment, and the owning ``Log``
serialises every call (appends, truncation, resizing and lookups) under its lock; the
map is never resized while a lookup runs because both happen under that lock.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
from pathlib import Path
from typing import ClassVar, NamedTuple

from storage import fileio
from storage.errors import CorruptIndexError, StorageError
from storage.offsets import INT32_MAX, NO_TIMESTAMP, Offset, Position

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class OffsetPosition(NamedTuple):
    offset: Offset
    position: Position


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: Offset


class InvalidIndexAppendError(StorageError):
    """An append that would break the index's order, or to a full or read-only index."""


def round_down_to_entries(size_bytes: int, entry_size_bytes: int) -> int:
    return size_bytes - size_bytes % entry_size_bytes


class _MmapIndex:
    """What both indexes share: the file, its mapping, the entry count, resizing."""

    entry_size_bytes: ClassVar[int]

    def __init__(
        self, path: Path, base_offset: int, max_index_size_bytes: int, *, writable: bool
    ) -> None:
        if max_index_size_bytes < self.entry_size_bytes:
            raise ValueError(f"segment.index.bytes {max_index_size_bytes} holds no entry")
        self.path = path
        self.base_offset = base_offset
        self._max_size_bytes = round_down_to_entries(max_index_size_bytes, self.entry_size_bytes)
        self._writable = writable
        fd = fileio.open_new(path, os.O_RDWR) if writable else os.open(path, os.O_RDONLY)
        self._file = os.fdopen(fd, "r+b" if writable else "rb", buffering=0)
        self._file_size_bytes = os.fstat(fd).st_size
        self._mm: mmap.mmap | None = None
        # An existing file's entry count is its whole entries (Kafka does the same);
        # a zero-padded tail from an unclean stop is caught by sanity_check().
        self._entries = self._file_size_bytes // self.entry_size_bytes
        try:
            if writable:
                self._remap(max(self._max_size_bytes, self._entries * self.entry_size_bytes))
            else:
                self._remap(self._file_size_bytes, truncate=False)
        except BaseException:
            self._file.close()  # no descriptor leaks when sizing the file fails
            raise

    # ------------------------------------------------------------------ sizing
    def _remap(self, size_bytes: int, *, truncate: bool = True) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if truncate and size_bytes != self._file_size_bytes:
            fileio.ftruncate(self._file.fileno(), size_bytes, self.path)
            self._file_size_bytes = size_bytes
        if size_bytes > 0:
            access = mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ
            self._mm = mmap.mmap(self._file.fileno(), size_bytes, access=access)

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        if not self._writable:
            return self._file_size_bytes // self.entry_size_bytes
        return self._max_size_bytes // self.entry_size_bytes

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    @property
    def size_bytes(self) -> int:
        """Bytes used by entries (what the file holds after ``trim``)."""
        return self._entries * self.entry_size_bytes

    @property
    def file_size_bytes(self) -> int:
        return self._file_size_bytes

    @property
    def writable(self) -> bool:
        return self._writable

    def trim(self) -> None:
        """Shrink the file to the used entries (on roll and close)."""
        if self._writable:
            self._remap(self.size_bytes)
            self._max_size_bytes = self.size_bytes  # full until resize() grows it again

    def resize(self, max_index_size_bytes: int) -> None:
        """Grow a writable index back to ``segment.index.bytes`` (a truncated segment
        that becomes active again)."""
        if not self._writable:
            raise InvalidIndexAppendError(f"{self.path} is read-only")
        self._max_size_bytes = round_down_to_entries(max_index_size_bytes, self.entry_size_bytes)
        target = max(self._max_size_bytes, self.size_bytes)
        if target != self._file_size_bytes or self._mm is None:
            self._remap(target)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._truncate_to_entries(0)

    def truncate_to_entries(self, entries: int) -> None:
        """Keep the first ``entries`` entries (undoing appends); the dropped ones are zeroed."""
        self._truncate_to_entries(entries)

    def _truncate_to_entries(self, entries: int) -> None:
        old_end = self._entries * self.entry_size_bytes
        self._entries = min(self._entries, entries)
        if self._mm is not None and self._writable:
            # Zero the dropped entries so an untrimmed file never shows stale ones
            # (bounded by segment.index.bytes).
            start = self._entries * self.entry_size_bytes
            end = min(len(self._mm), old_end)
            if end > start:
                fileio.pwrite_all(self._file.fileno(), bytes(end - start), start, self.path)

    def flush(self) -> None:
        """msync the mapped entries (blocking; call from a thread pool)."""
        if self._mm is not None and self._writable:
            fileio.msync(self._mm, self.path)

    def close(self) -> None:
        """Trim (if writable) and close; safe to call twice."""
        if self._file.closed:
            return
        if self._writable:
            self.trim()
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._file.close()

    def abandon(self) -> None:
        """Close without trimming: the file keeps its preallocated size (as after a crash)."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._file.close()

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            fileio.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        """Close and unlink the file (missing is fine)."""
        self.close()
        self.path.unlink(missing_ok=True)

    def _require_writable_space(self) -> mmap.mmap:
        if not self._writable or self._mm is None:
            raise InvalidIndexAppendError(f"{self.path} is read-only")
        if self._entries >= self._max_size_bytes // self.entry_size_bytes:
            raise InvalidIndexAppendError(f"{self.path} is full ({self._entries} entries)")
        return self._mm

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise InvalidIndexAppendError(
                f"offset {offset} does not fit {self.path} (base offset {self.base_offset})"
            )
        return relative


_SAMPLE_STRIDE = 64  # entries per step of the in-memory sample (see OffsetIndex)


class OffsetIndex(_MmapIndex):
    """Maps offsets to byte positions in the segment's .log file (layout above).

    Lookups are two-level: a small in-memory sample (every 64th entry's relative offset
    and position, 1/64 of the file, kept in step by append and truncation) is bisected
    in C, then the final step binary-searches that block of at most 64 entries on the
    mmap. The mmap stays the only full copy; the sample is rebuilt from it on first use.
    """

    entry_size_bytes = 8

    def __init__(
        self, path: Path, base_offset: int, max_index_size_bytes: int, *, writable: bool
    ) -> None:
        self._sample_rel: list[int] | None = None
        self._sample_pos: list[int] = []
        super().__init__(path, base_offset, max_index_size_bytes, writable=writable)

    def _sample(self) -> list[int]:
        if self._sample_rel is None:
            rel: list[int] = []
            pos: list[int] = []
            mm = self._mm
            if mm is not None:
                for i in range(0, self._entries, _SAMPLE_STRIDE):
                    r, p = _OFFSET_ENTRY.unpack_from(mm, i * 8)
                    rel.append(r)
                    pos.append(p)
            self._sample_rel, self._sample_pos = rel, pos
        return self._sample_rel

    def _truncate_to_entries(self, entries: int) -> None:
        super()._truncate_to_entries(entries)
        if self._sample_rel is not None:
            keep = (self._entries + _SAMPLE_STRIDE - 1) // _SAMPLE_STRIDE
            del self._sample_rel[keep:]
            del self._sample_pos[keep:]

    def entry(self, n: int) -> OffsetPosition:
        if not 0 <= n < self._entries or self._mm is None:
            raise IndexError(f"entry {n} of {self._entries} in {self.path}")
        relative, position = _OFFSET_ENTRY.unpack_from(self._mm, n * 8)
        return OffsetPosition(Offset(self.base_offset + relative), Position(position))

    def last_entry(self) -> OffsetPosition:
        """The last entry, or (base offset, 0) when empty."""
        if self._entries == 0:
            return OffsetPosition(Offset(self.base_offset), Position(0))
        return self.entry(self._entries - 1)

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must increase strictly (Kafka's rule)."""
        mm = self._require_writable_space()
        relative = self._relative(offset)
        if self._entries > 0 and relative <= _I32.unpack_from(mm, (self._entries - 1) * 8)[0]:
            raise InvalidIndexAppendError(
                f"offset {offset} is not above the last entry of {self.path}"
            )
        if not 0 <= position <= INT32_MAX:
            raise InvalidIndexAppendError(f"position {position} does not fit an int32")
        fileio.pwrite_all(self._file.fileno(), _OFFSET_ENTRY.pack(relative, position),
                          self._entries * 8, self.path)
        if self._sample_rel is not None and self._entries % _SAMPLE_STRIDE == 0:
            self._sample_rel.append(relative)
            self._sample_pos.append(position)
        self._entries += 1

    def _search(self, target: int, sample: list[int], field_offset: int) -> OffsetPosition:
        """Bisect the sample (C), then binary-search its block of <= 64 entries on the
        mmap; ``field_offset`` 0 compares relative offsets, 4 compares positions."""
        mm = self._mm
        k = bisect.bisect_right(sample, target) - 1
        if k < 0 or mm is None:
            return OffsetPosition(Offset(self.base_offset), Position(0))
        lo = k * _SAMPLE_STRIDE
        hi = min(lo + _SAMPLE_STRIDE - 1, self._entries - 1)
        unpack = _I32.unpack_from
        while lo < hi:  # at most 6 turns: 64 entries, halved each time
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * 8 + field_offset)[0] <= target:
                lo = mid
            else:
                hi = mid - 1
        relative, position = _OFFSET_ENTRY.unpack_from(mm, lo * 8)
        return OffsetPosition(Offset(self.base_offset + relative), Position(position))

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, or (base offset, 0) if none."""
        if self._mm is None or self._entries == 0:
            return OffsetPosition(Offset(self.base_offset), Position(0))
        return self._search(target_offset - self.base_offset, self._sample(), 0)

    def lookup_position(self, target_position: int) -> OffsetPosition:
        """The entry with the largest position <= target, or (base offset, 0) if none.

        Positions increase with offsets, so the same two-level search applies.
        """
        if self._mm is None or self._entries == 0:
            return OffsetPosition(Offset(self.base_offset), Position(0))
        self._sample()
        return self._search(target_position, self._sample_pos, 4)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        mm = self._mm
        relative = offset - self.base_offset
        if mm is None or self._entries == 0:
            return
        lo, hi = 0, self._entries  # first entry with relative >= target
        while lo < hi:  # at most 32 turns
            mid = (lo + hi) >> 1
            if _I32.unpack_from(mm, mid * 8)[0] < relative:
                lo = mid + 1
            else:
                hi = mid
        self._truncate_to_entries(lo)

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` for a partial entry, an untrimmed zero tail, or
        entries out of order at the end (Kafka's ``OffsetIndex.sanityCheck`` and more)."""
        if self._file_size_bytes % 8 != 0:
            raise CorruptIndexError(
                f"{self.path}: size {self._file_size_bytes} is not a multiple of 8"
            )
        if self._entries == 0 or self._mm is None:
            return
        first = _I32.unpack_from(self._mm, 0)[0]
        last_relative = _I32.unpack_from(self._mm, (self._entries - 1) * 8)[0]
        if first < 0 or last_relative < 0:
            raise CorruptIndexError(f"{self.path}: negative relative offset")
        if self._entries > 1:
            prev_relative = _I32.unpack_from(self._mm, (self._entries - 2) * 8)[0]
            if last_relative <= prev_relative:
                raise CorruptIndexError(
                    f"{self.path}: last entry (relative offset {last_relative}) is not above "
                    f"the one before ({prev_relative}); unflushed zero tail or corruption"
                )


class TimeIndex(_MmapIndex):
    """Maps timestamps to offsets (layout above). One slot stays free for the entry a
    segment writes when it rolls, so ``is_full`` is ``entries >= max_entries - 1``."""

    entry_size_bytes = 12

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries - 1

    def entry(self, n: int) -> TimestampOffset:
        if not 0 <= n < self._entries or self._mm is None:
            raise IndexError(f"entry {n} of {self._entries} in {self.path}")
        timestamp, relative = _TIME_ENTRY.unpack_from(self._mm, n * 12)
        return TimestampOffset(timestamp, Offset(self.base_offset + relative))

    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base offset) when empty."""
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, Offset(self.base_offset))
        return self.entry(self._entries - 1)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add (timestamp, offset) if the timestamp is above the last one; True if added.

        ``skip_full_check`` lets the roll entry use the reserved last slot.
        """
        if not skip_full_check and self.is_full:
            raise InvalidIndexAppendError(f"{self.path} is full ({self._entries} entries)")
        mm = self._require_writable_space()
        relative = self._relative(offset)
        if self._entries > 0:
            last_ts, last_rel = _TIME_ENTRY.unpack_from(mm, (self._entries - 1) * 12)
            if relative < last_rel:
                raise InvalidIndexAppendError(
                    f"offset {offset} is below the last entry of {self.path}"
                )
            if timestamp <= last_ts:
                return False
        fileio.pwrite_all(self._file.fileno(), _TIME_ENTRY.pack(timestamp, relative),
                          self._entries * 12, self.path)
        self._entries += 1
        return True

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (-1, base offset) if none."""
        mm = self._mm
        hi = self._entries - 1
        if mm is None or hi < 0 or _I64.unpack_from(mm, 0)[0] > target_timestamp:
            return TimestampOffset(NO_TIMESTAMP, Offset(self.base_offset))
        lo = 0
        while lo < hi:  # at most 32 turns
            mid = (lo + hi + 1) >> 1
            if _I64.unpack_from(mm, mid * 12)[0] <= target_timestamp:
                lo = mid
            else:
                hi = mid - 1
        timestamp, relative = _TIME_ENTRY.unpack_from(mm, lo * 12)
        return TimestampOffset(timestamp, Offset(self.base_offset + relative))

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        mm = self._mm
        relative = offset - self.base_offset
        if mm is None or self._entries == 0:
            return
        lo, hi = 0, self._entries
        while lo < hi:  # at most 32 turns
            mid = (lo + hi) >> 1
            if _I32.unpack_from(mm, mid * 12 + 8)[0] < relative:
                lo = mid + 1
            else:
                hi = mid
        self._truncate_to_entries(lo)

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` for a partial entry, a zero tail, or disorder at the end."""
        if self._file_size_bytes % 12 != 0:
            raise CorruptIndexError(
                f"{self.path}: size {self._file_size_bytes} is not a multiple of 12"
            )
        if self._entries == 0 or self._mm is None:
            return
        last_ts, last_rel = _TIME_ENTRY.unpack_from(self._mm, (self._entries - 1) * 12)
        first_ts = _I64.unpack_from(self._mm, 0)[0]
        if last_rel < 0 or last_ts < first_ts:
            raise CorruptIndexError(f"{self.path}: last entry ({last_ts}, {last_rel}) is corrupt")
        if self._entries > 1:
            prev_ts, prev_rel = _TIME_ENTRY.unpack_from(self._mm, (self._entries - 2) * 12)
            if last_ts <= prev_ts or last_rel < prev_rel:
                raise CorruptIndexError(
                    f"{self.path}: last entry ({last_ts}, {last_rel}) is not above the one "
                    f"before ({prev_ts}, {prev_rel}); unflushed zero tail or corruption"
                )

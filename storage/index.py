"""Sparse indexes of one segment: the offset index and the time index.

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
binary search valid.

An index holds no open file while it is not being written (Kafka's ``AbstractIndex``
maps its file and closes the channel; here a map would cost a descriptor, see
``storage.map_budget``), so a partition costs one descriptor, its active ``.log``:

- **Writable (active)**: new entries gather in memory (a ``bytearray``) and reach the
  file, preallocated to ``segment.index.bytes`` (10 MiB, rounded down to whole entries)
  when the index opens, in one ``pwrite`` when ``MEMORY_ENTRIES`` have gathered (the
  last one stays in memory, for the order check of the next append), at ``flush``
  (before the log's recovery point moves past them), ``trim`` (roll, close, which also
  shrinks the file to the used size) and ``resize``; truncation zeroes the dropped
  entries the file holds at once. Entries already in the file are read through its
  map, like a sealed index's. Memory per partition stays bounded (Kafka keeps the same
  bytes in its map of the file); the file is opened only for those writes. After an
  unclean stop the file holds what was written and a zero tail, which ``sanity_check``
  detects (the segment then rebuilds it; recovery rebuilds every segment past the
  recovery point anyway).
- **Read-only (sealed)**: the file is mapped on first lookup (open, ``mmap``, close) and
  the map is registered with ``storage.map_budget.MAPS``, which drops the oldest maps of
  the process beyond its bound; the next lookup maps the file again.

Lookups binary-search the entries in place (``struct.unpack_from`` on the memory or the
map; only a block that spans both is copied); the offset index first narrows the range
with a 1/64 in-memory sample (see ``OffsetIndex``). A lookup holds the map it reads in a
local, so a map evicted meanwhile (from any thread) stays valid until it ends.

Thread-safety: the owning ``Log`` serialises appends, truncation, resizing and lookups
under its lock. ``flush`` may run without it (from a thread pool, while appends go on): a
small per-index lock orders its disk writes against the owner's (truncation, writing
out a full memory, ``close``); appends only extend the memory before they count the
entry, so a flush writes whole entries.
"""


from __future__ import annotations

import bisect
import mmap
import os
import struct
import threading
from pathlib import Path
from typing import ClassVar, NamedTuple

from storage import fileio
from storage.errors import CorruptIndexError, StorageError
from storage.map_budget import MAPS
from storage.offsets import INT32_MAX, NO_TIMESTAMP, Offset, Position

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_Buffer = bytearray | bytes | mmap.mmap
# Entries a writable index keeps in memory: at the 4,096-byte index interval, the last
# 4 MiB of log (8 KiB of offset entries, 12 KiB of time entries per partition).
MEMORY_ENTRIES = 1024


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


def _pread_exact(fd: int, size_bytes: int, position: int) -> bytes:
    """``size_bytes`` at ``position``, fewer only at the end of the file."""
    chunks: list[bytes] = []
    got = 0
    for _ in range(size_bytes // (1 << 20) + 2):  # every turn reads or stops
        if got >= size_bytes:
            break
        chunk = os.pread(fd, size_bytes - got, position + got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class _Index:
    """What both indexes share: where entries are (memory, file map), the file, resizing.

    Entry ``i`` is in ``_mem`` at ``(i - _mem_start) * entry_size`` when ``i >= _mem_start``,
    else in the file (read through ``_map``). Read-only: ``_mem_start == entries``, nothing
    in memory. Writable: ``_mem_start <= _disk_entries`` (what memory dropped is in the
    file) and, when there are entries, ``_mem_start < entries`` (the last entry, which an
    append compares with, is in memory).
    """

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
        self._lock = threading.Lock()  # disk writes: flush (any thread) vs truncation, close
        self._closed = False
        self._unsynced = False  # written since the last fsync
        self._mem = bytearray()
        self._map: mmap.mmap | None = None  # the file, mapped on demand (map budget)
        if writable:
            self._open_writable()
        else:
            fd = os.open(path, os.O_RDONLY)
            try:
                self._file_size_bytes = os.fstat(fd).st_size
            finally:
                os.close(fd)
            # An existing file's entry count is its whole entries (Kafka does the same);
            # a zero-padded tail from an unclean stop is caught by sanity_check().
            self._entries = self._file_size_bytes // self.entry_size_bytes
            self._disk_entries = self._entries
            self._mem_start = self._entries

    def _open_writable(self) -> None:
        """Create or open the file, read its last entries, size it to
        ``segment.index.bytes``, close it."""
        es = self.entry_size_bytes
        fd = fileio.open_new(self.path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            entries = size // es
            start = max(0, entries - MEMORY_ENTRIES)
            mem = bytearray(_pread_exact(fd, (entries - start) * es, start * es))
            entries = start + len(mem) // es
            del mem[(entries - start) * es:]
            target = max(self._max_size_bytes, entries * es)
            if target != size:
                fileio.ftruncate(fd, target, self.path)
        finally:
            os.close(fd)  # no descriptor leaks when sizing the file fails
        self._mem = mem
        self._mem_start = start
        self._entries = entries
        self._disk_entries = entries
        self._file_size_bytes = target

    # ------------------------------------------------------------------ reading
    def _file_map(self, need_bytes: int) -> mmap.mmap:
        """The file's map covering ``need_bytes`` (mapped again when it does not)."""
        m = self._map
        if m is None or len(m) < need_bytes:
            self._drop_map()
            fd = os.open(self.path, os.O_RDONLY)
            try:
                m = mmap.mmap(fd, os.fstat(fd).st_size, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)  # the map keeps its own duplicate
            if len(m) < need_bytes:
                raise CorruptIndexError(f"{self.path} is shorter than its {need_bytes} bytes")
            self._map = m
            MAPS.mapped(self.evict_map)
        return m

    def _source(self, lo: int, hi: int) -> tuple[_Buffer, int]:
        """A buffer holding entries ``lo..hi`` and the index of its first entry."""
        ms = self._mem_start
        es = self.entry_size_bytes
        if lo >= ms:
            return self._mem, ms
        if hi < ms:
            return self._file_map(ms * es), 0
        head = self._file_map(ms * es)[lo * es:ms * es]  # a block across the two
        return head + self._mem[:(hi + 1 - ms) * es], lo

    def evict_map(self) -> None:
        """The map budget drops this index's map (the next read maps the file again)."""
        self._map = None

    def _drop_map(self) -> None:
        if self._map is not None:
            MAPS.unmapped(self.evict_map)
        self._map = None

    # ------------------------------------------------------------------ disk
    def _write_out(self, size_bytes: int | None = None, *, entries: bool = True) -> None:
        """Write the entries the file lacks (unless not ``entries``) and, with
        ``size_bytes``, set the file's size: one ``open``. Called with ``self._lock`` held."""
        es = self.entry_size_bytes
        n = self._entries  # appends may go on (another thread): write what is counted now
        pending = entries and self._writable and n > self._disk_entries
        if not pending and (size_bytes is None or size_bytes == self._file_size_bytes):
            return
        if size_bytes is not None and size_bytes < self._file_size_bytes:
            self._drop_map()  # never a map past the end of the file
        fd = os.open(self.path, os.O_RDWR)
        try:
            self._unsynced = True
            if pending:
                start, ms = self._disk_entries, self._mem_start
                fileio.pwrite_all(fd, self._mem[(start - ms) * es:(n - ms) * es], start * es,
                                  self.path)
                self._disk_entries = n
                self._file_size_bytes = max(self._file_size_bytes, n * es)
            if size_bytes is not None and size_bytes != self._file_size_bytes:
                fileio.ftruncate(fd, size_bytes, self.path)
                self._file_size_bytes = size_bytes
        finally:
            os.close(fd)

    def _spill(self) -> None:
        """Write the entries in memory and keep only the last one there (appends call it
        when ``MEMORY_ENTRIES`` have gathered; the owner's thread, under its lock)."""
        es = self.entry_size_bytes
        with self._lock:
            self._write_out()
            keep_from = self._entries - 1
            del self._mem[:(keep_from - self._mem_start) * es]
            self._mem_start = keep_from

    # ------------------------------------------------------------------ sizing
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
        # max_entries, inline: asked before every append
        size = self._max_size_bytes if self._writable else self._file_size_bytes
        return self._entries >= size // self.entry_size_bytes

    def full_after(self, more: int) -> bool:
        """``is_full`` once ``more`` entries more were appended."""
        size = self._max_size_bytes if self._writable else self._file_size_bytes
        return self._entries + more >= size // self.entry_size_bytes

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
        """Write every entry and shrink the file to them (on roll and close)."""
        if self._writable:
            with self._lock:
                self._write_out(self.size_bytes)
            self._max_size_bytes = self.size_bytes  # full until resize() grows it again

    def seal(self) -> None:
        """Trim and become read-only (the segment rolled): the entries leave memory and
        the next lookup maps the file."""
        if self._writable:
            self.trim()
            with self._lock:
                self._writable = False
                self._mem = bytearray()
                self._mem_start = self._entries

    def resize(self, max_index_size_bytes: int) -> None:
        """Grow a writable index back to ``segment.index.bytes`` (a truncated segment
        that becomes active again, the undoing of a failed roll). Writes no entry: sizing
        a sparse file needs no free space, so undoing a roll on a full disk succeeds."""
        if not self._writable:
            raise InvalidIndexAppendError(f"{self.path} is read-only")
        self._max_size_bytes = round_down_to_entries(max_index_size_bytes, self.entry_size_bytes)
        with self._lock:
            self._write_out(max(self._max_size_bytes, self.size_bytes), entries=False)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._truncate_to_entries(0)

    def truncate_to_entries(self, entries: int) -> None:
        """Keep the first ``entries`` entries (undoing appends); the dropped ones are zeroed."""
        self._truncate_to_entries(entries)

    def _truncate_to_entries(self, entries: int) -> None:
        es = self.entry_size_bytes
        with self._lock:
            keep = max(0, min(self._entries, entries))
            if not self._writable:
                self._entries = self._mem_start = keep
                return
            ms = self._mem_start
            # The new last entry back into memory when memory no longer holds it.
            reload_from = keep - 1 if 0 < keep <= ms else None
            if keep < self._disk_entries or reload_from is not None:
                fd = os.open(self.path, os.O_RDWR)
                try:
                    # Zero the dropped entries the file holds, so an untrimmed file never
                    # shows stale ones (bounded by segment.index.bytes).
                    end = min(self._disk_entries * es, self._file_size_bytes)
                    if end > keep * es:
                        self._unsynced = True
                        fileio.pwrite_all(fd, bytes(end - keep * es), keep * es, self.path)
                    if reload_from is not None:
                        last = _pread_exact(fd, (keep - reload_from) * es, reload_from * es)
                finally:
                    os.close(fd)
                self._disk_entries = min(self._disk_entries, keep)
            if reload_from is not None:
                self._mem = bytearray(last)
                self._mem_start = reload_from
            elif keep == 0:
                self._mem = bytearray()
                self._mem_start = 0
            else:
                del self._mem[(keep - ms) * es:]
            self._entries = keep

    def write_entries(self) -> None:
        """Write the entries the file lacks (no fsync)."""
        with self._lock:
            if not self._closed:
                self._write_out()

    def flush(self) -> None:
        """Write the entries the file lacks and fsync it (blocking; any thread)."""
        self.write_entries()
        self.sync()

    def sync(self) -> None:
        """fsync what was written to the file, writing nothing (blocking; any thread)."""
        with self._lock:
            if self._closed or not self._unsynced:
                return
            fd = os.open(self.path, os.O_RDONLY)
            self._unsynced = False
        try:
            fileio.fsync(fd, self.path)
        except BaseException:
            self._unsynced = True
            raise
        finally:
            os.close(fd)

    def close(self) -> None:
        """Trim (if writable) and close; safe to call twice."""
        if self._closed:
            return
        if self._writable:
            self.trim()
        with self._lock:
            self._closed = True
            self._drop_map()
            self._mem = bytearray()

    def abandon(self) -> None:
        """Close without writing or trimming: the file keeps what was written (at flush,
        or when memory filled) and its preallocated size, as after a crash."""
        with self._lock:
            self._closed = True
            self._drop_map()
            self._mem = bytearray()

    def rename_to(self, path: Path) -> None:
        with self._lock:
            if self.path.exists():
                fileio.replace(self.path, path)
            self.path = path

    def delete(self) -> None:
        """Close and unlink the file (missing is fine)."""
        self.close()
        self.path.unlink(missing_ok=True)

    def _append_position(self) -> int:
        """Where the next entry goes in ``_mem`` (writing out first when it is full);
        raises for a read-only, closed or full index."""
        if not self._writable or self._closed:
            raise InvalidIndexAppendError(f"{self.path} is read-only")
        if self._entries >= self._max_size_bytes // self.entry_size_bytes:
            raise InvalidIndexAppendError(f"{self.path} is full ({self._entries} entries)")
        if self._entries - self._mem_start >= MEMORY_ENTRIES:
            self._spill()
        return (self._entries - self._mem_start) * self.entry_size_bytes

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise InvalidIndexAppendError(
                f"offset {offset} does not fit {self.path} (base offset {self.base_offset})"
            )
        return relative


_SAMPLE_STRIDE = 64  # entries per step of the in-memory sample (see OffsetIndex)


class OffsetIndex(_Index):
    """Maps offsets to byte positions in the segment's .log file (layout above).

    Lookups are two-level: a small in-memory sample (every 64th entry's relative offset
    and position, 1/64 of the file, kept in step by append and truncation) is bisected
    in C, then the final step binary-searches that block of at most 64 entries where it
    lies (memory or the file's map). The sample is built from the entries on first use
    and outlives an evicted map.
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
            for i in range(0, self._entries, _SAMPLE_STRIDE):
                buf, first = self._source(i, i)
                r, p = _OFFSET_ENTRY.unpack_from(buf, (i - first) * 8)
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
        if not 0 <= n < self._entries or self._closed:
            raise IndexError(f"entry {n} of {self._entries} in {self.path}")
        buf, first = self._source(n, n)
        relative, position = _OFFSET_ENTRY.unpack_from(buf, (n - first) * 8)
        return OffsetPosition(Offset(self.base_offset + relative), Position(position))

    def last_entry(self) -> OffsetPosition:
        """The last entry, or (base offset, 0) when empty."""
        if self._entries == 0:
            return OffsetPosition(Offset(self.base_offset), Position(0))
        return self.entry(self._entries - 1)

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must increase strictly (Kafka's rule)."""
        at = self._append_position()
        relative = self._relative(offset)
        mem = self._mem
        if at and relative <= _I32.unpack_from(mem, at - 8)[0]:
            raise InvalidIndexAppendError(
                f"offset {offset} is not above the last entry of {self.path}"
            )
        if not 0 <= position <= INT32_MAX:
            raise InvalidIndexAppendError(f"position {position} does not fit an int32")
        n = self._entries
        mem += _OFFSET_ENTRY.pack(relative, position)  # the bytes first, then the count
        if self._sample_rel is not None and n % _SAMPLE_STRIDE == 0:
            self._sample_rel.append(relative)
            self._sample_pos.append(position)
        self._entries = n + 1

    def _search(self, target: int, sample: list[int], field_offset: int) -> OffsetPosition:
        """Bisect the sample (C), then binary-search its block of <= 64 entries where it
        lies; ``field_offset`` 0 compares relative offsets, 4 compares positions."""
        k = bisect.bisect_right(sample, target) - 1
        if k < 0:
            return OffsetPosition(Offset(self.base_offset), Position(0))
        lo = k * _SAMPLE_STRIDE
        hi = min(lo + _SAMPLE_STRIDE - 1, self._entries - 1)
        ms = self._mem_start
        if lo >= ms:  # the active segment's recent entries: in memory
            buf: _Buffer = self._mem
            first = ms
        else:
            buf, first = self._source(lo, hi)
        unpack = _I32.unpack_from
        while lo < hi:  # at most 6 turns: 64 entries, halved each time
            mid = (lo + hi + 1) >> 1
            if unpack(buf, (mid - first) * 8 + field_offset)[0] <= target:
                lo = mid
            else:
                hi = mid - 1
        relative, position = _OFFSET_ENTRY.unpack_from(buf, (lo - first) * 8)
        return OffsetPosition(Offset(self.base_offset + relative), Position(position))

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, or (base offset, 0) if none."""
        if self._entries == 0 or self._closed:
            return OffsetPosition(Offset(self.base_offset), Position(0))
        return self._search(target_offset - self.base_offset, self._sample(), 0)

    def lookup_position(self, target_position: int) -> OffsetPosition:
        """The entry with the largest position <= target, or (base offset, 0) if none.

        Positions increase with offsets, so the same two-level search applies.
        """
        if self._entries == 0 or self._closed:
            return OffsetPosition(Offset(self.base_offset), Position(0))
        self._sample()
        return self._search(target_position, self._sample_pos, 4)

    def _relative_at(self, i: int) -> int:
        buf, first = self._source(i, i)
        value: int = _I32.unpack_from(buf, (i - first) * 8)[0]
        return value

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        relative = offset - self.base_offset
        if self._entries == 0 or self._closed:
            return
        lo, hi = 0, self._entries  # first entry with relative >= target
        while lo < hi:  # at most 32 turns
            mid = (lo + hi) >> 1
            if self._relative_at(mid) < relative:
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
        if self._entries == 0 or self._closed:
            return
        first = self._relative_at(0)
        last_relative = self._relative_at(self._entries - 1)
        if first < 0 or last_relative < 0:
            raise CorruptIndexError(f"{self.path}: negative relative offset")
        if self._entries > 1:
            prev_relative = self._relative_at(self._entries - 2)
            if last_relative <= prev_relative:
                raise CorruptIndexError(
                    f"{self.path}: last entry (relative offset {last_relative}) is not above "
                    f"the one before ({prev_relative}); unflushed zero tail or corruption"
                )


class TimeIndex(_Index):
    """Maps timestamps to offsets (layout above). One slot stays free for the entry a
    segment writes when it rolls, so ``is_full`` is ``entries >= max_entries - 1``."""

    entry_size_bytes = 12

    @property
    def is_full(self) -> bool:
        # max_entries - 1, inline: asked before every append
        size = self._max_size_bytes if self._writable else self._file_size_bytes
        return self._entries >= size // self.entry_size_bytes - 1

    def full_after(self, more: int) -> bool:
        size = self._max_size_bytes if self._writable else self._file_size_bytes
        return self._entries + more >= size // self.entry_size_bytes - 1

    def _at(self, n: int) -> tuple[int, int]:
        buf, first = self._source(n, n)
        timestamp, relative = _TIME_ENTRY.unpack_from(buf, (n - first) * 12)
        return timestamp, relative

    def entry(self, n: int) -> TimestampOffset:
        if not 0 <= n < self._entries or self._closed:
            raise IndexError(f"entry {n} of {self._entries} in {self.path}")
        timestamp, relative = self._at(n)
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
        at = self._append_position()
        relative = self._relative(offset)
        mem = self._mem
        if at:
            last_ts, last_rel = _TIME_ENTRY.unpack_from(mem, at - 12)
            if relative < last_rel:
                raise InvalidIndexAppendError(
                    f"offset {offset} is below the last entry of {self.path}"
                )
            if timestamp <= last_ts:
                return False
        mem += _TIME_ENTRY.pack(timestamp, relative)  # the bytes first, then the count
        self._entries += 1
        return True

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (-1, base offset) if none."""
        hi = self._entries - 1
        if hi < 0 or self._closed or self._at(0)[0] > target_timestamp:
            return TimestampOffset(NO_TIMESTAMP, Offset(self.base_offset))
        lo = 0
        while lo < hi:  # at most 32 turns
            mid = (lo + hi + 1) >> 1
            if self._at(mid)[0] <= target_timestamp:
                lo = mid
            else:
                hi = mid - 1
        timestamp, relative = self._at(lo)
        return TimestampOffset(timestamp, Offset(self.base_offset + relative))

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        relative = offset - self.base_offset
        if self._entries == 0 or self._closed:
            return
        lo, hi = 0, self._entries
        while lo < hi:  # at most 32 turns
            mid = (lo + hi) >> 1
            if self._at(mid)[1] < relative:
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
        if self._entries == 0 or self._closed:
            return
        last_ts, last_rel = self._at(self._entries - 1)
        first_ts = self._at(0)[0]
        if last_rel < 0 or last_ts < first_ts:
            raise CorruptIndexError(f"{self.path}: last entry ({last_ts}, {last_rel}) is corrupt")
        if self._entries > 1:
            prev_ts, prev_rel = self._at(self._entries - 2)
            if last_ts <= prev_ts or last_rel < prev_rel:
                raise CorruptIndexError(
                    f"{self.path}: last entry ({last_ts}, {last_rel}) is not above the one "
                    f"before ({prev_ts}, {prev_rel}); unflushed zero tail or corruption"
                )

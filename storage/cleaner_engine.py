"""One cleaning of one log, given what to clean (``CleaningJob``) and a host that owns the
log (``CleaningHost``): Kafka's ``Cleaner``. It runs in a cleaner worker process
(``storage.cleaner_worker``), never on the broker's interpreter, or in process in tests.

1. Offset map: walk the dirty segments and record, per key, its latest offset
   (``storage.offset_map``), until the map's memory budget is used. The map's latest offset
   plus one is where the next cleaning starts.
2. Groups: the segments from the log's first up to that offset, grouped as Kafka groups
   them (together at most ``segment.bytes`` of log and ``segment.index.bytes`` of each
   index, offsets within an int32 of the group's base).
3. Each group is recopied through the filter (``storage.cleaner_filter``) into a new
   segment ``<base>.log.cleaned`` with its indexes, fsynced, closed and given the last old
   segment's mtime; then the host swaps it in (``CleaningHost.swap``: renames under the
   log's lock, in the broker) before the next group starts.

What the engine asks of its host: a private descriptor for each segment it reads
(``segment_fd``: the broker dups it under the log's lock, so a segment that left the log
aborts the cleaning), whether to stop (``check_done``, once per chunk), and the swap.
Segments are read with ``pread`` in ``log.cleaner.io.buffer.size / threads / 2`` chunks of
whole batches (a larger batch is read whole), throttled to the cleaner's share of
``log.cleaner.io.max.bytes.per.second``. The ``.cleaned`` files are the engine's until the
swap: an error or abort before it deletes them.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from protocol.batch_header import BATCH_LENGTH, LOG_OVERHEAD_BYTES
from storage.cleaner_stats import CleanerStats, LastRecord
from storage.errors import CorruptSegmentError
from storage.naming import (
    CLEANED_SUFFIX,
    TopicPartition,
    index_file,
    log_file,
    time_index_file,
)
from storage.offsets import INT32_MAX
from storage.segment import BatchMeta, LogSegment

if TYPE_CHECKING:
    # Imported by the engine when it is built: only a cleaning (in the worker process, or
    # the in-thread Cleaner) scans records, so the broker that drives the workers does not
    # load the filter and the compiled record scan.
    from storage.cleaner_filter import BatchFilter

log = logging.getLogger("storage.cleaner")

_MIN_BATCH_BYTES = 61
_MAX_CHUNKS = 1 << 32  # bound on chunk loops (each moves past >= one batch)
_OUT_FLUSH_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings (Kafka's ``CleanerConfig``)."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_message_size: int = 1048588
    max_io_bytes_per_second: float = math.inf
    backoff_ms: int = 15_000


class CleaningAbortedError(Exception):
    """The cleaning of one log stopped on purpose (shutdown, deletion, log changed)."""


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """A non-active segment as the cleaning plans with it."""

    base_offset: int
    next_offset: int  # base offset of the following segment
    size_bytes: int


@dataclass(frozen=True, slots=True)
class CleaningJob:
    """Everything a cleaning needs to know, as the broker saw it when it chose the log."""

    tp: TopicPartition
    directory: Path
    segments: tuple[SegmentRef, ...]  # every segment but the active one, oldest first
    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment base offset (or the active's)
    now_ms: int
    active_producers: Mapping[int, LastRecord]
    segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int
    delete_retention_ms: int


class CleaningHost(Protocol):
    """The side that owns the log (the broker)."""

    def segment_fd(self, base_offset: int) -> int:
        """A private read descriptor of the segment (the caller closes it); raises
        ``CleaningAbortedError`` if the segment left the log."""
        ...

    def check_done(self) -> None:
        """Raise ``CleaningAbortedError`` if the cleaning must stop."""
        ...

    def swap(self, base_offset: int, old_base_offsets: list[int]) -> None:
        """Swap the flushed ``<base_offset>.*.cleaned`` files in for the old segments;
        raises ``CleaningAbortedError`` (files deleted) if the log changed meanwhile."""
        ...


class Throttler:
    """Keeps the cleaner's I/O under a rate (Kafka's ``Throttler``, 300 ms windows)."""

    def __init__(self, rate_bytes_per_s: float, stop: threading.Event,
                 window_s: float = 0.3) -> None:
        self.rate = rate_bytes_per_s
        self._stop = stop
        self._window_s = window_s
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._bytes = 0

    def maybe_throttle(self, n: int) -> None:
        if math.isinf(self.rate):
            return
        with self._lock:
            self._bytes += n
            elapsed = time.monotonic() - self._start
            if elapsed < self._window_s:
                return
            sleep_s = self._bytes / self.rate - elapsed
            self._start, self._bytes = time.monotonic(), 0
        if sleep_s > 0:
            self._stop.wait(sleep_s)


def _whole_batches(data: bytes) -> int:
    """Length of the prefix of ``data`` made of whole batches (headers only)."""
    pos = 0
    end = len(data)
    while pos + LOG_OVERHEAD_BYTES <= end:  # each turn moves >= 61 bytes or stops
        size = BATCH_LENGTH.unpack_from(data, pos + 8)[0] + LOG_OVERHEAD_BYTES
        if size < _MIN_BATCH_BYTES:
            raise CorruptSegmentError(f"batch length {size - 12} at byte {pos} of a chunk")
        if pos + size > end:
            break
        pos += size
    return pos


def read_chunks(fd: int, size_bytes: int, buffer_bytes: int) -> Iterator[bytes]:
    """The file's bytes [0, size) as chunks of whole batches, ``buffer_bytes`` at a time
    (a larger batch comes alone)."""
    pos = 0
    for _ in range(_MAX_CHUNKS):
        if pos >= size_bytes:
            return
        data = os.pread(fd, min(buffer_bytes, size_bytes - pos), pos)
        valid = _whole_batches(data)
        if valid == 0:
            if len(data) < LOG_OVERHEAD_BYTES:
                raise CorruptSegmentError(f"{size_bytes - pos} bytes at byte {pos} are no batch")
            size = BATCH_LENGTH.unpack_from(data, 8)[0] + LOG_OVERHEAD_BYTES
            if pos + size > size_bytes:
                raise CorruptSegmentError(f"batch at byte {pos} runs past the segment end")
            data = os.pread(fd, size, pos)
            valid = _whole_batches(data)
            if valid == 0:
                raise CorruptSegmentError(f"short read of the batch at byte {pos}")
        yield data if valid == len(data) else data[:valid]
        pos += valid


def _index_sizes(directory: Path, base_offset: int) -> tuple[int, int]:
    sizes = []
    for path in (index_file(directory, base_offset), time_index_file(directory, base_offset)):
        try:
            sizes.append(os.stat(path).st_size)
        except OSError:
            sizes.append(0)
    return sizes[0], sizes[1]


def group_segments_by_size(
    directory: Path, segments: Sequence[SegmentRef], max_size: int, max_index_size: int,
    first_uncleanable_offset: int,
) -> list[list[SegmentRef]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose log bytes, offset-index
    bytes and time-index bytes each stay within the limits and whose offsets fit an int32
    from the group's base offset."""
    groups: list[list[SegmentRef]] = []
    i = 0
    n = len(segments)
    while i < n:
        group = [segments[i]]
        log_size = segments[i].size_bytes
        idx_size, tidx_size = _index_sizes(directory, segments[i].base_offset)
        i += 1
        while i < n:
            nxt = segments[i]
            n_idx, n_tidx = _index_sizes(directory, nxt.base_offset)
            last_offset = (segments[i + 1].base_offset - 1 if i + 1 < n
                           else first_uncleanable_offset - 1)
            if (log_size + nxt.size_bytes > max_size or idx_size + n_idx > max_index_size
                    or tidx_size + n_tidx > max_index_size
                    or (nxt.size_bytes > 0 and last_offset - group[0].base_offset > INT32_MAX)):
                break
            group.append(nxt)
            log_size += nxt.size_bytes
            idx_size += n_idx
            tidx_size += n_tidx
            i += 1
        groups.append(group)
    return groups


def cleaned_paths(directory: Path, base_offset: int) -> list[Path]:
    """The ``.cleaned`` files of the group starting at ``base_offset``."""
    return [p.with_name(p.name + CLEANED_SUFFIX)
            for p in (log_file(directory, base_offset), index_file(directory, base_offset),
                      time_index_file(directory, base_offset))]


class CleaningEngine:
    """Cleans one log at a time; it owns its offset map (one per cleaner)."""

    def __init__(self, config: CleanerConfig, throttler: Throttler) -> None:
        from storage.cleaner_filter import batch_body
        from storage.offset_map import OffsetMap

        def body_of(chunk: bytes, pos: int, size: int, attributes: int) -> bytes:
            return batch_body(memoryview(chunk)[pos : pos + size], attributes)

        self._body_of = body_of
        threads = max(config.threads, 1)
        self.offset_map = OffsetMap(config.dedupe_buffer_size // threads,
                                    config.dedupe_buffer_load_factor)
        self.io_buffer_bytes = max(config.io_buffer_size // threads // 2, 4096)
        self.throttler = throttler

    def clean(self, job: CleaningJob, host: CleaningHost) -> tuple[int, CleanerStats]:
        """Clean the job's log; returns the next first dirty offset and the statistics."""
        from storage.cleaner_filter import BatchFilter

        stats = CleanerStats(start_s=time.monotonic())
        tp = job.tp
        log.info("Beginning cleaning of log %s", tp)
        dirty = [s for s in job.segments
                 if s.next_offset > job.first_dirty_offset
                 and s.base_offset < job.first_uncleanable_offset]
        omap = self.offset_map
        omap.clear()
        for i, seg in enumerate(dirty):
            next_base = (dirty[i + 1].base_offset if i + 1 < len(dirty)
                         else job.first_uncleanable_offset)
            if self._map_segment(job, seg, next_base, stats, host):
                log.debug("%s: offset map full in segment %d", tp, seg.base_offset)
                break
        end_offset = omap.latest_offset + 1
        stats.map_done_s = time.monotonic()
        to_clean = [s for s in job.segments if s.base_offset < end_offset]
        groups = group_segments_by_size(job.directory, to_clean, job.segment_bytes,
                                        job.segment_index_bytes, job.first_uncleanable_offset)
        log.info("Cleaning log %s: %d segments in %d groups (offset map: %d keys up to offset %d)",
                 tp, len(to_clean), len(groups), omap.size, end_offset - 1)
        filt = BatchFilter(omap, now_ms=job.now_ms, delete_retention_ms=job.delete_retention_ms,
                           active_producers=job.active_producers,
                           upper_bound_offset=job.first_uncleanable_offset, stats=stats,
                           first_dirty_offset=job.first_dirty_offset)
        for group in groups:
            self._clean_group(job, group, filt, host)
        stats.buffer_utilization = omap.utilization
        stats.end_s = time.monotonic()
        return end_offset, stats

    # ------------------------------------------------------------------ offset map
    def _map_segment(self, job: CleaningJob, seg: SegmentRef, next_base: int,
                     stats: CleanerStats, host: CleaningHost) -> bool:
        """Add the segment's keys at offsets >= the first dirty offset; True when the map
        filled up."""
        omap = self.offset_map
        fd = host.segment_fd(seg.base_offset)
        try:
            for chunk in read_chunks(fd, seg.size_bytes, self.io_buffer_bytes):
                host.check_done()
                self.throttler.maybe_throttle(len(chunk))
                messages, nulls, full = omap.map_chunk(chunk, job.first_dirty_offset, self._body_of)
                stats.map_messages_read += messages
                stats.invalid_messages_read += nulls
                if full:
                    return True
                stats.map_bytes_read += len(chunk)
        finally:
            os.close(fd)
        omap.update_latest_offset(next_base - 1)
        return False

    # ------------------------------------------------------------------ recopying
    def _clean_group(self, job: CleaningJob, group: list[SegmentRef], filt: BatchFilter,
                     host: CleaningHost) -> None:
        base = group[0].base_offset
        paths = cleaned_paths(job.directory, base)
        for path in paths:  # leftovers of an abandoned cleaning
            path.unlink(missing_ok=True)
        try:
            cleaned = LogSegment.open(job.directory, base,
                                      index_interval_bytes=job.index_interval_bytes,
                                      max_index_size_bytes=job.segment_index_bytes,
                                      suffix=CLEANED_SUFFIX)
            try:
                mtime = self._recopy(job, group, filt, host, cleaned)
                cleaned.on_become_inactive()
                cleaned.flush()
            finally:
                cleaned.close()
            os.utime(paths[0], (mtime, mtime))
            host.check_done()
            host.swap(base, [s.base_offset for s in group])
        except BaseException:
            for path in paths:  # not swapped in: the files are ours to remove
                path.unlink(missing_ok=True)
            raise

    def _recopy(self, job: CleaningJob, group: list[SegmentRef], filt: BatchFilter,
                host: CleaningHost, cleaned: LogSegment) -> float:
        """Filter the group's segments into ``cleaned``; the last one's mtime."""
        cleaned.make_active()
        out = bytearray()
        metas: list[BatchMeta] = []
        mtime = 0.0
        for seg in group:
            log.debug("Cleaning segment %d of log %s into %d", seg.base_offset, job.tp,
                      group[0].base_offset)
            fd = host.segment_fd(seg.base_offset)
            try:
                for chunk in read_chunks(fd, seg.size_bytes, self.io_buffer_bytes):
                    host.check_done()
                    self.throttler.maybe_throttle(len(chunk))
                    metas.extend(filt.filter_chunk(chunk, out))
                    if len(out) >= _OUT_FLUSH_BYTES:
                        cleaned.append(out, metas)
                        self.throttler.maybe_throttle(len(out))
                        out, metas = bytearray(), []
                mtime = os.fstat(fd).st_mtime
            finally:
                os.close(fd)
        if metas:
            cleaned.append(out, metas)
            self.throttler.maybe_throttle(len(out))
        return mtime

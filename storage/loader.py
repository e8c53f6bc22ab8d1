"""Open a partition directory as a ``Log``: tidy stray files, recover, find the log end.

Steps (Kafka's ``LogLoader``), each repair logged with the file it touched:

0. Finish or undo an interrupted segment swap of the cleaner (Kafka's
   ``removeTempFilesAndCollectSwapFiles`` and the swap passes of ``LogLoader.load``):
   ``*.cleaned`` files are deleted; a ``.swap`` file at or above the lowest ``.cleaned``
   offset is from a rename that did not finish, while the old segments were still whole,
   so it is deleted too; for the other ``.swap`` segments every old segment file whose
   base offset lies in [lowest swap base offset, highest swap next offset) is deleted
   (those segments were cleaned into the swap), then the ``.swap`` files take the live
   names. Producer snapshots are left alone.
1. Remove leftovers of interrupted work: ``*.deleted``, ``*.tmp``; remove ``.index`` / ``.timeindex`` files whose ``.log`` is gone or whose
   size is not whole entries (rebuilt on first use); log and leave alone any other
   unknown file (never delete what we do not understand).
2. Open segments (indexes stay closed until first use).
3. After an unclean stop: re-scan every segment from the one holding the recovery point
   (``storage.recovery``), truncating a torn or corrupt tail and deleting the segments
   after it. After a clean stop: trust the files, but still walk the active segment's
   tail from its last index entry to find the log end offset; a bad tail there triggers
   recovery of that segment.
4. Leader epoch cache: load it (a corrupt checkpoint is rebuilt from batch headers) and
   cut it to [log start offset, log end offset).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path

from storage import fileio
from storage.checkpoints import fsync_dir, read_partition_metadata
from storage.config import LogConfig
from storage.epoch_cache import LeaderEpochCache
from storage.errors import CorruptCheckpointError, CorruptSegmentError
from storage.log import Log, now_ms
from storage.log_dir_failure import LogDirFailureChannel
from storage.naming import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    PARTITION_METADATA,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    TopicPartition,
    parse_segment_file,
)
from storage.recovery import recover_segment
from storage.segment import LogSegment

log = logging.getLogger(__name__)

_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp")
_SEGMENT_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_NEXT_OFFSET = struct.Struct(">qi12xi")  # baseOffset, batchLength, lastOffsetDelta @23
_MAX_SWAP_BATCHES = 1 << 24


def _next_offset_of(path: Path, base_offset: int) -> int:
    """The offset after the last whole batch of the segment file ``path`` (headers only)."""
    next_offset = base_offset
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        pos = 0
        for _ in range(_MAX_SWAP_BATCHES):
            if pos + 61 > size:
                break
            head = os.pread(f.fileno(), _NEXT_OFFSET.size, pos)
            if len(head) < _NEXT_OFFSET.size:
                break
            batch_base, length, delta = _NEXT_OFFSET.unpack(head)
            if length < 49 or pos + 12 + length > size:
                break
            next_offset = batch_base + delta + 1
            pos += 12 + length
    return next_offset


def _complete_swaps(directory: Path) -> None:
    """Step 0 of the module docstring."""
    cleaned: list[tuple[int, Path]] = []
    swaps: list[tuple[int, str, Path]] = []
    for entry in os.scandir(directory):
        name = entry.name
        for suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
            if name.endswith(suffix):
                parsed = parse_segment_file(name[: -len(suffix)])
                if parsed is None:
                    break  # not a segment file: the leftover pass removes it
                if suffix == CLEANED_SUFFIX:
                    cleaned.append((parsed[0], Path(entry.path)))
                else:
                    swaps.append((parsed[0], parsed[1], Path(entry.path)))
    if not cleaned and not swaps:
        return
    min_cleaned = min((base for base, _ in cleaned), default=None)
    valid: list[tuple[int, str, Path]] = []
    for base, suffix, path in swaps:
        if min_cleaned is not None and base >= min_cleaned:
            log.warning("%s: deleting %s: its swap did not finish (the old segments are whole)",
                        directory, path.name)
            path.unlink(missing_ok=True)
        else:
            valid.append((base, suffix, path))
    for _, path in cleaned:
        log.warning("%s: deleting unfinished cleaned file %s", directory, path.name)
        path.unlink(missing_ok=True)
    log_swaps = {base: path for base, suffix, path in valid if suffix == LOG_SUFFIX}
    if not log_swaps:
        for _, _, path in valid:
            log.warning("%s: deleting %s: no .log.swap goes with it", directory, path.name)
            path.unlink(missing_ok=True)
        fsync_dir(directory)
        return
    low = min(log_swaps)
    high = max(_next_offset_of(path, base) for base, path in log_swaps.items())
    for entry in os.scandir(directory):
        parsed = parse_segment_file(entry.name)
        if parsed is None or parsed[1] not in _SEGMENT_FILE_SUFFIXES:
            continue
        if low <= parsed[0] < high:
            log.info("%s: deleting %s, cleaned into a swap segment before a crash", directory,
                     entry.name)
            os.unlink(entry.path)
    for base, _, path in valid:
        if base not in log_swaps:
            log.warning("%s: deleting %s: no .log.swap goes with it", directory, path.name)
            path.unlink(missing_ok=True)
            continue
        target = path.with_name(path.name[: -len(SWAP_SUFFIX)])
        log.info("%s: completing the interrupted swap of %s", directory, target.name)
        fileio.replace(path, target)
    fsync_dir(directory)
_KNOWN_FILES = frozenset({LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA})
MAX_SEGMENTS_PER_LOG = 1_000_000


def _tidy(directory: Path) -> list[int]:
    """Complete swaps, remove leftovers and orphan indexes; return the .log base offsets."""
    _complete_swaps(directory)
    logs: set[int] = set()
    indexes: list[tuple[int, Path]] = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(_LEFTOVER_SUFFIXES):
            log.warning("%s: removing leftover file %s", directory, name)
            Path(entry.path).unlink(missing_ok=True)
            continue
        parsed = parse_segment_file(name)
        if parsed is None:
            if name not in _KNOWN_FILES:
                log.warning("%s: ignoring stray file %s", directory, name)
            continue
        base, suffix = parsed
        if suffix == LOG_SUFFIX:
            logs.add(base)
        elif suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            entry_size = 8 if suffix == INDEX_SUFFIX else 12
            size = entry.stat().st_size
            if size % entry_size:
                log.warning("%s: removing %s: size %d is not a multiple of %d (it is rebuilt)",
                            directory, name, size, entry_size)
                os.unlink(entry.path)
                continue
            indexes.append((base, Path(entry.path)))
        elif suffix not in (SNAPSHOT_SUFFIX, TXN_INDEX_SUFFIX):
            log.warning("%s: ignoring stray file %s", directory, name)
    for base, path in indexes:
        if base not in logs:
            log.warning("%s: removing index %s whose segment is missing", directory, path.name)
            path.unlink(missing_ok=True)
    if len(logs) > MAX_SEGMENTS_PER_LOG:
        raise CorruptSegmentError(f"{directory}: {len(logs)} segments is above the limit")
    return sorted(logs)


def _load_epoch_cache(directory: Path, segments: list[LogSegment]) -> LeaderEpochCache:
    path = directory / LEADER_EPOCH_CHECKPOINT
    try:
        return LeaderEpochCache.load(path)
    except CorruptCheckpointError as exc:
        log.warning("%s: rebuilding leader epoch cache from batch headers (%s)", directory, exc)
    cache = LeaderEpochCache(path)
    for seg in segments:
        try:
            for head in seg.iter_heads(0):
                cache.assign(head.partition_leader_epoch, head.base_offset)
        except CorruptSegmentError as exc:
            log.warning("%s: epoch rebuild stopped: %s", directory, exc)
            break
    return cache


def _recover(
    directory: Path,
    segments: list[LogSegment],
    start_index: int,
    config: LogConfig,
    cache: LeaderEpochCache,
    cleaned: bool,
) -> None:
    """Recover segments from ``start_index`` on; cut everything after a bad tail. Offsets
    may skip forward in a compacted log, or one the cleaner has cleaned (``cleaned``)."""
    cache.truncate_from_end(segments[start_index].base_offset)
    i = start_index
    while i < len(segments):  # bounded by the segment count
        seg = segments[i]
        result = recover_segment(seg, epoch_cache=cache, allow_offset_gaps=config.compacts or cleaned)
        if i + 1 < len(segments):
            seg.on_become_inactive()
        if result.reason or result.truncated_bytes:
            log.warning(
                "%s: recovery truncated %d bytes at byte %d (offset %d) of %s: %s",
                directory, result.truncated_bytes, result.valid_bytes, result.next_offset,
                seg.log_path.name, result.reason or "torn tail",
            )
            for later in segments[i + 1 :]:
                log.warning("%s: deleting segment %s after the corrupt tail", directory,
                            later.log_path.name)
                later.delete_files()
            del segments[i + 1 :]
            return
        i += 1


def load_log(
    directory: Path,
    topic_partition: TopicPartition,
    config: LogConfig,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    clean_shutdown: bool = False,
    cleaned: bool = False,
    clock_ms: Callable[[], int] = now_ms,
    failure_channel: LogDirFailureChannel | None = None,
) -> Log:
    """Open (creating if needed) the log in ``directory``. Blocking: start-up or thread pool.
    Raises ``OSError`` when the disk fails meanwhile (the caller decides what goes offline)."""
    fileio.mkdir(directory)
    bases = _tidy(directory)
    now = clock_ms()
    segments = []
    for base in bases:
        seg = LogSegment.open(
            directory, base, index_interval_bytes=config.index_interval_bytes,
            max_index_size_bytes=config.segment_index_bytes, now_ms=now,
        )
        if base != bases[-1]:
            seg.seal_file()  # the open-file budget may close it before the next one opens
        segments.append(seg)
    if not segments:
        start = max(log_start_offset, 0)
        segments.append(LogSegment.open(
            directory, start, index_interval_bytes=config.index_interval_bytes,
            max_index_size_bytes=config.segment_index_bytes, now_ms=now,
        ))
    cache = _load_epoch_cache(directory, segments)
    if not clean_shutdown:
        start_index = 0
        for i, seg in enumerate(segments):
            if seg.base_offset <= recovery_point:
                start_index = i
        log.info("%s: unclean shutdown, recovering from segment %d (recovery point %d)",
                 directory, segments[start_index].base_offset, recovery_point)
        _recover(directory, segments, start_index, config, cache, cleaned)
        leo = segments[-1].read_next_offset()
    else:
        segments[-1].make_active()  # its indexes open writable once, not twice
        try:
            leo = segments[-1].read_next_offset()
        except CorruptSegmentError as exc:
            log.warning("%s: active segment tail is corrupt (%s); recovering it", directory, exc)
            _recover(directory, segments, len(segments) - 1, config, cache, cleaned)
            leo = segments[-1].read_next_offset()
    first_base = segments[0].base_offset
    start = min(max(log_start_offset, first_base), leo)
    cache.truncate_from_end(leo)
    cache.truncate_from_start(start)
    topic_id: bytes | None = None
    meta = directory / PARTITION_METADATA
    if meta.exists():
        try:
            topic_id = read_partition_metadata(meta)
        except CorruptCheckpointError as exc:
            log.warning("%s: ignoring corrupt partition.metadata (%s)", directory, exc)
    return Log(
        directory,
        topic_partition,
        config,
        segments,
        log_end_offset=leo,
        log_start_offset=start,
        recovery_point=min(max(recovery_point, start), leo) if not clean_shutdown else leo,
        epoch_cache=cache,
        topic_id=topic_id,
        clock_ms=clock_ms,
        failure_channel=failure_channel,
    )

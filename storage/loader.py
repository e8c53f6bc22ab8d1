"""Open a partition directory as a ``Log``: tidy stray files, recover, find the log end.

Steps (Kafka's ``LogLoader``), each repair logged with the file it touched:

1. Remove leftovers of interrupted work: ``*.deleted``, ``*.cleaned``, ``*.swap``,
   ``*.tmp``; remove ``.index`` / ``.timeindex`` files whose ``.log`` is gone or whose
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
from collections.abc import Callable
from pathlib import Path

from storage.checkpoints import read_partition_metadata
from storage.config import LogConfig
from storage.epoch_cache import LeaderEpochCache
from storage.errors import CorruptCheckpointError, CorruptSegmentError
from storage.log import Log, now_ms
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
_KNOWN_FILES = frozenset({LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA})
MAX_SEGMENTS_PER_LOG = 1_000_000


def _tidy(directory: Path) -> list[int]:
    """Remove leftovers and orphan indexes; return the base offsets of the .log files."""
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
) -> None:
    """Recover segments from ``start_index`` on; cut everything after a bad tail."""
    cache.truncate_from_end(segments[start_index].base_offset)
    i = start_index
    while i < len(segments):  # bounded by the segment count
        seg = segments[i]
        result = recover_segment(seg, epoch_cache=cache, allow_offset_gaps=config.compacts)
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
    clock_ms: Callable[[], int] = now_ms,
) -> Log:
    """Open (creating if needed) the log in ``directory``. Blocking: start-up or thread pool."""
    directory.mkdir(parents=True, exist_ok=True)
    bases = _tidy(directory)
    now = clock_ms()
    segments = [
        LogSegment.open(
            directory, base, index_interval_bytes=config.index_interval_bytes,
            max_index_size_bytes=config.segment_index_bytes, now_ms=now,
        )
        for base in bases
    ]
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
        _recover(directory, segments, start_index, config, cache)
        leo = segments[-1].read_next_offset()
    else:
        segments[-1].make_active()  # its indexes open writable once, not twice
        try:
            leo = segments[-1].read_next_offset()
        except CorruptSegmentError as exc:
            log.warning("%s: active segment tail is corrupt (%s); recovering it", directory, exc)
            _recover(directory, segments, len(segments) - 1, config, cache)
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
    )

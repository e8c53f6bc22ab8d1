"""Crash recovery of one segment: keep the longest prefix of valid batches, rebuild indexes.

A batch is valid when its header is whole and sane, its CRC32C matches (checked in C by
``protocol.records.scan_batches``), and its offsets continue the log: the first batch
starts at the segment's base offset and each batch starts right after the previous one
(with ``allow_offset_gaps`` — compacted logs — only strictly after). baseOffset and
partitionLeaderEpoch lie outside the CRC, so these checks are what catch damage there;
epochs must not decrease either.

The file is scanned through an mmap in windows of ``_WINDOW_BYTES`` so the list of batch
views stays bounded; everything after the first invalid byte is cut off (and logged by
the caller). Blocking: call from a thread pool or at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.batch_header import BATCH_LENGTH, BATCH_LENGTH_OFFSET
from protocol.records import StopReason, read_header, scan_batches
from storage.epoch_cache import LeaderEpochCache
from storage.segment import LogSegment

_WINDOW_BYTES = 16 * 1024 * 1024
_MAX_WINDOWS = 1 << 20  # bound on scan turns; every turn advances or stops


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    """What recovering one segment found."""

    valid_bytes: int
    truncated_bytes: int
    next_offset: int  # offset after the last valid batch (the segment base if none)
    batches: int
    reason: str  # why the scan stopped early ("" when the whole file was valid)


@dataclass(slots=True)
class _ScanState:
    expected: int
    last_epoch: int = -1
    batches: int = 0


def _index_window(
    segment: LogSegment,
    window: memoryview,
    pos: int,
    state: _ScanState,
    *,
    epoch_cache: LeaderEpochCache | None,
    allow_offset_gaps: bool,
    max_batch_bytes: int | None,
) -> tuple[int, str, StopReason | None]:
    """Index the valid batches of one window; (end position, own stop reason, scan's)."""
    result = scan_batches(window, True, max_batch_bytes=max_batch_bytes)
    base = pos
    offset = 0  # position inside the window
    for _ in result.batches:
        head = read_header(window, offset)
        base_offset = head.base_offset
        expected = state.expected
        ok = base_offset >= expected if allow_offset_gaps else base_offset == expected
        if not ok:
            return base, f"batch at byte {base} has base offset {base_offset}, expected {expected}", None
        epoch = head.partition_leader_epoch
        if epoch < state.last_epoch:
            return base, f"batch at byte {base} has leader epoch {epoch} after {state.last_epoch}", None
        last_offset = base_offset + head.last_offset_delta
        # A cleaned batch may hold no record (Kafka keeps an empty batch for a producer's
        # last sequence), so only a negative count is impossible.
        if head.records_count < 0 or last_offset < base_offset or not segment.can_hold_offset(
            last_offset
        ):
            return base, f"batch at byte {base} has an impossible offset range", None
        size_bytes = head.batch_length + 12
        segment.index_batch(base, size_bytes, last_offset, head.max_timestamp)
        if epoch_cache is not None and epoch != state.last_epoch:
            epoch_cache.assign(epoch, base_offset)
        state.last_epoch = epoch
        state.expected = last_offset + 1
        state.batches += 1
        base += size_bytes
        offset += size_bytes
    message = result.message or (result.stop_reason.value if result.stop_reason else "")
    return base, message, result.stop_reason


def recover_segment(
    segment: LogSegment,
    *,
    epoch_cache: LeaderEpochCache | None,
    allow_offset_gaps: bool = False,
    max_batch_bytes: int | None = None,
) -> SegmentRecovery:
    """Re-scan ``segment`` from byte 0, rebuild its indexes, cut the invalid tail."""
    segment.reset_indexes()
    size = segment.size_bytes
    state = _ScanState(segment.base_offset)
    pos = 0
    reason = ""
    view = segment.mapped_view()
    try:
        for _ in range(_MAX_WINDOWS):
            if pos >= size:
                break
            window_end = min(size, pos + _WINDOW_BYTES)
            if window_end - pos >= 12:
                (length,) = BATCH_LENGTH.unpack_from(view, pos + BATCH_LENGTH_OFFSET)
                if length > 0 and pos + 12 + length <= size:
                    window_end = max(window_end, pos + 12 + length)  # one batch always fits
            window = view[pos:window_end]
            end, message, scan_stop = _index_window(
                segment,
                window,
                pos,
                state,
                epoch_cache=epoch_cache,
                allow_offset_gaps=allow_offset_gaps,
                max_batch_bytes=max_batch_bytes,
            )
            window.release()
            # A batch cut by the window (not by the file) is scanned again in the next
            # window; no progress means the file itself ends inside the batch.
            cut_short = window_end < size and scan_stop is StopReason.TRUNCATED and end > pos
            pos = end
            if message and not cut_short:
                reason = message
                break
    finally:
        view.release()
    truncated = segment.truncate_to_position(pos) if pos < size else 0
    segment.mark_verified(pos)
    return SegmentRecovery(pos, truncated, state.expected, state.batches, reason)

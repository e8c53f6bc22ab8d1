"""Which old segments a retention pass deletes (Kafka's ``deleteOldSegments``).

Three rules, checked in Kafka's order, each deleting a prefix of the segment list:

1. ``retention.ms`` (default 7 days; -1 = keep forever): a segment whose largest
   timestamp is older than ``now - retention.ms``.
2. ``retention.bytes`` (default -1 = unlimited): the oldest segments while the log stays
   at or above the limit without them.
3. The log start offset (DeleteRecords, or a leader's): a segment whose every offset is
   below it.

Never the active segment, and never a segment holding offsets at or above the high
watermark (consumers may not have seen them; Kafka's ``upperBoundOffset``).
Pure functions over ``SegmentInfo``: no I/O, easy to test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from storage.config import LogConfig


class SegmentInfo(NamedTuple):
    base_offset: int
    next_offset: int  # base offset of the following segment (log end offset if active)
    size_bytes: int
    largest_timestamp: int


class RetentionDecision(NamedTuple):
    delete_count: int  # how many leading segments to delete
    reason: str


def _deletable_prefix(segments: Sequence[SegmentInfo], high_watermark: int) -> int:
    """How many leading segments are eligible at all (not active, wholly below the HW)."""
    n = 0
    for seg in segments[:-1]:
        if seg.next_offset > high_watermark:
            break
        n += 1
    return n


def segments_to_delete(
    segments: Sequence[SegmentInfo],
    config: LogConfig,
    *,
    now_ms: int,
    high_watermark: int,
    log_start_offset: int,
) -> RetentionDecision:
    """The leading segments a retention pass deletes, and why (empty reason: none)."""
    eligible = _deletable_prefix(segments, high_watermark)
    if eligible == 0:
        return RetentionDecision(0, "")
    if config.deletes and config.retention_ms >= 0:
        n = 0
        for seg in segments[:eligible]:
            if now_ms - seg.largest_timestamp <= config.retention_ms:
                break
            n += 1
        if n:
            return RetentionDecision(n, f"retention.ms {config.retention_ms} breached")
    if config.deletes and config.retention_bytes >= 0:
        excess = sum(s.size_bytes for s in segments) - config.retention_bytes
        n = 0
        for seg in segments[:eligible]:
            if excess - seg.size_bytes < 0:
                break
            excess -= seg.size_bytes
            n += 1
        if n:
            return RetentionDecision(n, f"retention.bytes {config.retention_bytes} breached")
    n = 0
    for seg in segments[:eligible]:
        if seg.next_offset > log_start_offset:
            break
        n += 1
    if n:
        return RetentionDecision(n, f"log start offset {log_start_offset} breached")
    return RetentionDecision(0, "")

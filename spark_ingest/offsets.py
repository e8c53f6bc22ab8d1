"""Offsets per topic-partition, offset ranges, and how a batch is cut into Spark partitions.

Offsets travel in Spark's own JSON shape (the Kafka source's ``startingOffsets`` and its
checkpointed ``KafkaSourceOffset``): ``{"topicA": {"0": 23, "1": -1}, "topicB": {"0": -2}}``
with partitions as strings; in a starting/ending spec ``-2`` means earliest and ``-1``
latest. Resolved offsets (what a micro-batch stores) are never negative.

``OffsetRange(tp, start, end)`` is ``[start, end)``: the records a Spark task reads.
``rate_limit`` is Spark's ``maxOffsetsPerTrigger`` proration and ``split_ranges`` its
``minPartitions`` split (``KafkaOffsetRangeCalculator``), rewritten here.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from typing import Final, NamedTuple, NewType

from protocol.topic_partition import TopicPartition as TopicPartition  # the one type, re-exported

Offset = NewType("Offset", int)

EARLIEST: Final = -2
LATEST: Final = -1
MAX_PARTITIONS_PER_TOPIC: Final = 1_000_000  # a bound on what a JSON spec may name


class SourceError(ValueError):
    """A bad option or a failed read, worded for the person who wrote the query.

    The message names the option at fault (``kafka.bootstrap.servers``, ``startingOffsets``,
    ...) or the topic-partition and offsets a read could not serve.
    """


PartitionOffsets = dict[TopicPartition, int]


class OffsetRange(NamedTuple):
    """The records ``[start, end)`` of one topic-partition."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{tp: n}`` -> Spark's nested dict (sorted, so equal offsets give equal JSON)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(data: object, option: str, *, allow_special: bool = True) -> PartitionOffsets:
    """Spark's nested dict (or its JSON text) -> ``{tp: n}``; ``SourceError`` naming ``option``.

    ``allow_special`` admits -2 (earliest) and -1 (latest); anything else below 0 is refused.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise SourceError(
                f"{option}: malformed JSON ({exc.msg} at char {exc.pos}); expected "
                '{"topic": {"0": 23, "1": -1}}'
            ) from None
    if not isinstance(data, dict) or not data:
        raise SourceError(f'{option}: expected a JSON object like {{"topic": {{"0": 23}}}}, got {data!r}')
    out: PartitionOffsets = {}
    for topic, parts in data.items():
        if not isinstance(topic, str) or not topic:
            raise SourceError(f"{option}: topic names must be non-empty strings, got {topic!r}")
        if not isinstance(parts, dict) or not parts:
            raise SourceError(f'{option}: topic {topic!r} needs an object like {{"0": 23}}, got {parts!r}')
        for part, value in parts.items():
            if not (isinstance(part, str) and part.isdigit()) or int(part) >= MAX_PARTITIONS_PER_TOPIC:
                raise SourceError(f"{option}: partition {part!r} of topic {topic!r} is not a partition number")
            if isinstance(value, bool) or not isinstance(value, int):
                raise SourceError(f"{option}: offset of {topic}-{part} must be an integer, got {value!r}")
            lowest = EARLIEST if allow_special else 0
            if value < lowest:
                raise SourceError(f"{option}: offset {value} of {topic}-{part} is not valid")
            out[TopicPartition(topic, int(part))] = value
    return out


def rate_limit(
    start: Mapping[TopicPartition, int], until: Mapping[TopicPartition, int], limit: int
) -> PartitionOffsets:
    """Cap ``until`` so that about ``limit`` records are read, shared in proportion to each
    partition's backlog; a partition with any backlog gets at least one record (Spark's
    ``KafkaMicroBatchStream.rateLimit``). Partitions absent from ``start`` start at 0.
    """
    sizes = {tp: end - start.get(tp, 0) for tp, end in until.items() if end - start.get(tp, 0) > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(until)
    out: PartitionOffsets = {}
    for tp, end in until.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, start.get(tp, 0) + share)
    return out


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Non-empty ranges, split so there are about ``min_partitions`` of them (Spark's
    ``KafkaOffsetRangeCalculator``): each range gets ``max(1, round(size/total * n))`` parts
    of near-equal size; nothing is split when there are already enough ranges.
    """
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, round(r.size / total * min_partitions))
        parts = min(parts, r.size)
        step = r.size / parts
        bounds = [r.start + int(step * i) for i in range(parts)] + [r.end]
        out.extend(OffsetRange(r.tp, a, b) for a, b in itertools.pairwise(bounds) if b > a)
    return out

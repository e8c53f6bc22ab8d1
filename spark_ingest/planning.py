"""Driver-side planning: which topic-partitions, which offsets, which ranges.

- ``discover``: the partitions a subscription covers now (``subscribe`` and ``assign`` fail
  with a ``SourceError`` naming the option when a topic or partition does not exist;
  ``subscribePattern`` matching nothing is an empty set, as in Spark).
- ``resolve``: an ``OffsetSpec`` (earliest / latest / JSON / timestamps) -> offsets.
- ``plan_ranges``: start and end offsets -> ``OffsetRange``s, with the data-loss checks of
  Spark's ``KafkaMicroBatchStream.planInputPartitions``: a partition that vanished, or an
  end below the start, is lost data (error or warning per ``failOnDataLoss``); a partition
  that is new since the start is read from its earliest offset.
"""

from __future__ import annotations

import logging

from spark_ingest.kafka_client import Cluster
from spark_ingest.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    PartitionOffsets,
    SourceError,
    TopicPartition,
    split_ranges,
)
from spark_ingest.options import Assign, OffsetSpec, SourceOptions, Subscribe, SubscribePattern

log = logging.getLogger(__name__)


def discover(cluster: Cluster, opts: SourceOptions) -> list[TopicPartition]:
    sub = opts.subscription
    if isinstance(sub, SubscribePattern):
        meta = cluster.metadata(None)
        # a partition still without a leader (a topic being created) waits for the next batch
        return sorted(tp for tp, leader in meta.leaders.items() if leader >= 0 and sub.matches(tp.topic))
    if isinstance(sub, Subscribe):
        meta = cluster.metadata(sub.topics)
        unknown = [t for t in sub.topics if t not in meta.topics]
        if unknown:
            why = ", ".join(f"{t!r} ({meta.missing.get(t, 'UNKNOWN_TOPIC_OR_PARTITION')})" for t in unknown)
            raise SourceError(f"subscribe: unknown topic {why}")
        return sorted(meta.leaders)
    assert isinstance(sub, Assign)
    meta = cluster.metadata({tp.topic for tp in sub.partitions})
    unknown_tps = [str(tp) for tp in sub.partitions if tp not in meta.leaders]
    if unknown_tps:
        raise SourceError(f"assign: unknown topic-partition {', '.join(unknown_tps)}")
    return list(sub.partitions)


def resolve(cluster: Cluster, spec: OffsetSpec, tps: list[TopicPartition],
            opts: SourceOptions) -> PartitionOffsets:
    """Concrete offsets for ``tps``; ``SourceError`` naming ``spec.option`` on a bad spec."""
    if not tps:
        return {}
    if spec.kind == "earliest":
        return cluster.earliest(tps)
    if spec.kind == "latest":
        return cluster.latest(tps)
    if spec.kind in ("timestamp", "timestamps"):
        return _by_timestamp(cluster, spec, tps, opts)
    given = spec.offsets_map
    extra = sorted(str(tp) for tp in given if tp not in set(tps))
    if extra:
        raise SourceError(f"{spec.option}: {', '.join(extra)} is not among the partitions read")
    missing = sorted(str(tp) for tp in tps if tp not in given)
    if missing:
        raise SourceError(f"{spec.option}: give an offset for every partition; missing {', '.join(missing)}")
    out = {tp: v for tp, v in given.items() if v >= 0}
    special = {tp: v for tp, v in given.items() if v < 0}
    if special:
        out.update(cluster.list_offsets(special))
    return out


def _by_timestamp(cluster: Cluster, spec: OffsetSpec, tps: list[TopicPartition],
                  opts: SourceOptions) -> PartitionOffsets:
    if spec.kind == "timestamp":
        wanted = dict.fromkeys(tps, spec.timestamp_ms)
    else:
        wanted = spec.offsets_map
        missing = sorted(str(tp) for tp in tps if tp not in wanted)
        if missing:
            raise SourceError(f"{spec.option}: give a timestamp for every partition; missing {', '.join(missing)}")
    found = cluster.list_offsets(wanted)
    none = [tp for tp, off in found.items() if off < 0]
    if none:
        ending = spec.option.startswith("ending")
        if not ending and opts.timestamp_strategy == "error":
            raise SourceError(
                f"{spec.option}: no record at or after the timestamp in {', '.join(map(str, none))} "
                "(set startingOffsetsByTimestampStrategy=latest to start at the end)")
        found.update(cluster.latest(none))
    return found


def plan_ranges(cluster: Cluster, opts: SourceOptions, start: PartitionOffsets,
                end: PartitionOffsets) -> list[OffsetRange]:
    """Ranges from ``start`` to ``end`` (data-loss checks as documented above)."""
    new = [tp for tp in end if tp not in start]
    new_start = cluster.earliest(new) if new else {}
    for tp in sorted(set(start) - set(end)):
        _loss(opts, f"{tp} is gone (deleted topic or partition) at offset {start[tp]}")
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        first = start.get(tp, new_start.get(tp, 0))
        last = end[tp]
        if last < first:
            _loss(opts, f"{tp}'s offsets went back from {first} to {last}")
            continue
        ranges.append(OffsetRange(tp, first, last))
    return split_ranges(ranges, opts.min_partitions)


def _loss(opts: SourceOptions, what: str) -> None:
    message = f"failOnDataLoss: {what}; some data may have been lost"
    if opts.fail_on_data_loss:
        raise SourceError(message)
    log.warning(message)


__all__ = ["EARLIEST", "LATEST", "discover", "plan_ranges", "resolve"]

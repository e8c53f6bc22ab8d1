"""Bytes and messages in and out per topic (Kafka's ``BrokerTopicStats`` /
``BrokerTopicMetrics``).

The replica manager calls ``on_append`` for every partition of a produce (client and
group coordinator writes alike, as Kafka's ``appendToLocalLog``) and ``on_fetch`` for every
partition of a completed fetch. Counts live in plain ints on a ``TopicStats`` cached on
the ``Partition`` (``partition.topic_stats``), so the hot path does no lookup by name.
Only topics hosted here get stats (a client naming unknown topics cannot grow them).

Exported as counters named by the JMX exporter's ``PerSec`` rule
(``kafka_server_brokertopicmetrics_<name>_total``), each once without a ``topic`` label
(Kafka's all-topics meter) and once per topic. A deleted topic's counts move into the
all-topics totals, which therefore never go down.

Kafka's rules kept: BytesIn/MessagesIn count successful appends only (MessagesIn: records,
from the assigned offsets); BytesRejected counts batches refused as too large;
FailedProduce/FailedFetchRequests count only unexpected errors (not unknown partition,
not leader, too large, corrupt, offset out of range...); BytesOut counts consumer fetches,
ReplicationBytesOut follower fetches (all topics only).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final, Protocol

from prometheus_client.metrics_core import CounterMetricFamily, Metric

from protocol.errors import ErrorCode


class Partition(Protocol):
    """What is counted of a ``broker.partition.Partition`` (named here, not imported:
    this module sits below the partition that holds its counters)."""

    topic: str
    topic_stats: TopicStats | None


class AppendResult(Protocol):
    @property
    def error(self) -> ErrorCode: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...


class ReadResult(Protocol):
    @property
    def error(self) -> ErrorCode: ...
    @property
    def size_bytes(self) -> int: ...

# Errors Kafka does not count as a failed produce / fetch (expected client-side conditions).
_EXPECTED_PRODUCE_ERRORS: Final = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.INVALID_TOPIC,
})
_REJECTED_ERRORS: Final = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})
_EXPECTED_FETCH_ERRORS: Final = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.OFFSET_OUT_OF_RANGE,
    ErrorCode.UNKNOWN_TOPIC_ID,
})

# Read once per partition append/read: a module constant, not an attribute of the Enum class.
_NO_ERROR: Final = ErrorCode.NO_ERROR

# (field, Kafka meter name without PerSec, help)
_TOPIC_METERS: Final = (
    ("bytes_in", "BytesIn", "Bytes appended from produce requests"),
    ("bytes_out", "BytesOut", "Record bytes sent to consumers"),
    ("messages_in", "MessagesIn", "Records appended from produce requests"),
    ("bytes_rejected", "BytesRejected", "Bytes of batches refused as too large"),
    ("total_produce", "TotalProduceRequests", "Partition appends attempted"),
    ("failed_produce", "FailedProduceRequests", "Partition appends failed unexpectedly"),
    ("total_fetch", "TotalFetchRequests", "Partition reads answered"),
    ("failed_fetch", "FailedFetchRequests", "Partition reads failed unexpectedly"),
)
_BROKER_METERS: Final = (
    ("replication_bytes_out", "ReplicationBytesOut", "Record bytes sent to followers"),
)


class TopicStats:
    __slots__ = ("bytes_in", "bytes_out", "bytes_rejected", "failed_fetch", "failed_produce",
                 "messages_in", "replication_bytes_out", "total_fetch", "total_produce")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0
        self.messages_in = 0
        self.bytes_rejected = 0
        self.total_produce = 0
        self.failed_produce = 0
        self.total_fetch = 0
        self.failed_fetch = 0
        self.replication_bytes_out = 0

    def add_to(self, other: TopicStats) -> None:
        for name in self.__slots__:
            setattr(other, name, getattr(other, name) + getattr(self, name))


class BrokerTopicStats:
    """Per-topic counters, on the event loop. See the module docstring."""

    def __init__(self) -> None:
        self._topics: dict[str, TopicStats] = {}
        self._retired = TopicStats()  # counts of deleted topics (kept in the totals)
        self._broker = TopicStats()  # counts without a topic (replication)

    def _attach(self, partition: Partition) -> TopicStats:
        stats = self._topics.get(partition.topic)
        if stats is None:
            stats = self._topics[partition.topic] = TopicStats()
        partition.topic_stats = stats
        return stats

    def on_append(self, partition: Partition, size_bytes: int, result: AppendResult) -> None:
        stats = partition.topic_stats or self._attach(partition)
        stats.total_produce += 1
        if result.error is _NO_ERROR:
            stats.bytes_in += size_bytes
            stats.messages_in += result.last_offset - result.base_offset + 1
        elif result.error in _REJECTED_ERRORS:
            stats.bytes_rejected += size_bytes
        elif result.error not in _EXPECTED_PRODUCE_ERRORS:
            stats.failed_produce += 1

    def on_read(self, partition: Partition, result: ReadResult, *, follower: bool) -> None:
        stats = partition.topic_stats or self._attach(partition)
        stats.total_fetch += 1
        error = result.error
        if error is _NO_ERROR:
            if follower:
                self._broker.replication_bytes_out += result.size_bytes
            else:
                stats.bytes_out += result.size_bytes
        elif error not in _EXPECTED_FETCH_ERRORS:
            stats.failed_fetch += 1

    def remove_topic(self, topic: str, partitions: Iterable[Partition] = ()) -> None:
        """The topic is gone: fold its counts into the totals, forget its series."""
        stats = self._topics.pop(topic, None)
        if stats is not None:
            stats.add_to(self._retired)
        for partition in partitions:
            partition.topic_stats = None

    def get(self, topic: str) -> TopicStats | None:
        return self._topics.get(topic)

    def totals(self) -> TopicStats:
        total = TopicStats()
        self._retired.add_to(total)
        self._broker.add_to(total)
        for stats in self._topics.values():
            stats.add_to(total)
        return total

    def collect(self) -> Iterator[Metric]:
        totals = self.totals()
        for field, meter, help_text in _TOPIC_METERS:
            family = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{meter.lower()}",
                f"{help_text} (Kafka: BrokerTopicMetrics {meter}PerSec; no topic label: all "
                "topics)")
            family.add_sample(family.name + "_total", {}, float(getattr(totals, field)))
            for topic, stats in sorted(self._topics.items()):
                family.add_sample(family.name + "_total", {"topic": topic},
                                  float(getattr(stats, field)))
            yield family
        for field, meter, help_text in _BROKER_METERS:
            family = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{meter.lower()}",
                f"{help_text} (Kafka: BrokerTopicMetrics {meter}PerSec)")
            family.add_metric([], float(getattr(totals, field)))
            yield family

"""The cluster as the last Metadata answers described it (pure: no IO).

``parse_metadata`` turns a ``MetadataResponse`` into a ``ClusterMetadata`` (brokers,
controller, cluster id, per topic its id, internal flag, error and partitions with leader,
leader epoch, replicas, ISR and offline replicas). ``ClusterMetadata.merge`` folds a newer
answer in: brokers and controller are replaced; the topics the newer answer was asked for
(all of them when it was asked for every topic) are replaced, the rest kept.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.messages.metadata import MetadataResponse
from protocol.topic_partition import TopicPartition

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    error_code: int
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        first = self.partitions.get(0) or next(iter(self.partitions.values()), None)
        return len(first.replicas) if first is not None else 0


@dataclass(slots=True)
class ClusterMetadata:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    topics: dict[str, TopicInfo] = field(default_factory=dict)

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        topic = self.topics.get(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def leader(self, tp: TopicPartition) -> int | None:
        """The partition's leader; None when unknown or without one."""
        info = self.partition(tp)
        return None if info is None or info.leader < 0 else info.leader

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        info = self.topics.get(topic)
        return [] if info is None else [TopicPartition(topic, p) for p in sorted(info.partitions)]

    def merge(self, newer: ClusterMetadata, asked: Iterable[str] | None) -> ClusterMetadata:
        """This picture updated with ``newer``, an answer to a request for ``asked`` topics."""
        if asked is None:
            topics = dict(newer.topics)
        else:
            topics = dict(self.topics)
            for name in asked:
                topics.pop(name, None)
            topics.update(newer.topics)
        return ClusterMetadata(dict(newer.brokers), newer.controller_id, newer.cluster_id, topics)


def parse_metadata(response: MetadataResponse) -> ClusterMetadata:
    topics: dict[str, TopicInfo] = {}
    for t in response.topics:
        name = t.name or ""
        parts = {
            p.partition_index: PartitionInfo(
                p.partition_index, p.leader_id, p.leader_epoch, tuple(p.replica_nodes),
                tuple(p.isr_nodes), tuple(p.offline_replicas), p.error_code)
            for p in t.partitions
        }
        topics[name] = TopicInfo(name, t.topic_id, t.is_internal, t.error_code, parts)
    brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
    return ClusterMetadata(brokers, response.controller_id, response.cluster_id, topics)

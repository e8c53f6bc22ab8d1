"""``MetadataCache``: the cluster as the controller last told this broker (Kafka's
``ZkMetadataCache``).

Written only by UpdateMetadata (``update_metadata``); read by every handler that must
know whether a topic or partition exists, who leads it, and which brokers are alive:

- live brokers: id, endpoints by listener name, rack; the controller id;
- per partition: leader, leader epoch, ISR, replicas, offline replicas, zkVersion and the
  epoch of the controller that decided them (``PartitionInfo``);
- topic name <-> topic id.

The replica manager answers a different question ("is it hosted here, in which role");
handlers ask the cache "does it exist, who leads it". So UNKNOWN_TOPIC_OR_PARTITION means
the cache does not know the partition, and NOT_LEADER_OR_FOLLOWER that it exists but this
broker does not lead it.

An UpdateMetadata names live brokers in full and partitions incrementally: partitions it
does not mention keep their state; a partition whose leader is ``LEADER_DURING_DELETE``
(-2) is removed (and returned by ``update_metadata``, so the group coordinator can drop
the offsets of deleted partitions, as Kafka does). A topic state with the zero topic id
forgets the topic's id.

Every update builds a new ``MetadataSnapshot`` and swaps it in, so a reader that holds a
snapshot (``snapshot()``) sees one consistent view even across an ``await``. What readers
derive from a snapshot (the Metadata handler's encoded topic entries) may be kept in its
``memo``: a new snapshot starts with an empty one, so nothing derived outlives the state it
was derived from (``memo_get`` / ``memo_put``, at most ``MEMO_MAX_ENTRIES``).
Thread-safety: the broker's event loop only, but for ``updated_snapshot``, which only reads
a snapshot and a request: a large UpdateMetadata's snapshot is built in a worker thread
(``update_metadata_off_loop``) and swapped in on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from controller.channel import BrokerEndpoint
from controller.leader_and_isr import LEADER_DURING_DELETE
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

ZERO_UUID: Final = uuid.UUID(int=0)
NO_LEADER: Final = -1
MEMO_MAX_ENTRIES: Final = 1_000_000  # derived values kept per snapshot; cleared when reached

_PartitionState = UpdateMetadataRequest.UpdateMetadataPartitionState


@dataclass(frozen=True, slots=True)
class LiveBroker:
    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        for e in self.endpoints:
            if e.listener == listener:
                return e
        return None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as the controller last described it (UpdateMetadataPartitionState)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    zk_version: int = 0
    controller_epoch: int = 0

    @property
    def has_leader(self) -> bool:
        return self.leader >= 0


@dataclass(frozen=True, slots=True)
class MetadataSnapshot:
    """One consistent view; never changed once built."""

    partitions: Mapping[str, Mapping[int, PartitionInfo]] = field(
        default_factory=lambda: MappingProxyType({}))
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=lambda: MappingProxyType({}))
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=lambda: MappingProxyType({}))
    controller_id: int | None = None
    brokers: Mapping[int, LiveBroker] = field(default_factory=lambda: MappingProxyType({}))
    updated: bool = False  # built from a controller's UpdateMetadata (not the empty start)
    # Values derived from this snapshot alone (never from anything else that can change),
    # by key; the only mutable part, and not part of the view.
    memo: dict[Hashable, Any] = field(default_factory=dict, compare=False, repr=False)

    def memo_get(self, key: Hashable) -> Any:
        """The value ``memo_put`` kept under ``key`` for this snapshot, else None."""
        return self.memo.get(key)

    def memo_put(self, key: Hashable, value: Any) -> None:
        memo = self.memo
        if len(memo) >= MEMO_MAX_ENTRIES:
            memo.clear()
        memo[key] = value


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._snapshot = MetadataSnapshot()

    def snapshot(self) -> MetadataSnapshot:
        return self._snapshot

    # ------------------------------------------------------------ brokers

    @property
    def controller_id(self) -> int | None:
        return self._snapshot.controller_id

    def alive_brokers(self) -> list[LiveBroker]:
        """Live brokers sorted by id."""
        brokers = self._snapshot.brokers
        return [brokers[b] for b in sorted(brokers)]

    def alive_broker(self, broker_id: int) -> LiveBroker | None:
        return self._snapshot.brokers.get(broker_id)

    def has_alive_broker(self, broker_id: int) -> bool:
        return broker_id in self._snapshot.brokers

    @property
    def updated(self) -> bool:
        """A controller's UpdateMetadata has been applied (since the broker started)."""
        return self._snapshot.updated

    # ------------------------------------------------------------ topics and partitions

    def contains_topic(self, topic: str) -> bool:
        return topic in self._snapshot.partitions

    def contains(self, tp: tuple[str, int]) -> bool:
        parts = self._snapshot.partitions.get(tp[0])
        return parts is not None and tp[1] in parts

    def topic_names(self) -> list[str]:
        """Every known topic, sorted."""
        return sorted(self._snapshot.partitions)

    def partitions(self, topic: str) -> Mapping[int, PartitionInfo] | None:
        return self._snapshot.partitions.get(topic)

    def num_partitions(self, topic: str) -> int | None:
        parts = self._snapshot.partitions.get(topic)
        return None if parts is None else len(parts)

    def partition_info(self, topic: str, partition: int) -> PartitionInfo | None:
        parts = self._snapshot.partitions.get(topic)
        return None if parts is None else parts.get(partition)

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id, or the zero UUID when unknown (as Kafka's ``getTopicId``)."""
        return self._snapshot.topic_ids.get(topic, ZERO_UUID)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._snapshot.topic_names.get(topic_id)

    def leader_endpoint(self, topic: str, partition: int, listener: str) -> BrokerEndpoint | None:
        """The partition leader's endpoint on ``listener``, if it has a live leader."""
        info = self.partition_info(topic, partition)
        if info is None:
            return None
        broker = self._snapshot.brokers.get(info.leader)
        return None if broker is None else broker.endpoint(listener)

    # ------------------------------------------------------------ the one writer

    def update_metadata(self, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply an UpdateMetadata (any version); returns the partitions it deleted."""
        self._snapshot, deleted, changed = updated_snapshot(self._snapshot, request)
        self._log_update(request, changed, deleted)
        return deleted

    async def update_metadata_off_loop(self, request: UpdateMetadataRequest
                                       ) -> list[TopicPartition]:
        """``update_metadata``, the new snapshot built in a worker thread (from the current
        one, which no one changes, and the request, which no one else holds); readers see
        the current one until it is swapped in, here on the loop. The caller keeps any other
        update from starting meanwhile (the replica manager's state-change lock)."""
        old = self._snapshot
        snapshot, deleted, changed = await asyncio.to_thread(updated_snapshot, old, request)
        if self._snapshot is not old:
            raise RuntimeError("the metadata cache was updated during an off-loop update")
        self._snapshot = snapshot
        self._log_update(request, changed, deleted)
        return deleted

    def _log_update(self, request: UpdateMetadataRequest, changed: int,
                    deleted: list[TopicPartition]) -> None:
        if changed:
            log.info("[MetadataCache brokerId=%d] %d partitions updated and %d deleted by "
                     "UpdateMetadata from controller %d epoch %d", self.broker_id,
                     changed - len(deleted), len(deleted), request.controller_id,
                     request.controller_epoch)


def updated_snapshot(old: MetadataSnapshot, request: UpdateMetadataRequest
                     ) -> tuple[MetadataSnapshot, list[TopicPartition], int]:
    """``old`` with an UpdateMetadata applied: (the new snapshot, the partitions it deleted,
    how many partition states it carried). Reads ``old`` and ``request`` only: safe in any
    thread while neither changes."""
    brokers = {
        b.id: LiveBroker(b.id, tuple(
            BrokerEndpoint(e.listener, e.host, e.port, e.security_protocol)
            for e in b.endpoints), b.rack or None)
        for b in request.live_brokers
    }
    topic_ids = dict(old.topic_ids)
    for ts in request.topic_states:
        if ts.topic_id == ZERO_UUID:
            topic_ids.pop(ts.topic_name, None)
        else:
            topic_ids[ts.topic_name] = ts.topic_id
    partitions = old.partitions
    deleted: dict[TopicPartition, None] = {}  # in order; a dict: thousands in a topic deletion
    states = list(partition_states(request))
    if states:
        changed: dict[str, dict[int, PartitionInfo]] = {}
        for topic, s in states:
            parts = changed.get(topic)
            if parts is None:
                parts = changed[topic] = dict(old.partitions.get(topic, {}))
            tp = TopicPartition(topic, s.partition_index)
            if s.leader == LEADER_DURING_DELETE:
                parts.pop(s.partition_index, None)
                deleted.setdefault(tp)
            else:
                parts[s.partition_index] = PartitionInfo(
                    topic, s.partition_index, s.leader, s.leader_epoch, tuple(s.isr),
                    tuple(s.replicas), tuple(s.offline_replicas), s.zk_version,
                    s.controller_epoch)
                deleted.pop(tp, None)
        merged = dict(old.partitions)
        for topic, parts in changed.items():
            if parts:
                merged[topic] = MappingProxyType(parts)
            else:
                merged.pop(topic, None)
                topic_ids.pop(topic, None)
        partitions = MappingProxyType(merged)
    snapshot = MetadataSnapshot(
        partitions=partitions,
        topic_ids=MappingProxyType(topic_ids),
        topic_names=MappingProxyType({v: k for k, v in topic_ids.items()}),
        controller_id=request.controller_id if request.controller_id >= 0 else None,
        brokers=MappingProxyType(brokers),
        updated=True,
    )
    return snapshot, list(deleted), len(states)


def partition_states(request: UpdateMetadataRequest) -> Iterator[tuple[str, _PartitionState]]:
    """(topic, partition state) of every partition in the request, whatever its version
    (v0-4 list partitions with their topic name, v5+ group them by topic)."""
    for s in request.ungrouped_partition_states:
        yield s.topic_name, s
    for ts in request.topic_states:
        for s in ts.partition_states:
            yield ts.topic_name, s

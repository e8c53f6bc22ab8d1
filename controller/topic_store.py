"""The topic store: the cluster's durable topic metadata (Kafka keeps it in ZooKeeper).

Two implementations: ``controller.local_store.LocalTopicStore`` (one JSON file in the log
dir, for a single node) and a ZooKeeper one over Kafka's znodes. What each method stands
for in ZooKeeper (under the optional chroot):

=============================  =================================================
method                         znodes
=============================  =================================================
topic_names, topics            /brokers/topics (children), /brokers/topics/<t>
                               {"version": 3, "topic_id": ..., "partitions":
                               {"0": [1, 2]}, "adding_replicas": {},
                               "removing_replicas": {}}
create_topic                   /config/topics/<t> first, then /brokers/topics/<t>
set_assignment                 /brokers/topics/<t> (partition increase)
topic_configs, set_configs     /config/topics/<t> {"version": 1, "config": {..}}
                               (+ a /config/changes/config_change_ notification)
mark_for_deletion, deletions   /admin/delete_topics/<t>
delete_topic                   /brokers/topics/<t> (with its partition states),
                               /config/topics/<t>, /admin/delete_topics/<t>
partition_states               /brokers/topics/<t>/partitions/<p>/state
                               {"controller_epoch": 1, "leader": 0, "version": 1,
                               "leader_epoch": 0, "isr": [0]}; its zkVersion is
                               the LeaderAndIsr's partition_epoch
create_partition_states        create, version 0 (exists -> in ``failed``)
update_partition_states        setData with the expected version (a conflict ->
                               in ``failed``; the caller re-reads and retries)
=============================  =================================================

Who writes what, as in Kafka's ZooKeeper mode: the broker that receives an admin request
(CreateTopics, CreatePartitions, DeleteTopics, AlterConfigs) validates it and writes the
topic, its assignment, configs or deletion mark; the controller watches the store
(``TopicStoreWatcher``), and only the controller writes partition states and removes
deleted topics. Brokers watch configs (``on_configs_changed``) and apply them to their
logs. Admin requests complete when the brokers' metadata caches show the result, not when
the store write returns.

Every method is a coroutine (ZooKeeper round trips, fsyncs); watcher callbacks run on the
event loop that owns the store and must not block (they hand work to a queue).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from controller.leader_and_isr import LeaderIsrAndControllerEpoch
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition


class TopicStoreError(Exception):
    """A store operation refused, with the error code an admin request answers."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class TopicExistsError(TopicStoreError):
    def __init__(self, name: str, *, marked_for_deletion: bool = False) -> None:
        super().__init__(ErrorCode.TOPIC_ALREADY_EXISTS,
                         f"Topic '{name}' is marked for deletion." if marked_for_deletion
                         else f"Topic '{name}' already exists.")


class NoSuchTopicError(TopicStoreError):
    def __init__(self, name: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"Topic '{name}' does not exist.")


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """A topic's identity and replica assignment (``/brokers/topics/<t>``)."""

    name: str
    topic_id: uuid.UUID
    assignment: Mapping[int, tuple[int, ...]] = field(default_factory=dict)  # partition -> replicas
    # Partitions being reassigned (Kafka's adding_replicas / removing_replicas): the
    # assignment then holds the full set, target replicas first.
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    @property
    def num_partitions(self) -> int:
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        replicas = self.assignment.get(0)
        return len(replicas) if replicas is not None else 0

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(self.name, p) for p in sorted(self.assignment)]


@dataclass(frozen=True, slots=True)
class StateWriteResult:
    """Version-checked partition state writes: what was written (with the new partition
    epoch = stored version) and what was not (a version conflict or a missing node)."""

    written: dict[TopicPartition, LeaderIsrAndControllerEpoch]
    failed: set[TopicPartition]


class TopicStoreWatcher(Protocol):
    """Change notifications, each called on the event loop. They say *that* something
    changed; the callee reads the store for *what* (as with ZooKeeper watches)."""

    def on_topics_changed(self) -> None: ...  # a topic created (or removed)
    def on_partitions_changed(self, topic: str) -> None: ...  # a topic's assignment changed
    def on_deletions_requested(self) -> None: ...  # a topic marked for deletion
    def on_configs_changed(self, topic: str) -> None: ...  # a topic's config overrides changed


DEFAULT_BROKER_ENTITY: Final = "<default>"  # Kafka's ZooKeeperInternals.DEFAULT_STRING


class BrokerConfigStore(Protocol):
    """Dynamic broker configs, per entity: a broker id (``"1"``) or the cluster-wide
    defaults (``DEFAULT_BROKER_ENTITY``). In a cluster ``/config/brokers/<entity>``
    {"version": 1, "config": {..}} plus a ``/config/changes`` notification of entity path
    ``brokers/<entity>`` per write, as Kafka's ZooKeeper mode keeps them; on a single node
    a file in the log dir (``controller.local_broker_configs``)."""

    async def broker_configs(self, entity: str) -> dict[str, str]: ...

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """Replace the entity's whole set of dynamic configs and notify every broker."""
        ...

    def watch_broker_configs(self, callback: Callable[[str], None]) -> None:
        """``callback(entity)`` on the event loop when that entity's configs changed."""
        ...


class TopicStore(Protocol):
    """See the module docstring for the ZooKeeper layout behind each method."""

    def watch(self, watcher: TopicStoreWatcher) -> None: ...

    async def topic_names(self) -> set[str]: ...

    async def topics(self, names: Iterable[str] | None = None) -> dict[str, TopicRecord]:
        """The records of ``names`` that exist (every topic when ``names`` is None)."""
        ...

    async def create_topic(self, record: TopicRecord, configs: Mapping[str, str]) -> None:
        """Write a new topic and its config overrides; TopicExistsError if the name is
        taken (also while an old topic of that name is being deleted)."""
        ...

    async def set_assignment(self, record: TopicRecord) -> None:
        """Replace a topic's assignment (partition increase); NoSuchTopicError."""
        ...

    async def topic_configs(self, name: str) -> dict[str, str]:
        """The topic's config overrides ({} for a topic without any)."""
        ...

    async def all_topic_configs(self) -> dict[str, dict[str, str]]: ...

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's whole set of overrides; NoSuchTopicError."""
        ...

    async def mark_for_deletion(self, name: str) -> None:
        """Ask the controller to delete the topic (idempotent); NoSuchTopicError."""
        ...

    async def topics_marked_for_deletion(self) -> set[str]: ...

    async def delete_topic(self, name: str) -> None:
        """Remove the topic, its configs, partition states and deletion mark (the
        controller, once every replica is deleted)."""
        ...

    async def partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """The stored states of those partitions that have one."""
        ...

    async def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> StateWriteResult: ...

    async def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> StateWriteResult:
        """Write each state if the stored version is still its
        ``leader_and_isr.partition_epoch``."""
        ...

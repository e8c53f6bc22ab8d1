"""The group coordinator inside the broker: configuration, ``__consumer_offsets`` and life cycle.

- Settings come from the broker's Kafka properties (``group.*``, ``offsets.*``).
- ``__consumer_offsets`` (``offsets.topic.num.partitions`` partitions, ``cleanup.policy=compact``,
  ``compression.type=producer``, ``segment.bytes=offsets.topic.segment.bytes``) is created on
  first use (the first FindCoordinator or group request), as Kafka's auto-creation does. On one
  broker the replication factor is 1: Kafka would refuse to create it while fewer brokers than
  ``offsets.topic.replication.factor`` are alive; a single node takes min(that, 1) and says so.
- ``startup`` (after the replica manager opened the registered partitions) loads every
  partition of ``__consumer_offsets`` that exists: groups and offsets come back.
- ``shutdown`` answers every waiting JoinGroup/SyncGroup (NOT_COORDINATOR) and stops the timers.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from broker.group.config import PROPERTY_FIELDS, GroupConfig
from broker.group.coordinator import GroupCoordinator
from broker.group.log_store import ReplicaRecordLog, read_records
from broker.group.offsets import remove_topic_offsets
from broker.group.partitioning import GROUP_METADATA_TOPIC
from broker.group.timers import LoopTimers

if TYPE_CHECKING:
    from broker.services import Broker

log = logging.getLogger(__name__)


def group_config_from(broker: Broker) -> GroupConfig:
    values = broker.config.values
    return GroupConfig.from_properties(
        {name: values[name] for name in PROPERTY_FIELDS if values.get(name) is not None}
    )


class GroupService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = group_config_from(broker)
        self.record_log = ReplicaRecordLog(broker.replica_manager, self.config.offsets_commit_timeout_ms)
        self.coordinator = GroupCoordinator(self.config, LoopTimers(), self.record_log)

    @property
    def num_partitions(self) -> int:
        return self.config.offsets_topic_num_partitions

    def startup(self) -> None:
        info = self.broker.topics.get(GROUP_METADATA_TOPIC)
        if info is not None and info.num_partitions != self.num_partitions:
            # Kafka maps groups with the topic's real partition count, not the setting.
            log.warning("%s has %d partitions, offsets.topic.num.partitions is %d: using the topic's",
                        GROUP_METADATA_TOPIC, info.num_partitions, self.num_partitions)
            self.config = replace(self.config, offsets_topic_num_partitions=info.num_partitions)
            self.coordinator = GroupCoordinator(self.config, LoopTimers(), self.record_log)
        self.coordinator.startup()
        if info is not None:
            self._load_all(info.num_partitions)

    def ensure_offsets_topic(self) -> bool:
        """Create and load ``__consumer_offsets`` if it does not exist yet; False on failure
        or once the coordinator has shut down (requests then get COORDINATOR_NOT_AVAILABLE)."""
        if not self.coordinator.is_active:
            return False
        if self.coordinator.manager.owned_partitions:
            return True
        from broker import topic_admin  # the admin module needs services: import late
        from broker.topics import TopicError

        if self.broker.topics.get(GROUP_METADATA_TOPIC) is None:
            rf = self.config.offsets_topic_replication_factor
            if rf > 1:
                log.warning("offsets.topic.replication.factor is %d but this is a single broker: "
                            "creating %s with replication factor 1", rf, GROUP_METADATA_TOPIC)
            try:
                topic_admin.create_topic(
                    self.broker, GROUP_METADATA_TOPIC, self.num_partitions, 1,
                    {
                        "cleanup.policy": "compact",
                        "compression.type": "producer",
                        "segment.bytes": str(self.config.offsets_topic_segment_bytes),
                    },
                )
            except TopicError as exc:
                log.error("cannot create %s: %s", GROUP_METADATA_TOPIC, exc)
                return False
        info = self.broker.topics.get(GROUP_METADATA_TOPIC)
        if info is None:
            return False
        self._load_all(info.num_partitions)
        return True

    def _load_all(self, num_partitions: int) -> None:
        rm = self.broker.replica_manager
        for p in range(num_partitions):
            partition = rm.get_partition(GROUP_METADATA_TOPIC, p)
            if partition is None:
                log.error("%s-%d is not hosted here; its groups are unavailable", GROUP_METADATA_TOPIC, p)
                continue
            self.coordinator.on_election(p, read_records(partition))

    def on_topic_deleted(self, topic: str) -> None:
        """Forget the deleted topic's committed offsets in every group (tombstones written)."""
        if topic == GROUP_METADATA_TOPIC:
            # Its logs are gone: unload every group (waiters answered NOT_COORDINATOR); the
            # next group request creates the topic afresh.
            for partition in sorted(self.coordinator.manager.owned_partitions):
                self.coordinator.on_resignation(partition)
            return
        if self.coordinator.is_active:
            removed = remove_topic_offsets(self.coordinator, topic)
            if removed:
                log.info("removed %d committed offsets of deleted topic %s", removed, topic)

    def shutdown(self) -> None:
        self.coordinator.shutdown()

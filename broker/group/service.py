"""The group coordinator inside the broker: configuration, ``__consumer_offsets`` and life cycle.

- Settings come from the broker's Kafka properties (``group.*``, ``offsets.*``).
- ``__consumer_offsets`` (``offsets.topic.num.partitions`` partitions, ``cleanup.policy=compact``,
  ``compression.type=producer``, ``segment.bytes=offsets.topic.segment.bytes``) is created on
  first use (the first FindCoordinator or group request), through the admin manager like
  any topic (store, controller, LeaderAndIsr), without blocking the event loop; concurrent
  requests wait for the same creation, bounded (COORDINATOR_NOT_AVAILABLE if it does not
  finish: clients retry). In a cluster (``zookeeper.connect``), as in Kafka, it is not
  created while fewer brokers than ``offsets.topic.replication.factor`` are alive
  (COORDINATOR_NOT_AVAILABLE until then); on a single node the factor is capped at the
  live brokers and the cap is logged.
- Groups follow leadership, as in Kafka: a LeaderAndIsr that makes this broker leader of
  ``__consumer_offsets-<p>`` loads that partition's groups and offsets (``on_election``);
  becoming follower, or a StopReplica deleting it, unloads them (``on_resignation``).
- A deleted topic's committed offsets are removed from every group (tombstones written)
  when UpdateMetadata says its partitions are gone; ``__consumer_offsets`` itself deleted
  unloads every group (the next group request creates it afresh).
- ``shutdown`` answers every waiting JoinGroup/SyncGroup (NOT_COORDINATOR) and stops the timers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from broker.config import BrokerConfig
from broker.group.config import PROPERTY_FIELDS, GroupConfig
from broker.group.coordinator import GroupCoordinator
from broker.group.log_store import ReplicaRecordLog, read_records
from broker.group.offsets import remove_topic_offsets
from broker.group.partitioning import GROUP_METADATA_TOPIC
from broker.group.timers import LoopTimers
from broker.metadata_cache import MetadataCache
from broker.topics import TopicError
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from storage.throttled_log import ThrottledLog

if TYPE_CHECKING:
    from broker.admin_manager import AdminManager
    from broker.partition import Partition
    from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)
_throttled = ThrottledLog(log)  # one line a minute while the disk stays full

# How long a group request waits for __consumer_offsets to be created (a bound of ours,
# below the clients' request timeouts; past it they get COORDINATOR_NOT_AVAILABLE and retry).
OFFSETS_TOPIC_CREATE_WAIT_MS: Final = 25_000


def group_config_from(config: BrokerConfig) -> GroupConfig:
    values = config.values
    return GroupConfig.from_properties(
        {name: values[name] for name in PROPERTY_FIELDS if values.get(name) is not None}
    )


class GroupService:
    def __init__(self, config: BrokerConfig, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, admin: AdminManager) -> None:
        self.config = group_config_from(config)
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.admin = admin
        self.cluster_mode = config.zookeeper_connect is not None
        self.record_log = ReplicaRecordLog(replica_manager, self.config.offsets_commit_timeout_ms)
        self.coordinator = GroupCoordinator(self.config, LoopTimers(), self.record_log)
        self._creating: asyncio.Task[bool] | None = None

    @property
    def num_partitions(self) -> int:
        return self.config.offsets_topic_num_partitions

    def startup(self, offsets_topic_partitions: int | None) -> None:
        """Before the first LeaderAndIsr: ``offsets_topic_partitions`` is the existing
        ``__consumer_offsets``'s partition count, if it exists."""
        if offsets_topic_partitions is not None and offsets_topic_partitions != self.num_partitions:
            # Kafka maps groups with the topic's real partition count, not the setting.
            log.warning("%s has %d partitions, offsets.topic.num.partitions is %d: using the topic's",
                        GROUP_METADATA_TOPIC, offsets_topic_partitions, self.num_partitions)
            self.config = replace(self.config,
                                  offsets_topic_num_partitions=offsets_topic_partitions)
            self.coordinator = GroupCoordinator(self.config, LoopTimers(), self.record_log)
        self.coordinator.startup()

    # ------------------------------------------------------------ __consumer_offsets

    async def ensure_offsets_topic(self) -> bool:
        """``__consumer_offsets`` exists (created now if needed); False on failure or once
        the coordinator has shut down (requests then get COORDINATOR_NOT_AVAILABLE)."""
        if not self.coordinator.is_active:
            return False
        if self.metadata_cache.contains_topic(GROUP_METADATA_TOPIC):
            return True
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create_offsets_topic())
        return await asyncio.shield(self._creating)

    async def _create_offsets_topic(self) -> bool:
        live = len(self.admin.live_broker_ids())
        wanted = self.config.offsets_topic_replication_factor
        if self.cluster_mode and live < wanted:
            # Kafka's rule in a cluster: wait for enough brokers (COORDINATOR_NOT_AVAILABLE,
            # retriable, until then).
            log.info("Number of alive brokers '%d' does not meet the required replication "
                     "factor '%d' for the offsets topic (configured via "
                     "'offsets.topic.replication.factor'). This error can be ignored if the "
                     "cluster is starting up and not all brokers are up yet.", live, wanted)
            return False
        rf = min(wanted, max(live, 1))
        if rf < self.config.offsets_topic_replication_factor:
            log.warning("offsets.topic.replication.factor is %d but %d brokers are alive: "
                        "creating %s with replication factor %d",
                        self.config.offsets_topic_replication_factor, live,
                        GROUP_METADATA_TOPIC, rf)
        try:
            _, _, error = await self.admin.create_topic(
                GROUP_METADATA_TOPIC, self.num_partitions, rf,
                {
                    "cleanup.policy": "compact",
                    "compression.type": "producer",
                    "segment.bytes": str(self.config.offsets_topic_segment_bytes),
                },
                timeout_ms=OFFSETS_TOPIC_CREATE_WAIT_MS)
        except TopicError as exc:
            if exc.error_code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                _throttled.error("create", "cannot create %s: %s", GROUP_METADATA_TOPIC, exc)
                return False
            error = ErrorCode.NO_ERROR
        if error is not ErrorCode.NO_ERROR:
            _throttled.error("created", "creating %s: %s", GROUP_METADATA_TOPIC, error.name)
        return self.metadata_cache.contains_topic(GROUP_METADATA_TOPIC)

    # ------------------------------------------------------------ leadership (LeaderAndIsr)

    def on_leadership_change(self, leaders: list[Partition], followers: list[Partition]) -> None:
        for p in leaders:
            if p.topic == GROUP_METADATA_TOPIC and self.coordinator.is_active:
                self.coordinator.on_election(p.partition, read_records(p))
        for p in followers:
            if p.topic == GROUP_METADATA_TOPIC:
                self.coordinator.on_resignation(p.partition)

    def on_replica_stopped(self, tp: TopicPartition, deleted: bool) -> None:
        """A StopReplica removed this broker's replica of ``tp``."""
        if tp.topic == GROUP_METADATA_TOPIC and deleted:
            self.coordinator.on_resignation(tp.partition)

    def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> None:
        """Forget deleted topics' committed offsets in every group (tombstones written)."""
        for topic in sorted({tp.topic for tp in partitions}):
            if topic == GROUP_METADATA_TOPIC:
                # Its logs are gone: unload every group (waiters answered NOT_COORDINATOR);
                # the next group request creates the topic afresh.
                for partition in sorted(self.coordinator.manager.owned_partitions):
                    self.coordinator.on_resignation(partition)
                continue
            if self.coordinator.is_active:
                removed = remove_topic_offsets(self.coordinator, topic)
                if removed:
                    log.info("removed %d committed offsets of deleted topic %s", removed, topic)

    def shutdown(self) -> None:
        self.coordinator.shutdown()

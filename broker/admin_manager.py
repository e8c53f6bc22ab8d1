"""Topic admin on the broker side (Kafka's ``ZkAdminManager``): validate, write the topic
store, wait for the metadata cache.

The broker that receives CreateTopics, CreatePartitions, DeleteTopics or AlterConfigs
checks the request, writes the topic store (``controller.topic_store``) and lets the
controller do the rest: it elects leaders, tells every broker, deletes replicas. The
request then waits in the topic purgatory (``broker.delayed_admin``) until this broker's
metadata cache shows the result, bounded by the request's timeout (REQUEST_TIMED_OUT when
it runs out; the change itself stands). Nothing here touches partitions or logs, and no
lock is shared between brokers: the store serializes writes.

Checks, in the order the handlers have always made them: topic name
(INVALID_TOPIC_EXCEPTION), existence (TOPIC_ALREADY_EXISTS, also while an old topic of the
name is being deleted), '.'/'_' collisions (INVALID_TOPIC_EXCEPTION), partition count
(INVALID_PARTITIONS), replication factor against the live brokers
(INVALID_REPLICATION_FACTOR), configs (INVALID_CONFIG). Replicas are placed by
``controller.assignment`` over the live brokers (rack-aware when every broker has a rack).

Thread-safety: the broker's event loop only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping

from broker import topic_config
from broker.config import BrokerConfig
from broker.delayed_admin import DelayedCreatePartitions, DelayedDeleteTopics
from broker.dynamic_broker_config import DynamicBrokerConfig
from broker.log_configs import LogConfigs
from broker.metadata_cache import MetadataCache
from broker.purgatory import Purgatory
from broker.topic_config import ResolvedConfig
from broker.topics import (
    TopicError,
    collision,
    validate_configs,
    validate_partitions,
    validate_topic_name,
)
from controller.assignment import AssignmentError, BrokerMetadata, assign_replicas_to_brokers
from controller.topic_store import TopicRecord, TopicStore, TopicStoreError
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)


class AdminManager:
    def __init__(self, *, config: BrokerConfig, store: TopicStore,
                 metadata_cache: MetadataCache, log_configs: LogConfigs) -> None:
        self.config = config
        self.store = store
        self.metadata_cache = metadata_cache
        self.log_configs = log_configs
        self.topic_purgatory: Purgatory[str] = Purgatory("topic")
        # A cluster's broker keeps dynamic configs (replica throttling); a single node none.
        self.dynamic_broker_config: DynamicBrokerConfig | None = None

    # ------------------------------------------------------------ broker settings

    def explicit_broker_props(self) -> dict[str, str]:
        """The broker properties set in server.properties or by --override (not defaults)."""
        return dict(self.config.explicit)

    def topic_configs(self, overrides: Mapping[str, str]) -> list[ResolvedConfig]:
        """Every topic config of a topic with ``overrides``, resolved, by name (over the
        dynamic log defaults as this broker applies them, then server.properties)."""
        explicit = self.explicit_broker_props()
        dynamic = self.dynamic_broker_config
        mine = {} if dynamic is None else dynamic.overrides
        cluster = {} if dynamic is None else dynamic.defaults
        return [topic_config.resolve(name, overrides, explicit, dynamic_broker=mine,
                                     dynamic_default=cluster)
                for name in sorted(topic_config.TOPIC_CONFIGS)]

    def log_broker_props(self) -> dict[str, str]:
        """The broker properties topic configs fall back on: the dynamic log defaults in
        force over server.properties."""
        return {**self.explicit_broker_props(), **self.log_configs.dynamic}

    @property
    def auto_create_enabled(self) -> bool:
        return self.config.auto_create_topics_enable

    @property
    def default_num_partitions(self) -> int:
        return self.config.num_partitions

    @property
    def default_replication_factor(self) -> int:
        return self.config.default_replication_factor

    def live_broker_ids(self) -> set[int]:
        return {b.broker_id for b in self.metadata_cache.alive_brokers()}

    # ------------------------------------------------------------ create

    async def check_create(self, name: str, num_partitions: int, replication_factor: int,
                           configs: Mapping[str, str | None],
                           assignment: Mapping[int, list[int]] | None = None,
                           ) -> tuple[dict[int, tuple[int, ...]], dict[str, str]]:
        """Every check ``create_topic`` makes, without creating (validate_only): the
        replica assignment and the clean config overrides."""
        validate_topic_name(name)
        existing = await self.store.topic_names()
        if name in existing or self.metadata_cache.contains_topic(name):
            marked = name in await self.store.topics_marked_for_deletion()
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"Topic '{name}' is marked for deletion." if marked
                             else f"Topic '{name}' already exists.")
        other = collision(name, existing)
        if other is not None:
            raise TopicError(ErrorCode.INVALID_TOPIC,
                             f"Topic '{name}' collides with existing topic: {other}")
        validate_partitions(num_partitions)
        if assignment is None:
            placed = self._assign(num_partitions, replication_factor)
        else:
            placed = {p: tuple(replicas) for p, replicas in assignment.items()}
        return placed, validate_configs(configs)

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: Mapping[str, str | None], *, timeout_ms: int,
                           assignment: Mapping[int, list[int]] | None = None,
                           ) -> tuple[TopicRecord, dict[str, str], ErrorCode]:
        """Create ``name`` and wait (up to ``timeout_ms``) for its leaders: (record, clean
        configs, NO_ERROR or REQUEST_TIMED_OUT). TopicError when refused."""
        placed, clean = await self.check_create(name, num_partitions, replication_factor,
                                                configs, assignment)
        topic_id = uuid.uuid4()
        while topic_id == ZERO_UUID or self.metadata_cache.topic_name(topic_id) is not None:
            topic_id = uuid.uuid4()
        record = TopicRecord(name, topic_id, placed)
        try:
            await self.store.create_topic(record, clean)
        except TopicStoreError as exc:
            raise TopicError(exc.error_code, exc.message) from None
        log.info("created topic %s (id %s, %d partitions, replication factor %d, configs %s)",
                 name, topic_id, record.num_partitions, record.replication_factor, clean)
        error = await self._wait(DelayedCreatePartitions(
            timeout_ms, self.metadata_cache, name, placed), name)
        return record, clean, error

    def _assign(self, num_partitions: int, replication_factor: int,
                start_partition_id: int = -1, fixed_start_index: int = -1,
                ) -> dict[int, tuple[int, ...]]:
        brokers = [BrokerMetadata(b.broker_id, b.rack) for b in self.metadata_cache.alive_brokers()]
        try:
            placed = assign_replicas_to_brokers(
                brokers, num_partitions, replication_factor,
                start_partition_id=start_partition_id, fixed_start_index=fixed_start_index)
        except AssignmentError as exc:
            raise TopicError(exc.error_code, exc.message) from None
        return {p: tuple(replicas) for p, replicas in placed.items()}

    # ------------------------------------------------------------ partitions

    async def topic_record(self, name: str) -> TopicRecord:
        """The topic's stored record; UNKNOWN_TOPIC_OR_PARTITION if there is none."""
        record = (await self.store.topics([name])).get(name)
        if record is None or not self.metadata_cache.contains_topic(name):
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "This server does not host this topic-partition.")
        return record

    async def check_add_partitions(self, name: str, total: int) -> TopicRecord:
        record = await self.topic_record(name)
        if total < record.num_partitions:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {record.num_partitions} partitions, which is higher than"
                f" the requested {total}.")
        if total == record.num_partitions:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic already has {record.num_partitions} partitions.")
        validate_partitions(total)
        return record

    async def add_partitions(self, name: str, total: int, *, timeout_ms: int,
                             assignments: Iterable[list[int]] | None = None) -> ErrorCode:
        """Grow ``name`` to ``total`` partitions and wait for their leaders."""
        record = await self.check_add_partitions(name, total)
        current = record.num_partitions
        if assignments is not None:
            added = {current + i: tuple(r) for i, r in enumerate(assignments)}
        else:
            # Kafka starts the round robin at the broker of partition 0's first replica.
            first = record.assignment[0][0] if record.assignment.get(0) else -1
            ids = sorted(self.live_broker_ids())
            start = next((i for i, b in enumerate(ids) if b >= first), 0)
            added = self._assign(total - current, record.replication_factor,
                                 start_partition_id=current, fixed_start_index=start)
        grown = TopicRecord(name, record.topic_id, {**record.assignment, **added})
        try:
            await self.store.set_assignment(grown)
        except TopicStoreError as exc:
            raise TopicError(exc.error_code, exc.message) from None
        log.info("topic %s now has %d partitions", name, total)
        return await self._wait(DelayedCreatePartitions(
            timeout_ms, self.metadata_cache, name, added), name)

    # ------------------------------------------------------------ delete

    async def delete_topic(self, name: str, *, timeout_ms: int) -> ErrorCode:
        """Mark ``name`` for deletion and wait until this broker's cache no longer has it."""
        try:
            await self.store.mark_for_deletion(name)
        except TopicStoreError as exc:
            raise TopicError(exc.error_code, exc.message) from None
        return await self._wait(DelayedDeleteTopics(timeout_ms, self.metadata_cache, name), name)

    # ------------------------------------------------------------ configs

    async def topic_overrides(self, name: str) -> dict[str, str]:
        return await self.store.topic_configs(name)

    async def set_topic_configs(self, name: str, overrides: Mapping[str, str | None]) -> None:
        """Replace the topic's overrides (validated) and apply them to this broker's logs
        at once (other brokers hear of it from the store)."""
        clean = validate_configs(overrides)
        try:
            await self.store.set_topic_configs(name, clean)
        except TopicStoreError as exc:
            raise TopicError(exc.error_code, exc.message) from None
        await self.log_configs.refresh(name)
        log.info("topic %s configs now %s", name, clean)

    # ------------------------------------------------------------ the purgatory

    async def _wait(self, op: DelayedCreatePartitions | DelayedDeleteTopics,
                    topic: str) -> ErrorCode:
        if op.delay_ms <= 0 and not op.try_complete():
            return ErrorCode.REQUEST_TIMED_OUT
        if not self.topic_purgatory.try_complete_else_watch(op, [topic]):
            await op.wait()
        return op.error

    def try_complete_delayed_topic_operations(self, topics: Iterable[str]) -> None:
        """The metadata cache changed for ``topics`` (after each UpdateMetadata)."""
        if len(self.topic_purgatory):
            for topic in set(topics):
                self.topic_purgatory.check_and_complete(topic)

    def shutdown(self) -> int:
        return self.topic_purgatory.shutdown()


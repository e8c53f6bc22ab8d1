"""``ZkTopicStore``: the topic store of a cluster, in Kafka's own znodes.

The ZooKeeper implementation of ``controller.topic_store.TopicStore`` (the map of methods to
znodes is there; the JSON is ``controller.zk_data``'s, Kafka 3.9's byte for byte in
meaning). Kafka's writers and their order:

- ``create_topic`` (the broker handling CreateTopics): ``/config/topics/<t>`` (always, even
  with no overrides) and ``/brokers/topics/<t>`` in one transaction, so a name already
  taken (TopicExistsError) never has its configs overwritten; a name marked for deletion
  is refused as Kafka does.
- ``set_assignment`` (CreatePartitions): ``/brokers/topics/<t>``, any version.
- ``set_topic_configs`` (AlterConfigs): ``/config/topics/<t>``, then a
  ``/config/changes/config_change_`` notification that every broker's store turns into
  ``on_configs_changed(t)``.
- ``mark_for_deletion`` (DeleteTopics): ``/admin/delete_topics/<t>``, no data.
- ``set_broker_configs`` (AlterConfigs of a BROKER): ``/config/brokers/<id>`` (or
  ``/config/brokers/<default>`` for the cluster-wide defaults), then a notification whose
  entity path is ``brokers/<id>`` (``brokers/<default>``); ``watch_broker_configs``
  callbacks hear the entity of each one that arrives.
- the controller's writes -- ``create_partition_states``, ``update_partition_states`` and
  ``delete_topic`` -- are fenced like Kafka's: once ``fence(zk_version)`` was called
  with the elected controller's ``/controller_epoch`` version, each write is a transaction
  that checks it first, and raises ``ControllerMovedError`` when a newer controller exists.
  A state's ``partition_epoch`` is its znode's version; updates are conditional on it.

Watches (``watch(watcher)``): children of ``/brokers/topics`` (on_topics_changed), the data
of each ``/brokers/topics/<t>`` (on_partitions_changed), children of
``/admin/delete_topics`` (on_deletions_requested) and of ``/config/changes``
(on_configs_changed for each new notification of a topic; notifications older than
``CONFIG_CHANGE_EXPIRY_MS`` are purged, as Kafka's ZkNodeChangeNotificationListener does).
A fired watch is re-armed *before* the watchers hear of it, so a change is either seen by
the re-armed watch or by the watchers' next read. kazoo drops every watch when the
connection drops; the firing then re-arms once connected again. Watcher callbacks run on
the event loop.

Reads and writes of many partitions go out concurrently, bounded by the client's
``zookeeper.max.in.flight.requests``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Final, TypeVar, cast

from controller import zk_data as zd
from controller.leader_and_isr import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
)
from controller.topic_store import (
    DEFAULT_BROKER_ENTITY,
    NoSuchTopicError,
    StateWriteResult,
    TopicExistsError,
    TopicRecord,
    TopicStoreWatcher,
)
from controller.zk_client import (
    CreateOp,
    DeleteOp,
    Op,
    SetDataOp,
    ZkBadVersion,
    ZkClient,
    ZkError,
    ZkNodeExists,
    ZkNoNode,
    ZkRolledBack,
    ZnodeStat,
)
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

ZERO_UUID: Final = uuid.UUID(int=0)
MAX_WATCHERS: Final = 16
MAX_OPS_PER_TRANSACTION: Final = 500
CONFIG_CHANGE_EXPIRY_MS: Final = 15 * 60 * 1000  # Kafka's changeExpirationMs
REARM_RETRY_S: Final = 1.0

T = TypeVar("T")
GATHER_LIMIT: Final = 64  # znode operations of one decision started at a time (_gather)


class ZkTopicStore:
    """See the module docstring."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk
        self._watchers: list[TopicStoreWatcher] = []
        self._fence: int | None = None
        self._watched_topics: set[str] = set()
        self._last_config_change = -1
        self._broker_config_callbacks: list[Callable[[str], None]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    # ------------------------------------------------------------ fencing

    def fence(self, controller_epoch_zk_version: int | None) -> None:
        """The elected controller's ``/controller_epoch`` version guards its writes from now
        on (None: no check, before an election or after resigning)."""
        self._fence = controller_epoch_zk_version

    # ------------------------------------------------------------ reads

    async def topic_names(self) -> set[str]:
        return set(await self.zk.children(zd.TOPICS))

    async def topics(self, names: Iterable[str] | None = None) -> dict[str, TopicRecord]:
        wanted = sorted(await self.topic_names() if names is None else set(names))
        found = await _gather(self.zk.get_or_none(zd.topic_path(n)) for n in wanted)
        out: dict[str, TopicRecord] = {}
        for name, item in zip(wanted, found, strict=True):
            if item is None:
                continue
            assignment = zd.TopicAssignment.decode(name, item[0])
            out[name] = TopicRecord(
                name, assignment.topic_id or ZERO_UUID, assignment.replicas(),
                {p: a.adding_replicas for p, a in assignment.partitions.items()
                 if a.adding_replicas},
                {p: a.removing_replicas for p, a in assignment.partitions.items()
                 if a.removing_replicas})
        return out

    async def topic_configs(self, name: str) -> dict[str, str]:
        found = await self.zk.get_or_none(zd.topic_config_path(name))
        return {} if found is None else zd.decode_entity_config(found[0])

    async def all_topic_configs(self) -> dict[str, dict[str, str]]:
        names = await self.zk.children(f"{zd.CONFIG}/topics")
        found = await _gather(self.zk.get_or_none(zd.topic_config_path(n)) for n in names)
        return {n: zd.decode_entity_config(f[0]) for n, f in zip(names, found, strict=True)
                if f is not None}

    async def topics_marked_for_deletion(self) -> set[str]:
        return set(await self.zk.children(zd.DELETE_TOPICS))

    async def partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        wanted = list(partitions)
        found = await _gather(self.zk.get_or_none(zd.partition_state_path(tp)) for tp in wanted)
        return {tp: _state(f[0], f[1]) for tp, f in zip(wanted, found, strict=True)
                if f is not None}

    # ------------------------------------------------------------ the brokers' writes

    async def create_topic(self, record: TopicRecord, configs: Mapping[str, str]) -> None:
        name = record.name
        if await self.zk.exists(zd.delete_topic_path(name)) is not None:
            raise TopicExistsError(name, marked_for_deletion=True)
        config_path = zd.topic_config_path(name)
        config_data = zd.encode_entity_config(configs)
        config_op: Op = (SetDataOp(config_path, config_data)
                         if await self.zk.exists(config_path) is not None
                         else CreateOp(config_path, config_data))
        assignment = zd.TopicAssignment.of(dict(record.assignment), record.topic_id)
        results = await self.zk.multi([CreateOp(zd.topic_path(name), assignment.encode()),
                                       config_op])
        if isinstance(results[0], ZkNodeExists):
            raise TopicExistsError(name)
        _raise_first_error(results)
        log.info("Created topic %s with %d partitions (topic id %s)", name,
                 record.num_partitions, zd.uuid_to_kafka(record.topic_id))

    async def set_assignment(self, record: TopicRecord) -> None:
        assignment = zd.TopicAssignment(
            {p: zd.ReplicaAssignment(tuple(r), tuple(record.adding.get(p, ())),
                                     tuple(record.removing.get(p, ())))
             for p, r in record.assignment.items()}, record.topic_id)
        try:
            await self.zk.set(zd.topic_path(record.name), assignment.encode())
        except ZkNoNode:
            raise NoSuchTopicError(record.name) from None

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        if await self.zk.exists(zd.topic_path(name)) is None:
            raise NoSuchTopicError(name)
        path, data = zd.topic_config_path(name), zd.encode_entity_config(configs)
        try:
            await self.zk.set(path, data)
        except ZkNoNode:
            await self.zk.create_persistent(path, data)
        await self.zk.create(f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
                             zd.encode_config_change("topics", name), sequence=True)

    async def broker_configs(self, entity: str) -> dict[str, str]:
        found = await self.zk.get_or_none(zd.config_path("brokers", entity))
        return {} if found is None else zd.decode_entity_config(found[0])

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        path = zd.config_path("brokers", entity)
        data = zd.encode_entity_config(configs)
        try:
            await self.zk.set(path, data)
        except ZkNoNode:
            await self.zk.create_persistent(path, data)
        await self.zk.create(f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
                             zd.encode_config_change("brokers", entity), sequence=True)

    async def mark_for_deletion(self, name: str) -> None:
        if await self.zk.exists(zd.topic_path(name)) is None:
            raise NoSuchTopicError(name)
        with contextlib.suppress(ZkNodeExists):  # already marked
            await self.zk.create(zd.delete_topic_path(name), None)

    # ------------------------------------------------------------ the controller's writes

    async def delete_topic(self, name: str) -> None:
        """Kafka's completeDeleteTopic: the topic znode with its partitions, its configs,
        then its deletion mark; children before parents, each batch fenced."""
        paths: list[str] = []
        await self._collect(zd.topic_path(name), paths)
        if await self.zk.exists(zd.topic_config_path(name)) is not None:
            paths.append(zd.topic_config_path(name))
        if await self.zk.exists(zd.delete_topic_path(name)) is not None:
            paths.append(zd.delete_topic_path(name))
        for start in range(0, len(paths), MAX_OPS_PER_TRANSACTION):
            ops: list[Op] = [DeleteOp(p) for p in paths[start:start + MAX_OPS_PER_TRANSACTION]]
            results = await self.zk.multi(ops, controller_epoch_zk_version=self._fence)
            if any(isinstance(r, ZkError) for r in results):  # someone else deleted some
                for path in paths[start:start + MAX_OPS_PER_TRANSACTION]:
                    with contextlib.suppress(ZkNoNode):
                        await self._fenced([DeleteOp(path)])
        self._watched_topics.discard(name)

    async def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> StateWriteResult:
        topics = sorted({tp.topic for tp in states})
        await _gather(self._ensure_fenced(zd.topic_partitions_path(t)) for t in topics)
        await _gather(self._ensure_fenced(zd.partition_path(tp)) for tp in states)
        items = list(states.items())
        results = await _gather(self._create_state(tp, s) for tp, s in items)
        written: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        failed: set[TopicPartition] = set()
        for (tp, state), ok in zip(items, results, strict=True):
            if ok:
                written[tp] = _with_partition_epoch(state, 0)
            else:
                failed.add(tp)
        return StateWriteResult(written, failed)

    async def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> StateWriteResult:
        items = list(states.items())
        versions = await _gather(self._update_state(tp, s) for tp, s in items)
        written: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        failed: set[TopicPartition] = set()
        for (tp, state), version in zip(items, versions, strict=True):
            if version is None:
                failed.add(tp)
            else:
                written[tp] = _with_partition_epoch(state, version)
        return StateWriteResult(written, failed)

    async def _create_state(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> bool:
        try:
            await self._fenced([CreateOp(zd.partition_state_path(tp), _encode_state(state))])
            return True
        except (ZkNodeExists, ZkNoNode):
            return False

    async def _update_state(self, tp: TopicPartition,
                            state: LeaderIsrAndControllerEpoch) -> int | None:
        op = SetDataOp(zd.partition_state_path(tp), _encode_state(state),
                       state.leader_and_isr.partition_epoch)
        try:
            stat = (await self._fenced([op]))[0]
        except (ZkBadVersion, ZkNoNode):
            return None
        assert isinstance(stat, ZnodeStat)
        return stat.version

    async def _ensure_fenced(self, path: str) -> None:
        """Create a parent with no data; already there, or its topic gone: nothing to do."""
        with contextlib.suppress(ZkNodeExists, ZkNoNode):
            await self._fenced([CreateOp(path, None)])

    async def _fenced(self, ops: list[Op]) -> list[object]:
        """One transaction checked against the controller's epoch version; the first
        failing op's error is raised."""
        results = await self.zk.multi(ops, controller_epoch_zk_version=self._fence)
        _raise_first_error(results)
        return list(results)

    async def _collect(self, path: str, out: list[str]) -> None:
        """``path`` and its subtree, children first."""
        try:
            children = await self.zk.children(path)
        except ZkNoNode:
            return
        for child in children:
            await self._collect(f"{path}/{child}", out)
        out.append(path)

    # ------------------------------------------------------------ watches

    def watch(self, watcher: TopicStoreWatcher) -> None:
        if len(self._watchers) >= MAX_WATCHERS:
            raise RuntimeError(f"more than {MAX_WATCHERS} topic store watchers")
        self._watchers.append(watcher)
        if len(self._watchers) == 1:
            self._spawn(self._arm_topics(notify=False))
            self._spawn(self._arm_deletions(notify=False))
            self._spawn(self._arm_config_changes(first=True))

    def watch_broker_configs(self, callback: Callable[[str], None]) -> None:
        """``callback(entity)`` on the loop for each new ``brokers/<entity>`` notification
        (the topic watches, which arm the notifications, are set up at start-up)."""
        if len(self._broker_config_callbacks) >= MAX_WATCHERS:
            raise RuntimeError(f"more than {MAX_WATCHERS} broker config watchers")
        self._broker_config_callbacks.append(callback)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, work: Awaitable[None]) -> None:
        if self._closed:
            return

        async def run() -> None:
            try:
                await work
            except asyncio.CancelledError:
                raise
            except ZkError as exc:
                if self._closed:
                    return
                log.warning("topic store watch: %s; re-arming in %.0f s", exc, REARM_RETRY_S)
                await asyncio.sleep(REARM_RETRY_S)
                self._spawn(self._arm_topics(notify=True))
                self._spawn(self._arm_deletions(notify=True))
                self._spawn(self._arm_config_changes(first=False))

        task = asyncio.get_running_loop().create_task(run(), name="zk-topic-store-watch")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _notify(self, call: Callable[[TopicStoreWatcher], None]) -> None:
        for watcher in list(self._watchers):
            call(watcher)

    async def _arm_topics(self, *, notify: bool) -> None:
        fired = self.zk.loop_watch(lambda: self._spawn(self._arm_topics(notify=True)))
        names = set(await self.zk.children(zd.TOPICS, watch=fired))
        for name in sorted(names - self._watched_topics):
            self._watched_topics.add(name)
            await self._arm_topic(name, notify=False)
        self._watched_topics &= names
        if notify:
            self._notify(lambda w: w.on_topics_changed())

    async def _arm_topic(self, name: str, *, notify: bool) -> None:
        if name not in self._watched_topics:
            return  # gone: stop watching it
        fired = self.zk.loop_watch(lambda: self._spawn(self._arm_topic(name, notify=True)))
        if await self.zk.exists(zd.topic_path(name), watch=fired) is None:
            return
        if notify:
            self._notify(lambda w: w.on_partitions_changed(name))

    async def _arm_deletions(self, *, notify: bool) -> None:
        fired = self.zk.loop_watch(lambda: self._spawn(self._arm_deletions(notify=True)))
        marked = await self.zk.children(zd.DELETE_TOPICS, watch=fired)
        if notify and marked:
            self._notify(lambda w: w.on_deletions_requested())

    async def _arm_config_changes(self, *, first: bool) -> None:
        fired = self.zk.loop_watch(
            lambda: self._spawn(self._arm_config_changes(first=False)))
        children = await self.zk.children(zd.CONFIG_CHANGES, watch=fired)
        changes = sorted((zd.sequence_number(c, zd.CONFIG_CHANGE_PREFIX), c) for c in children
                         if c.startswith(zd.CONFIG_CHANGE_PREFIX))
        topics: list[str] = []
        brokers: list[str] = []
        now_ms = int(time.time() * 1000)
        for seq, child in changes:
            path = f"{zd.CONFIG_CHANGES}/{child}"
            found = await self.zk.get_or_none(path)
            if found is None:
                continue
            if seq > self._last_config_change:
                self._last_config_change = seq
                try:
                    entity_type, name = zd.decode_config_change(found[0])
                except zd.ZkDataError as exc:
                    log.warning("ignoring config change %s: %s", child, exc)
                else:
                    if entity_type == "topics" and name not in topics:
                        topics.append(name)
                    elif (entity_type == "brokers"
                          and (name.isdigit() or name == DEFAULT_BROKER_ENTITY)
                          and name not in brokers):
                        brokers.append(name)
            if now_ms - found[1].ctime_ms > CONFIG_CHANGE_EXPIRY_MS:
                with contextlib.suppress(ZkNoNode):  # another broker purged it first
                    await self.zk.delete(path)
        if not first:  # at start-up the watchers read every config anyway
            for name in topics:
                self._notify_configs_changed(name)
            for entity in brokers:
                for callback in list(self._broker_config_callbacks):
                    callback(entity)

    def _notify_configs_changed(self, name: str) -> None:
        self._notify(lambda w: w.on_configs_changed(name))


async def _gather(awaitables: Iterable[Awaitable[T]], limit: int = GATHER_LIMIT) -> list[T]:
    """Run concurrently, at most ``limit`` at a time; the results in order. Not all at once:
    started together, the operations of a decision over thousands of partitions (each
    encodes its znode and queues for the client's in-flight bound) would all take their
    first step in one turn of the event loop, a stall of tens to hundreds of ms. The first
    error is raised once the running ones are done; the ones not started are dropped."""
    items = list(awaitables)
    results: list[T | None] = [None] * len(items)
    pending = iter(enumerate(items))
    errors: list[BaseException] = []

    async def worker() -> None:
        for i, awaitable in pending:
            if errors:  # fail fast, as gather did: the rest are not started
                if inspect.iscoroutine(awaitable):
                    awaitable.close()
                continue
            try:
                results[i] = await awaitable
            except Exception as exc:
                errors.append(exc)

    await asyncio.gather(*(worker() for _ in range(min(limit, len(items)))))
    if errors:
        raise errors[0]
    return cast(list[T], results)  # every slot was filled


def _raise_first_error(results: Iterable[object]) -> None:
    """Raise the error of the op that made a transaction fail."""
    errors = [r for r in results if isinstance(r, ZkError)]
    cause = next((e for e in errors if not isinstance(e, ZkRolledBack)), None)
    if cause is not None:
        raise cause
    if errors:
        raise errors[0]


def _encode_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    lai = state.leader_and_isr
    return zd.PartitionState(lai.leader, lai.leader_epoch, lai.isr, state.controller_epoch,
                             int(lai.leader_recovery_state)).encode()


def _state(data: bytes | None, stat: ZnodeStat) -> LeaderIsrAndControllerEpoch:
    ps = zd.PartitionState.decode(data, stat.version)
    return LeaderIsrAndControllerEpoch(
        LeaderAndIsr(ps.leader, ps.leader_epoch, ps.isr,
                     LeaderRecoveryState(ps.leader_recovery_state), stat.version),
        ps.controller_epoch)


def _with_partition_epoch(state: LeaderIsrAndControllerEpoch,
                          version: int) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(state.leader_and_isr.with_partition_epoch(version),
                                       state.controller_epoch)


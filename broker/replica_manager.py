"""The partitions this broker hosts, their roles, and the produce and fetch paths over them.

``ReplicaManager`` (Kafka's ``ReplicaManager``) owns the ``Partition`` objects (role,
leader epoch, ISR, HW, LEO over storage's ``Log``), the produce purgatory (acks=all waits
for the HW) and the fetch purgatory (long polls wait for data).

Partitions appear, change role and go only by the controller's requests:

- ``become_leader_or_follower(LeaderAndIsr)``: refused whole (STALE_CONTROLLER_EPOCH)
  when its controller epoch is older than the last one seen; per partition, one whose log
  dir failed is KAFKA_STORAGE_ERROR whatever its epoch (the controller learns from it
  that the replica is offline, Kafka's ``HostedPartition.Offline``), a topic id
  that differs from the hosted log's is INCONSISTENT_TOPIC_ID, a leader epoch not newer
  than the current one is ignored with STALE_CONTROLLER_EPOCH (as Kafka answers), and a
  partition whose replicas do not include this broker is UNKNOWN_TOPIC_OR_PARTITION.
  The rest are opened (logs created in a worker thread, with their topic's LogConfig
  read from the topic store; producer state loaded in a few worker threads) and made
  leader or follower; a follower of a broker the
  metadata cache does not know as alive keeps its old role. Replica fetchers are removed
  for new leaders and followers and added for followers (``FetcherManager``); parked
  produce and fetch requests of partitions that stopped leading are answered; the
  ``on_leadership_change`` callback hears which partitions became leader or follower
  (the group coordinator loads or unloads ``__consumer_offsets`` partitions).
- ``stop_replicas(StopReplica)``: STALE_CONTROLLER_EPOCH as above; per partition, one whose
  log dir failed is KAFKA_STORAGE_ERROR and left as it is, delete or not (Kafka ignores
  StopReplica for an offline replica: its files stay in the failed dir, and the
  controller's topic deletion waits for the broker's restart); a leader epoch older than
  the current one is FENCED_LEADER_EPOCH (EPOCH_DURING_DELETE and -1 pass); the fetcher is
  removed, waiters answered and, with delete, the log deleted.
- ``maybe_update_metadata_cache(UpdateMetadata)``: STALE_CONTROLLER_EPOCH as above, else
  the metadata cache applies it; returns the deleted partitions.

They run one at a time (a state-change lock), as Kafka's ``replicaStateChangeLock``.

Errors for a partition that is not hosted come from the metadata cache:
NOT_LEADER_OR_FOLLOWER when the cluster has it (another broker's), else
UNKNOWN_TOPIC_OR_PARTITION.

Produce: each partition's records are validated and appended locally on the leader
(``Partition.append_records_as_leader``); with acks=-1 a ``DelayedProduce`` then waits
until the HW covers them. On one node the HW follows the LEO at once, so the operation
completes on its first try -- through the same path replication uses when followers move
the HW.

Fetch: a first read of every partition; if that is enough (``min_bytes``), or the request
may not wait, or an error came back, the answer goes at once; otherwise a ``DelayedFetch``
watches the partitions and is completed by the next append (``check_and_complete``) or by
``max_wait_ms``. Response limits follow KIP-74: partitions are read in request order, each
up to ``partition_max_bytes`` and what is left of ``max_bytes``; only the first partition
that has data may return one whole batch above those limits.

Thread-safety: none; the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from broker.delayed_ops import (
    DelayedFetch,
    DelayedProduce,
    FetchParams,
    FetchPartitionStatus,
    ProducePartitionStatus,
)
from broker.fetch_session import DEFAULT_MAX_SLOTS, FetchSessionCache
from broker.fetchers import FetcherManager, InitialFetchState, NoFetchers
from broker.heap import HeapFreezer
from broker.loop_slice import LoopSlice
from broker.metadata_cache import MetadataCache
from broker.partition import (
    CONSUMER_REPLICA_ID,
    NO_EPOCH,
    AppendResult,
    GroupResults,
    IsolationLevel,
    Partition,
    PartitionStateChange,
    PlainResults,
    ReadResult,
)
from broker.producer_state import LoadJob, load_states
from broker.purgatory import Purgatory
from broker.replication_quota import ReplicationQuota, apply_topic_configs
from broker.topics import INTERNAL_TOPICS
from controller.leader_and_isr import EPOCH_DURING_DELETE
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.topic_partition import TopicPartition
from storage.config import LogConfig
from storage.errors import LogDirOfflineError, LogIOError, StorageError
from storage.manager import LogManager
from storage.naming import TopicPartition as StorageTopicPartition

_new_tuple = tuple.__new__  # a NamedTuple's own __new__ is Python code; this is C

if TYPE_CHECKING:
    from broker.alter_partition import AlterPartitionManager
    from broker.metrics.topics import BrokerTopicStats

log = logging.getLogger(__name__)
# Enum members read on the per-request path, looked up once: on Python 3.11 a class
# attribute of an Enum costs a metaclass __getattr__ hook call (~10x a global read).
_NO_ERROR = ErrorCode.NO_ERROR

VALID_ACKS = (-1, 0, 1)
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
PRODUCER_ID_CHECK_INTERVAL_MS = 600_000  # producer.id.expiration.check.interval.ms
ZERO_UUID = uuid.UUID(int=0)
SNAPSHOT_THREADS = 8  # producer-state snapshot files written at once at shutdown
# A fetch of more partitions than this (a follower's, over all it follows here) is read,
# and its follower's offsets recorded, this many partitions at a time, the event loop given
# back in between when it was held for LoopSlice's few ms (``_fetch_many``).
FETCH_SLICE_PARTITIONS = 64
# A LeaderAndIsr logs the role changes of its first this many partitions at INFO, the
# others' at DEBUG (its one INFO line counts them all); a follower's fetch likewise its ISR
# expansions (with one INFO line for them all when there are more).
PER_PARTITION_INFO_MAX = 10
# An UpdateMetadata of more partition states than this is applied to the metadata cache in a
# worker thread (MetadataCache.update_metadata_off_loop): ~4 ms of CPU per 1,000 partitions.
METADATA_OFF_LOOP_PARTITIONS = 500

LeadershipCallback = Callable[[list[Partition], list[Partition]], None]
LogConfigSource = Callable[[str], Awaitable[LogConfig]]


def _log_level(logged: int) -> int:
    """The level of a partition's line (a role change in a LeaderAndIsr, an ISR expansion
    in a follower's fetch) after ``logged`` others of the same request: INFO for the first
    PER_PARTITION_INFO_MAX, DEBUG after (one INFO line sums them all up)."""
    return logging.INFO if logged < PER_PARTITION_INFO_MAX else logging.DEBUG


def _now_ms() -> int:
    return int(time.time() * 1000)


def leader_and_isr_states(request: LeaderAndIsrRequest
                          ) -> list[tuple[str, PartitionStateChange]]:
    """(topic, partition state) of every partition in a LeaderAndIsr of any version."""
    states = [(s.topic_name, s) for s in request.ungrouped_partition_states]
    states += [(t.topic_name, s) for t in request.topic_states for s in t.partition_states]
    return states


def leader_and_isr_error(request: LeaderAndIsrRequest, error: ErrorCode) -> LeaderAndIsrResponse:
    """The whole request refused (Kafka's ``getErrorResponse``): every partition gets it."""
    _R = LeaderAndIsrResponse
    return _R(error_code=error, topics=[
        _R.LeaderAndIsrTopicError(topic_id=t.topic_id, partition_errors=[
            _R.LeaderAndIsrPartitionError(topic_name=t.topic_name,
                                          partition_index=s.partition_index, error_code=error)
            for s in t.partition_states])
        for t in request.topic_states])


class StaleControllerEpochError(Exception):
    """A control request from a controller older than the last one seen (Kafka's
    ControllerMovedException; answered STALE_CONTROLLER_EPOCH)."""

    error_code = ErrorCode.STALE_CONTROLLER_EPOCH


class ReplicaManager:
    """See the module docstring.

    Slotted: with more than ~28 instance attributes CPython 3.11 gives an instance a plain
    dict instead of the shared-key one, and each attribute read becomes a dict lookup (the
    group append reads a few per turn, a single append a dozen per request)."""

    __slots__ = ("_checkpointed_hws", "_flushing", "_isr_expiration", "_last_producer_check_ms",
                 "_log_config", "_metadata_again", "_metadata_flush", "_shutting_down",
                 "_state_change_lock", "_topic_names", "alter_partition", "broker_id",
                 "controller_epoch", "fetch_purgatory", "fetch_sessions", "fetchers",
                 "follower_quota", "heap", "isr_expands", "isr_shrinks", "leader_quota",
                 "log_manager", "metadata_cache", "offline_partitions", "partitions",
                 "produce_purgatory", "producer_id_expiration_check_interval_ms",
                 "producer_id_expiration_ms", "replica_selector", "topic_stats")

    def __init__(self, log_manager: LogManager, metadata_cache: MetadataCache, *,
                 broker_id: int, log_config: LogConfigSource,
                 fetchers: FetcherManager | None = None,
                 fetch_session_cache_slots: int = DEFAULT_MAX_SLOTS,
                 producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
                 producer_id_expiration_check_interval_ms: int = PRODUCER_ID_CHECK_INTERVAL_MS,
                 ) -> None:
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.broker_id = broker_id
        self._log_config = log_config
        self.fetchers: FetcherManager = fetchers if fetchers is not None else NoFetchers()
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        self._last_producer_check_ms = _now_ms()
        self.fetch_sessions = FetchSessionCache(fetch_session_cache_slots)
        self.partitions: dict[TopicPartition, Partition] = {}
        self.offline_partitions: set[TopicPartition] = set()  # not opened: log dir offline
        self._topic_names: dict[uuid.UUID, str] = {}
        self._checkpointed_hws: dict[StorageTopicPartition, int] | None = None
        self._flushing: set[Partition] = set()
        # The background write of new partitions' partition.metadata files (one at a time;
        # _metadata_again: run once more when it ends).
        self._metadata_flush: asyncio.Future[int] | None = None
        self._metadata_again = False
        self.produce_purgatory: Purgatory[TopicPartition] = Purgatory("Produce")
        self.fetch_purgatory: Purgatory[TopicPartition] = Purgatory("Fetch")
        # Bytes/messages in and out per topic (broker.metrics.topics); None: not counted.
        self.topic_stats: BrokerTopicStats | None = None
        # ISR changes of partitions led here (Kafka's IsrShrinksPerSec / IsrExpandsPerSec),
        # counted when the controller commits the leader's AlterPartition.
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.controller_epoch = 0
        self._state_change_lock = asyncio.Lock()
        self._shutting_down = False
        # A cluster's leaders send ISR changes here (broker.alter_partition); None on a
        # single node, whose ISR never changes.
        self.alter_partition: AlterPartitionManager | None = None
        # replica.selector.class (KIP-392); None: consumers always read from the leader.
        self.replica_selector: str | None = None
        # Replica throttling (broker.replication_quota): unbounded unless configured.
        self.leader_quota = ReplicationQuota(None)
        self.follower_quota = ReplicationQuota(None)
        self._isr_expiration: asyncio.Task[None] | None = None
        # Frozen out of full garbage collections: the objects of the partitions hosted here.
        self.heap = HeapFreezer()

    # ------------------------------------------------------------ partitions

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get(_new_tuple(TopicPartition, (topic, partition)))

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return self._topic_names.get(topic_id)

    def unknown_partition_error(self, topic: str, partition: int) -> ErrorCode:
        """The error for a partition not hosted here: offline (its log dir failed before it
        could be opened), another broker's, or none at all."""
        if (topic, partition) in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.metadata_cache.contains((topic, partition)):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def high_watermarks(self) -> dict[StorageTopicPartition, int]:
        """For replication-offset-checkpoint (LogManager.write_high_watermarks / shutdown)."""
        return {StorageTopicPartition(t, i): p.high_watermark
                for (t, i), p in self.partitions.items()}

    def _count_isr_change(self, expanded: bool, shrunk: bool) -> None:
        """A leader's ISR change was committed (Kafka marks IsrExpandsPerSec or
        IsrShrinksPerSec when its AlterPartition succeeds)."""
        self.isr_expands += expanded
        self.isr_shrinks += shrunk

    def mark_offline(self, tp: TopicPartition) -> None:
        """The partition's log could not be opened (its log dir is offline): it answers
        KAFKA_STORAGE_ERROR, as Kafka's offline partitions do, until a restart."""
        self.offline_partitions.add(tp)

    def handle_log_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        """A log dir went offline (Kafka's ``handleLogDirFailure``): its partitions' logs
        refuse every call, so they answer KAFKA_STORAGE_ERROR; parked produce and fetch
        requests on them are answered now; followers among them stop fetching, leaders
        among them stop deciding their ISR (the controller moves them). Returns those
        partitions. On the loop."""
        offline = [tp for tp, p in self.partitions.items() if p.log.log_dir == log_dir]
        self.fetchers.remove_fetchers(offline)
        for tp in offline:
            self.produce_purgatory.check_and_complete(tp)
            self.fetch_purgatory.check_and_complete(tp)
        return offline


    def update_log_config(self, topic: str, log_config: LogConfig) -> None:
        """A topic's config changed: its hosted logs (and so partitions) use the new one,
        and its throttled replicas are the ones it names now."""
        for (t, _), p in self.partitions.items():
            if t == topic:
                p.log.update_config(log_config)
        apply_topic_configs(self.leader_quota, self.follower_quota, topic, log_config.other,
                            self.broker_id)

    # ------------------------------------------------------------ controller requests

    async def become_leader_or_follower(
        self, request: LeaderAndIsrRequest,
        on_leadership_change: LeadershipCallback | None = None,
    ) -> LeaderAndIsrResponse:
        """Apply a LeaderAndIsr (see the module docstring)."""
        async with self._state_change_lock:
            if request.controller_epoch < self.controller_epoch:
                log.warning("Ignoring LeaderAndIsr from controller %d with epoch %d: the latest "
                            "known controller epoch is %d", request.controller_id,
                            request.controller_epoch, self.controller_epoch)
                return leader_and_isr_error(request, ErrorCode.STALE_CONTROLLER_EPOCH)
            self.controller_epoch = request.controller_epoch
            topic_ids = {t.topic_name: t.topic_id for t in request.topic_states}
            errors: dict[TopicPartition, ErrorCode] = {}
            to_lead: dict[TopicPartition, PartitionStateChange] = {}
            to_follow: dict[TopicPartition, PartitionStateChange] = {}
            work = LoopSlice()  # thousands of partitions: the loop serves others meanwhile
            for topic, state in leader_and_isr_states(request):
                await work.pause()
                tp = TopicPartition(topic, state.partition_index)
                errors[tp] = self._check_leader_and_isr(tp, state, topic_ids.get(topic, ZERO_UUID))
                if errors[tp] is ErrorCode.NO_ERROR:
                    (to_lead if state.leader == self.broker_id else to_follow)[tp] = state
            states = {**to_lead, **to_follow}
            opened = await self._open_partitions(
                [tp for tp in states if tp not in self.partitions], topic_ids,
                {tp for tp, state in states.items() if state.is_new})
            for tp, error in opened.items():
                errors[tp] = error
                to_lead.pop(tp, None)
                to_follow.pop(tp, None)
            leaders = await self._make_leaders(to_lead, work)
            followers = await self._make_followers(to_follow, work)
            self.heap.settle()
            log.info("LeaderAndIsr from controller %d epoch %d: %d partitions, %d new leaders,"
                     " %d new followers", request.controller_id, request.controller_epoch,
                     len(errors), len(leaders), len(followers))
            if on_leadership_change is not None:
                on_leadership_change(leaders, followers)
            response = LeaderAndIsrResponse(error_code=ErrorCode.NO_ERROR)
            by_topic: dict[str, LeaderAndIsrResponse.LeaderAndIsrTopicError] = {}
            for tp, error in errors.items():
                await work.pause()
                topic_error = by_topic.get(tp.topic)
                if topic_error is None:
                    topic_error = by_topic[tp.topic] = LeaderAndIsrResponse.LeaderAndIsrTopicError(
                        topic_id=topic_ids.get(tp.topic, ZERO_UUID))
                    response.topics.append(topic_error)
                topic_error.partition_errors.append(LeaderAndIsrResponse.LeaderAndIsrPartitionError(
                    topic_name=tp.topic, partition_index=tp.partition, error_code=error))
            return response

    def _check_leader_and_isr(self, tp: TopicPartition, state: PartitionStateChange,
                              request_topic_id: uuid.UUID) -> ErrorCode:
        existing = self.partitions.get(tp)
        if tp in self.offline_partitions or (existing is not None and existing.log.offline):
            log.warning("Ignoring LeaderAndIsr for %s: the local replica is in an offline log"
                        " directory", tp)
            return ErrorCode.KAFKA_STORAGE_ERROR
        current_epoch = existing.leader_epoch if existing is not None else NO_EPOCH
        if request_topic_id != ZERO_UUID:
            if existing is not None:
                hosted_id: uuid.UUID | None = existing.topic_id
            else:
                on_disk = self.log_manager.get_log(StorageTopicPartition(*tp))
                hosted_id = (uuid.UUID(bytes=on_disk.topic_id)
                             if on_disk is not None and on_disk.topic_id is not None else None)
            if hosted_id is not None and hosted_id != ZERO_UUID and hosted_id != request_topic_id:
                log.error("%s: topic id %s does not match the hosted log's %s", tp,
                          request_topic_id, hosted_id)
                return ErrorCode.INCONSISTENT_TOPIC_ID
        if state.leader_epoch > current_epoch:
            if self.broker_id in state.replicas:
                return ErrorCode.NO_ERROR
            log.warning("Ignoring LeaderAndIsr for %s: this broker is not among its replicas"
                        " %s", tp, state.replicas)
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        log.info("Ignoring LeaderAndIsr for %s: its leader epoch %d is not newer than %d", tp,
                 state.leader_epoch, current_epoch)
        return ErrorCode.STALE_CONTROLLER_EPOCH

    async def _open_partitions(self, new: list[TopicPartition],
                               topic_ids: Mapping[str, uuid.UUID],
                               is_new: set[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Create (or open) the logs of partitions not hosted yet and host them; returns
        the partitions that failed (KAFKA_STORAGE_ERROR). A partition not ``is_new`` (the
        controller says it existed) is not created afresh while a log dir that may hold
        it is offline (Kafka's rule); it is then offline itself."""
        if not new:
            return {}
        configs = {topic: await self._log_config(topic) for topic in {tp.topic for tp in new}}

        def create_logs() -> dict[TopicPartition, StorageError]:
            failed: dict[TopicPartition, StorageError] = {}
            for tp in new:
                topic_id = topic_ids.get(tp.topic, ZERO_UUID)
                try:
                    self.log_manager.get_or_create_log(
                        StorageTopicPartition(*tp), configs[tp.topic],
                        topic_id=None if topic_id == ZERO_UUID else topic_id.bytes,
                        is_new=tp in is_new)
                except StorageError as exc:
                    failed[tp] = exc
            return failed

        # mkdir, segment files; no fsync: partition.metadata is written in the background
        # (Kafka's semantics: storage.partition_metadata), the topic id is recorded now.
        failed = await asyncio.to_thread(create_logs)
        self._write_partition_metadata_soon()
        if self._checkpointed_hws is None:
            self._checkpointed_hws = self.log_manager.read_high_watermarks()
        errors: dict[TopicPartition, ErrorCode] = {}
        opened: list[Partition] = []
        loads: dict[Partition, LoadJob] = {}
        work = LoopSlice()
        for tp in new:
            if tp in failed:
                if isinstance(failed[tp], LogIOError | LogDirOfflineError):  # storage logged it
                    log.debug("%s: cannot create its log: %s", tp, failed[tp])
                else:
                    log.error("%s: cannot create its log: %s", tp, failed[tp])
                errors[tp] = failed[tp].error_code
                if isinstance(failed[tp], LogDirOfflineError):
                    self.mark_offline(tp)
                continue
            plog = self.log_manager.get_log(StorageTopicPartition(*tp))
            if plog is None:
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            plog.update_config(configs[tp.topic])
            apply_topic_configs(self.leader_quota, self.follower_quota, tp.topic,
                                configs[tp.topic].other, self.broker_id)
            topic_id = topic_ids.get(tp.topic, ZERO_UUID)
            if topic_id == ZERO_UUID and plog.topic_id is not None:
                topic_id = uuid.UUID(bytes=plog.topic_id)
            p = Partition(tp.topic, tp.partition, topic_id, plog, broker_id=self.broker_id,
                          high_watermark=self._checkpointed_hws.get(StorageTopicPartition(*tp), 0))
            if self.alter_partition is not None:
                p.isr_change_sender = self.alter_partition.submit
                p.isr_change_listener = self._count_isr_change
            p.is_broker_eligible = self.metadata_cache.has_alive_broker
            fresh, plog.fresh_directory = plog.fresh_directory, False
            if not fresh:  # a new dir has no snapshot and no log to replay
                loads[p] = LoadJob(p.producer_state, p.log_start_offset, p.log_end_offset,
                                   p.batches_from)
            opened.append(p)
            self.heap.hosted()  # its log and state made: counted for the next freeze
            await work.pause()  # a topic of many partitions does not stall other clients
        # Producer state: snapshot files read and decoded, the log after them replayed, in
        # worker threads (LOAD_THREADS at a time), not on the loop (10,000 partitions at
        # start-up). The partitions are not hosted yet: nothing else touches their state.
        replayed = dict(zip(loads, await asyncio.to_thread(load_states, list(loads.values())),
                            strict=True)) if loads else {}
        for p in opened:  # hosted in order; a failed load raises, as on the loop before
            await work.pause()
            done = replayed.get(p, 0)
            if isinstance(done, Exception):
                raise done
            if done:
                log.info("%s: producer state rebuilt, %d batches replayed from the log",
                         p.topic_partition, done)
            self.partitions[p.topic_partition] = p
            if p.topic_id != ZERO_UUID:
                self._topic_names[p.topic_id] = p.topic
        return errors

    def _write_partition_metadata_soon(self) -> None:
        """Write the recorded topic ids of new logs (``LogManager.flush_partition_metadata``)
        in a worker thread, after the LeaderAndIsr answer rather than before it."""
        if self._metadata_flush is not None:
            self._metadata_again = True
            return
        future = asyncio.get_running_loop().run_in_executor(
            None, self.log_manager.flush_partition_metadata)
        self._metadata_flush = future

        def done(f: asyncio.Future[int]) -> None:
            self._metadata_flush = None
            exc = None if f.cancelled() else f.exception()
            if exc is not None:
                log.error("writing partition.metadata files failed: %r", exc)
            if self._metadata_again and not self._shutting_down:
                self._metadata_again = False
                self._write_partition_metadata_soon()

        future.add_done_callback(done)

    async def _make_leaders(self, states: Mapping[TopicPartition, PartitionStateChange],
                            work: LoopSlice) -> list[Partition]:
        """Each partition's step is whole between two yields of ``work``."""
        if not states:
            return []
        self.fetchers.remove_fetchers(states)
        now = _now_ms()
        leaders = []
        for i, (tp, state) in enumerate(states.items()):
            await work.pause()
            p = self.partitions[tp]
            await p.settled()  # a truncation its fetcher began finishes first
            if p.make_leader(state, now, _log_level(i)):
                leaders.append(p)
            self._complete_delayed(tp)  # the HW may have moved (a smaller ISR)
        return leaders

    async def _make_followers(self, states: Mapping[TopicPartition, PartitionStateChange],
                              work: LoopSlice) -> list[Partition]:
        """Roles first (a follower without its fetcher yet answers clients
        NOT_LEADER_OR_FOLLOWER, as it should), then the fetchers, all at once."""
        if not states:
            return []
        followers: list[Partition] = []
        for i, (tp, state) in enumerate(states.items()):
            await work.pause()
            p = self.partitions[tp]
            await p.settled()  # a truncation its fetcher began finishes first
            if not self.metadata_cache.has_alive_broker(state.leader):
                log.error("%s: cannot become follower: the new leader %d is not alive in the "
                          "metadata cache", tp, state.leader)
                continue
            if p.make_follower(state, _log_level(i)):
                followers.append(p)
        self.fetchers.remove_fetchers(p.topic_partition for p in followers)
        for p in followers:  # requests parked on the old leader answer now
            await work.pause()
            self._complete_delayed(p.topic_partition)
        if not self._shutting_down and followers:
            self.fetchers.add_fetchers({
                p.topic_partition: InitialFetchState(
                    p.topic_id, state.leader, p.leader_epoch,
                    p.log_end_offset if p.log.latest_epoch() is not None else p.high_watermark)
                for p in followers for state in (states[p.topic_partition],)})
        return followers

    async def stop_replicas(self, request: StopReplicaRequest
                            ) -> tuple[dict[TopicPartition, ErrorCode], ErrorCode]:
        """Apply a StopReplica (see the module docstring): (partition errors, error)."""
        async with self._state_change_lock:
            if request.controller_epoch < self.controller_epoch:
                log.warning("Ignoring StopReplica from controller %d with epoch %d: the latest "
                            "known controller epoch is %d", request.controller_id,
                            request.controller_epoch, self.controller_epoch)
                return {}, ErrorCode.STALE_CONTROLLER_EPOCH
            self.controller_epoch = request.controller_epoch
            errors: dict[TopicPartition, ErrorCode] = {}
            stopped: list[tuple[TopicPartition, bool]] = []
            for ts in request.topic_states:
                for ps in ts.partition_states:
                    tp = TopicPartition(ts.topic_name, ps.partition_index)
                    p = self.partitions.get(tp)
                    epoch = ps.leader_epoch
                    if tp in self.offline_partitions or (p is not None and p.log.offline):
                        log.warning("Ignoring StopReplica (delete=%s) for %s: the local replica"
                                    " is in an offline log dir", ps.delete_partition, tp)
                        errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                    elif (p is None or epoch in (EPOCH_DURING_DELETE, NO_EPOCH)
                            or epoch >= p.leader_epoch):
                        stopped.append((tp, ps.delete_partition))
                        errors[tp] = ErrorCode.NO_ERROR
                    else:
                        log.warning("Ignoring StopReplica for %s: leader epoch %d is older than"
                                    " %d", tp, epoch, p.leader_epoch)
                        errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
            self.fetchers.remove_fetchers(tp for tp, _ in stopped)
            for tp, delete in stopped:
                if delete:
                    errors[tp] = await self._delete_partition(tp)
                else:
                    self._complete_delayed(tp)
            log.info("StopReplica from controller %d epoch %d: %d partitions stopped",
                     request.controller_id, request.controller_epoch, len(stopped))
            return errors, ErrorCode.NO_ERROR

    async def _delete_partition(self, tp: TopicPartition) -> ErrorCode:
        hosted = self.partitions.get(tp)
        if hosted is not None:
            await hosted.settled()  # a truncation its fetcher began finishes first
        p = self.partitions.pop(tp, None)
        if p is not None:
            self.heap.removed()
        if p is not None and not any(t == tp.topic for t, _ in self.partitions):
            self._topic_names.pop(p.topic_id, None)
            if self.topic_stats is not None:
                self.topic_stats.remove_topic(tp.topic, [p])
        self._complete_delayed(tp)  # waiters find the partition gone and answer an error
        try:
            # Closing files, renaming the directory and an fsync: off the event loop.
            await asyncio.to_thread(self.log_manager.delete_log, StorageTopicPartition(*tp))
        except (StorageError, OSError) as exc:
            log.error("%s: deleting its log failed: %s", tp, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NO_ERROR

    async def maybe_update_metadata_cache(self, request: UpdateMetadataRequest
                                          ) -> list[TopicPartition]:
        """Apply an UpdateMetadata to the cache; the partitions it deleted. Raises
        ``StaleControllerEpochError`` for an older controller epoch."""
        async with self._state_change_lock:
            if request.controller_epoch < self.controller_epoch:
                log.warning("Ignoring UpdateMetadata from controller %d with epoch %d: the "
                            "latest known controller epoch is %d", request.controller_id,
                            request.controller_epoch, self.controller_epoch)
                raise StaleControllerEpochError(
                    f"controller epoch {request.controller_epoch} < {self.controller_epoch}")
            if (sum(len(t.partition_states) for t in request.topic_states)
                    + len(request.ungrouped_partition_states)) > METADATA_OFF_LOOP_PARTITIONS:
                deleted = await self.metadata_cache.update_metadata_off_loop(request)
            else:
                deleted = self.metadata_cache.update_metadata(request)
            self.controller_epoch = request.controller_epoch
            return deleted

    def _complete_delayed(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    # ------------------------------------------------------------ produce

    async def append_records(
        self, *, timeout_ms: int, required_acks: int, produce_version: int,
        entries: Iterable[tuple[TopicPartition, memoryview | bytes | None]],
        internal_topics_allowed: bool = True,
    ) -> dict[TopicPartition, AppendResult]:
        """Append every partition's records; with acks=-1 wait for the HW (or timeout).

        Client produce passes ``internal_topics_allowed=False``: an append to an internal
        topic (``__consumer_offsets``) is then INVALID_TOPIC_EXCEPTION, as in Kafka; the
        broker's own writers (the group coordinator) keep the default.
        """
        results: dict[TopicPartition, AppendResult] = {}
        if required_acks not in VALID_ACKS:
            for tp, _ in entries:
                results[tp] = AppendResult(ErrorCode.INVALID_REQUIRED_ACKS)
            return results
        appended: list[TopicPartition] = []
        for tp, records in entries:
            result = self._append_entry(tp, records, produce_version, required_acks,
                                        internal_topics_allowed)
            results[tp] = result
            if result.error is _NO_ERROR:
                appended.append(tp)
        for tp in appended:
            self._after_append(tp)
        self._maybe_expire_producers()
        if required_acks != -1 or not appended:
            return results
        statuses = {
            tp: ProducePartitionStatus(results[tp].last_offset + 1, results[tp], True)
            for tp in appended
        }
        op = DelayedProduce(max(timeout_ms, 0), statuses, self.partitions.get)
        if not self.produce_purgatory.try_complete_else_watch(op, appended):
            await op.wait()
        return results

    def append_single(self, tp: TopicPartition, records: memoryview | bytes | None,
                      produce_version: int, required_acks: int) -> AppendResult:
        """``append_records`` of one client partition with acks 0 or 1, which never
        waits (the produce fast path): the same checks and steps, in the same order."""
        assert required_acks in (0, 1)
        result = self._append_entry(tp, records, produce_version, required_acks, False)
        if result.error is _NO_ERROR:
            self._after_append(tp)
        self._maybe_expire_producers()
        return result

    def append_group(self, tp: TopicPartition, records: list[memoryview | bytes | None],
                     produce_version: int) -> GroupResults:
        """``append_single`` (acks=1) of several requests' records for one partition, in
        order, with the answers ``append_single`` would give each one after the other
        (``Partition.append_records_group``); what waits for data on ``tp`` is woken, and
        idle producers expired, once after all of them."""
        if len(records) == 1:
            return [self.append_single(tp, records[0], produce_version, 1)]
        p = self.partitions.get(tp)
        results: GroupResults
        if tp[0] in INTERNAL_TOPICS or p is None:
            results = [self._append_entry(tp, r, produce_version, 1, False) for r in records]
        else:
            results = p.append_records_group(records, produce_version)
            if self.topic_stats is not None:
                for r, result in zip(records, results, strict=True):
                    self.topic_stats.on_append(p, 0 if r is None else len(r), result)
        # (a plain group's: every one appended, none made to ask)
        appended = type(results) is PlainResults
        if not appended:
            for result in results:
                if result.error is _NO_ERROR:
                    appended = True
                    break
        if appended:
            self._after_append(tp)
        self._maybe_expire_producers()
        return results

    def _append_entry(self, tp: TopicPartition, records: memoryview | bytes | None,
                      produce_version: int, required_acks: int,
                      internal_topics_allowed: bool) -> AppendResult:
        p = self.partitions.get(tp)
        if not internal_topics_allowed and tp[0] in INTERNAL_TOPICS:
            return AppendResult(ErrorCode.INVALID_TOPIC,
                                error_message=f"Cannot append to internal topic {tp[0]}")
        if p is None:
            return AppendResult(self.unknown_partition_error(*tp))
        result = p.append_records_as_leader(records, produce_version, required_acks)
        if self.topic_stats is not None:
            self.topic_stats.on_append(p, 0 if records is None else len(records), result)
        return result

    def _after_append(self, tp: TopicPartition) -> None:
        """Complete what waited for data on ``tp``; background flush/snapshot if due."""
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)
        p = self.partitions[tp]
        if p.needs_flush or p.snapshot_due:  # (checked again there; most appends need neither)
            self._maybe_flush(p)

    def _maybe_expire_producers(self) -> None:
        now = int(time.time() * 1000)  # _now_ms(), inline: once per produce
        if now - self._last_producer_check_ms >= self.producer_id_expiration_check_interval_ms:
            self._last_producer_check_ms = now
            self.expire_producers(now)

    def _maybe_flush(self, p: Partition) -> None:
        """Background disk work after an append, in the default thread pool, at most one
        job per partition at a time: the fsync the log asked for (flush.messages reached,
        or a roll) and, after a roll, a producer-state snapshot (encoded here, on the
        loop, so the thread never reads state the loop is changing)."""
        if not (p.needs_flush or p.snapshot_due) or p in self._flushing:
            return
        flush, p.needs_flush = p.needs_flush, False
        snapshot: tuple[int, bytes] | None = None
        if p.snapshot_due:
            p.snapshot_due = False
            snapshot = (p.log_end_offset, p.producer_state.snapshot_bytes())
        self._flushing.add(p)

        def work() -> None:
            if flush:
                p.log.flush()
            if snapshot is not None:
                try:
                    p.producer_state.write_snapshot(*snapshot)
                except OSError as exc:
                    raise p.log.io_failed("producer state snapshot", exc) from exc

        future = asyncio.get_running_loop().run_in_executor(None, work)

        def done(f: asyncio.Future[None]) -> None:
            self._flushing.discard(p)
            exc = None if f.cancelled() else f.exception()
            if isinstance(exc, StorageError):  # a disk error: storage logged it
                log.debug("%s-%d: background flush/snapshot failed: %s", p.topic, p.partition, exc)
            elif exc is not None:
                log.error("%s-%d: background flush/snapshot failed: %s", p.topic, p.partition,
                          exc)

        future.add_done_callback(done)

    def expire_producers(self, now_ms: int) -> int:
        """Forget producers silent for producer.id.expiration.ms (1 day), and those whose
        data retention or DeleteRecords removed (Kafka's periodic producer expiration).
        Runs on the loop from the produce path every
        producer.id.expiration.check.interval.ms (10 min); returns how many went."""
        removed = 0
        for p in self.partitions.values():
            removed += p.producer_state.remove_expired(now_ms, self.producer_id_expiration_ms)
            removed += p.producer_state.remove_before(p.log_start_offset)
        if removed:
            log.info("expired %d producer ids", removed)
        return removed

    def on_high_watermark_moved(self, tp: TopicPartition) -> None:
        """Replication hook: a follower's fetch (or a committed ISR) moved the HW."""
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    def after_follower_append(self, partition: Partition) -> None:
        """A replica fetcher appended to (or truncated, or moved the HW of) a follower:
        background flush/snapshot as after a leader's append; consumers reading from this
        follower (KIP-392) may have data now."""
        self._maybe_flush(partition)
        self.fetch_purgatory.check_and_complete(partition.topic_partition)

    # ------------------------------------------------------------ ISR expiration

    def start_isr_expiration(self, max_lag_ms: int) -> None:
        """Every ``replica.lag.time.max.ms`` / 2, leaders drop followers that stopped
        keeping up (Kafka's ``isr-expiration`` task)."""
        if self._isr_expiration is None:
            self._isr_expiration = asyncio.get_running_loop().create_task(
                self._expire_isr(max_lag_ms), name=f"isr-expiration-{self.broker_id}")

    async def _expire_isr(self, max_lag_ms: int) -> None:
        interval = max(0.01, max_lag_ms / 2000)
        while not self._shutting_down:  # one pass over the partitions per interval
            await asyncio.sleep(interval)
            now = _now_ms()
            for p in list(self.partitions.values()):
                if p.is_leader and not p.log.offline:  # a failed dir's leader is moved away
                    p.maybe_shrink_isr(now, max_lag_ms)

    async def stop_replication(self) -> None:
        """Stop the fetchers, the ISR expiration and the AlterPartition sender (shutdown)."""
        self._shutting_down = True
        if self._isr_expiration is not None:
            self._isr_expiration.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._isr_expiration
        await self.fetchers.shutdown()
        if self.alter_partition is not None:
            await self.alter_partition.shutdown()

    # ------------------------------------------------------------ fetch

    def read_all(self, params: FetchParams, statuses: list[FetchPartitionStatus],
                 min_one_message: bool = True) -> list[ReadResult]:
        """Read every partition once, with the KIP-74 byte limits (see the module docstring);
        ``min_one_message`` False: an earlier read of the same fetch already has data."""
        results: list[ReadResult] = []
        remaining = params.max_bytes
        for s in statuses:
            p = self.get_partition(s.topic, s.partition)
            if p is None:
                results.append(ReadResult(self.unknown_partition_error(s.topic, s.partition)))
                continue
            if params.client_rack and self.replica_selector is not None and p.is_leader:
                preferred = self._preferred_read_replica(p, s.fetch_offset, params.client_rack)
                if preferred is not None:
                    results.append(ReadResult(ErrorCode.NO_ERROR, p.high_watermark,
                                              p.last_stable_offset, p.log_start_offset,
                                              preferred_read_replica=preferred))
                    continue
            if (params.replica_id >= 0 and p.is_leader and params.replica_id not in p.isr
                    and self.leader_quota.is_throttled(p.topic_partition)
                    and self.leader_quota.is_quota_exceeded()):
                # Throttled (leader.replication.throttled.*): nothing for this follower now.
                results.append(ReadResult(ErrorCode.NO_ERROR, p.high_watermark,
                                          p.last_stable_offset, p.log_start_offset))
                continue
            limit = max(0, min(s.max_bytes, remaining))
            result = p.read(s.fetch_offset, limit, replica_id=params.replica_id,
                            isolation=params.isolation, min_one_message=min_one_message,
                            current_leader_epoch=s.current_leader_epoch,
                            follower_reads=params.follower_reads)
            size = result.size_bytes
            if size > 0:
                min_one_message = False
                remaining = max(0, remaining - size)
            results.append(result)
        return results

    def read_consumer(self, topic: str, partition: int, fetch_offset: int, max_bytes: int,
                      isolation: IsolationLevel, current_leader_epoch: int,
                      follower_reads: bool) -> ReadResult:
        """``read_all`` of one partition for a consumer without a rack id (the fetch fast
        path's read: no replica to prefer, no follower throttle, the first batch whole),
        without the FetchParams and statuses it takes; ``max_bytes`` is the partition's
        limit already capped by the request's."""
        p = self.partitions.get(_new_tuple(TopicPartition, (topic, partition)))
        if p is None:
            return ReadResult(self.unknown_partition_error(topic, partition))
        return p.read(fetch_offset, max_bytes, replica_id=CONSUMER_REPLICA_ID,
                      isolation=isolation, min_one_message=True,
                      current_leader_epoch=current_leader_epoch,
                      follower_reads=follower_reads)

    def _update_follower_fetch_states(self, replica_id: int,
                                      statuses: list[FetchPartitionStatus],
                                      expanded: int = 0) -> int:
        """A follower's fetch says how far it has copied each partition (Kafka's
        ``updateFollowerFetchState``): only for partitions led here at the epoch it names
        and offsets within the log. Returns ``expanded`` (the ISR expansions this fetch
        asked for before) plus those asked for here; each is logged at ``_log_level``."""
        now = _now_ms()
        for s in statuses:
            p = self.get_partition(s.topic, s.partition)
            if (p is None or not p.is_leader
                    or p.check_leader_epoch(s.current_leader_epoch) is not ErrorCode.NO_ERROR
                    or s.fetch_offset > p.log_end_offset):
                continue
            pending = p.pending_isr
            if p.update_follower_fetch_state(replica_id, s.fetch_offset, now,
                                             _log_level(expanded)):
                self.on_high_watermark_moved(p.topic_partition)
            if pending is None and p.pending_isr is not None:
                expanded += 1
        return expanded

    def _log_expansions(self, replica_id: int, expanded: int) -> None:
        if expanded > PER_PARTITION_INFO_MAX:
            log.info("Fetch of follower %d: %d partitions' ISR expanding (the first %d "
                     "above, the others at DEBUG)", replica_id, expanded,
                     PER_PARTITION_INFO_MAX)

    def _preferred_read_replica(self, p: Partition, fetch_offset: int,
                                client_rack: str) -> int | None:
        """KIP-392 on the leader: the replica a consumer in ``client_rack`` should read
        from, if not this one. Candidates are alive in-sync followers holding
        ``fetch_offset`` (Kafka's ``findPreferredReadReplica``); the selector
        (``replica.selector.class``: Kafka's ``RackAwareReplicaSelector``) prefers the
        leader when it is in the client's rack, else the most caught-up candidate there."""
        racks: dict[int, str | None] = {}
        for replica in p.isr:
            if replica == self.broker_id:
                continue
            state = p.follower_states.get(replica)
            broker = self.metadata_cache.alive_broker(replica)
            if (state is None or broker is None or state.log_end_offset < fetch_offset
                    or fetch_offset < p.log_start_offset):
                continue
            racks[replica] = broker.rack
        me = self.metadata_cache.alive_broker(self.broker_id)
        if me is not None and me.rack == client_rack:
            return None
        in_rack = [r for r, rack in racks.items() if rack == client_rack]
        if not in_rack:
            return None
        return max(in_rack, key=lambda r: (p.follower_states[r].log_end_offset, -r))

    async def fetch_messages(self, params: FetchParams,
                             statuses: list[FetchPartitionStatus]) -> list[ReadResult]:
        """Read now, or wait (long poll) for ``min_bytes`` up to ``max_wait_ms``."""
        if len(statuses) > FETCH_SLICE_PARTITIONS:
            return await self._fetch_many(params, statuses)
        if params.replica_id >= 0:
            self._log_expansions(params.replica_id, self._update_follower_fetch_states(
                params.replica_id, statuses))
        results = self.read_all(params, statuses)
        total = sum(r.size_bytes for r in results)
        any_error = any(r.error is not ErrorCode.NO_ERROR for r in results)
        if (params.max_wait_ms <= 0 or not statuses or total >= params.min_bytes or any_error):
            return self._counted(params, statuses, results)
        op = DelayedFetch(params, statuses, self.get_partition, self.read_all)
        keys = [TopicPartition(s.topic, s.partition) for s in statuses]
        # op.reusable: the read just made is the one try_complete would make, and nothing
        # ran in between, so trying once more before watching could only find the same.
        purgatory = self.fetch_purgatory
        if not (purgatory.watch(op, keys) if op.reusable
                else purgatory.try_complete_else_watch(op, keys)):
            await op.wait()
        return self._counted(params, statuses, op.results)

    async def _fetch_many(self, params: FetchParams,
                          statuses: list[FetchPartitionStatus]) -> list[ReadResult]:
        """``fetch_messages`` of more than ``FETCH_SLICE_PARTITIONS`` partitions (a
        follower's fetch over all it follows here): the same steps, each over
        ``FETCH_SLICE_PARTITIONS`` partitions at a time with the loop given back in between
        (``LoopSlice``), and the read after the wait made here, sliced too, not by the
        completion (on the loop in one go: a timer's or an append's callback)."""
        work = LoopSlice()
        n = FETCH_SLICE_PARTITIONS
        if params.replica_id >= 0:
            expanded = 0
            for start in range(0, len(statuses), n):
                await work.pause()
                expanded = self._update_follower_fetch_states(
                    params.replica_id, statuses[start:start + n], expanded)
            self._log_expansions(params.replica_id, expanded)
        results = await self._read_all_sliced(params, statuses, work)
        total = sum(r.size_bytes for r in results)
        any_error = any(r.error is not ErrorCode.NO_ERROR for r in results)
        if params.max_wait_ms <= 0 or total >= params.min_bytes or any_error:
            return self._counted(params, statuses, results)
        op = DelayedFetch(params, statuses, self.get_partition, self.read_all,
                          read_on_complete=False)
        keys = [TopicPartition(s.topic, s.partition) for s in statuses]
        await work.pause()
        # Tried again before it watches: data may have come for a partition read before a
        # pause above.
        if not self.fetch_purgatory.try_complete_else_watch(op, keys):
            await op.wait()
        return self._counted(params, statuses,
                             await self._read_all_sliced(params, statuses, LoopSlice()))

    async def _read_all_sliced(self, params: FetchParams, statuses: list[FetchPartitionStatus],
                               work: LoopSlice) -> list[ReadResult]:
        """``read_all``, ``FETCH_SLICE_PARTITIONS`` partitions at a time with the loop given
        back in between; the KIP-74 limits carried from one slice to the next."""
        results: list[ReadResult] = []
        remaining = params.max_bytes
        min_one_message = True  # until a partition has data
        n = FETCH_SLICE_PARTITIONS
        for start in range(0, len(statuses), n):
            await work.pause()
            read = self.read_all(replace(params, max_bytes=remaining), statuses[start:start + n],
                                 min_one_message)
            size = sum(r.size_bytes for r in read)
            if size > 0:
                min_one_message = False
                remaining = max(0, remaining - size)
            results += read
        return results

    def _counted(self, params: FetchParams, statuses: list[FetchPartitionStatus],
                 results: list[ReadResult]) -> list[ReadResult]:
        """Count the answered reads in the topic stats (when on) and a follower's bytes of
        throttled partitions in the leader's quota; returns ``results``."""
        if params.replica_id >= 0 and self.leader_quota.bound is not None:
            self.leader_quota.record(sum(
                r.size_bytes for s, r in zip(statuses, results, strict=True)
                if self.leader_quota.is_throttled(TopicPartition(s.topic, s.partition))))
        stats = self.topic_stats
        if stats is not None:
            follower = params.replica_id >= 0
            for s, result in zip(statuses, results, strict=True):
                p = self.get_partition(s.topic, s.partition)
                if p is not None:
                    stats.on_read(p, result, follower=follower)
        return results

    # ------------------------------------------------------------ shutdown

    def complete_delayed_operations(self) -> int:
        """Answer every parked request now, as expired (long polls return what they have,
        acks=all waits answer REQUEST_TIMED_OUT), and refuse to park new ones. Call it
        before draining in-flight requests at shutdown, so no request waits out its delay.
        Returns how many operations were completed."""
        self._shutting_down = True  # no new fetchers from here on
        return self.produce_purgatory.shutdown() + self.fetch_purgatory.shutdown()

    def shutdown(self) -> None:
        """Complete parked requests (if not done yet), then snapshot producer state.

        Blocking (snapshot files are fsynced, ``SNAPSHOT_THREADS`` at a time): after the
        network stopped and before ``LogManager.shutdown(self.high_watermarks())``, which
        makes them durable (``write_snapshots``). The broker's ordered shutdown uses
        ``shutdown_off_loop`` instead."""
        self.complete_delayed_operations()
        write_snapshots(self.shutdown_snapshots())

    async def shutdown_off_loop(self) -> None:
        """``shutdown`` with the snapshot files written in worker threads: the state is
        encoded on the loop (it owns it), the files are written and fsynced off it."""
        self.complete_delayed_operations()
        if self._metadata_flush is not None:  # the logs' close writes what it leaves
            await asyncio.wait([self._metadata_flush])
        await asyncio.to_thread(write_snapshots, self.shutdown_snapshots())

    def shutdown_snapshots(self) -> list[SnapshotJob]:
        """Every hosted partition's producer state, encoded at its log end (in memory;
        the loop's view of it). Partitions on a failed disk are left out: the next start
        replays their log."""
        return [SnapshotJob(p, p.log_end_offset, p.producer_state.snapshot_bytes())
                for p in self.partitions.values() if not p.log.offline]


class SnapshotJob(NamedTuple):
    partition: Partition
    log_end_offset: int
    data: bytes


def _write_snapshot(job: SnapshotJob) -> OSError | None:
    try:
        job.partition.producer_state.write_snapshot(job.log_end_offset, job.data,
                                                    sync_dir=False)
    except OSError as exc:
        return exc
    job.partition.log.mark_dir_dirty()  # the log's close fsyncs the directory
    return None


def write_snapshots(jobs: list[SnapshotJob]) -> None:
    """Write the snapshot files, ``SNAPSHOT_THREADS`` at a time (fsync waits release the
    GIL, and the file system commits concurrent ones together). Each is written to a
    temp file, fsynced and renamed into place; its directory entry is made durable by
    the fsync of the partition directory that the log's close (``LogManager.shutdown``,
    which follows) makes once for everything written there, the log's own checkpoint
    included. A snapshot whose write failed is logged: the next start then replays that
    partition's log. Whoever calls this closes the logs afterwards."""
    if not jobs:
        return
    with ThreadPoolExecutor(max_workers=min(SNAPSHOT_THREADS, len(jobs))) as pool:
        failures = list(pool.map(_write_snapshot, jobs))
    for job, exc in zip(jobs, failures, strict=True):
        if exc is not None:
            p = job.partition
            log.warning("%s-%d: producer snapshot failed: %s", p.topic, p.partition, exc)

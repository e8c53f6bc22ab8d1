"""Replica fetchers: how a follower copies its leader's log (Kafka's
``ReplicaFetcherManager``, ``AbstractFetcherThread`` and ``ReplicaFetcherThread``, as
asyncio tasks).

The replica manager adds fetchers for the partitions a LeaderAndIsr makes follower (with
where to start: ``InitialFetchState``) and removes them for partitions that become leader
or are stopped, before it changes their state, exactly where Kafka does. ``NoFetchers``
(``broker.fetchers``, with ``InitialFetchState`` and the ``FetcherManager`` interface)
stands in on a single node (it never has followers), which does not load this module.

``ReplicaFetcherManager``: one ``ReplicaFetcher`` per (source broker, fetcher id), the id
being ``hash(topic, partition) % num.replica.fetchers``; a fetcher left without
partitions stops. Each fetcher has one connection to its leader (the inter-broker
listener, found in the metadata cache, with that listener's TLS and SASL settings:
``FetcherSettings.client_properties``) and loops:

1. **Truncating** partitions (every partition starts so, Kafka's KIP-101/KIP-279): an
   OffsetForLeaderEpoch with the follower's latest epoch (replica id set); the follower
   cuts its log where its history and the leader's part: at the end offset the leader
   gives for that epoch, or, when the leader answers an older epoch the follower does not
   know, at the follower's end of the largest epoch below it and asks again. A log with no
   epochs is cut at the HW (the only case the HW decides). Cutting below the HW is logged
   as a warning (an unclean election's doing).
2. **Fetching** partitions: one Fetch (replica id and broker epoch set, an incremental
   fetch session, ``replica.fetch.max.bytes`` per partition, ``replica.fetch.response.max.bytes``
   in all, ``replica.fetch.min.bytes``, ``replica.fetch.wait.max.ms``). Records are appended
   as the leader wrote them (``Partition.append_records_as_follower``: offsets, epochs and
   producer state kept); the follower's HW becomes min(leader's HW, its LEO) and its log
   start offset follows the leader's. OFFSET_OUT_OF_RANGE: the leader's log end below ours
   (after an unclean election) truncates to it; a leader's log start above ours restarts
   the log there (ListOffsets to the leader). Partitions throttled as follower
   (``broker.replication_quota``) that are behind the leader's HW are left out while the
   follower quota's rate is above its bound. FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
   NOT_LEADER_OR_FOLLOWER and similar: the partition waits ``replica.fetch.backoff.ms`` (a
   LeaderAndIsr is on its way); a failed exchange: the whole fetcher waits that long and
   reconnects.

A partition whose log dir went offline leaves its fetcher (Kafka's ``markPartitionFailed``):
its log refuses every write until a restart, so fetching for it again only repeats the error.
An append refused by a full disk (ENOSPC: the dir stays online) is retried after the backoff
and reported once until an append succeeds again.

A partition's answer is used only if its state did not change while the request was in
flight (same leader epoch and fetch offset), as Kafka checks.

Thread-safety: the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from broker.fetchers import InitialFetchState
from broker.loop_slice import LoopSlice
from client.config import ClientConfig
from client.connection import BrokerConnection
from client.errors import ClientError
from client.fetch_session import FetchPosition, FetchSession, response_partitions
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from protocol.records import scan_batches
from protocol.topic_partition import TopicPartition
from storage.errors import LogIOError, StorageError

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.partition import Partition
    from broker.replication_quota import ReplicationQuota

log = logging.getLogger(__name__)

UNDEFINED_EPOCH: Final = -1
UNDEFINED_OFFSET: Final = -1
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
FETCH_MAX_VERSION: Final = 15  # replica_state (KIP-903) with the broker epoch
OFFSET_FOR_LEADER_EPOCH_MIN_VERSION: Final = 3  # the first with replica_id
MAX_TRUNCATION_ROUNDS: Final = 64  # OffsetForLeaderEpoch rounds for one partition in a row
# A fetch answer's partitions delayed for one error: the first this many logged at INFO, the
# others at DEBUG and counted in one INFO line (thousands at once when a new topic's leaders
# do not know its id yet).
BACK_OFF_INFO_MAX: Final = 10
# Partition errors after which the partition waits replica.fetch.backoff.ms.
_BACK_OFF: Final = frozenset({
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE,
})


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """The replica.* settings a fetcher uses (Kafka's names and defaults)."""

    broker_id: int
    listener: str  # inter.broker.listener.name
    num_fetchers: int = 1  # num.replica.fetchers
    max_bytes: int = 1_048_576  # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    min_bytes: int = 1  # replica.fetch.min.bytes
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms
    # How to reach the leaders' inter-broker listener (TLS, SASL), by the client's property
    # names (broker.security.inter_broker).
    client_properties: Mapping[str, str] = field(default_factory=dict)


class FollowerHost(Protocol):
    """What fetchers need of the replica manager."""

    def get_partition(self, topic: str, partition: int) -> Partition | None: ...

    def after_follower_append(self, partition: Partition) -> None:
        """Records were appended to (or the HW of) a follower moved: flushes, waiters."""
        ...

    @property
    def follower_quota(self) -> ReplicationQuota:
        """follower.replication.throttled.* (broker.replication_quota)."""
        ...


@dataclass(slots=True)
class PartitionFetchState:
    """Kafka's ``PartitionFetchState``: where one follower partition stands."""

    topic_id: uuid.UUID
    leader_epoch: int
    fetch_offset: int
    truncating: bool = True
    delayed_until: float = 0.0  # monotonic seconds
    truncation_rounds: int = 0
    lag: int | None = None  # the leader's HW minus our fetch offset, after the last fetch
    append_failing: bool = False  # the last append failed (a full disk): reported once


class ReplicaFetcherManager:
    """See the module docstring."""

    def __init__(self, settings: FetcherSettings, cache: MetadataCache, host: FollowerHost,
                 broker_epoch: Callable[[], int]) -> None:
        self.settings = settings
        self._cache = cache
        self._host = host
        self._broker_epoch = broker_epoch
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._closed = False

    def _fetcher_id(self, tp: TopicPartition) -> int:
        key = f"{tp.topic}-{tp.partition}".encode()
        return zlib.crc32(key) % max(1, self.settings.num_fetchers)

    def add_fetchers(self, partitions: Mapping[TopicPartition, InitialFetchState]) -> None:
        """One INFO line per fetcher (Kafka's), not per partition: a LeaderAndIsr of
        thousands of partitions would spend most of its time on the loop logging."""
        if self._closed:
            return
        added: dict[tuple[int, int], list[str]] = {}
        for tp, state in partitions.items():
            self.remove_fetchers([tp])
            key = (state.leader_id, self._fetcher_id(tp))
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = self.fetchers[key] = ReplicaFetcher(
                    self.settings, state.leader_id, key[1], self._cache, self._host,
                    self._broker_epoch)
                fetcher.start()
            fetcher.add(tp, PartitionFetchState(state.topic_id, state.leader_epoch,
                                                state.fetch_offset))
            added.setdefault(key, []).append(
                f"{tp.topic}-{tp.partition} (leader epoch {state.leader_epoch}, "
                f"offset {state.fetch_offset})")
        for (leader, fetcher_id), tps in added.items():
            log.info("[ReplicaFetcherManager broker=%d] Added fetcher %d to broker %d for %d "
                     "partitions: %s", self.settings.broker_id, fetcher_id, leader, len(tps),
                     ", ".join(tps))

    def max_lag(self) -> int:
        """The largest lag (the leader's high watermark minus the fetch offset, after the
        last fetch) of any partition fetched (Kafka's ReplicaFetcherManager MaxLag)."""
        return max((state.lag for fetcher in self.fetchers.values()
                    for state in fetcher.states.values() if state.lag is not None),
                   default=0)

    def remove_fetchers(self, partitions: Iterable[TopicPartition]) -> None:
        tps = list(partitions)
        for key, fetcher in list(self.fetchers.items()):
            for tp in tps:
                fetcher.remove(tp)
            if not fetcher.states:
                del self.fetchers[key]
                fetcher.stop()

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        for fetcher in self.fetchers.values():
            state = fetcher.states.get(tp)
            if state is not None:
                return state
        return None

    async def shutdown(self) -> None:
        self._closed = True
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        for fetcher in fetchers:
            fetcher.stop()
        for fetcher in fetchers:
            await fetcher.join()


@dataclass(slots=True)
class _Sent:
    leader_epoch: int
    fetch_offset: int


@dataclass(slots=True)
class _Stats:
    fetches: int = 0
    bytes: int = 0
    errors: int = 0
    started: float = field(default_factory=time.monotonic)


class ReplicaFetcher:
    """One fetch loop against one leader (see the module docstring)."""

    def __init__(self, settings: FetcherSettings, leader_id: int, fetcher_id: int,
                 cache: MetadataCache, host: FollowerHost,
                 broker_epoch: Callable[[], int]) -> None:
        self.settings = settings
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.name = (f"ReplicaFetcherThread-{fetcher_id}-{leader_id} "
                     f"broker={settings.broker_id}")
        self._cache = cache
        self._host = host
        self._broker_epoch = broker_epoch
        self.states: dict[TopicPartition, PartitionFetchState] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._session = FetchSession(leader_id)
        self._connection: BrokerConnection | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.stats = _Stats()
        # Partitions of the truncation round under way that needed none (one line a round).
        self._untruncated = 0
        self._config = ClientConfig.from_properties(settings.client_properties, ClientConfig(
            client_id=f"broker-{settings.broker_id}-fetcher-{fetcher_id}",
            request_timeout_ms=settings.socket_timeout_ms + settings.max_wait_ms,
            connection_setup_timeout_ms=settings.socket_timeout_ms,
            max_in_flight_requests_per_connection=1,
            max_response_bytes=max(settings.response_max_bytes, settings.max_bytes) + (1 << 20)))

    # ------------------------------------------------------------ partitions

    def add(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        self.states[tp] = state
        # Kept after removal too: the next incremental fetch names forgotten partitions
        # by topic id.
        self._topic_ids[tp.topic] = state.topic_id
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        if self.states.pop(tp, None) is not None:
            log.info("[%s] Removed %s", self.name, tp)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()

    async def join(self) -> None:
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._close_connection()

    async def _close_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    async def _run(self) -> None:
        log.info("[%s] Starting", self.name)
        backoff = self.settings.backoff_ms / 1000
        try:
            while not self._stopping:  # each turn sends one request or waits
                if not self.states:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                try:
                    connection = await self._connect()
                    if connection is None:
                        await self._sleep(backoff)
                        continue
                    worked = await self._truncate(connection)
                    worked = await self._fetch(connection) or worked
                    if not worked:
                        await self._sleep(self._next_delay())
                except (ClientError, OSError) as exc:
                    self.stats.errors += 1
                    log.warning("[%s] Error in fetch from broker %d: %s", self.name,
                                self.leader_id, exc)
                    self._session.handle_error()
                    await self._close_connection()
                    await self._sleep(backoff)
                except Exception:  # a bug must not stop replication silently: log, go on
                    self.stats.errors += 1
                    log.exception("[%s] Unexpected error in fetch from broker %d",
                                  self.name, self.leader_id)
                    self._session.handle_error()
                    await self._close_connection()
                    await self._sleep(backoff)
        except asyncio.CancelledError:
            pass
        finally:
            await self._close_connection()
            log.info("[%s] Stopped", self.name)

    async def _sleep(self, seconds: float) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(0.0, seconds))

    def _next_delay(self) -> float:
        now = time.monotonic()
        delays = [s.delayed_until - now for s in self.states.values()]
        return min([self.settings.backoff_ms / 1000, *delays])

    async def _connect(self) -> BrokerConnection | None:
        connection = self._connection
        if connection is not None and not connection.closed:
            return connection
        broker = self._cache.alive_broker(self.leader_id)
        endpoint = None if broker is None else broker.endpoint(self.settings.listener)
        if endpoint is None:
            log.warning("[%s] Broker %d is not alive in the metadata cache, or has no %s "
                        "listener", self.name, self.leader_id, self.settings.listener)
            return None
        self._session = FetchSession(self.leader_id)
        self._connection = await BrokerConnection.open(endpoint.host, endpoint.port,
                                                       self._config, node_id=self.leader_id)
        return self._connection

    def _ready(self, truncating: bool) -> dict[TopicPartition, PartitionFetchState]:
        now = time.monotonic()
        for tp in list(self.states):
            p = self._host.get_partition(*tp)
            if p is not None and p.log.offline:
                self._fail(tp, "its log dir is offline")
        return {tp: s for tp, s in self.states.items()
                if s.truncating == truncating and s.delayed_until <= now}

    def _fail(self, tp: TopicPartition, reason: str) -> None:
        """Stop fetching ``tp`` until a LeaderAndIsr adds it again (Kafka's
        ``markPartitionFailed``)."""
        if self.states.pop(tp, None) is not None:
            log.error("[%s] Stopped fetching %s: %s", self.name, tp, reason)

    def _to_ask(self, ready: dict[TopicPartition, PartitionFetchState]
                ) -> Iterator[tuple[TopicPartition, PartitionFetchState, Partition]]:
        """The ready partitions to put in the next request, with their Partition: one no
        longer hosted here is dropped; one throttled (follower.replication.throttled.*) and
        behind is left out while the rate is above the bound."""
        quota = self._host.follower_quota
        throttle = quota.bound is not None and quota.is_quota_exceeded()
        for tp, state in ready.items():
            p = self._host.get_partition(*tp)
            if p is None:
                self.states.pop(tp, None)
                continue
            if throttle and quota.is_throttled(tp) and (state.lag is None or state.lag > 0):
                continue
            yield tp, state, p

    def _delay(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        state.delayed_until = time.monotonic() + self.settings.backoff_ms / 1000

    # ------------------------------------------------------------ truncation (KIP-101/279)

    async def _truncate(self, connection: BrokerConnection) -> bool:
        ready = self._ready(truncating=True)
        if not ready:
            return False
        self._untruncated = 0
        try:
            return await self._truncate_round(connection, ready)
        finally:
            if self._untruncated:
                log.info("[%s] %d partitions: no truncation needed (each at DEBUG)", self.name,
                         self._untruncated)

    async def _truncate_round(self, connection: BrokerConnection,
                              ready: dict[TopicPartition, PartitionFetchState]) -> bool:
        asked: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        work = LoopSlice()  # a first round covers every partition of the fetcher
        for tp, state, p in self._to_ask(ready):
            await work.pause()
            latest = p.log.latest_epoch()
            if latest is None:
                # No epochs in the log (empty, or written before epochs): the HW is all
                # there is to go by (Kafka's truncateToHighWatermark).
                await self._truncate_partition(tp, p, p.high_watermark,
                                               "no leader epochs in the log")
                self._done_truncating(tp, state, p)
                continue
            asked[tp] = (state, int(latest))
        if not asked:
            return True
        version = connection.version_for(OffsetForLeaderEpochRequest)
        if version < OFFSET_FOR_LEADER_EPOCH_MIN_VERSION:
            raise ClientError("UNSUPPORTED_VERSION",
                              f"broker {self.leader_id} answers OffsetForLeaderEpoch only "
                              f"up to v{version}")
        topics: dict[str, list[OffsetForLeaderEpochRequest.OffsetForLeaderPartition]] = {}
        for tp, (state, epoch) in asked.items():
            topics.setdefault(tp.topic, []).append(
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=tp.partition, current_leader_epoch=state.leader_epoch,
                    leader_epoch=epoch))
        request = OffsetForLeaderEpochRequest(
            replica_id=self.settings.broker_id,
            topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps)
                    for t, ps in topics.items()])
        response = await connection.send(request, version=version)
        for topic in response.topics:
            for r in topic.partitions:
                await work.pause()
                tp = TopicPartition(topic.topic, r.partition)
                sent = asked.get(tp)
                current = self.states.get(tp)
                if sent is None or current is None or current is not sent[0]:
                    continue  # removed or re-added while the request was out
                state = current
                partition = self._host.get_partition(*tp)
                if partition is None:
                    continue
                error = ErrorCode(r.error_code)
                if error is not ErrorCode.NO_ERROR:
                    log.info("[%s] OffsetForLeaderEpoch of %s answered %s; retrying after "
                             "backoff", self.name, tp, error.name)
                    self._delay(tp, state)
                    continue
                await self._apply_epoch_end_offset(tp, partition, state, sent[1],
                                                   r.leader_epoch, r.end_offset)
        return True

    async def _apply_epoch_end_offset(self, tp: TopicPartition, p: Partition,
                                      state: PartitionFetchState, asked_epoch: int,
                                      leader_epoch: int, leader_end: int) -> None:
        """Kafka's ``getOffsetTruncationState``."""
        leo = p.log_end_offset
        if leader_end == UNDEFINED_OFFSET:
            # The leader knows no epoch <= ours: nothing to match, keep what the HW covers.
            await self._truncate_partition(tp, p, p.high_watermark,
                                           f"the leader has no epoch <= {asked_epoch}")
            self._done_truncating(tp, state, p)
            return
        follower_epoch, follower_end = p.log.end_offset_for_epoch(leader_epoch)
        if follower_end == UNDEFINED_OFFSET:
            offset = min(leader_end, leo)
            reason = (f"the leader's epoch {leader_epoch} ends at {leader_end}; this log has "
                      f"no epoch <= {leader_epoch}")
            done = True
        elif follower_epoch != leader_epoch:
            # We do not know the leader's epoch: cut to where our largest epoch below it
            # ends and ask again with the epoch that is then our latest.
            offset = min(int(follower_end), leo)
            reason = (f"the leader answered epoch {leader_epoch} (end {leader_end}), unknown "
                      f"here; our epoch {follower_epoch} ends at {follower_end}")
            done = False
        else:
            offset = min(int(follower_end), leader_end, leo)
            reason = (f"epoch {leader_epoch} ends at {leader_end} on the leader, "
                      f"{follower_end} here")
            done = True
        await self._truncate_partition(tp, p, offset, reason)
        state.truncation_rounds += 1
        if done or state.truncation_rounds >= MAX_TRUNCATION_ROUNDS:
            self._done_truncating(tp, state, p)

    async def _truncate_partition(self, tp: TopicPartition, p: Partition, offset: int,
                                  reason: str) -> None:
        """Cut ``p`` at ``offset`` (its files and producer state: in a worker thread)."""
        leo, hw = p.log_end_offset, p.high_watermark
        if offset >= leo:
            self._untruncated += 1  # _truncate sums them up at INFO
            log.debug("[%s] %s: no truncation needed at log end offset %d (%s)", self.name, tp,
                      leo, reason)
            return
        if offset < hw:
            log.warning("[%s] %s: truncating to offset %d, below the high watermark %d "
                        "(log end offset %d; %s)", self.name, tp, offset, hw, leo, reason)
        else:
            log.info("[%s] %s: truncating to offset %d (log end offset %d, HW %d; %s)",
                     self.name, tp, offset, leo, hw, reason)
        await p.truncate_off_loop(offset)
        self._host.after_follower_append(p)

    def _done_truncating(self, tp: TopicPartition, state: PartitionFetchState,
                         p: Partition) -> None:
        state.truncating = False
        state.truncation_rounds = 0
        state.fetch_offset = p.log_end_offset

    # ------------------------------------------------------------ fetch

    async def _fetch(self, connection: BrokerConnection) -> bool:
        ready = self._ready(truncating=False)
        if not ready:
            return False
        version = connection.version_for(FetchRequest, FETCH_MAX_VERSION)
        wanted: dict[TopicPartition, FetchPosition] = {}
        topic_ids = self._topic_ids
        sent: dict[TopicPartition, _Sent] = {}
        work = LoopSlice()
        for tp, state, p in self._to_ask(ready):
            await work.pause()
            latest = p.log.latest_epoch()
            wanted[tp] = FetchPosition(
                state.fetch_offset, self.settings.max_bytes, state.leader_epoch,
                -1 if latest is None else int(latest), p.log_start_offset)
            sent[tp] = _Sent(state.leader_epoch, state.fetch_offset)
        if not wanted:
            return False  # all throttled: wait a little
        request = self._session.build(
            wanted, version, topic_ids=topic_ids, replica_id=self.settings.broker_id,
            max_wait_ms=self.settings.max_wait_ms, min_bytes=self.settings.min_bytes,
            max_bytes=self.settings.response_max_bytes)
        if version >= 15:
            request.replica_state.replica_epoch = self._broker_epoch()
        try:
            response = await connection.send(request, version=version)
        except ClientError:
            self._session.handle_error()
            raise
        self.stats.fetches += 1
        if not self._session.handle_response(response):
            log.info("[%s] Fetch session error %s from broker %d; the next fetch is full",
                     self.name, ErrorCode(response.error_code).name, self.leader_id)
            return True
        backed_off: dict[str, int] = {}  # error name -> partitions delayed for it
        for tp, data in response_partitions(response, version, topic_ids).items():
            await work.pause()
            current = self.states.get(tp)
            at_send = sent.get(tp)
            if (current is None or at_send is None or current.truncating
                    or current.leader_epoch != at_send.leader_epoch
                    or current.fetch_offset != at_send.fetch_offset):
                continue  # changed while the request was out
            state = current
            partition = self._host.get_partition(*tp)
            if partition is None:
                continue
            error = ErrorCode(data.error_code)
            if error is ErrorCode.NO_ERROR:
                self._process_data(tp, partition, state, data.records, data.high_watermark,
                                   data.log_start_offset)
            elif error is ErrorCode.OFFSET_OUT_OF_RANGE:
                await self._handle_out_of_range(connection, tp, partition, state)
            else:
                if error not in _BACK_OFF:
                    log.warning("[%s] Fetch of %s answered %s", self.name, tp, error.name)
                else:
                    # The first few of an answer at INFO, the others at DEBUG and counted.
                    seen = backed_off[error.name] = backed_off.get(error.name, 0) + 1
                    log.log(logging.INFO if seen <= BACK_OFF_INFO_MAX else logging.DEBUG,
                            "[%s] Fetch of %s answered %s; retrying after backoff",
                            self.name, tp, error.name)
                self._delay(tp, state)
        for name, count in backed_off.items():
            if count > BACK_OFF_INFO_MAX:
                log.info("[%s] Fetch answered %s for %d partitions (the first %d above, the "
                         "others at DEBUG); retrying them after backoff", self.name, name,
                         count, BACK_OFF_INFO_MAX)
        return True

    def _process_data(self, tp: TopicPartition, p: Partition, state: PartitionFetchState,
                      records: bytes, leader_hw: int, leader_start: int) -> None:
        if records:
            scan = scan_batches(records, False, keep_batches=False)
            if scan.valid_bytes < len(records) and scan.valid_bytes == 0:
                # Not even one whole batch: a batch above replica.fetch.max.bytes is still
                # returned whole by a leader, so this is a corrupt answer.
                log.warning("[%s] %s: fetched data holds no whole batch (%s)", self.name, tp,
                            scan.message)
                self._delay(tp, state)
                return
            data = memoryview(records)[:scan.valid_bytes]
            try:
                state.fetch_offset = p.append_records_as_follower(data)
            except StorageError as exc:
                if p.log.offline:  # the log dir failed (EIO): nothing to retry until a restart
                    self._fail(tp, f"appending at offset {state.fetch_offset} failed: {exc}")
                    return
                # A full disk (ENOSPC) refuses writes until space is freed: retried after
                # the backoff, reported once per episode.
                if not state.append_failing:
                    state.append_failing = True
                    level = logging.WARNING if isinstance(exc, LogIOError) else logging.ERROR
                    log.log(level, "[%s] %s: appending %d fetched bytes at offset %d failed: "
                            "%s; retrying every replica.fetch.backoff.ms", self.name, tp,
                            scan.valid_bytes, state.fetch_offset, exc)
                self._delay(tp, state)
                return
            if state.append_failing:
                state.append_failing = False
                log.info("[%s] %s: appending again (log end offset %d)", self.name, tp,
                         state.fetch_offset)
            self.stats.bytes += scan.valid_bytes
            if self._host.follower_quota.is_throttled(tp):
                self._host.follower_quota.record(scan.valid_bytes)
        state.lag = leader_hw - state.fetch_offset
        p.update_follower_high_watermark(leader_hw)
        if leader_start >= 0:
            p.maybe_increment_log_start_offset(leader_start)
        self._host.after_follower_append(p)

    async def _handle_out_of_range(self, connection: BrokerConnection, tp: TopicPartition,
                                   p: Partition, state: PartitionFetchState) -> None:
        """Kafka's ``fetchOffsetAndTruncate``."""
        leo = p.log_end_offset
        leader_end = await self._list_offset(connection, tp, state, LATEST_TIMESTAMP)
        if leader_end is None:
            self._delay(tp, state)
            return
        if leader_end < leo:
            await self._truncate_partition(tp, p, leader_end,
                                           f"the leader's log ends at {leader_end} (out of range)")
            state.fetch_offset = p.log_end_offset
            return
        leader_start = await self._list_offset(connection, tp, state, EARLIEST_TIMESTAMP)
        if leader_start is None:
            self._delay(tp, state)
            return
        if leader_start > leo:
            log.warning("[%s] %s: the leader's log starts at %d, after our log end offset %d: "
                        "restarting the log there", self.name, tp, leader_start, leo)
            await p.truncate_off_loop(leader_start, fully=True)
            self._host.after_follower_append(p)
        state.fetch_offset = max(leader_start, p.log_end_offset)

    async def _list_offset(self, connection: BrokerConnection, tp: TopicPartition,
                           state: PartitionFetchState, timestamp: int) -> int | None:
        request = ListOffsetsRequest(replica_id=self.settings.broker_id, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=tp.topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=tp.partition, current_leader_epoch=state.leader_epoch,
                    timestamp=timestamp)])])
        response = await connection.send(request)
        for topic in response.topics:
            for r in topic.partitions:
                if r.partition_index == tp.partition:
                    if r.error_code != ErrorCode.NO_ERROR:
                        log.info("[%s] ListOffsets of %s answered %s", self.name, tp,
                                 ErrorCode(r.error_code).name)
                        return None
                    return int(r.offset)
        return None

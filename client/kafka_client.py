"""``KafkaClient``: the connections to one cluster's brokers, and where to send what.

- **Brokers** are known from Metadata answers, from ``add_broker`` (a controller knows them
  from ZooKeeper; a follower knows its leader's endpoint) and, until a Metadata answer
  arrives, from ``bootstrap.servers`` (node ids -1, -2, ... as in Kafka). A bootstrap
  connection to an address that Metadata then names is kept as that broker's connection.
- **Connections**: at most one per broker (``BrokerConnection``), opened on first use and
  again after it broke, waiting ``reconnect.backoff.ms`` (exponential) after failures.
  Concurrent callers share one connection attempt.
- **Sending**: ``send(node_id, request)`` to a given broker, ``send_any(request)`` to the
  least loaded one (fewest requests in flight; a bootstrap broker before any is known).
  Each returns the typed response or raises ``ClientError``; neither retries.
- **Routing**: ``leader_for(tp)`` and ``coordinator_for(group)`` answer from the cached
  metadata, refreshing it (Metadata / FindCoordinator) when it is missing, marked stale by
  ``invalidate`` or older than ``metadata.max.age.ms``.
- **Retries**: ``retry(op)`` runs ``op`` again after a retriable ``ClientError``, with
  exponential backoff (``retry.backoff.ms`` .. ``retry.backoff.max.ms``), until
  ``default.api.timeout.ms`` (or the given timeout) would pass.

One event loop; not thread-safe (``client.sync.SyncClient`` runs one in a thread of its own).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any, Final, Self, TypeVar

from client.backoff import backoff_ms
from client.config import ClientConfig, parse_bootstrap
from client.connection import BrokerConnection, Request
from client.errors import ClientError, check, network_error
from client.metadata import ClusterMetadata, parse_metadata
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.metadata import MetadataRequest
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
Address = tuple[str, int]

GROUP_KEY_TYPE: Final = 0
TRANSACTION_KEY_TYPE: Final = 1


class KafkaClient:
    def __init__(self, bootstrap_servers: str, config: ClientConfig | None = None) -> None:
        self.config = config or ClientConfig()
        self._bootstrap: dict[int, Address] = {
            -(i + 1): addr for i, addr in enumerate(parse_bootstrap(bootstrap_servers))}
        self._pinned: dict[int, Address] = {}  # add_broker: wins over Metadata
        self._learned: dict[int, Address] = {}  # FindCoordinator answers
        self._conns: dict[int, BrokerConnection] = {}
        self._opening: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._failures: dict[int, tuple[int, float]] = {}  # node -> (failures in a row, retry at)
        self.cluster = ClusterMetadata()
        self._topic_refreshed_at: dict[str, float] = {}
        self._stale: set[str] = set()
        self._coordinators: dict[tuple[int, str], int] = {}
        self._closed = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect to a bootstrap broker now, so that a wrong address fails at once."""
        await self._any_connection(bootstrap_only=True)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._opening.values()):
            task.cancel()
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            await conn.close()

    # -- brokers and connections ---------------------------------------------------------

    def add_broker(self, node_id: int, host: str, port: int) -> None:
        """Know ``node_id`` at ``host:port`` (over what Metadata says); a moved broker's old
        connection is closed."""
        if self._pinned.get(node_id) != (host, port):
            self._pinned[node_id] = (host, port)
            self._drop(node_id)

    def remove_broker(self, node_id: int) -> None:
        self._pinned.pop(node_id, None)
        self._drop(node_id)

    def address(self, node_id: int) -> Address | None:
        for table in (self._pinned, self._learned, self._bootstrap):
            if node_id in table:
                return table[node_id]
        info = self.cluster.brokers.get(node_id)
        return None if info is None else (info.host, info.port)

    def known_brokers(self) -> list[int]:
        """Node ids of the brokers known (not bootstrap entries), in order."""
        return sorted(set(self._pinned) | set(self.cluster.brokers))

    def _drop(self, node_id: int) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            asyncio.get_running_loop().create_task(conn.close())

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to ``node_id``, opening it if needed."""
        if self._closed:
            raise network_error("The client is closed")
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        task = self._opening.get(node_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._open(node_id))
            self._opening[node_id] = task
            task.add_done_callback(lambda t: self._opened(node_id, t))
        return await asyncio.shield(task)

    def _opened(self, node_id: int, task: asyncio.Task[BrokerConnection]) -> None:
        if self._opening.get(node_id) is task:
            del self._opening[node_id]
        if not task.cancelled():
            task.exception()  # retrieved: the waiters got it

    async def _open(self, node_id: int) -> BrokerConnection:
        address = self.address(node_id)
        if address is None and node_id >= 0:
            await self.refresh_metadata([])  # a broker named by DescribeCluster, say
            address = self.address(node_id)
        if address is None:
            raise ClientError(ErrorCode.BROKER_NOT_AVAILABLE.name, f"Node {node_id} is not a known broker")
        loop = asyncio.get_running_loop()
        failures, retry_at = self._failures.get(node_id, (0, 0.0))
        if retry_at > loop.time():
            await asyncio.sleep(retry_at - loop.time())
        try:
            conn = await BrokerConnection.open(address[0], address[1], self.config, node_id)
        except ClientError:
            wait_ms = backoff_ms(failures, self.config.reconnect_backoff_ms,
                                 self.config.reconnect_backoff_max_ms)
            self._failures[node_id] = (failures + 1, loop.time() + wait_ms / 1000)
            raise
        self._failures.pop(node_id, None)
        if self._closed:
            await conn.close()
            raise network_error("The client is closed")
        self._conns[node_id] = conn
        return conn

    async def _any_connection(self, bootstrap_only: bool = False) -> BrokerConnection:
        """The least loaded open connection, else the first broker that accepts one."""
        live = [c for c in self._conns.values() if not c.closed]
        if live and not bootstrap_only:
            return min(live, key=lambda c: c.in_flight)
        known = [] if bootstrap_only else self.known_brokers()
        loop = asyncio.get_running_loop()
        # brokers in reconnect backoff go last
        candidates = sorted([*known, *sorted(self._bootstrap, reverse=True)],
                            key=lambda n: self._failures.get(n, (0, 0.0))[1] > loop.time())
        errors: list[str] = []
        for node_id in candidates:
            try:
                return await self.connection(node_id)
            except ClientError as exc:
                if not exc.retriable and exc.error_name != ErrorCode.BROKER_NOT_AVAILABLE.name:
                    raise
                errors.append(str(exc))
        raise network_error("No broker is reachable: " + "; ".join(errors))

    # -- sending -------------------------------------------------------------------------

    async def send(self, node_id: int, request: Request[R], *, version: int | None = None,
                   timeout_ms: int | None = None) -> R:
        """Send ``request`` to ``node_id`` (at the negotiated version unless ``version``)."""
        conn = await self.connection(node_id)
        return await conn.send(request, version=version, timeout_ms=timeout_ms)

    async def send_any(self, request: Request[R], *, version: int | None = None,
                       timeout_ms: int | None = None) -> R:
        """Send ``request`` to the least loaded broker."""
        conn = await self._any_connection()
        return await conn.send(request, version=version, timeout_ms=timeout_ms)

    async def send_no_response(self, node_id: int, request: Request[Any], *,
                               version: int | None = None) -> None:
        conn = await self.connection(node_id)
        await conn.send_no_response(request, version=version)

    async def version_for(self, node_id: int | None, request_cls: Any, our_max: int | None = None) -> int:
        """The version ``send`` would use for ``request_cls`` (any broker when None)."""
        conn = await (self._any_connection() if node_id is None else self.connection(node_id))
        return conn.version_for(request_cls, our_max)

    async def api_versions(self, node_id: int | None = None) -> dict[int, tuple[int, int]]:
        """The version ranges a broker (any when None) advertised: api key -> (min, max)."""
        conn = await (self._any_connection() if node_id is None else self.connection(node_id))
        return dict(conn.api_versions)

    async def retry(self, op: Callable[[], Awaitable[T]], *, what: str, timeout_ms: int | None = None,
                    max_attempts: int | None = None) -> T:
        """``await op()`` until it does not raise a retriable ``ClientError``; the last error
        when the time (``default.api.timeout.ms`` unless given) or attempts run out."""
        loop = asyncio.get_running_loop()
        budget_ms = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        deadline = loop.time() + budget_ms / 1000
        attempt = 0
        while True:
            try:
                return await op()
            except ClientError as exc:
                if not exc.retriable:
                    raise
                attempt += 1
                wait_s = backoff_ms(attempt - 1, self.config.retry_backoff_ms,
                                    self.config.retry_backoff_max_ms) / 1000
                if (max_attempts is not None and attempt >= max_attempts) or loop.time() + wait_s > deadline:
                    raise ClientError(exc.error_name, f"{what}: {exc} (after {attempt} attempts)") from None
                log.debug("%s: %s; retrying in %.0f ms", what, exc, wait_s * 1000)
                await asyncio.sleep(wait_s)

    # -- metadata and routing ------------------------------------------------------------

    async def refresh_metadata(self, topics: Iterable[str] | None = None, *,
                               allow_auto_topic_creation: bool = False) -> ClusterMetadata:
        """Ask one broker for ``topics`` (every topic when None); the cache takes the answer,
        which is returned as it came (topics with errors included)."""
        names = None if topics is None else sorted(set(topics))
        conn = await self._any_connection()
        version = conn.version_for(MetadataRequest)
        request = MetadataRequest(
            topics=None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=allow_auto_topic_creation,
        )
        fresh = parse_metadata(await conn.send(request, version=version))
        self.cluster = self.cluster.merge(fresh, names)
        now = asyncio.get_running_loop().time()
        refreshed = fresh.topics.keys() if names is None else names
        self._stale.difference_update(refreshed)
        for name in refreshed:
            self._topic_refreshed_at[name] = now
        self._adopt_bootstrap_connections()
        return fresh

    def _adopt_bootstrap_connections(self) -> None:
        for boot_id, address in self._bootstrap.items():
            conn = self._conns.get(boot_id)
            if conn is None or conn.closed:
                continue
            for info in self.cluster.brokers.values():
                held = self._conns.get(info.node_id)
                if (info.host, info.port) == address and (held is None or held.closed):
                    del self._conns[boot_id]
                    conn.node_id = info.node_id
                    self._conns[info.node_id] = conn
                    break

    def invalidate(self, topics: Iterable[str]) -> None:
        """Refresh these topics' metadata before they are routed again (after an error that
        says the cluster changed)."""
        self._stale.update(topics)

    def _needs_refresh(self, tp: TopicPartition) -> bool:
        if tp.topic in self._stale or self.cluster.leader(tp) is None:
            return True
        at = self._topic_refreshed_at.get(tp.topic)
        loop = asyncio.get_running_loop()
        return at is None or loop.time() - at > self.config.metadata_max_age_ms / 1000

    async def leaders_now(self, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """The partitions grouped by leader (one metadata refresh at most, no retry)."""
        wanted = sorted(set(tps))
        stale = {tp.topic for tp in wanted if self._needs_refresh(tp)}
        if stale:
            await self.refresh_metadata(stale)
        out: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            out.setdefault(self._cached_leader(tp), []).append(tp)
        return out

    async def leaders(self, tps: Iterable[TopicPartition], *,
                      timeout_ms: int | None = None) -> dict[int, list[TopicPartition]]:
        """The partitions grouped by leader, retrying while a leader is unknown."""
        wanted = list(tps)
        return await self.retry(lambda: self.leaders_now(wanted), what="Finding partition leaders",
                                timeout_ms=timeout_ms)

    async def leader_for(self, tp: TopicPartition, *, timeout_ms: int | None = None) -> int:
        (leader,) = await self.leaders([tp], timeout_ms=timeout_ms)
        return leader

    def _cached_leader(self, tp: TopicPartition) -> int:
        topic = self.cluster.topics.get(tp.topic)
        if topic is not None and topic.error_code:
            self.invalidate([tp.topic])
            raise ClientError.from_code(topic.error_code, None, f"Topic {tp.topic}")
        part = None if topic is None else topic.partitions.get(tp.partition)
        if part is None:
            self.invalidate([tp.topic])
            raise ClientError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.name,
                              f"This server does not host this topic-partition: {tp}")
        if part.leader < 0 or self.address(part.leader) is None:
            self.invalidate([tp.topic])
            raise ClientError(ErrorCode.LEADER_NOT_AVAILABLE.name, f"{tp} has no leader now")
        return part.leader

    async def coordinator_for(self, key: str, key_type: int = GROUP_KEY_TYPE, *,
                              timeout_ms: int | None = None) -> int:
        """The coordinator of a group (or transactional id), from FindCoordinator."""
        cached = self._coordinators.get((key_type, key))
        if cached is not None and self.address(cached) is not None:
            return cached

        async def attempt() -> int:
            conn = await self._any_connection()
            version = conn.version_for(FindCoordinatorRequest)
            if version >= 4:
                response = await conn.send(
                    FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), version=version)
                (c,) = response.coordinators
                code, message, node, host, port = c.error_code, c.error_message, c.node_id, c.host, c.port
            else:
                r = await conn.send(FindCoordinatorRequest(key=key, key_type=key_type), version=version)
                code, message, node, host, port = r.error_code, r.error_message, r.node_id, r.host, r.port
            check(code, message, f"FindCoordinator({key})")
            self._learned[node] = (host, port)
            self._coordinators[(key_type, key)] = node
            return node

        return await self.retry(attempt, what=f"Finding the coordinator of {key!r}", timeout_ms=timeout_ms)

    def forget_coordinator(self, key: str, key_type: int = GROUP_KEY_TYPE) -> None:
        self._coordinators.pop((key_type, key), None)

"""The socket server: listening sockets, acceptors, connections, IO workers.

Life cycle (Kafka's SocketServer: bind at start-up, ``enableRequestProcessing`` last):

- ``bind()``: create and bind every listener's socket (port 0 binds an ephemeral port; the
  bound endpoints are then known for advertising), listen with
  ``socket.listen.backlog.size``. Nothing is accepted yet: clients wait in the backlog.
- ``start()``: start the IO workers, one acceptor per listener, and the idle sweeper.
- ``stop_accepting()``, then ``drain(timeout)``: no new connections; every connection
  finishes the request in flight and reads nothing more; returns when all are closed or
  the timeout passed. ``close()`` then cancels whatever is left.

Pool members live on the broker's one (uvloop) event loop: acceptor tasks, one
``asyncio.Protocol`` per connection (Kafka's processors multiplex connections the same
way; a task per connection only waits for it to close, for the ordered stop), and
``num.io.threads`` workers. ``num.network.threads`` is accepted but unused: see the
README's measurement of one loop against threads.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import time
from typing import TYPE_CHECKING, cast

from broker.config import BrokerConfig, Endpoint
from broker.handlers.api_versions import answer_before_authentication
from broker.metrics.network import ListenerStats
from broker.network.connection import Connection
from broker.network.memory_pool import MemoryPool
from broker.network.quotas import (
    ConnectionQuotas,
    ConnectionRateLimiter,
    TooManyConnectionsError,
)
from broker.network.request_channel import RequestChannel
from broker.network.sendfile import copy_mode_from_env
from broker.network.write_batch import WriteBatch
from broker.security.listener import ListenerSecurity, build_listeners
from broker.security.tls import describe_handshake_error
from storage.throttled_log import BurstLog

if TYPE_CHECKING:
    from broker.faults import FaultInjector
    from broker.metrics.requests import RequestMetrics
    from broker.security.sasl.authenticator import SaslAuthenticator
    from broker.services import Broker

log = logging.getLogger(__name__)
rejected_log = BurstLog(log, rate_per_s=10, burst=100)  # a connection flood: bounded lines

# Reading from a muted connection pauses once its buffer holds twice this.
READ_LIMIT_BYTES = 64 * 1024
# Idle connections are looked for this often at most (and at least every idle-time / 4).
MAX_SWEEP_INTERVAL_S = 10.0
# Connections accepted per acceptor wake-up beyond the first.
ACCEPT_BATCH_MAX = 64
# A TLS handshake not finished within this closes the connection.
SSL_HANDSHAKE_TIMEOUT_S = 10.0


class SocketServer:
    def __init__(self, config: BrokerConfig, *,
                 request_metrics: RequestMetrics | None = None,
                 faults: FaultInjector | None = None) -> None:
        self._config = config
        self._faults = faults
        self._request_metrics = request_metrics
        # Connections created and closed per listener name (scrape-time metrics).
        self.listener_stats: dict[str, ListenerStats] = {
            e.listener_name: ListenerStats() for e in config.listeners}
        self._sockets: list[tuple[Endpoint, socket.socket]] = []
        self.bound_endpoints: list[Endpoint] = []  # the listeners as bound (actual ports)
        self._security: dict[str, ListenerSecurity] = {}
        self._broker: Broker | None = None
        self._auth_ids = itertools.count()
        self._channel: RequestChannel | None = None
        self._write_batch: WriteBatch | None = None  # made in start(), on the loop
        self._io_workers = config.num_io_threads  # num.io.threads, dynamic
        self._tasks: list[asyncio.Task[None]] = []
        self._connections: set[Connection] = set()
        self._socket_tasks: set[asyncio.Task[None]] = set()
        self._copy = copy_mode_from_env()
        self.quotas = ConnectionQuotas(config.max_connections, config.max_connections_for)
        self.rate_limiter = ConnectionRateLimiter(config.get_int("max.connection.creation.rate"))
        self.memory_pool = MemoryPool(config.get_int("queued.max.request.bytes"))
        self._accepting = False
        # socket.send/receive.buffer.bytes: applied only when set explicitly (and not -1);
        # otherwise the kernel's autotuning stays on (Kafka's 100 KiB defaults would cap
        # loopback fetch throughput).
        self._buffer_sizes = [
            (option, config.get_int(name)) for option, name in (
                (socket.SO_SNDBUF, "socket.send.buffer.bytes"),
                (socket.SO_RCVBUF, "socket.receive.buffer.bytes"))
            if name in config.explicit and config.get_int(name) != -1]

    # -- start-up ----------------------------------------------------------------------

    def bind(self) -> list[Endpoint]:
        """Bind every listener; returns the bound endpoints (actual ports). Each listener's
        security (TLS context, ...) is built first: ConfigError before anything is bound."""
        self._security = build_listeners(self._config)
        bound: list[Endpoint] = []
        for endpoint in self._config.listeners:
            host = endpoint.host or None
            sock = socket.create_server(
                (host or "", endpoint.port),
                family=socket.AF_INET6 if host and ":" in host else socket.AF_INET,
                backlog=self._config.socket_listen_backlog_size, reuse_port=False)
            sock.setblocking(False)
            port = sock.getsockname()[1]
            actual = Endpoint(endpoint.listener_name, endpoint.host, port)
            self._sockets.append((actual, sock))
            bound.append(actual)
            log.info("Bound listener %s", actual)
        self.bound_endpoints = list(bound)
        return bound

    def start(self, broker: Broker) -> None:
        self._broker = broker
        self._channel = RequestChannel(
            broker, queued_max_requests=self._config.queued_max_requests,
            num_workers=self._io_workers, metrics=self._request_metrics,
            request_quotas=None if broker is None else broker.quotas.request, faults=self._faults)
        self._channel.start()
        self._write_batch = WriteBatch(asyncio.get_running_loop())
        if broker is not None:  # the produce appends of a turn are done at its end
            broker.produce_appends.attach(self._write_batch)
        self._accepting = True
        for endpoint, sock in self._sockets:
            self._tasks.append(asyncio.create_task(self._accept_loop(endpoint, sock),
                                                   name=f"acceptor-{endpoint.listener_name}"))
        self._tasks.append(asyncio.create_task(self._idle_sweeper(), name="idle-sweeper"))
        if self._copy:
            log.info("Fetch data is sent by copying (MINIKAFKA_FETCH_COPY=1), not sendfile")

    def resize_io_workers(self, count: int) -> None:
        """``num.io.threads`` changed (a dynamic broker config): the request channel's
        workers, now or when it starts."""
        self._io_workers = count
        if self._channel is not None:
            self._channel.resize_workers(count)

    @property
    def io_worker_count(self) -> int:
        """IO workers running now (0 before start)."""
        return 0 if self._channel is None else self._channel.worker_count

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    @property
    def request_queue_size(self) -> int:
        """Requests waiting for an IO worker (Kafka's RequestQueueSize)."""
        return 0 if self._channel is None else self._channel.queue.qsize()

    # -- accepting ---------------------------------------------------------------------

    async def _accept_loop(self, endpoint: Endpoint, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while self._accepting:
            await self.quotas.wait_for_slot()
            await self.rate_limiter.acquire()
            try:
                sock, addr = await loop.sock_accept(listener)
            except OSError as exc:  # EMFILE and friends: log, back off, keep accepting
                log.error("Accept on %s failed: %s", endpoint, exc)
                await asyncio.sleep(0.1)
                continue
            self._admit(endpoint, sock, addr)
            # Then whatever else is already waiting, without a loop round trip each
            # (bounded per wake-up so one listener cannot starve the loop).
            for _ in range(ACCEPT_BATCH_MAX):
                if (self.quotas.total >= self.quotas.max_connections
                        or self.rate_limiter.rate_per_s < 2**31 - 1):
                    break  # at the limit, or rate-limited: back to the waiting accept
                try:
                    sock, addr = listener.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:
                    log.error("Accept on %s failed: %s", endpoint, exc)
                    break
                self._admit(endpoint, sock, addr)

    def _admit(self, endpoint: Endpoint, sock: socket.socket, addr: tuple[str, int]) -> None:
        host = str(addr[0])
        try:
            self.quotas.inc(host)
        except TooManyConnectionsError as exc:
            rejected_log.warning("Rejected connection from %s:%s on %s: %s", host, addr[1],
                                 endpoint, exc)
            sock.close()
            return
        task = asyncio.create_task(self._serve_socket(sock, host, self._security[endpoint.listener_name]),
                                   name=f"conn-{host}:{addr[1]}")
        self._socket_tasks.add(task)

        def forget(_: asyncio.Task[None]) -> None:
            self._socket_tasks.discard(task)
            self.quotas.dec(host)

        task.add_done_callback(forget)

    async def _serve_socket(self, sock: socket.socket, host: str, security: ListenerSecurity) -> None:
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for option, size in self._buffer_sizes:
                sock.setsockopt(socket.SOL_SOCKET, option, size)
        except OSError as exc:
            log.warning("Connection from %s failed at set-up: %s", host, exc)
            sock.close()
            return
        assert self._channel is not None and self._write_batch is not None
        # Record data cannot go through TLS with sendfile: TLS connections copy it.
        connection = Connection(self._channel,
                                max_frame_bytes=self._config.socket_request_max_bytes,
                                copy_fetch_data=self._copy or security.uses_tls,
                                memory_pool=self.memory_pool,
                                read_limit_bytes=READ_LIMIT_BYTES, security=security,
                                write_batch=self._write_batch,
                                authenticator=self._authenticator(security))
        self._connections.add(connection)
        stats = self.listener_stats[security.name]
        stats.created += 1
        try:
            if not self._accepting:  # shutting down: close at once
                connection.stop_reading()
            loop = asyncio.get_running_loop()
            protocol = cast(asyncio.Protocol, connection)  # one by its methods
            try:
                if security.ssl_context is not None:
                    await loop.connect_accepted_socket(
                        lambda: protocol, sock, ssl=security.ssl_context,
                        ssl_handshake_timeout=SSL_HANDSHAKE_TIMEOUT_S)
                else:
                    await loop.connect_accepted_socket(lambda: protocol, sock)
            except (OSError, TimeoutError) as exc:
                if security.ssl_context is not None:
                    # Kafka's Selector logs the same for a failed TLS handshake.
                    log.warning("Failed authentication with %s (SSL handshake failed: %s) on "
                                "listener %s", host, describe_handshake_error(exc), security.name)
                else:
                    log.warning("Connection from %s failed at set-up: %s", host, exc)
                sock.close()
                return
            try:
                await connection.closed  # this task only waits: the protocol does the work
            except asyncio.CancelledError:
                connection.close()
                raise
        finally:
            self._connections.discard(connection)
            stats.closed += 1

    def _authenticator(self, security: ListenerSecurity) -> SaslAuthenticator | None:
        if security.sasl is None:
            return None
        # Loaded with the listener's SaslSettings (broker.security.listener): a lookup.
        from broker.security.sasl.authenticator import SaslAuthenticator

        assert self._broker is not None
        connection_id = f"{security.name}-{next(self._auth_ids)}"
        return SaslAuthenticator(
            security.sasl, self._broker.credentials,
            lambda version, request: answer_before_authentication(version, request, connection_id))

    async def _idle_sweeper(self) -> None:
        idle_ms = self._config.connections_max_idle_ms
        if idle_ms < 0:
            return
        interval_s = min(max(idle_ms / 4000, 0.01), MAX_SWEEP_INTERVAL_S)
        while True:
            await asyncio.sleep(interval_s)
            now_ns = time.monotonic_ns()
            deadline_ns = now_ns - idle_ms * 1_000_000
            for connection in list(self._connections):
                if connection.active:
                    # Bytes read or an answer finished since the last sweep: idle from now
                    # at most (a flag per request, not a clock read: Connection).
                    connection.active = False
                    connection.last_active_ns = now_ns
                elif connection.idle and connection.last_active_ns < deadline_ns:
                    log.info("Closing idle connection %s (connections.max.idle.ms=%d)",
                             connection.id, idle_ms)
                    connection.close()

    def close_connections(self) -> int:
        """Close every client connection now (they may reconnect); how many there were."""
        connections = list(self._connections)
        for connection in connections:
            connection.close()
        return len(connections)

    # -- shutdown ----------------------------------------------------------------------

    def stop_accepting(self) -> None:
        """Close the listening sockets: new connections are refused from now on."""
        self._accepting = False
        for task in self._tasks:
            task.cancel()
        for _endpoint, sock in self._sockets:
            sock.close()
        self._sockets.clear()

    async def drain(self, timeout_s: float) -> bool:
        """Finish the requests in flight, then close every connection. True if all closed
        within ``timeout_s``."""
        for connection in list(self._connections):
            connection.stop_reading()
        tasks = list(self._socket_tasks)
        if not tasks:
            return True
        _done, pending = await asyncio.wait(tasks, timeout=timeout_s)
        return not pending

    async def close(self) -> None:
        """Cancel whatever is still running (connections, handlers, workers)."""
        tasks = [*self._tasks, *self._socket_tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._channel is not None:
            await self._channel.stop()
        for connection in list(self._connections):
            connection.close()
        if self._write_batch is not None:
            self._write_batch.close()

"""One ZooKeeper session for a broker, on kazoo, awaited from the broker's event loop.

Kafka's ``ZooKeeperClient``/``KafkaZkClient`` in asyncio form:

- ``await ZkClient.connect("h1:2181,h2:2181/kafka", session_timeout_ms=18000,
  connection_timeout_ms=18000, post=manager.put_threadsafe)``. A chroot is created
  (persistent, no data) if missing, through a short first session without the chroot, as
  Kafka does. When no
  server answers within ``zookeeper.connection.timeout.ms``, ``ZkConnectionTimeout`` says
  so, naming the servers and the property.
- Operations are coroutines (``get``, ``exists``, ``children``, ``create``,
  ``create_persistent``, ``set``, ``delete``, ``delete_recursive``, ``multi``); kazoo runs
  them on its own thread and the result comes back with ``call_soon_threadsafe``. A
  connection loss is retried once the connection is back, as Kafka's
  ``retryRequestsUntilConnected``; each operation is bounded by ``op_timeout_s`` (twice the
  session timeout by default) and raises ``ZkTimeout`` after it. At most
  ``max_in_flight`` operations are outstanding (``zookeeper.max.in.flight.requests``);
  more wait their turn.
- Version checks: ``set``/``delete`` take the expected znode version (``ZkBadVersion``).
  ``multi(ops, controller_epoch_zk_version=v)`` prepends a check of ``/controller_epoch``'s
  version, Kafka's fencing of a controller that lost its office: ``ControllerMovedError``.
- Watches are one-shot kazoo watches whose callbacks (kazoo's threads) post
  ``ZkWatchFired(kind, topic)`` through ``post`` (the controller's
  ``ControllerEventManager.put_threadsafe``, which queues an event only once while it
  waits); ``watch(kind)`` makes one. kazoo fires every watch once (while SUSPENDED) and
  forgets it when the connection drops, and, unlike Java's client, never sets it again on
  reconnect: a handler that refuses that firing (an inactive controller) re-reads on the
  reconnect instead (``connections`` counts them; ``ZkBrokerSession`` does it).
- Session: kazoo's state listener (its thread) records the state and posts
  ``ZkSessionChanged``. ``state`` is ``CONNECTED``, ``SUSPENDED`` (connection lost, session
  maybe alive) or ``LOST`` (the session expired: its ephemeral znodes are gone; kazoo opens
  a new session by itself). ``session_id`` is the live session's id (0 when there is
  none); ``connections`` counts CONNECTED states, so a reconnect within the same session
  shows even when its ``ZkSessionChanged`` coalesced with the SUSPENDED one;
  ``is_live(session_id)`` is true only while connected within that very session, and
  may be asked from any thread: a controller acts only while it holds;
  ``may_be_live(session_id)`` also while disconnected for less than the session timeout
  (``disconnected_since``), so a broker cut off from ZooKeeper for longer knows that its
  registration is gone before kazoo can tell it.

Thread-safety: coroutines run on the loop given to ``connect`` (the running loop); the
state fields are written by kazoo's thread as single attribute stores and only read here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState, _prefix_root
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.connection import ConnectionHandler
from kazoo.protocol.serialization import Create
from kazoo.security import OPEN_ACL_UNSAFE

from controller.zk_data import CONTROLLER_EPOCH, MATCH_ANY_VERSION

log = logging.getLogger(__name__)

CONNECTED: Final = "CONNECTED"
SUSPENDED: Final = "SUSPENDED"
LOST: Final = "LOST"
CLOSED: Final = "CLOSED"
_CONNECT_RE: Final = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[^,/:\s]+):(\d{1,5})$")
MAX_DELETE_DEPTH: Final = 64
DEFAULT_MAX_IN_FLIGHT: Final = 10  # zookeeper.max.in.flight.requests


# -- events posted from kazoo's threads ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZkWatchFired:
    """A ZooKeeper watch fired (or was reset by a lost connection): re-read ``kind``
    (``controller``, ``brokers``, ``topics``, ``partition_modifications``, ...); ``topic``
    qualifies per-topic watches. Equal events coalesce in the controller's queue."""

    kind: str
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class ZkSessionChanged:
    """The ZooKeeper connection or session changed state: look at the ``ZkClient`` again."""


Post = Callable[[object], None]  # thread-safe: the controller's put_threadsafe


# -- errors ------------------------------------------------------------------------------


class ZkError(Exception):
    """A ZooKeeper operation failed."""


class ZkConnectionTimeout(ZkError):
    """No ZooKeeper server answered within zookeeper.connection.timeout.ms (start-up)."""


class ZkTimeout(ZkError):
    """An operation got no answer within the client's bound (connection lost too long)."""


class ZkSessionExpired(ZkError):
    """The session ended while the operation was in flight or waiting to be sent."""


class ZkClosed(ZkError):
    """The client was closed."""


class ZkNoNode(ZkError):
    pass


class ZkNodeExists(ZkError):
    pass


class ZkBadVersion(ZkError):
    pass


class ZkNotEmpty(ZkError):
    pass


class ZkRolledBack(ZkError):
    """An op of a failed transaction that was not itself the cause."""


class ControllerMovedError(ZkError):
    """A write conditioned on /controller_epoch's version found another controller's epoch."""


# kazoo's exception -> ours and its message (the path is added): the first that matches.
_TRANSLATIONS: tuple[tuple[type[Exception], type[ZkError], str], ...] = (
    (kz.NoNodeError, ZkNoNode, "no znode"),
    (kz.NodeExistsError, ZkNodeExists, "znode exists"),
    (kz.BadVersionError, ZkBadVersion, "znode version changed"),
    (kz.NotEmptyError, ZkNotEmpty, "znode has children"),
    (kz.ConnectionClosedError, ZkClosed, "ZooKeeper client closed"),
    (kz.SessionExpiredError, ZkSessionExpired, "ZooKeeper session expired"),
    (kz.RolledBackError, ZkRolledBack, "rolled back (another operation of the transaction failed)"),
)


def _translate(exc: BaseException, path: str) -> BaseException:
    """kazoo's exception -> ours (kazoo stays behind this module)."""
    where = f" ({path})" if path else ""
    for kazoo_type, ours, message in _TRANSLATIONS:
        if isinstance(exc, kazoo_type):
            return ours(f"{message}{where}")
    if isinstance(exc, kz.KazooException):
        return ZkError(f"{type(exc).__name__}{where}: {exc}")
    return exc


# -- values --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZnodeStat:
    czxid: int  # the creating transaction id (a broker registration's czxid is its epoch)
    mzxid: int
    version: int  # data version: the expected version of a conditional write
    cversion: int
    ephemeral_owner: int  # the owning session id, 0 for a persistent znode
    num_children: int
    ctime_ms: int = 0  # creation time, ms since the epoch (the server's clock)

    @classmethod
    def of(cls, stat: Any) -> ZnodeStat:
        return cls(stat.czxid, stat.mzxid, stat.version, stat.cversion, stat.ephemeralOwner,
                   stat.numChildren, stat.ctime)


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes | None = None
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True, slots=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = MATCH_ANY_VERSION


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = MATCH_ANY_VERSION


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


Op = CreateOp | SetDataOp | DeleteOp | CheckOp
# Per op: the created path (str), the new stat (ZnodeStat), True (delete, check), or the
# error (ZkError) when the transaction failed (the others then carry a rolled-back ZkError).
OpResult = str | ZnodeStat | bool | ZkError


def parse_connect(connect: str) -> tuple[str, str | None]:
    """``h1:2181,h2:2181/kafka`` -> ("h1:2181,h2:2181", "/kafka"); ValueError if malformed."""
    hosts, slash, chroot = connect.strip().partition("/")
    servers = [s.strip() for s in hosts.split(",")]
    if not hosts or any(_CONNECT_RE.match(s) is None or not 0 < int(s.rsplit(":", 1)[1]) < 65536
                        for s in servers):
        raise ValueError(f"expected host:port[,host:port...][/chroot], got {connect!r}")
    if not slash or not chroot.strip("/"):
        return ",".join(servers), None
    chroot = "/" + chroot.strip("/")
    if "//" in chroot or any(part in (".", "..") for part in chroot.split("/")):
        raise ValueError(f"invalid chroot {chroot!r} in {connect!r}")
    return ",".join(servers), chroot


# -- the session timeout the server granted -------------------------------------------------


class _NegotiatingConnection(ConnectionHandler):  # type: ignore[misc]
    """kazoo's connection handler, remembering the session timeout the server granted.

    ZooKeeper bounds a requested session timeout by its minSessionTimeout and
    maxSessionTimeout (by default 2 and 20 times its tickTime); kazoo 2.11 keeps the granted
    value only in a local of ``_connect``, which returns the read timeout it derives from
    it (two thirds of it). Written on kazoo's connection thread, read from any thread (one
    attribute store)."""

    negotiated_timeout_ms: int | None = None

    def _connect(self, host: str, hostip: str, port: int) -> tuple[float, float]:
        read_timeout, connect_timeout = super()._connect(host, hostip, port)
        self.negotiated_timeout_ms = round(read_timeout * 3 / 2)
        return read_timeout, connect_timeout


def _remember_negotiated_timeout(kazoo: KazooClient) -> _NegotiatingConnection:
    """Make ``kazoo``'s (not yet started) connection handler remember the granted timeout."""
    connection = kazoo._connection
    assert type(connection) is ConnectionHandler, type(connection)
    connection.__class__ = _NegotiatingConnection
    assert isinstance(connection, _NegotiatingConnection)
    return connection


# -- the client ------------------------------------------------------------------------------


class ZkClient:
    """One kazoo session (see the module docstring)."""

    def __init__(self, kazoo: KazooClient, *, connect: str, session_timeout_ms: int,
                 loop: asyncio.AbstractEventLoop, post: Post | None,
                 op_timeout_s: float | None = None,
                 max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> None:
        self._kazoo = kazoo
        self._connection = _remember_negotiated_timeout(kazoo)
        self.connect_string = connect
        self.session_timeout_ms = session_timeout_ms  # requested (zookeeper.session.timeout.ms)
        self.op_timeout_s = op_timeout_s or max(10.0, 2 * session_timeout_ms / 1000)
        self._loop = loop
        self._post = post
        self._connected = asyncio.Event()
        self.state = CONNECTED
        self.session_id = 0
        self.sessions_started = 0
        self.connections = 0  # CONNECTED states seen: a reconnect within a session bumps it
        self.disconnected_since: float | None = None  # monotonic s; None while connected
        self._closing = False
        self._session_listeners: list[Callable[[], None]] = []
        self._in_flight = asyncio.Semaphore(max_in_flight)
        self._watchers: dict[tuple[str, str | None], Callable[[Any], None]] = {}

    @classmethod
    async def connect(cls, connect: str, *, session_timeout_ms: int = 18000,
                      connection_timeout_ms: int | None = None,
                      post: Post | None = None,
                      op_timeout_s: float | None = None,
                      max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> ZkClient:
        """A connected client (chroot created if missing); ZkConnectionTimeout if no server
        answers within ``connection_timeout_ms`` (default: the session timeout)."""
        hosts, chroot = parse_connect(connect)
        timeout_ms = connection_timeout_ms if connection_timeout_ms is not None \
            else session_timeout_ms
        loop = asyncio.get_running_loop()
        started = loop.time()
        if chroot is not None:
            await asyncio.to_thread(_create_chroot, hosts, chroot, session_timeout_ms, timeout_ms)
        remaining_ms = max(1.0, timeout_ms - (loop.time() - started) * 1000)
        kazoo = KazooClient(hosts=hosts + (chroot or ""), timeout=session_timeout_ms / 1000)
        client = cls(kazoo, connect=connect, session_timeout_ms=session_timeout_ms, loop=loop,
                     post=post, op_timeout_s=op_timeout_s, max_in_flight=max_in_flight)
        kazoo.add_listener(client._on_state)
        try:
            await asyncio.to_thread(kazoo.start, remaining_ms / 1000)
        except KazooTimeoutError:
            await asyncio.to_thread(_close_quietly, kazoo)
            raise ZkConnectionTimeout(_timeout_message(hosts, timeout_ms)) from None
        client._on_state(KazooState.CONNECTED)
        log.info("Connected to ZooKeeper %s (session 0x%x, timeout %d ms, %d ms requested)",
                 connect, client.session_id, client.negotiated_session_timeout_ms,
                 session_timeout_ms)
        return client

    @property
    def negotiated_session_timeout_ms(self) -> int:
        """The session timeout the server granted at the latest connect (the requested one
        until a server answered). Safe from any thread."""
        granted = self._connection.negotiated_timeout_ms
        return self.session_timeout_ms if granted is None else granted

    # -- session state (written on kazoo's thread) -------------------------------------------

    def _on_state(self, state: str) -> bool:
        """kazoo's listener; runs on kazoo's thread, must not block."""
        if state == KazooState.CONNECTED:
            client_id = self._kazoo.client_id
            session_id = client_id[0] if client_id else 0
            if session_id != self.session_id:
                self.sessions_started += 1
            self.session_id = session_id
            self.connections += 1
            self.disconnected_since = None
        else:
            if self.disconnected_since is None:
                self.disconnected_since = time.monotonic()
            if state == KazooState.LOST:
                self.session_id = 0
        self.state = CLOSED if self._closing else state
        with contextlib.suppress(RuntimeError):  # loop closed: nobody is waiting any more
            self._loop.call_soon_threadsafe(self._on_state_loop, state)
        self._post_event(ZkSessionChanged())
        return False  # keep listening

    def _post_event(self, event: object) -> None:
        """From kazoo's thread; nothing to do once the loop is gone."""
        if self._post is not None and not self._closing:
            with contextlib.suppress(RuntimeError):
                self._post(event)

    def _on_state_loop(self, state: str) -> None:
        if state == KazooState.CONNECTED and not self._closing:
            self._connected.set()
        else:
            self._connected.clear()
        for listener in list(self._session_listeners):
            listener()

    def add_session_listener(self, listener: Callable[[], None]) -> None:
        """Called on the loop after every connection/session state change."""
        self._session_listeners.append(listener)

    def may_be_live(self, session_id: int) -> bool:
        """Within session ``session_id``, connected or cut off for less than the session
        timeout the server granted (after that the server has expired it, though kazoo
        learns it only when it reconnects). Safe from any thread."""
        since = self.disconnected_since
        timeout_s = self.negotiated_session_timeout_ms / 1000
        return (session_id != 0 and self.session_id == session_id
                and (since is None or time.monotonic() - since < timeout_s))

    def is_live(self, session_id: int) -> bool:
        """Connected, within session ``session_id`` (safe from any thread)."""
        return self.state == CONNECTED and session_id != 0 and self.session_id == session_id

    # -- watches --------------------------------------------------------------------------------

    def watch(self, kind: str, topic: str | None = None) -> Callable[[Any], None]:
        """A kazoo watch callback that posts ``ZkWatchFired(kind, topic)``. The same callable
        for the same (kind, topic), so re-reading a path does not pile up watchers in kazoo."""
        if self._post is None:
            raise ZkError("this client has no event queue for watches")
        key = (kind, topic)
        fired = self._watchers.get(key)
        if fired is None:
            event = ZkWatchFired(kind, topic)

            def fired(_watched_event: Any) -> None:
                self._post_event(event)

            self._watchers[key] = fired
        return fired

    def loop_watch(self, callback: Callable[[], None]) -> Callable[[Any], None]:
        """A kazoo watch callback that runs ``callback()`` on the event loop (once per
        firing; kazoo's thread only schedules it)."""

        def fired(_watched_event: Any) -> None:
            if not self._closing:
                self._call_soon(callback)

        return fired

    def forget_watch(self, kind: str, topic: str | None = None) -> None:
        """Drop the cached callback of a per-topic watch (the topic is gone)."""
        self._watchers.pop((kind, topic), None)

    # -- operations -------------------------------------------------------------------------

    async def get(self, path: str, watch: Callable[[Any], None] | None = None
                  ) -> tuple[bytes | None, ZnodeStat]:
        data, stat = await self._run(path, lambda: self._kazoo.get_async(path, watch))
        return data, ZnodeStat.of(stat)

    async def get_or_none(self, path: str, watch: Callable[[Any], None] | None = None
                          ) -> tuple[bytes | None, ZnodeStat] | None:
        try:
            return await self.get(path, watch)
        except ZkNoNode:
            return None

    async def exists(self, path: str, watch: Callable[[Any], None] | None = None
                     ) -> ZnodeStat | None:
        stat = await self._run(path, lambda: self._kazoo.exists_async(path, watch))
        return None if stat is None else ZnodeStat.of(stat)

    async def children(self, path: str, watch: Callable[[Any], None] | None = None
                       ) -> list[str]:
        result = await self._run(path, lambda: self._kazoo.get_children_async(path, watch))
        return sorted(result)

    async def create(self, path: str, data: bytes | None = None, *, ephemeral: bool = False,
                     sequence: bool = False) -> str:
        """Create one znode (``data`` None: no data, as Kafka writes its parents)."""
        created = await self._run(path, lambda: self._kazoo.create_async(
            path, data, ephemeral=ephemeral, sequence=sequence))
        return str(created)

    async def create_persistent(self, path: str, data: bytes | None = None, *,
                                exist_ok: bool = False) -> bool:
        """Kafka's ``createRecursive``: parents created with no data; True if created."""
        try:
            return await self._create_unless_exists(path, data, exist_ok)
        except ZkNoNode:
            parent = path.rsplit("/", 1)[0]
            if parent:
                await self.create_persistent(parent, exist_ok=True)
        return await self._create_unless_exists(path, data, exist_ok)

    async def _create_unless_exists(self, path: str, data: bytes | None, exist_ok: bool) -> bool:
        """True if created; False if it exists and ``exist_ok``, else ZkNodeExists."""
        try:
            await self.create(path, data)
            return True
        except ZkNodeExists:
            if exist_ok:
                return False
            raise

    async def set(self, path: str, data: bytes, version: int = MATCH_ANY_VERSION) -> ZnodeStat:
        stat = await self._run(path, lambda: self._kazoo.set_async(path, data, version))
        return ZnodeStat.of(stat)

    async def delete(self, path: str, version: int = MATCH_ANY_VERSION) -> None:
        await self._run(path, lambda: self._kazoo.delete_async(path, version))

    async def delete_recursive(self, path: str, _depth: int = 0) -> bool:
        """Delete ``path`` and everything under it; False if it did not exist."""
        if _depth > MAX_DELETE_DEPTH:
            raise ZkError(f"{path}: deeper than {MAX_DELETE_DEPTH} levels")
        try:
            for child in await self.children(path):
                await self.delete_recursive(f"{path.rstrip('/')}/{child}", _depth + 1)
            await self.delete(path)
            return True
        except ZkNoNode:
            return False

    async def multi(self, ops: Sequence[Op], *, controller_epoch_zk_version: int | None = None
                    ) -> list[OpResult]:
        """One transaction: all ops or none. Returns a result per op (errors included, the
        first failing op's error and rolled-back errors for the rest). With
        ``controller_epoch_zk_version``, a check of /controller_epoch's version goes first
        and its failure raises ControllerMovedError (that result is not returned)."""
        all_ops: list[Op] = list(ops)
        if controller_epoch_zk_version is not None:
            all_ops.insert(0, CheckOp(CONTROLLER_EPOCH, controller_epoch_zk_version))

        def start() -> Any:
            tx = self._kazoo.transaction()
            for op in all_ops:
                if isinstance(op, CreateOp) and op.data is None:
                    # kazoo's tx.create insists on bytes; ZooKeeper takes null data, which
                    # is what Kafka writes to its parent znodes: add the op as kazoo would.
                    flags = (1 if op.ephemeral else 0) | (2 if op.sequence else 0)
                    tx._add(Create(_prefix_root(self._kazoo.chroot, op.path), None,
                                   OPEN_ACL_UNSAFE, flags), None)
                elif isinstance(op, CreateOp):
                    tx.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequence)
                elif isinstance(op, SetDataOp):
                    tx.set_data(op.path, op.data, op.version)
                elif isinstance(op, DeleteOp):
                    tx.delete(op.path, op.version)
                else:
                    tx.check(op.path, op.version)
            return tx.commit_async()

        raw = await self._run("multi", start)
        results: list[OpResult] = []
        for op, result in zip(all_ops, raw, strict=True):
            if isinstance(result, BaseException):
                err = _translate(result, op.path)
                results.append(err if isinstance(err, ZkError) else ZkError(str(err)))
            elif isinstance(result, tuple):  # a ZnodeStat namedtuple
                results.append(ZnodeStat.of(result))
            else:
                results.append(result)
        if controller_epoch_zk_version is not None:
            check = results.pop(0)
            if isinstance(check, ZkBadVersion | ZkNoNode):
                raise ControllerMovedError(
                    f"{CONTROLLER_EPOCH} is no longer at version {controller_epoch_zk_version}: "
                    "another controller was elected")
        return results

    async def sync(self, path: str = "/") -> None:
        """A round trip to the server (after it, reads see every write before it)."""
        await self._run(path, lambda: self._kazoo.sync_async(path))

    async def close(self) -> None:
        """End the session (its ephemeral znodes go at once) and stop kazoo's threads."""
        if self._closing:
            return
        self._closing = True
        self._connected.clear()
        await asyncio.to_thread(_close_quietly, self._kazoo)
        self.state = CLOSED
        self.session_id = 0

    # -- plumbing -----------------------------------------------------------------------------

    async def _run(self, path: str, start: Callable[[], Any]) -> Any:
        """Start a kazoo async op and await it; retry after a connection loss."""
        deadline = self._loop.time() + self.op_timeout_s
        while True:
            if self._closing:
                raise ZkClosed(f"ZooKeeper client closed ({path})")
            # asyncio.timeout, not wait_for: a cancellation is never lost to a result that
            # lands at the same moment (3.11's wait_for can swallow it).
            try:
                async with asyncio.timeout_at(deadline), self._in_flight:
                    return await self._await_kazoo(start())
            except TimeoutError:
                raise ZkTimeout(f"no answer from ZooKeeper in {self.op_timeout_s:.0f} s "
                                f"({path})") from None
            except kz.ConnectionLoss:
                if self._loop.time() >= deadline:
                    raise ZkTimeout(f"ZooKeeper connection lost for {self.op_timeout_s:.0f} s "
                                    f"({path})") from None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(deadline):
                        await self._connected.wait()
            except kz.KazooException as exc:
                raise _translate(exc, path) from None

    def _await_kazoo(self, result: Any) -> Awaitable[Any]:
        future: asyncio.Future[Any] = self._loop.create_future()

        def settle(done: Any) -> None:  # kazoo's thread
            try:
                value = done.get_nowait()
            except BaseException as exc:  # handed to the awaiting coroutine
                self._call_soon(_set_exception, future, exc)
            else:
                self._call_soon(_set_result, future, value)

        result.rawlink(settle)
        return future

    def _call_soon(self, fn: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # loop closed: nobody awaits the result
            self._loop.call_soon_threadsafe(fn, *args)


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _timeout_message(hosts: str, timeout_ms: int) -> str:
    return (f"Timed out waiting for connection to ZooKeeper at {hosts} after {timeout_ms} ms "
            "(zookeeper.connection.timeout.ms): is ZooKeeper running and zookeeper.connect "
            "right?")


def _close_quietly(kazoo: KazooClient) -> None:
    with contextlib.suppress(Exception):
        kazoo.stop()
    with contextlib.suppress(Exception):
        kazoo.close()


def _create_chroot(hosts: str, chroot: str, session_timeout_ms: int, timeout_ms: int) -> None:
    """Kafka's createChrootIfNecessary: a first session without the chroot (blocking)."""
    root = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000)
    try:
        root.start(timeout_ms / 1000)
    except KazooTimeoutError:
        _close_quietly(root)
        raise ZkConnectionTimeout(_timeout_message(hosts, timeout_ms)) from None
    try:
        path = ""
        for part in chroot.strip("/").split("/"):
            path += "/" + part
            try:
                root.create(path, None)
                log.info("Created ZooKeeper path %s", path)
            except kz.NodeExistsError:
                pass
    finally:
        _close_quietly(root)

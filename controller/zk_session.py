"""A broker's membership of a ZooKeeper cluster: session, registration, election.

``ZkBrokerSession`` puts the pieces together as Kafka's ``KafkaServer`` and the event
thread of ``KafkaController`` do:

Start-up, in Kafka's order (each step fails start-up with a clear message):
  1. ``connect()``: the session (``zookeeper.connect`` with its chroot, session and
     connection timeouts), the top-level persistent paths, ``/cluster/id`` (created once)
     checked against the log dir's ``meta.properties``; the event task starts;
  2. ``register()``, once the listeners are bound: ``/brokers/ids/<id>`` (a duplicate id
     fails here); the broker epoch is its czxid;
  3. ``elect()``: join the controller election (Startup).
``start()`` does the three in one go.

Events, one at a time from its ``ControllerEventManager`` (kazoo's threads post into it):
  - ``ZkSessionChanged``: when the session that registered the broker is gone (expired),
    resign (Expire), then, once a new session is connected, register again (a new broker
    epoch) and race for the office again (RegisterBrokerAndReelect). A merely suspended
    connection changes nothing, but the controller does not act while it lasts
    (``ControllerElection.is_active`` turns false on kazoo's thread at once). When the
    same session connects again, every watch is set again by re-reading its path (kazoo
    dropped them all on the connection loss, and the controller refused what fired while
    suspended): the election looks at ``/controller`` again and ``on_reconnected`` (the
    controller's reconciliation: ``/brokers/ids``, topics, deletions) runs, as Java's
    client re-sends its watches (SetWatches) and they fire for what changed meanwhile.
  - ``ZkWatchFired("controller")``: the election looks again.
  - anything else goes to ``handler`` (the controller proper), if any.
A ZooKeeper error while handling an event is logged (a lost session is only noted: the new
session's event redoes what matters) and session handling that failed is retried after
``RETRY_BACKOFF_S``.

``stop()`` closes the event task and the session: the registration (and ``/controller``
if held) disappear at once, so the cluster learns of a clean shutdown without waiting for
a session timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from controller import zk_data as zd
from controller.events import ControllerEventManager
from controller.zk_client import (
    CONNECTED,
    ZkClient,
    ZkError,
    ZkSessionChanged,
    ZkSessionExpired,
    ZkWatchFired,
)
from controller.zk_election import ControllerElection, ControllerEpoch
from controller.zk_registration import (
    check_cluster_id,
    create_top_level_paths,
    get_or_create_cluster_id,
    register_broker,
)

log = logging.getLogger(__name__)

RETRY_BACKOFF_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class ZkSettings:
    """The broker properties this needs (names as in server.properties)."""

    connect: str  # zookeeper.connect
    session_timeout_ms: int = 18000  # zookeeper.session.timeout.ms
    connection_timeout_ms: int | None = None  # zookeeper.connection.timeout.ms (None: session's)


class ZkBrokerSession:
    def __init__(self, settings: ZkSettings, registration: Callable[[], zd.BrokerRegistration],
                 *, on_elected: Callable[[ControllerEpoch], Awaitable[None]] | None = None,
                 on_resigned: Callable[[], Awaitable[None]] | None = None,
                 handler: Callable[[object], Awaitable[None]] | None = None,
                 on_registered: Callable[[int], None] | None = None,
                 on_reconnected: Callable[[], None] | None = None) -> None:
        self.settings = settings
        self.on_registered = on_registered
        self._on_reconnected = on_reconnected
        self._registration = registration
        self.events = ControllerEventManager(self._process, name="zk-controller-events")
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        self._handler = handler
        self._zk: ZkClient | None = None
        self._election: ControllerElection | None = None
        self._registered_session = 0
        self._connections_seen = 0  # ZkClient.connections when the watches were last set
        self._registering = False
        self._stopped = False
        self.broker_epoch = -1
        self.cluster_id = ""

    # -- accessors ------------------------------------------------------------------------------

    @property
    def zk(self) -> ZkClient:
        if self._zk is None:
            raise RuntimeError("ZooKeeper session not started")
        return self._zk

    @property
    def election(self) -> ControllerElection:
        if self._election is None:
            raise RuntimeError("ZooKeeper session not started")
        return self._election

    @property
    def is_registered(self) -> bool:
        """``/brokers/ids/<id>`` is this broker's in a session that may still be alive
        (safe from any thread: readiness probes ask it)."""
        zk = self._zk
        session = self._registered_session
        return zk is not None and zk.may_be_live(session)

    @property
    def is_controller(self) -> bool:
        return self._election is not None and self._election.is_active

    # -- life cycle -----------------------------------------------------------------------------

    async def start(self, stored_cluster_id: str | None, meta_path: str,
                    proposed_cluster_id: str) -> str:
        """``connect``, ``register`` and ``elect`` in one go (tests, tools)."""
        cluster_id = await self.connect(stored_cluster_id, meta_path, proposed_cluster_id)
        try:
            await self.register()
            await self.elect()
        except BaseException:
            await self.stop()
            raise
        return cluster_id

    async def connect(self, stored_cluster_id: str | None, meta_path: str,
                      proposed_cluster_id: str) -> str:
        """Connect, create the top-level paths, get (or create) and check the cluster id."""
        self.events.start()
        try:
            self._zk = await ZkClient.connect(
                self.settings.connect, session_timeout_ms=self.settings.session_timeout_ms,
                connection_timeout_ms=self.settings.connection_timeout_ms,
                post=self.events.put_threadsafe)
        except BaseException:
            await self.events.close()
            raise
        try:
            await create_top_level_paths(self._zk)
            self.cluster_id = await get_or_create_cluster_id(
                self._zk, stored_cluster_id or proposed_cluster_id)
            check_cluster_id(self.cluster_id, stored_cluster_id, meta_path)
        except BaseException:
            await self.stop()
            raise
        return self.cluster_id

    async def register(self) -> int:
        """Register the broker (after its listeners are bound); returns the broker epoch.
        From now on a new session registers it again by itself."""
        self._registering = True
        await self._register()
        return self.broker_epoch

    async def elect(self) -> None:
        """Join the controller election (Kafka's controller Startup)."""
        self._election = ControllerElection(self.zk, self._registration().broker_id,
                                            on_elected=self._on_elected,
                                            on_resigned=self._on_resigned)
        await self._election.startup()

    async def stop(self) -> None:
        """Stop the event task (bounded by the manager), then end the session."""
        self._stopped = True
        await self.events.close()
        if self._zk is not None:
            await self._zk.close()

    # -- events ---------------------------------------------------------------------------------

    async def _process(self, event: object) -> None:
        zk = self._zk
        if isinstance(event, ZkWatchFired) and zk is not None and zk.state != CONNECTED:
            # kazoo fires every watch once when the connection drops (Java's client does
            # not). Acting on it now would only wait for the connection, up to the
            # operation timeout, and fail when the cut outlasts it. The reconnect re-reads
            # every watched path: within the session (_on_same_session_reconnected) or in
            # a new one (register and elect again).
            log.debug("Controller event %s left to the reconnect: ZooKeeper is %s",
                      event, zk.state)
            return
        if (isinstance(event, ZkWatchFired) and zk is not None and self._registered_session != 0
                and zk.session_id != self._registered_session):
            # A watch of the session this broker registered (and was perhaps elected) in,
            # which has expired: the new session's ZkSessionChanged, queued behind it,
            # resigns, registers and elects again, and a new controller re-reads every path.
            # Acting on it first would act in an office already lost (a controller fresh
            # from a pause sent UpdateMetadata with its old epoch). Kafka's controller
            # clears its queue on expiry for the same reason.
            log.debug("Controller event %s dropped: it fired in the expired session 0x%x",
                      event, self._registered_session)
            return
        try:
            if isinstance(event, ZkSessionChanged):
                await self._on_session_changed()
            elif isinstance(event, ZkWatchFired) and event.kind == "controller":
                if self._election is not None:
                    await self._election.on_controller_changed()
            elif self._handler is not None:
                await self._handler(event)
        except ZkSessionExpired as exc:
            # The new session's ZkSessionChanged redoes what matters (register, elect).
            log.info("Controller event %s interrupted: %s", event, exc)
        except ZkError as exc:
            log.error("Error processing controller event %s: %s", event, exc)
            if isinstance(event, ZkSessionChanged) and not self._stopped:
                asyncio.get_running_loop().call_later(RETRY_BACKOFF_S, self.events.put,
                                                      ZkSessionChanged())

    async def _on_session_changed(self) -> None:
        zk = self._zk
        if zk is None:  # the first connection, still inside connect()
            return
        if self._registered_session != 0 and zk.session_id != self._registered_session:
            log.info("ZooKeeper session 0x%x expired", self._registered_session)
            self._registered_session = 0
            if self._election is not None:
                await self._election.on_session_expired()
        if (self._registering and self._registered_session == 0 and zk.state == CONNECTED
                and zk.session_id != 0):
            await self._register()
            if self._election is not None:
                await self._election.startup()
        elif (self._registered_session != 0 and zk.is_live(self._registered_session)
              and zk.connections > self._connections_seen):
            await self._on_same_session_reconnected(zk.connections)

    async def _on_same_session_reconnected(self, connections: int) -> None:
        """The connection came back within the session: set every watch again."""
        log.info("Reconnected to ZooKeeper within session 0x%x: re-reading watched paths",
                 self._registered_session)
        if self._on_reconnected is not None:
            self._on_reconnected()
        if self._election is not None:
            await self._election.on_controller_changed()
        self._connections_seen = connections  # not before: a ZkError retries all of it

    async def _register(self) -> None:
        session = self.zk.session_id
        self._connections_seen = self.zk.connections
        self.broker_epoch = await register_broker(self.zk, self._registration())
        self._registered_session = session
        if self.on_registered is not None:
            self.on_registered(self.broker_epoch)

"""Controller election through ZooKeeper, with the controller epoch (Kafka's ``elect()``).

Every broker races to create the ephemeral ``/controller``; the winner, in the same
transaction, moves ``/controller_epoch`` from the epoch it read to the next one with a
version-checked write (Kafka's ``registerControllerAndIncrementControllerEpoch``). So each
controller has its own epoch, higher than any before, and the epoch znode's version after
that write (``ControllerEpoch.zk_version``) fences its later writes: every controller write
is a transaction that first checks that version (``ZkClient.multi(...,
controller_epoch_zk_version=...)``), which fails with ControllerMovedError as soon as a
newer controller was elected.

Losers keep a watch on ``/controller``; when it changes they look again, and when it is
gone they race again. The methods are the handlers of the controller's events, called one
at a time on the event loop:

- ``startup()``: watch ``/controller`` and elect (Kafka's Startup event);
- ``on_controller_changed()``: the ``controller`` watch fired: resign if another broker
  holds the office now, race again if nobody does (ControllerChange / Reelect);
- ``on_session_expired()``: resign at once (Expire); ``startup()`` runs again once the new
  session is there (RegisterBrokerAndReelect, after the broker registered again).

``is_active`` is true only while the session that won the election is alive and connected:
it turns false on kazoo's thread the moment the connection or session is lost, before any
event is processed, so a controller that lost ZooKeeper (paused past its session timeout,
say) stops acting at once; when the session was merely suspended and comes back, it acts
again. ``on_elected(epoch)`` and ``on_resigned()`` are the controller's failover and
resignation (Kafka's ``onControllerFailover`` / ``onControllerResignation``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from controller import zk_data as zd
from controller.zk_client import (
    ControllerMovedError,
    CreateOp,
    SetDataOp,
    ZkBadVersion,
    ZkClient,
    ZkNodeExists,
    ZnodeStat,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerEpoch:
    epoch: int  # sent in every controller request; brokers refuse older ones
    zk_version: int  # /controller_epoch's version: the fence of this controller's writes


class ControllerElection:
    def __init__(self, zk: ZkClient, broker_id: int, *,
                 on_elected: Callable[[ControllerEpoch], Awaitable[None]] | None = None,
                 on_resigned: Callable[[], Awaitable[None]] | None = None) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.active_controller_id = -1
        self.epoch: ControllerEpoch | None = None
        self._session_id = 0
        self._on_elected = on_elected
        self._on_resigned = on_resigned

    @property
    def is_active(self) -> bool:
        return self.epoch is not None and self.zk.is_live(self._session_id)

    # -- event handlers ------------------------------------------------------------------------

    async def startup(self) -> None:
        await self._watch()
        await self.elect()

    async def on_controller_changed(self) -> None:
        await self.maybe_resign()
        if self.active_controller_id == -1:
            await self.elect()

    async def on_session_expired(self) -> None:
        if self.epoch is not None:
            await self._resign()
        self.active_controller_id = -1

    # -- the election ---------------------------------------------------------------------------

    async def elect(self) -> None:
        """Kafka's ``elect()``: take the office if nobody holds it."""
        self.active_controller_id = await self._read_controller_id()
        if self.active_controller_id != -1:
            log.debug("Broker %d has been elected as the controller, so stopping the election "
                      "process.", self.active_controller_id)
            return
        session_id = self.zk.session_id
        try:
            epoch = await self._register_and_increment_epoch()
        except ControllerMovedError:
            await self.maybe_resign()
            log.info("A controller has been elected (broker %d) while this broker %d tried",
                     self.active_controller_id, self.broker_id)
            return
        self.epoch = epoch
        self._session_id = session_id
        self.active_controller_id = self.broker_id
        log.info("%d successfully elected as the controller. Epoch incremented to %d and epoch "
                 "zk version is now %d", self.broker_id, epoch.epoch, epoch.zk_version)
        if self._on_elected is not None:
            await self._on_elected(epoch)

    async def maybe_resign(self) -> None:
        was_active = self.epoch is not None
        await self._watch()
        self.active_controller_id = await self._read_controller_id()
        if was_active and self.active_controller_id != self.broker_id:
            await self._resign()

    async def _resign(self) -> None:
        epoch, self.epoch = self.epoch, None
        log.info("Resigning as the controller (epoch %s)", epoch.epoch if epoch else "?")
        if self._on_resigned is not None:
            await self._on_resigned()

    async def _watch(self) -> None:
        await self.zk.exists(zd.CONTROLLER, watch=self.zk.watch("controller"))

    async def _read_controller_id(self) -> int:
        found = await self.zk.get_or_none(zd.CONTROLLER)
        if found is None:
            return -1
        return zd.ControllerRegistration.decode(found[0]).broker_id

    async def _register_and_increment_epoch(self) -> ControllerEpoch:
        """Kafka's ``registerControllerAndIncrementControllerEpoch``."""
        current, current_version = await self._read_or_create_epoch()
        new_epoch = current + 1
        registration = zd.ControllerRegistration(self.broker_id, int(time.time() * 1000))
        results = await self.zk.multi([
            CreateOp(zd.CONTROLLER, registration.encode(), ephemeral=True),
            SetDataOp(zd.CONTROLLER_EPOCH, zd.encode_controller_epoch(new_epoch), current_version),
        ])
        stat = results[1]
        if isinstance(stat, ZnodeStat):
            return ControllerEpoch(new_epoch, stat.version)
        if any(isinstance(r, ZkNodeExists | ZkBadVersion) for r in results):
            return await self._check_controller_and_epoch(new_epoch)
        error = next(r for r in results if isinstance(r, Exception))
        raise error

    async def _check_controller_and_epoch(self, new_epoch: int) -> ControllerEpoch:
        """The transaction failed: did it succeed before a lost connection made us retry?"""
        if await self._read_controller_id() == self.broker_id:
            data, stat = await self.zk.get(zd.CONTROLLER_EPOCH)
            if zd.decode_controller_epoch(data) == new_epoch:
                return ControllerEpoch(new_epoch, stat.version)
        raise ControllerMovedError("Controller moved to another broker. Aborting controller "
                                   "startup procedure")

    async def _read_or_create_epoch(self) -> tuple[int, int]:
        found = await self.zk.get_or_none(zd.CONTROLLER_EPOCH)
        if found is None:
            try:
                await self.zk.create(zd.CONTROLLER_EPOCH,
                                     zd.encode_controller_epoch(zd.INITIAL_CONTROLLER_EPOCH))
                return zd.INITIAL_CONTROLLER_EPOCH, 0
            except ZkNodeExists:
                found = await self.zk.get(zd.CONTROLLER_EPOCH)
        data, stat = found
        return zd.decode_controller_epoch(data), stat.version

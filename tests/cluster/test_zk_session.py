"""Broker registration, cluster id and controller election on a real ZooKeeper, through
``ZkBrokerSession`` (several brokers' sessions in one process, each its own ZK session)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from controller import zk_data as zd
from controller.zk_client import (
    CONNECTED,
    ControllerMovedError,
    SetDataOp,
    ZkClient,
    ZkSessionExpired,
    ZkWatchFired,
)
from controller.zk_election import ControllerEpoch
from controller.zk_registration import DuplicateBrokerIdError, InconsistentClusterIdError
from controller.zk_session import ZkBrokerSession, ZkSettings
from tests.cluster.conftest import KazooFactory
from tests.cluster.zk_support import expire_session

pytestmark = pytest.mark.timeout(120)

SESSION_TIMEOUT_MS = 6000


class Member:
    """One broker's ZooKeeper side, with a record of its elections and resignations."""

    def __init__(self, connect: str, broker_id: int, *, rack: str | None = None,
                 handler: Callable[[object], Awaitable[None]] | None = None) -> None:
        self.broker_id = broker_id
        self.elected: list[ControllerEpoch] = []
        self.resignations = 0
        self.port = 9000 + broker_id
        self.rack = rack
        self.session = ZkBrokerSession(
            ZkSettings(connect, session_timeout_ms=SESSION_TIMEOUT_MS),
            self.registration, on_elected=self._elected, on_resigned=self._resigned,
            handler=handler)

    def registration(self) -> zd.BrokerRegistration:
        return zd.BrokerRegistration(
            self.broker_id, (zd.BrokerEndpoint("PLAINTEXT", "127.0.0.1", self.port),),
            int(time.time() * 1000), rack=self.rack)

    async def _elected(self, epoch: ControllerEpoch) -> None:
        self.elected.append(epoch)

    async def _resigned(self) -> None:
        self.resignations += 1

    async def start(self, stored_cluster_id: str | None = None) -> str:
        return await self.session.start(stored_cluster_id, "/tmp/meta.properties",
                                        f"proposed-by-{self.broker_id}")

    @property
    def zk(self) -> ZkClient:
        return self.session.zk


@pytest.fixture
async def members(zk_connect: str) -> AsyncIterator[Callable[..., Member]]:
    started: list[Member] = []

    def make(broker_id: int, **kwargs: object) -> Member:
        member = Member(zk_connect, broker_id, **kwargs)  # type: ignore[arg-type]
        started.append(member)
        return member

    yield make
    for member in started:
        await member.session.stop()


async def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def controllers(group: list[Member]) -> list[int]:
    return [m.broker_id for m in group if m.session.is_controller]


async def test_registration_cluster_id_and_paths(members: Callable[..., Member],
                                                 zk_connect: str,
                                                 kazoo_factory: KazooFactory) -> None:
    first = members(1, rack="r1")
    cluster_id = await first.start()
    assert cluster_id == "proposed-by-1"  # created once, by the first broker
    second = members(2)
    assert await second.start() == cluster_id  # read by every later one
    check = kazoo_factory(zk_connect)
    for path in zd.PERSISTENT_PATHS:
        assert check.get(path)[0] is None, path
    data, stat = check.get(zd.broker_path(1))
    assert stat.ephemeralOwner == first.zk.session_id
    assert first.session.broker_epoch == stat.czxid  # the broker epoch is the czxid
    assert stat.version == 1  # created empty, then set: as Kafka's CheckedEphemeral does
    body = json.loads(data)
    assert body["endpoints"] == [f"PLAINTEXT://127.0.0.1:{first.port}"]
    assert body["rack"] == "r1" and body["version"] == 5 and body["jmx_port"] == -1
    assert second.session.broker_epoch > first.session.broker_epoch
    assert zd.decode_cluster_id(check.get(zd.CLUSTER_ID)[0]) == cluster_id
    # meta.properties naming another cluster fails start-up, saying why.
    stranger = members(3)
    with pytest.raises(InconsistentClusterIdError, match="Expected proposed-by-1, but read other"):
        await stranger.start(stored_cluster_id="other")
    assert check.exists(zd.broker_path(3)) is None  # and it did not register


async def test_duplicate_broker_id_fails_start_up(members: Callable[..., Member],
                                                  kazoo_factory: KazooFactory,
                                                  zk_connect: str) -> None:
    first = members(1)
    await first.start()
    twin = members(1)
    with pytest.raises(DuplicateBrokerIdError) as info:
        await twin.start()
    message = str(info.value)
    assert "Broker id 1 is already registered" in message and "broker.id=1" in message
    _, stat = kazoo_factory(zk_connect).get(zd.broker_path(1))
    assert stat.ephemeralOwner == first.zk.session_id  # the first keeps its registration
    assert twin.session._zk is not None and twin.zk.session_id == 0  # the twin let go


async def test_one_controller_and_failover(members: Callable[..., Member],
                                           kazoo_factory: KazooFactory, zk_connect: str) -> None:
    group = [members(i) for i in (1, 2, 3)]
    await asyncio.gather(*(m.start() for m in group))
    await wait_for(lambda: len(controllers(group)) == 1, "one controller")
    (winner_id,) = controllers(group)
    winner = group[winner_id - 1]
    assert [e.epoch for e in winner.elected] == [1]
    assert all(m.session.election.active_controller_id == winner_id for m in group)
    check = kazoo_factory(zk_connect)
    assert zd.ControllerRegistration.decode(check.get(zd.CONTROLLER)[0]).broker_id == winner_id
    epoch_data, epoch_stat = check.get(zd.CONTROLLER_EPOCH)
    assert zd.decode_controller_epoch(epoch_data) == 1
    assert winner.elected[0].zk_version == epoch_stat.version

    # A clean stop ends the session: /controller goes at once and another broker takes over.
    await winner.session.stop()
    rest = [m for m in group if m is not winner]
    await wait_for(lambda: len(controllers(rest)) == 1, "a new controller")
    (new_id,) = controllers(rest)
    new = group[new_id - 1]
    assert [e.epoch for e in new.elected] == [2]
    await wait_for(lambda: all(m.session.election.active_controller_id == new_id for m in rest),
                   "every broker to know the new controller")


async def test_controller_that_loses_its_session_is_fenced(members: Callable[..., Member],
                                                           kazoo_factory: KazooFactory,
                                                           zk_connect: str) -> None:
    group = [members(i) for i in (1, 2)]
    for m in group:
        await m.start()
    await wait_for(lambda: len(controllers(group)) == 1, "one controller")
    (old_id,) = controllers(group)
    old, other = group[old_id - 1], group[2 - old_id]
    old_epoch = old.elected[-1]
    old_broker_epoch = old.session.broker_epoch

    await asyncio.to_thread(expire_session, old.zk._kazoo)
    assert not old.session.is_controller  # stopped acting at once, before any event ran
    await wait_for(lambda: other.session.is_controller, "the other broker to take over")
    assert other.elected[-1].epoch == old_epoch.epoch + 1
    # The old controller's writes are refused: in the expired session, and in the new one
    # by ZooKeeper's check of /controller_epoch's version (its epoch's version is stale).
    zombie_write = [SetDataOp(zd.CONTROLLER_EPOCH, b"999")]
    with pytest.raises((ControllerMovedError, ZkSessionExpired)):
        await old.zk.multi(zombie_write, controller_epoch_zk_version=old_epoch.zk_version)
    # It resigned, registered again with a new session (a new broker epoch) and follows.
    await wait_for(lambda: old.resignations == 1 and old.session.broker_epoch > old_broker_epoch,
                   "the old controller to resign and re-register")
    with pytest.raises(ControllerMovedError):
        await old.zk.multi(zombie_write, controller_epoch_zk_version=old_epoch.zk_version)
    await wait_for(lambda: old.session.election.active_controller_id == other.broker_id,
                   "the old controller to follow the new one")
    assert controllers(group) == [other.broker_id]
    _, stat = kazoo_factory(zk_connect).get(zd.broker_path(old.broker_id))
    assert stat.czxid == old.session.broker_epoch
    assert stat.ephemeralOwner == old.zk.session_id


async def test_a_broker_whose_session_expired_registers_again(members: Callable[..., Member],
                                                              kazoo_factory: KazooFactory,
                                                              zk_connect: str) -> None:
    member = members(5)
    await member.start()
    first_epoch = member.session.broker_epoch
    check = kazoo_factory(zk_connect)
    await asyncio.to_thread(expire_session, member.zk._kazoo)
    await wait_for(lambda: member.session.broker_epoch > first_epoch, "re-registration")
    data, stat = check.get(zd.broker_path(5))
    assert stat.czxid == member.session.broker_epoch
    assert zd.BrokerRegistration.decode(5, data).endpoints[0].port == member.port


async def test_a_watch_of_the_expired_session_is_not_handled_before_the_resignation(
        members: Callable[..., Member]) -> None:
    """A watch event queued in the session a controller lost, still waiting when the new
    session is up (its event queue was busy: a broker fresh from a pause), is dropped: the
    new session's resignation and election come first and re-read what matters. Handled
    first, it ran in an office already lost (the controller sent UpdateMetadata with its
    old epoch and was refused)."""
    busy = asyncio.Event()
    release = asyncio.Event()
    handled: list[tuple[object, int]] = []  # (event, resignations when it was handled)
    member: Member | None = None

    async def handler(event: object) -> None:
        if event == "busy":
            busy.set()
            await release.wait()
            return
        assert member is not None
        handled.append((event, member.resignations))

    member = members(1, handler=handler)
    await member.start()
    await wait_for(lambda: member.session.is_controller, "the controller")
    old_session = member.zk.session_id
    member.session.events.put("busy")  # the queue is held by a long event
    await asyncio.wait_for(busy.wait(), 10)
    member.session.events.put(ZkWatchFired("brokers"))  # a watch that fired meanwhile
    await asyncio.to_thread(expire_session, member.zk._kazoo)
    await wait_for(lambda: member.zk.state == CONNECTED and member.zk.session_id != old_session,
                   "a new session")
    release.set()
    await wait_for(lambda: member.resignations == 1 and member.session.is_controller,
                   "the resignation and a new election")
    stale = [event for event, resigned in handled
             if isinstance(event, ZkWatchFired) and resigned == 0]
    assert stale == [], f"handled in the lost office: {stale}"

"""controller.zk_client on a real ZooKeeper: chroot, timeouts, versions, multi, watches,
connection loss and session expiry."""

from __future__ import annotations

import asyncio
import time

import pytest

from controller import zk_data as zd
from controller.zk_client import (
    CONNECTED,
    CheckOp,
    ControllerMovedError,
    CreateOp,
    SetDataOp,
    ZkBadVersion,
    ZkClient,
    ZkConnectionTimeout,
    ZkNodeExists,
    ZkNoNode,
    ZkSessionChanged,
    ZkWatchFired,
    ZnodeStat,
    parse_connect,
)
from devcluster.zookeeper import ZooKeeper, free_ports
from tests.cluster.conftest import KazooFactory
from tests.cluster.zk_support import expire_session

pytestmark = pytest.mark.timeout(120)


class Inbox:
    """What kazoo's threads post, collected on the loop (with the queue's rule: an event
    equal to one still waiting is not queued twice)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.items: list[object] = []

    def post(self, event: object) -> None:  # kazoo's thread
        self.loop.call_soon_threadsafe(self._add, event)

    def _add(self, event: object) -> None:
        if event not in self.items:
            self.items.append(event)

    async def drain(self, wait_s: float = 0.3) -> list[object]:
        await asyncio.sleep(wait_s)
        out, self.items = self.items, []
        return out


def test_parse_connect() -> None:
    assert parse_connect("127.0.0.1:2181") == ("127.0.0.1:2181", None)
    assert parse_connect("a:1,b:2/kafka/x") == ("a:1,b:2", "/kafka/x")
    assert parse_connect("a:1/") == ("a:1", None)
    for bad in ("", "a", "a:", "a:99999", "a:1,,b:2", "a:1/x//y", "a:1/../x", "a b:1"):
        with pytest.raises(ValueError):
            parse_connect(bad)


async def test_connect_creates_the_chroot(zookeeper: ZooKeeper, zk_chroot: str,
                                          kazoo_factory: KazooFactory) -> None:
    zk = await ZkClient.connect(f"{zookeeper.connect_string}{zk_chroot}/deeper",
                                session_timeout_ms=6000)
    try:
        await zk.create("/x", b"1")
        root = kazoo_factory(zookeeper.connect_string)
        assert root.get(f"{zk_chroot}/deeper")[0] is None  # no data, as Kafka creates it
        assert root.get(f"{zk_chroot}/deeper/x")[0] == b"1"
        assert zk.state == CONNECTED and zk.session_id != 0
    finally:
        await zk.close()


@pytest.mark.parametrize("chroot", ["", "/kafka"])
async def test_unreachable_zookeeper_times_out_clearly(chroot: str) -> None:
    (port,) = free_ports(1)  # nothing listens there
    started = time.monotonic()
    with pytest.raises(ZkConnectionTimeout) as info:
        await ZkClient.connect(f"127.0.0.1:{port}{chroot}", session_timeout_ms=6000,
                               connection_timeout_ms=1500)
    elapsed = time.monotonic() - started
    assert 1.4 <= elapsed < 6.0, elapsed
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "1500 ms" in message
    assert "zookeeper.connection.timeout.ms" in message


async def test_versions_parents_and_multi(zk_connect: str) -> None:
    zk = await ZkClient.connect(zk_connect, session_timeout_ms=6000)
    try:
        assert await zk.create_persistent("/a/b/c", b"leaf")
        assert not await zk.create_persistent("/a/b/c", exist_ok=True)
        with pytest.raises(ZkNodeExists):
            await zk.create_persistent("/a/b/c")
        assert (await zk.get("/a"))[0] is None and (await zk.get("/a/b"))[0] is None
        data, stat = await zk.get("/a/b/c")
        assert (data, stat.version) == (b"leaf", 0)
        stat = await zk.set("/a/b/c", b"v1", version=0)
        assert stat.version == 1
        with pytest.raises(ZkBadVersion):
            await zk.set("/a/b/c", b"stale", version=0)
        with pytest.raises(ZkBadVersion):
            await zk.delete("/a/b/c", version=0)
        with pytest.raises(ZkNoNode):
            await zk.get("/nope")
        assert await zk.get_or_none("/nope") is None
        assert await zk.exists("/nope") is None
        assert await zk.children("/a") == ["b"]

        results = await zk.multi([CreateOp("/m", b"1"), SetDataOp("/m", b"2", 0),
                                  CheckOp("/m", 1)])
        assert results[0] == "/m" and isinstance(results[1], ZnodeStat) and results[2] is True
        failed = await zk.multi([CreateOp("/n", b"1"), SetDataOp("/m", b"x", 0)])
        assert isinstance(failed[1], ZkBadVersion)  # and nothing was done:
        assert await zk.exists("/n") is None

        # The controller's fence: a write conditioned on /controller_epoch's version.
        await zk.create(zd.CONTROLLER_EPOCH, b"1")
        ok = await zk.multi([SetDataOp("/m", b"3")], controller_epoch_zk_version=0)
        assert isinstance(ok[0], ZnodeStat)
        await zk.set(zd.CONTROLLER_EPOCH, b"2")  # a newer controller was elected
        with pytest.raises(ControllerMovedError):
            await zk.multi([SetDataOp("/m", b"zombie")], controller_epoch_zk_version=0)
        assert (await zk.get("/m"))[0] == b"3"

        assert await zk.delete_recursive("/a")
        assert not await zk.delete_recursive("/a")
    finally:
        await zk.close()


async def test_watches_become_coalesced_events(zk_connect: str) -> None:
    inbox = Inbox()
    zk = await ZkClient.connect(zk_connect, session_timeout_ms=6000, post=inbox.post)
    try:
        await inbox.drain(0.1)  # the initial session event
        await zk.create_persistent("/brokers/ids")
        assert await zk.children("/brokers/ids", watch=zk.watch("brokers")) == []
        assert await zk.exists("/controller", watch=zk.watch("controller")) is None
        await zk.create("/brokers/ids/1", b"x", ephemeral=True)
        await zk.create("/controller", b"y", ephemeral=True)
        got = await inbox.drain()
        assert set(got) == {ZkWatchFired("brokers"), ZkWatchFired("controller")}
        # One-shot: a second change without re-reading fires nothing.
        await zk.create("/brokers/ids/2", b"x", ephemeral=True)
        assert await inbox.drain() == []
        # Re-read twice (same watch callable), change twice before the event is taken: one.
        await zk.children("/brokers/ids", watch=zk.watch("brokers"))
        await zk.children("/brokers/ids", watch=zk.watch("brokers"))
        await zk.delete("/brokers/ids/1")
        await zk.delete("/brokers/ids/2")
        assert await inbox.drain() == [ZkWatchFired("brokers")]
    finally:
        await zk.close()


async def test_session_expiry(zk_connect: str, kazoo_factory: KazooFactory) -> None:
    inbox = Inbox()
    zk = await ZkClient.connect(zk_connect, session_timeout_ms=30000, post=inbox.post)
    try:
        await zk.create("/eph", b"1", ephemeral=True)
        await zk.exists("/eph", watch=zk.watch("eph"))
        old_session = zk.session_id
        assert zk.is_live(old_session) and zk.sessions_started == 1
        await inbox.drain(0.1)
        # expire_session blocks: run it off the loop so kazoo's callbacks can land.
        await asyncio.to_thread(expire_session, zk._kazoo)
        assert not zk.is_live(old_session)  # at once, on kazoo's thread
        deadline = time.monotonic() + 15
        while zk.state != CONNECTED or zk.session_id in (0, old_session):
            assert time.monotonic() < deadline, "no new session"
            await asyncio.sleep(0.05)
        assert zk.sessions_started == 2 and zk.is_live(zk.session_id)
        got = await inbox.drain()
        assert ZkSessionChanged() in got
        assert await zk.exists("/eph") is None  # the old session's ephemeral went with it
        await zk.create("/eph", b"2", ephemeral=True)  # the new session works
    finally:
        await zk.close()
    assert zk.state == "CLOSED"
    check = kazoo_factory(zk_connect)
    assert check.exists("/eph") is None  # closing ended the session


async def test_operations_survive_a_lost_zookeeper_node(healthy_ensemble: ZooKeeper) -> None:
    zk = await ZkClient.connect(healthy_ensemble.connect_string, session_timeout_ms=10000)
    try:
        await zk.create("/survivor", b"1", ephemeral=True)
        session = zk.session_id
        connected_to = zk._kazoo._connection._socket.getpeername()[1]
        node = next(n for n in healthy_ensemble.nodes if n.client_port == connected_to)
        node.kill()
        # kazoo reconnects to another node within the session; the write is retried.
        await zk.create("/after", b"2")
        assert zk.session_id == session
        assert (await zk.get("/survivor"))[0] == b"1"
    finally:
        await zk.close()

"""The real ZooKeeper the cluster tests run on: standalone, ensemble, faults, session expiry."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooState
from kazoo.exceptions import NoNodeError

from devcluster.zookeeper import ZooKeeper, four_letter_word
from tests.cluster.conftest import KazooFactory
from tests.cluster.zk_support import expire_session, wait_until

pytestmark = pytest.mark.timeout(120)


def test_standalone_server_answers_and_keeps_data(zookeeper: ZooKeeper, zk_connect: str,
                                                  kazoo_factory: KazooFactory) -> None:
    assert four_letter_word(zookeeper.nodes[0].client_port, "ruok") == "imok"
    assert zookeeper.nodes[0].mode() == "standalone"
    client = kazoo_factory(zk_connect)
    client.create("/a/b", b"payload", makepath=True)
    other = kazoo_factory(zk_connect)
    assert other.get("/a/b")[0] == b"payload"


def test_chroots_are_separate(zookeeper: ZooKeeper, zk_chroot: str,
                              kazoo_factory: KazooFactory) -> None:
    root = kazoo_factory(zookeeper.connect_string)
    root.create(f"{zk_chroot}/x", b"1", makepath=True)
    inside = kazoo_factory(zookeeper.connect_string + zk_chroot)
    assert inside.get("/x")[0] == b"1"
    with pytest.raises(NoNodeError):
        root.get("/x")


def test_forced_expiry_removes_ephemerals_and_fires_watches(zk_connect: str,
                                                            kazoo_factory: KazooFactory) -> None:
    owner = kazoo_factory(zk_connect, session_timeout_s=30.0)
    watcher = kazoo_factory(zk_connect)
    owner.create("/eph", b"x", ephemeral=True)
    gone = threading.Event()
    assert watcher.exists("/eph", watch=lambda event: gone.set()) is not None
    old_session = owner.client_id[0]

    expire_session(owner)  # far sooner than the 30 s session timeout

    assert gone.wait(5.0)
    assert watcher.exists("/eph") is None
    # kazoo opens a new session by itself after an expiry.
    wait_until(lambda: owner.state == KazooState.CONNECTED, timeout_s=15, what="a new session")
    assert owner.client_id[0] != old_session


def test_ensemble_survives_losing_one_node(healthy_ensemble: ZooKeeper,
                                           kazoo_factory: KazooFactory) -> None:
    zk = healthy_ensemble
    assert sorted(n.mode() or "" for n in zk.nodes) == ["follower", "follower", "leader"]
    client = kazoo_factory(zk.connect_string)
    client.create("/before", b"1")
    leader = zk.leader()
    assert leader is not None
    leader.kill()
    wait_until(lambda: zk.leader() is not None, timeout_s=30, what="a new ZooKeeper leader")
    client.create("/after-kill", b"2")  # kazoo retries on another node
    follower = next(n for n in zk.nodes if n.mode() == "follower")
    follower.pause()  # now one killed, one hung: no quorum until one is back
    follower.resume()
    wait_until(lambda: follower.mode() is not None, timeout_s=30, what="the resumed follower")
    assert client.get("/before")[0] == b"1"
    assert client.get("/after-kill")[0] == b"2"
    leader.start()
    zk.wait_serving([leader], timeout_s=60)
    assert kazoo_factory(leader.address).get("/after-kill")[0] == b"2"  # it caught up


def test_ensemble_without_quorum_stops_serving(healthy_ensemble: ZooKeeper) -> None:
    zk = healthy_ensemble
    survivor, *others = zk.nodes
    for node in others:
        node.kill()
    wait_until(lambda: survivor.mode() is None, timeout_s=30,
               what="the last node to stop serving without a quorum")
    others[0].start()
    zk.wait_serving([survivor, others[0]], timeout_s=60)

"""A controller whose ZooKeeper connection drops and comes back within its session keeps
watching ``/brokers/ids``: a broker restarted afterwards gets the controller's metadata.

kazoo fires and forgets every watch on a connection loss (while SUSPENDED), and never sets
them again on reconnect; the controller refuses what fires while it is suspended. Kafka's
Java client re-sends its watches on reconnect (SetWatches), so Kafka's controller sees
later broker changes: here the controller re-reads what it watches once reconnected.

The controller (broker 1) reaches ZooKeeper through a TCP proxy that the test cuts and
restores; broker 2 connects directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.cluster.conftest import ClusterBrokers
from tests.cluster.tcp_proxy import TcpProxy
from tests.cluster.test_cluster_brokers import controller_of, create, everyone_sees
from tests.cluster.zk_support import wait_until

SESSION_TIMEOUT_MS = 10000
CUT_S = 1.0
METADATA_BOUND_S = 20.0  # below the restarted broker's 30 s "serving anyway" fallback


def test_controller_watches_brokers_after_reconnect(
        cluster_brokers: Callable[..., ClusterBrokers], zk_chroot: str,
        zk_proxy: TcpProxy) -> None:
    brokers = cluster_brokers(0, zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS))
    brokers.start(1, zookeeper_connect=f"127.0.0.1:{zk_proxy.port}{zk_chroot}")
    wait_until(lambda: controller_of(brokers.brokers[1].bootstrap) == 1, timeout_s=30,
               what="broker 1 to be the controller")
    brokers.start(2)
    create(brokers.bootstrap(), "t", {0: [1, 2], 1: [2, 1]})
    wait_until(lambda: everyone_sees(brokers, "t", {0: 1, 1: 2}), timeout_s=30,
               what="the initial leaders")
    # The controller's connection drops and comes back well within its session.
    connections = zk_proxy.accepted
    zk_proxy.cut()
    time.sleep(CUT_S)
    zk_proxy.restore()
    wait_until(lambda: zk_proxy.accepted > connections, timeout_s=SESSION_TIMEOUT_MS / 2000,
               what="the controller to reconnect")
    wait_until(lambda: controller_of(brokers.brokers[1].bootstrap) == 1, timeout_s=10,
               what="broker 1 to be the controller still")
    time.sleep(0.5)  # the reconnect's state change reaches the controller's event queue
    # Broker 2 restarts: its registration goes and comes back. The controller must notice
    # (through its /brokers/ids watch) and send it metadata and its replicas.
    restarted = brokers.brokers[2].restart()
    started = time.monotonic()
    wait_until(lambda: controller_of(restarted.bootstrap) == 1
               and everyone_sees(brokers, "t", {0: 1, 1: 1}),
               timeout_s=METADATA_BOUND_S,
               what="the restarted broker to get the controller's metadata")
    assert time.monotonic() - started < METADATA_BOUND_S
    assert "Reconnected to ZooKeeper within session" in brokers.brokers[1].stderr_text()


SHORT_SESSION_TIMEOUT_MS = 3000  # ZooKeeper operations give up after twice this: 6 s
LONG_CUT_S = 8.0


def test_controller_cut_off_longer_than_its_operation_timeout_comes_back_without_error(
        cluster_brokers: Callable[..., ClusterBrokers], zk_chroot: str,
        zk_proxy: TcpProxy) -> None:
    """kazoo fires the /controller watch when the connection drops. The controller must not
    act on that firing while cut off (it could only wait for ZooKeeper and give up with an
    error once the cut outlasts its operation timeout): the reconnect, here in a new
    session since the old one expired, registers the broker and elects again. The test's
    broker-health check fails on any ERROR line the broker logs."""
    brokers = cluster_brokers(0, zookeeper_session_timeout_ms=str(SHORT_SESSION_TIMEOUT_MS))
    broker = brokers.start(1, zookeeper_connect=f"127.0.0.1:{zk_proxy.port}{zk_chroot}")
    wait_until(lambda: controller_of(broker.bootstrap) == 1, timeout_s=30,
               what="broker 1 to be the controller")
    create(brokers.bootstrap(), "t", {0: [1]})
    zk_proxy.cut()
    time.sleep(LONG_CUT_S)
    zk_proxy.restore()
    wait_until(lambda: "expired" in broker.stderr_text(), timeout_s=30,
               what="the broker to learn that its session expired")
    wait_until(lambda: broker.stderr_text().count("successfully elected as the controller") == 2,
               timeout_s=30, what="broker 1 to be elected again in its new session")
    wait_until(lambda: everyone_sees(brokers, "t", {0: 1}), timeout_s=30,
               what="the topic's leader after the new election")

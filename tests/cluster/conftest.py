"""Fixtures that run a real ZooKeeper (devcluster.zookeeper) for cluster tests.

- ``zookeeper`` (session): one standalone server shared by every test of the run. Tests
  never share znodes: each takes its own chroot from ``zk_chroot``.
- ``zk_chroot``: a fresh chroot path (``/t-<hex>``), deleted with everything under it after
  the test; ``zk_connect`` is ``127.0.0.1:PORT/t-<hex>``, what ``zookeeper.connect`` takes.
- ``zk_ensemble`` (session): a 3-node ensemble for tests that kill or pause nodes, started
  once for the modules that use it (each start and stop of three JVMs took 4-7 s);
  ``healthy_ensemble`` hands it over with every node serving and heals it again after the
  test (resumes paused nodes, restarts killed ones), so the tests stay independent.
- ``kazoo_factory(hosts)``: started kazoo clients, stopped at teardown.
- ``cluster_brokers(count=3, **props)``: minikafka broker processes (``broker.id`` 1..count)
  on the test's chroot, with ``CLUSTER_TEST_PROPS``; killed together at teardown, their logs
  printed when the test failed.

Every start and stop is bounded (devcluster.zookeeper's timeouts). When a test fails, the
server logs' tails are printed.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from devcluster.zookeeper import ZooKeeper
from tests import outcome
from tests.cluster.tcp_proxy import TcpProxy
from tests.cluster.zk_support import kazoo_client
from tests.integration.broker_process import BrokerProcess

KazooFactory = Callable[..., KazooClient]


def _print_logs(zk: ZooKeeper) -> None:
    for node in zk.nodes:
        print(f"\n----- ZooKeeper node {node.myid} -----\n{node.log_tail()}")


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeper]:
    zk = ZooKeeper(tmp_path_factory.mktemp("zookeeper"), nodes=1).start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def zk_proxy(zookeeper: ZooKeeper) -> Iterator[TcpProxy]:
    """A TCP proxy in front of the session's ZooKeeper, to cut a broker's link to it."""
    port = int(zookeeper.connect_string.split(",")[0].rsplit(":", 1)[1])
    proxy = TcpProxy(port)
    yield proxy
    proxy.close()


@pytest.fixture
def zk_chroot(zookeeper: ZooKeeper, request: pytest.FixtureRequest) -> Iterator[str]:
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    yield chroot
    if outcome.failed(request.node):
        _print_logs(zookeeper)
    with contextlib.suppress(Exception):
        client = kazoo_client(zookeeper.connect_string)
        try:
            client.delete(chroot, recursive=True)
        finally:
            client.stop()
            client.close()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeper, zk_chroot: str) -> str:
    return f"{zookeeper.connect_string}{zk_chroot}"


@pytest.fixture(scope="session")
def zk_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeper]:
    zk = ZooKeeper(tmp_path_factory.mktemp("zk-ensemble"), nodes=3).start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def healthy_ensemble(zk_ensemble: ZooKeeper, request: pytest.FixtureRequest) -> Iterator[ZooKeeper]:
    _heal(zk_ensemble)
    yield zk_ensemble
    if outcome.failed(request.node):
        _print_logs(zk_ensemble)
    _heal(zk_ensemble)


def _heal(zk: ZooKeeper) -> None:
    for node in zk.nodes:
        if node.paused:
            node.resume()
        if not node.running():
            node.start()
    zk.wait_serving()


@pytest.fixture
def kazoo_factory() -> Iterator[KazooFactory]:
    clients: list[KazooClient] = []

    def make(hosts: str, **kwargs: Any) -> KazooClient:
        client = kazoo_client(hosts, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        with contextlib.suppress(Exception):
            client.stop()
            client.close()


# -- brokers of a cluster ------------------------------------------------------------------

# Properties every test broker of a cluster gets: short session timeout (failover within
# seconds), quick controlled-shutdown retries (teardown stops brokers one by one).
CLUSTER_TEST_PROPS: dict[str, str] = {
    "zookeeper.session.timeout.ms": "6000",
    "controlled.shutdown.retry.backoff.ms": "300",
    "group.initial.rebalance.delay.ms": "0",
}


class ClusterBrokers:
    """Broker processes of one cluster (one ZooKeeper chroot): ``start(broker_id)``."""

    def __init__(self, tmp_dir: Path, zk_connect: str, props: dict[str, str]) -> None:
        self.tmp_dir = tmp_dir
        self.zk_connect = zk_connect
        self.props = props
        self.brokers: dict[int, BrokerProcess] = {}
        self.all: list[BrokerProcess] = []

    def start(self, broker_id: int, **props: str) -> BrokerProcess:
        return self._process(broker_id, props).start()

    def start_together(self, broker_ids: Iterable[int],
                       props_of: Mapping[int, dict[str, str]] | None = None) -> None:
        """Start several brokers at once (each process launched, then each awaited);
        ``props_of`` maps a broker id to properties of its own."""
        props_of = props_of or {}
        for proc in [self._process(broker_id, props_of.get(broker_id, {})).launch()
                     for broker_id in broker_ids]:
            proc.wait_ready()

    def start_cluster(self, count: int,
                      props_of: Mapping[int, dict[str, str]] | None = None) -> None:
        """Brokers 1..count: broker 1 alone first, so that it is the controller, as when
        they were started one after another; the others together. ``props_of`` maps a
        broker id to properties of its own."""
        props_of = props_of or {}
        if count >= 1:
            self.start(1, **props_of.get(1, {}))
        self.start_together(range(2, count + 1), props_of)

    def _process(self, broker_id: int, props: dict[str, str]) -> BrokerProcess:
        overrides = {"broker.id": str(broker_id), "zookeeper.connect": self.zk_connect,
                     **CLUSTER_TEST_PROPS, **self.props,
                     **{k.replace("_", "."): v for k, v in props.items()}}
        proc = self.brokers.get(broker_id)
        if proc is None:
            proc = BrokerProcess(self.tmp_dir, overrides, name=f"broker{broker_id}")
            self.brokers[broker_id] = proc
            self.all.append(proc)
        else:
            proc.overrides.update(overrides)
        return proc

    def bootstrap(self, *, exclude: int | None = None) -> str:
        return ",".join(p.bootstrap for i, p in sorted(self.brokers.items())
                        if i != exclude and p.is_running())


def kill_together(procs: list[BrokerProcess]) -> None:
    """SIGKILL every running one of ``procs`` (paused ones too), then reap them: stopping the
    brokers of a cluster one after another leaves partitions without a live replica, which
    the controller rightly logs as errors."""
    running = [p for p in procs if p.is_running()]
    for proc in running:
        if proc.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.proc.kill()
    for proc in running:
        proc.wait(cause="SIGKILL by the test")


@pytest.fixture
def cluster_brokers(tmp_path: Path, zk_connect: str,
                    request: pytest.FixtureRequest) -> Iterator[Callable[..., ClusterBrokers]]:
    made: list[ClusterBrokers] = []

    def make(count: int = 3, connect: str | None = None, **props: str) -> ClusterBrokers:
        brokers = ClusterBrokers(tmp_path, connect or zk_connect,
                                 {k.replace("_", "."): v for k, v in props.items()})
        made.append(brokers)
        brokers.start_cluster(count)
        return brokers

    yield make
    failed = outcome.failed(request.node)
    # Torn down at once (the tests of shutdown check SIGTERM's exit code and handover
    # themselves).
    kill_together([p for brokers in made for p in brokers.all])
    if failed:
        for proc in (p for brokers in made for p in brokers.all):
            print(f"\n----- {proc.name} stderr -----\n{proc.stderr_text()[-20000:]}")

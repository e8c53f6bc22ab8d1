"""Fixtures that run a real ZooKeeper (devcluster.zookeeper) for cluster tests.

- ``zookeeper`` (session): one standalone server shared by every test of the run. Tests
  never share znodes: each takes its own chroot from ``zk_chroot``.
- ``zk_chroot``: a fresh chroot path (``/t-<hex>``), deleted with everything under it after
  the test; ``zk_connect`` is ``127.0.0.1:PORT/t-<hex>``, what ``zookeeper.connect`` takes.
- ``zk_ensemble`` (module): a 3-node ensemble for tests that kill or pause nodes;
  ``healthy_ensemble`` hands it over with every node serving and heals it again after the
  test (resumes paused nodes, restarts killed ones), so tests of a module stay independent.
- ``kazoo_factory(hosts)``: started kazoo clients, stopped at teardown.

Every start and stop is bounded (devcluster.zookeeper's timeouts). When a test fails, the
server logs' tails are printed.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from devcluster.zookeeper import ZooKeeper
from tests.cluster.zk_support import kazoo_client

KazooFactory = Callable[..., KazooClient]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def _failed(node: Any) -> bool:
    return any(getattr(node, f"rep_{when}", None) is not None and getattr(node, f"rep_{when}").failed
               for when in ("setup", "call"))


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
def zk_chroot(zookeeper: ZooKeeper, request: pytest.FixtureRequest) -> Iterator[str]:
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    yield chroot
    if _failed(request.node):
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


@pytest.fixture(scope="module")
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
    if _failed(request.node):
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

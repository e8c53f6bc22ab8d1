"""``/ready`` of a real metrics endpoint (its HTTP server on an ephemeral port): the broker
state first, then the server's readiness check (in a cluster: registered in ZooKeeper,
metadata from the controller), whose reason the 503 names."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from broker.metrics.endpoint import MetricsEndpoint
from broker.metrics.view import BrokerState


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def endpoint() -> Iterator[MetricsEndpoint]:
    ep = MetricsEndpoint("127.0.0.1", 0)
    ep.start()
    yield ep
    ep.stop()


def test_ready_asks_the_readiness_check_once_running(endpoint: MetricsEndpoint) -> None:
    url = f"http://127.0.0.1:{endpoint.port}/ready"
    reason: list[str | None] = ["not registered in ZooKeeper"]
    endpoint.readiness = lambda: reason[0]
    endpoint.state = BrokerState.RECOVERY
    assert get(url) == (503, "not ready RECOVERY\n")
    endpoint.state = BrokerState.RUNNING
    assert get(url) == (503, "not ready RUNNING: not registered in ZooKeeper\n")
    reason[0] = None
    assert get(url) == (200, "ready RUNNING\n")
    endpoint.readiness = None  # a single node: the state alone
    assert get(url) == (200, "ready RUNNING\n")

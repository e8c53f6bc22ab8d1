"""A closed client connection is freed by reference counting alone: nothing of the broker's
keeps it in a reference cycle. The cycle collector would free one in time, but not once a
``gc.freeze`` (broker.heap: at start-up, and whenever partitions are opened) caught it
alive: frozen objects in cycles are never collected, so each such connection, with its
buffers, would be kept for the broker's lifetime.

One broker in this process (its event loop in a thread), the collector disabled while the
client connects, produces (the fast path with its parked answer: acks=1 and acks=-1) and
closes; the broker's ``Connection`` for it must then leave the collector's lists."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.network.connection import Connection
from client.sync import SyncClient
from tests.integration.data_path_client import batch, create_topic, produce
from tests.integration.test_brokers_in_process import InProcessBrokers
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(90)


def connection_ids() -> set[int]:
    """The ids of the live ``Connection``s the collector tracks (not the frozen ones)."""
    return {id(o) for o in gc.get_objects() if type(o) is Connection}


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    config = BrokerConfig.from_properties({
        "broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / "data"), "num.partitions": "1"})
    brokers = InProcessBrokers([config]).start()
    try:
        yield brokers.bootstraps[0]
    finally:
        brokers.stop()


def test_a_closed_connection_is_freed_without_the_cycle_collector(bootstrap: str) -> None:
    create_topic(bootstrap, "freed")  # (opening the partition freezes the heap: before)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        before = connection_ids()
        with SyncClient(bootstrap, timeout_ms=10_000) as client:
            for acks in (1, -1, 1):
                assert produce(client, "freed", 0, batch([b"v"]), acks=acks).error_code == 0
            opened = connection_ids() - before
            assert opened  # this client's (bootstrap and leader: one broker, one or two)
        wait_for(lambda: not opened & connection_ids(), 20, "the closed connection to be freed")
    finally:
        if was_enabled:
            gc.enable()

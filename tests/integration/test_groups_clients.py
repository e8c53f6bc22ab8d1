"""Consumer groups with librdkafka (confluent-kafka) and aiokafka against a real broker:
cooperative-sticky incremental rebalances, static membership surviving a member restart
without a rebalance, and aiokafka group consumption with commits."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.integration.broker_process import BrokerProcess
from tests.integration.test_groups_support import create_topic, produce, start_group_broker

PARTITIONS = 6


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_group_broker(tmp_path_factory.mktemp("groups-clients"))
    try:
        yield proc
    finally:
        proc.stop()


class Tracked:
    """A confluent-kafka consumer that records its rebalance callbacks and what it consumed."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, **conf: Any) -> None:
        self.name = name
        self.assigned_events: list[list[int]] = []
        self.revoked_events: list[list[int]] = []
        self.values: list[str] = []
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **conf,
        })
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned_events.append(sorted(p.partition for p in partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.revoked_events.append(sorted(p.partition for p in partitions))

    def owned(self) -> list[int]:
        return sorted(p.partition for p in self.consumer.assignment())

    def poll_once(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is None:
            return
        err = msg.error()
        if err is not None:
            assert err.code() == KafkaError._PARTITION_EOF, err
            return
        self.consumer.commit(message=msg, asynchronous=False)
        self.values.append((msg.value() or b"").decode())


def poll_until(consumers: list[Tracked], condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll_once()
        if condition():
            return
    raise AssertionError(f"timed out after {timeout_s} s: {what}; owned: "
                         + ", ".join(f"{c.name}={c.owned()}" for c in consumers))


def poll_for(consumers: list[Tracked], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll_once()


def cover(consumers: list[Tracked]) -> bool:
    owned = [p for c in consumers for p in c.owned()]
    return sorted(owned) == list(range(PARTITIONS))


@pytest.mark.timeout(120)
def test_cooperative_sticky_moves_only_what_it_must(gbroker: BrokerProcess) -> None:
    topic = "coop"
    create_topic(gbroker.bootstrap, topic, PARTITIONS)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    a = Tracked(gbroker.bootstrap, "coop-group", topic, "a", **conf)
    consumers = [a]
    try:
        poll_until(consumers, lambda: a.owned() == list(range(PARTITIONS)), 30, "a owns everything")
        b = Tracked(gbroker.bootstrap, "coop-group", topic, "b", **conf)
        consumers.append(b)
        poll_until(consumers, lambda: cover([a, b]) and len(b.owned()) == 3, 40, "a and b share")
        # incremental: a only ever gave up the three partitions b took, never all six
        assert all(set(r) <= set(b.owned()) for r in a.revoked_events), a.revoked_events
        c = Tracked(gbroker.bootstrap, "coop-group", topic, "c", **conf)
        consumers.append(c)
        poll_until(consumers, lambda: cover([a, b, c]) and len(c.owned()) == 2, 40, "a, b, c share")
        sent = produce(gbroker.bootstrap, topic, PARTITIONS, 30, "coop")
        poll_until(consumers, lambda: set(x for k in consumers for x in k.values) >= sent, 40, "all consumed")
        counts = Counter(x for k in consumers for x in k.values)
        assert set(counts) == sent and max(counts.values()) == 1
    finally:
        for k in consumers:
            k.consumer.close()


@pytest.mark.timeout(120)
def test_static_member_restart_gets_its_partitions_back_without_rebalance(gbroker: BrokerProcess) -> None:
    topic = "static"
    create_topic(gbroker.bootstrap, topic, PARTITIONS)
    a = Tracked(gbroker.bootstrap, "static-group", topic, "a", **{"group.instance.id": "inst-a"})
    b = Tracked(gbroker.bootstrap, "static-group", topic, "b", **{"group.instance.id": "inst-b"})
    consumers = [a, b]
    b2: Tracked | None = None
    try:
        poll_until(consumers, lambda: cover([a, b]) and len(a.owned()) == 3, 40, "a and b share")
        poll_for([a, b], 1.0)  # settled: both assigned, heartbeating
        a_assigned, a_revoked, b_owned = list(a.assigned_events), list(a.revoked_events), b.owned()
        # b stops without leaving the group (a static member does not send LeaveGroup) ...
        b.consumer.close()
        consumers = [a]
        # ... and comes back with the same group.instance.id well within session.timeout.ms
        b2 = Tracked(gbroker.bootstrap, "static-group", topic, "b2", **{"group.instance.id": "inst-b"})
        consumers = [a, b2]
        poll_until(consumers, lambda: b2.owned() == b_owned, 20, "b2 gets b's partitions")
        poll_for(consumers, 2.0)  # keep both polling a while: a must see no rebalance
        assert a.assigned_events == a_assigned and a.revoked_events == a_revoked
        assert sorted(a.owned() + b2.owned()) == list(range(PARTITIONS))
    finally:
        for k in consumers:
            k.consumer.close()


@pytest.mark.timeout(120)
def test_aiokafka_group_consumes_everything_once(gbroker: BrokerProcess) -> None:
    topic = "aio"
    create_topic(gbroker.bootstrap, topic, 4)
    sent = produce(gbroker.bootstrap, topic, 4, 25, "aio")

    async def scenario() -> tuple[list[str], list[str], list[int], list[int]]:
        from aiokafka import AIOKafkaConsumer

        def make(name: str) -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                topic, bootstrap_servers=gbroker.bootstrap, group_id="aio-group", client_id=name,
                enable_auto_commit=False, auto_offset_reset="earliest",
                session_timeout_ms=6000, heartbeat_interval_ms=500,
            )

        c1, c2 = make("c1"), make("c2")
        await c1.start()
        await c2.start()
        got1: list[str] = []
        got2: list[str] = []
        try:
            async def drain(c: AIOKafkaConsumer, sink: list[str]) -> None:
                batch = await c.getmany(timeout_ms=100)
                if batch:
                    await c.commit()
                    sink.extend(r.value.decode() for recs in batch.values() for r in recs)

            deadline = time.monotonic() + 60
            owned: tuple[list[int], list[int]] = ([], [])
            while time.monotonic() < deadline:
                await asyncio.gather(drain(c1, got1), drain(c2, got2))
                owned = (sorted(p.partition for p in c1.assignment()),
                         sorted(p.partition for p in c2.assignment()))
                if set(got1 + got2) >= sent and sorted(owned[0] + owned[1]) == [0, 1, 2, 3]:
                    break
            return got1, got2, owned[0], owned[1]
        finally:
            await c1.stop()
            await c2.stop()

    got1, got2, owned1, owned2 = asyncio.run(scenario())
    assert sorted(owned1 + owned2) == [0, 1, 2, 3] and owned1 and owned2
    counts = Counter(got1 + got2)
    assert set(counts) == sent and max(counts.values()) == 1

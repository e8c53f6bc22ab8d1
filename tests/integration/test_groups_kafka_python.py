"""kafka-python consumer groups against a real broker: partitions shared and rebalanced, every
record consumed exactly once with commits, and consumers resuming from committed offsets."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.test_groups_support import (
    ConsumerProcess,
    assignments_cover,
    create_topic,
    produce,
    start_group_broker,
    wait_until,
)

TOPIC = "orders"
PARTITIONS = 6
PER_PARTITION = 50
REBALANCE_S = 30.0


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_group_broker(tmp_path_factory.mktemp("groups-kafka-python"))
    try:
        yield proc
    finally:
        proc.stop()


def consumed(consumers: list[ConsumerProcess]) -> Counter[str]:
    return Counter(v for c in consumers for v in c.values())


def wait_consumed(everyone: list[ConsumerProcess], expected: set[str], phase: str) -> None:
    wait_until(lambda: set(consumed(everyone)) >= expected, 60, f"{phase}: all records consumed")
    counts = consumed(everyone)
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert not duplicates, f"{phase}: consumed more than once: {sorted(duplicates)[:10]}"


@pytest.mark.timeout(240)
def test_three_consumers_share_partitions_through_join_leave_and_crash(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, TOPIC, PARTITIONS)
    a, b, c = (ConsumerProcess(bootstrap, TOPIC, "g", name) for name in ("a", "b", "c"))
    everyone = [a, b, c]
    try:
        # Each joins when its process is up, so the group may first settle without one of
        # them (a alone, then a and b): wait for the generation that has all three.
        wait_until(lambda: assignments_cover([a, b, c], PARTITIONS)
                   and all(len(x.current_assignment() or []) == 2 for x in (a, b, c)),
                   REBALANCE_S, "a, b, c share 6 partitions, 2 each")
        sent = produce(bootstrap, TOPIC, PARTITIONS, PER_PARTITION, "phase1")
        wait_consumed(everyone, sent, "three members")

        # graceful leave: c commits and sends LeaveGroup; a and b take over at once
        assert c.stop() == 0
        wait_until(lambda: assignments_cover([a, b], PARTITIONS), REBALANCE_S, "a, b after c left")
        sent |= produce(bootstrap, TOPIC, PARTITIONS, PER_PARTITION, "phase2")
        wait_consumed(everyone, sent, "after leave")

        # crash: b is killed; the broker notices when its session (3 s) runs out
        b.kill9()
        wait_until(lambda: assignments_cover([a], PARTITIONS), REBALANCE_S, "a alone after b crashed")
        sent |= produce(bootstrap, TOPIC, PARTITIONS, PER_PARTITION, "phase3")
        wait_consumed(everyone, sent, "after crash")

        # join: d arrives and gets half of the partitions
        d = ConsumerProcess(bootstrap, TOPIC, "g", "d")
        everyone.append(d)
        wait_until(lambda: assignments_cover([a, d], PARTITIONS), REBALANCE_S, "a, d after d joined")
        sent |= produce(bootstrap, TOPIC, PARTITIONS, PER_PARTITION, "phase4")
        wait_consumed(everyone, sent, "after join")
        assert sum(consumed(everyone).values()) == len(sent) == 4 * PARTITIONS * PER_PARTITION
    finally:
        for x in everyone:
            x.kill9()


@pytest.mark.timeout(180)
def test_restarted_consumer_resumes_from_committed_offsets(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic = "resume-topic"
    create_topic(bootstrap, topic, PARTITIONS)
    first = produce(bootstrap, topic, PARTITIONS, 20, "before")
    a = ConsumerProcess(bootstrap, topic, "resume", "a")
    try:
        wait_consumed([a], first, "first run")
        assert a.stop() == 0
        later = produce(bootstrap, topic, PARTITIONS, 20, "after")
        b = ConsumerProcess(bootstrap, topic, "resume", "b")
        try:
            wait_consumed([b], later, "second run")
            # auto_offset_reset=earliest: only committed offsets keep b from re-reading "before"
            assert set(b.values()) == later
        finally:
            b.kill9()
    finally:
        a.kill9()

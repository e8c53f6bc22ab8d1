"""Group coordination in a cluster of three broker processes on a real ZooKeeper: the
coordinator of a group is the leader of its ``__consumer_offsets`` partition (replication
factor 3, Kafka's default), and the group follows that leadership. A broker that becomes
leader loads the group's offsets from its replica; one that becomes follower unloads them
and answers NOT_COORDINATOR; FindCoordinator from any broker names the new leader. A
librdkafka consumer of the group carries on through both moves (a controlled shutdown of the
coordinator, then a preferred leader election that brings leadership back), reading every
record, and each commit lands at the coordinator of the moment.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaException, Producer

from broker.group.partitioning import partition_for
from client.config import ClientConfig
from client.connection import BrokerConnection
from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from tests.cluster.conftest import ClusterBrokers
from tests.cluster.replication_support import partition_state
from tests.cluster.zk_support import wait_until
from tests.integration.broker_process import REPO_ROOT, BrokerProcess

pytestmark = [pytest.mark.timeout(240)]

OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 3
GROUP = "movers"
TOPIC = "orders"
PHASE = 10  # records produced and consumed per phase


async def _ask(broker: BrokerProcess, request: FindCoordinatorRequest | OffsetFetchRequest,
               version: int) -> object:
    connection = await BrokerConnection.open(broker.host, broker.port, ClientConfig(
        client_id="group-probe", request_timeout_ms=10000))
    try:
        return await connection.send(request, version=version)
    finally:
        await connection.close()


def coordinator_named_by(broker: BrokerProcess) -> tuple[int, int]:
    """(error code, node id) of FindCoordinator for the group, asked of ``broker``."""
    response = asyncio.run(_ask(broker, FindCoordinatorRequest(
        key_type=0, coordinator_keys=[GROUP]), 4))
    (answer,) = response.coordinators  # type: ignore[attr-defined]
    return int(answer.error_code), int(answer.node_id)


def committed_at(broker: BrokerProcess) -> tuple[int, int]:
    """(error code, committed offset of orders-0) from OffsetFetch v7 sent to ``broker``."""
    response = asyncio.run(_ask(broker, OffsetFetchRequest(group_id=GROUP, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]), 7))
    if response.error_code != ErrorCode.NO_ERROR:  # type: ignore[attr-defined]
        return int(response.error_code), -1  # type: ignore[attr-defined]
    (topic,) = response.topics  # type: ignore[attr-defined]
    (partition,) = topic.partitions
    return int(partition.error_code), int(partition.committed_offset)


def produce(bootstrap: str, values: list[bytes]) -> None:
    failed: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": 60000})
    for value in values:
        producer.produce(TOPIC, value, partition=0,
                         on_delivery=lambda err, _m: failed.append(err) if err else None)
    assert producer.flush(60) == 0
    assert failed == []


class GroupMember:
    """One librdkafka consumer of the group, committing synchronously after each record."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 30000,
            "heartbeat.interval.ms": 500})
        self.consumer.subscribe([TOPIC])
        self.values: list[bytes] = []
        self.retried: list[str] = []

    def read(self, count: int, timeout_s: float = 60) -> None:
        """Consume until ``count`` records in all, committing each (retriable commit errors
        retried: a coordinator on the move answers NOT_COORDINATOR or is unreachable)."""
        deadline = time.monotonic() + timeout_s
        while len(self.values) < count:
            assert time.monotonic() < deadline, f"consumed {len(self.values)} of {count}"
            msg = self.consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            self.values.append(msg.value() or b"")
            while True:
                try:
                    self.consumer.commit(message=msg, asynchronous=False)
                    break
                except KafkaException as exc:
                    error = exc.args[0]
                    assert error.retriable(), error
                    assert time.monotonic() < deadline, f"commit kept failing: {error}"
                    self.retried.append(error.name())
                    time.sleep(0.2)

    def close(self) -> None:
        self.consumer.close()


def leader_election(bootstrap: str, partition: int) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "cli", "leader-election", "--bootstrap-server", bootstrap,
         "--election-type", "preferred", "--topic", OFFSETS, "--partition", str(partition)],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_group_follows_the_leadership_of_its_offsets_partition(
        cluster_brokers: Callable[..., ClusterBrokers]) -> None:
    brokers = cluster_brokers(3, offsets_topic_num_partitions=str(OFFSETS_PARTITIONS),
                              auto_leader_rebalance_enable="false")
    procs = brokers.brokers
    bootstrap = brokers.bootstrap()
    with SyncClient(bootstrap, timeout_ms=30000) as client:
        client.create_topic(TOPIC, 1, 3)
    wait_until(lambda: partition_state(bootstrap, TOPIC)[1] == [1, 2, 3], timeout_s=30,
               what="the topic's replicas in sync")
    values = [f"o-{i}".encode() for i in range(3 * PHASE)]
    member = GroupMember(bootstrap)
    try:
        # Phase 1: the coordinator is the leader of the group's offsets partition.
        produce(bootstrap, values[:PHASE])
        member.read(PHASE)
        p = partition_for(GROUP, OFFSETS_PARTITIONS)
        first, isr = partition_state(bootstrap, OFFSETS, p)
        assert isr == [1, 2, 3]
        assert {coordinator_named_by(b) for b in procs.values()} == {(0, first)}
        assert committed_at(procs[first]) == (0, PHASE)
        for other in (b for i, b in procs.items() if i != first):
            assert committed_at(other)[0] == ErrorCode.NOT_COORDINATOR

        # Phase 2: SIGTERM moves the leadership (controlled shutdown); the new leader loads
        # the group from its own replica and is named coordinator by every broker.
        assert procs[first].stop() == 0
        second, _ = partition_state(brokers.bootstrap(), OFFSETS, p)
        assert second != first
        rest = [b for i, b in procs.items() if i != first]
        wait_until(lambda: all(coordinator_named_by(b) == (0, second) for b in rest),
                   timeout_s=30, what=f"broker {second} named coordinator")
        assert committed_at(procs[second]) == (0, PHASE)
        produce(brokers.bootstrap(), values[PHASE:2 * PHASE])
        member.read(2 * PHASE)
        assert committed_at(procs[second]) == (0, 2 * PHASE)

        # Phase 3: the first coordinator returns as a follower, catches up, and the
        # preferred leader election gives it the partition back: it loads what was
        # committed while it followed; the one it replaces unloads the group.
        brokers.start(first)
        wait_until(lambda: partition_state(brokers.bootstrap(), OFFSETS, p) == (second, [1, 2, 3]),
                   timeout_s=60, what=f"broker {first} back in the ISR of {OFFSETS}-{p}")
        out = leader_election(brokers.bootstrap(), p)
        assert f"Successfully completed leader election (PREFERRED) for partitions {OFFSETS}-{p}" in out
        wait_until(lambda: all(coordinator_named_by(b) == (0, first) for b in procs.values()),
                   timeout_s=30, what=f"broker {first} named coordinator again")
        assert committed_at(procs[first]) == (0, 2 * PHASE)
        assert committed_at(procs[second])[0] == ErrorCode.NOT_COORDINATOR
        produce(brokers.bootstrap(), values[2 * PHASE:])
        member.read(3 * PHASE)
        assert committed_at(procs[first]) == (0, 3 * PHASE)
    finally:
        member.close()
    # Every record once, in order: each commit was acknowledged before the next record was
    # read, so no move made the member go back.
    assert member.values == values
    assert set(member.retried) <= {"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE",
                                   "_TRANSPORT", "REQUEST_TIMED_OUT",
                                   "COORDINATOR_LOAD_IN_PROGRESS"}, member.retried

"""A leader's log dir fails in a ZooKeeper cluster: the controller moves the leadership.

Three minikafka broker processes on a real ZooKeeper; broker 1 leads an RF=3 topic
(min.insync.replicas 2) from the first of its two log dirs. That dir's segment file fails
every write from the 11th on with EIO (the test-only ``MINIKAFKA_TEST_FAULT_INJECTION``
hook of ``storage.fileio``), while a librdkafka producer (acks=all, idempotent) keeps
producing. The dir goes offline; broker 1 stays up on its other dir and writes a
``/log_dir_event_notification`` znode; the controller deletes it, asks broker 1 with
LeaderAndIsr (KAFKA_STORAGE_ERROR for the partition), elects a leader from the rest of the
ISR and takes broker 1 out of the ISR. Checked: the leadership moves within a bound, acks=all
goes on, every acknowledged record is on the new leader at its offset, the notification is
gone, broker 1 is still running. Twice: with broker 1 the controller (it asks itself), and
with broker 2 the controller (the notification and the LeaderAndIsr cross brokers).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from devcluster.zookeeper import ZooKeeper
from tests.cluster.conftest import ClusterBrokers
from tests.cluster.replication_support import (
    alive_brokers,
    controller_id,
    partition_state,
    read_replica,
)
from tests.cluster.zk_support import kazoo_client, wait_until
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(180)

TOPIC = "dirfail"
FAULT_ENV = "MINIKAFKA_TEST_FAULT_INJECTION"  # broker.server's test hook
APPENDS_BEFORE_FAILURE = 10
MOVE_BOUND_S = 15.0  # the failure to a new leader in the metadata (measured: ~1 s idle)


def state(bootstrap: str) -> tuple[int, list[int]] | None:
    """(leader, sorted ISR) of the partition, None while the metadata does not have it."""
    try:
        return partition_state(bootstrap, TOPIC)
    except AssertionError:  # not (yet) in the answering broker's metadata cache
        return None


@pytest.mark.parametrize("controller", [1, 2])
@pytest.mark.broker_errors(r"Log dir .*broker1-d1 is offline: append of dirfail-0 failed: "
                           r".*Input/output",
                           r"Log dir .*broker1-d1 failed: 1 partitions answer "
                           r"KAFKA_STORAGE_ERROR")
def test_failed_log_dir_of_the_leader_moves_leadership_to_the_isr(
        zookeeper: ZooKeeper, tmp_path: Path, cluster_brokers: Callable[..., ClusterBrokers],
        controller: int) -> None:
    chroot = f"/dirfail-{uuid.uuid4().hex[:10]}"
    brokers = cluster_brokers(0, f"{zookeeper.connect_string}{chroot}",
                              replica_lag_time_max_ms="10000",
                              offsets_topic_replication_factor="1")
    d1, d2 = tmp_path / "broker1-d1", tmp_path / "broker1-d2"
    one = BrokerProcess(tmp_path, {}, name="broker1")
    brokers.brokers[1] = one
    brokers.all.append(one)
    # The partition lands in d1, the first of two empty dirs; its segment file fails every
    # write after the first APPENDS_BEFORE_FAILURE (one write per produce request).
    one.env = {FAULT_ENV: f"op=write,errno=EIO,times=0,nth={APPENDS_BEFORE_FAILURE + 1},"
                          f"path={d1}/{TOPIC}-0/00000000000000000000.log"}
    for broker_id in [controller] + [b for b in (1, 2, 3) if b != controller]:
        if broker_id == 1:
            brokers.start(1, log_dirs=f"{d1},{d2}")
        else:
            brokers.start(broker_id)
        if broker_id == controller:  # the first broker up wins the election
            wait_until(lambda: controller_id(brokers.bootstrap()) == controller, timeout_s=30,
                       what=f"broker {controller} to be the controller", interval_s=0.2)
    wait_until(lambda: alive_brokers(brokers.bootstrap()) == {1, 2, 3}, timeout_s=30,
               what="three live brokers", interval_s=0.2)
    admin = KafkaAdminClient(bootstrap_servers=brokers.bootstrap(), request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(TOPIC, replica_assignments={0: [1, 2, 3]},
                                      topic_configs={"min.insync.replicas": "2"})],
                            timeout_ms=60000)
    finally:
        admin.close()
    wait_until(lambda: state(brokers.bootstrap()) == (1, [1, 2, 3]),
               timeout_s=30, what="broker 1 leading with ISR [1, 2, 3]", interval_s=0.2)
    assert (d1 / f"{TOPIC}-0").is_dir()

    acked: dict[bytes, int] = {}
    errors: list[str] = []

    def done(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.value()] = msg.offset()  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": brokers.bootstrap(), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 0,
                         "message.timeout.ms": 90000, "retry.backoff.ms": 100,
                         "topic.metadata.refresh.interval.ms": 1000})
    # One request per record, each acknowledged by the ISR before the next.
    for i in range(APPENDS_BEFORE_FAILURE):
        producer.produce(TOPIC, value=b"before-%d" % i, partition=0, on_delivery=done)
        assert producer.flush(30) == 0
    assert sorted(acked.values()) == list(range(APPENDS_BEFORE_FAILURE)), errors

    # The next append fails: the dir goes offline while records keep coming.
    failed_at = time.monotonic()
    for i in range(200):
        producer.produce(TOPIC, value=b"during-%d" % i, partition=0, on_delivery=done)
        producer.poll(0.01)
    wait_until(lambda: (state(brokers.bootstrap()) or (-1, []))[0] in (2, 3),
               timeout_s=MOVE_BOUND_S, what="a new leader among brokers 2 and 3",
               interval_s=0.1)
    moved_after_s = time.monotonic() - failed_at
    wait_until(lambda: (state(brokers.bootstrap()) or (-1, []))[1] == [2, 3],
               timeout_s=MOVE_BOUND_S, what="ISR [2, 3]", interval_s=0.1)
    leader, isr = partition_state(brokers.bootstrap(), TOPIC)
    assert producer.flush(60) == 0
    # acks=all goes on with the new leader and the ISR that is left (min.insync.replicas 2).
    for i in range(100):
        producer.produce(TOPIC, value=b"after-%d" % i, partition=0, on_delivery=done)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    assert len(acked) == APPENDS_BEFORE_FAILURE + 300

    records, hw = read_replica(brokers.brokers[leader], TOPIC)
    stored = {value: offset for offset, value in records}
    assert hw == len(records) == len(acked)  # nothing acknowledged twice, nothing extra
    assert {v: o for v, o in acked.items() if stored.get(v) != o} == {}  # nothing lost
    assert partition_state(brokers.bootstrap(), TOPIC) == (leader, [2, 3])
    assert one.is_running()  # its other log dir keeps it up
    assert controller_id(brokers.bootstrap()) == controller

    zk = kazoo_client(f"{zookeeper.connect_string}{chroot}")
    try:
        wait_until(lambda: zk.get_children("/log_dir_event_notification") == [], timeout_s=10,
                   what="the controller to delete the log dir event notification")
    finally:
        zk.stop()
        zk.close()
    assert "Wrote log dir failure notification /log_dir_event_notification/log_dir_event_" in (
        one.stderr_text())
    assert "Mark replicas dirfail-0 on broker 1 as offline" in (
        brokers.brokers[controller].stderr_text())
    print(f"\nlog dir failure: leader {leader} after {moved_after_s:.1f} s, ISR {isr}, "
          f"{len(acked)} records acknowledged and on the new leader")

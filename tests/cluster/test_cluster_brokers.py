"""Three minikafka broker processes on a real ZooKeeper, with stock clients.

These tests check metadata, leadership and the controller with replication factor 3
topics, and the data path across brokers (replication itself: tests/cluster/test_replication.py).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kazoo.client import KazooClient

from broker.group.partitioning import partition_for
from client.errors import ClientError
from client.sync import SyncClient
from controller import zk_data as zd
from controller.channel import BrokerRegistration, ControlRequestBatch
from controller.network_channel import NetworkChannel
from controller.zk import to_channel_registration
from devcluster.apache_kafka import kafka_tool
from devcluster.zookeeper import ZooKeeper, free_ports
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import AlterPartitionRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.update_metadata import UpdateMetadataResponse
from protocol.records import NewRecord, build_batch
from protocol.topic_partition import TopicPartition
from tests.cluster.conftest import ClusterBrokers, KazooFactory
from tests.cluster.zk_support import wait_until
from tests.integration.broker_process import REPO_ROOT, BrokerProcess, BrokerStartError

pytestmark = [pytest.mark.timeout(240)]

SESSION_TIMEOUT_S = 6.0


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)


def describe(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, ISR) as the broker(s) at ``bootstrap`` tell it (the
    project's client: one Metadata request, bounded)."""
    with SyncClient(bootstrap, timeout_ms=10000) as client:
        (info,) = client.describe_topics([topic])
    return {p: (i.leader, sorted(i.replicas), sorted(i.isr)) for p, i in info.partitions.items()}


def knows_partitions(bootstrap: str, topic: str, count: int) -> bool:
    """Whether the broker at ``bootstrap`` describes ``count`` partitions of ``topic``."""
    try:
        return len(describe(bootstrap, topic)) == count
    except (ClientError, OSError):
        return False


def controller_of(bootstrap: str) -> int | None:
    """The controller id a broker names; None while it cannot be asked."""
    try:
        with SyncClient(bootstrap, timeout_ms=10000) as client:
            return client.describe_cluster().controller_id
    except (ClientError, OSError):
        return None


def create(bootstrap: str, topic: str, assignment: dict[int, list[int]]) -> None:
    client = admin(bootstrap)
    try:
        client.create_topics([NewTopic(topic, replica_assignments=assignment)], timeout_ms=60000)
    finally:
        client.close()


def leaders_of(brokers: ClusterBrokers, topic: str, broker_id: int) -> dict[int, int]:
    return {p: v[0] for p, v in describe(brokers.brokers[broker_id].bootstrap, topic).items()}


def everyone_sees(brokers: ClusterBrokers, topic: str, expected: dict[int, int]) -> bool:
    try:
        return all(leaders_of(brokers, topic, i) == expected
                   for i, p in brokers.brokers.items() if p.is_running())
    except Exception:
        return False


def send_update_metadata(target: BrokerRegistration, controller_id: int,
                         controller_epoch: int) -> int:
    """An UpdateMetadata (live brokers only) as controller ``controller_id`` at
    ``controller_epoch`` would send it, over the controller's network channel."""

    async def go() -> int:
        channel = NetworkChannel(controller_id, "PLAINTEXT")
        channel.add_broker(target)
        try:
            batch = ControlRequestBatch(controller_id, controller_epoch, "PLAINTEXT")
            batch.add_update_metadata([target.broker_id])
            ((_, _, future),) = batch.send_all(channel, {target.broker_id: target},
                                               lambda _t: uuid.UUID(int=0))
            response = await asyncio.wait_for(future, 30)
            assert isinstance(response, UpdateMetadataResponse)
            return response.error_code
        finally:
            await channel.close()

    return asyncio.run(go())


def produce_all(bootstrap: str, topic: str, partitions: list[int], *, acks: int = -1,
                values: list[bytes] | None = None) -> int:
    """Produce one record per entry of ``partitions`` with librdkafka; the number
    acknowledged (every delivery report checked, not just the flush)."""
    delivered: list[Any] = []
    failed: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        (failed if err is not None else delivered).append(err or msg)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "message.timeout.ms": 30000})
    for i, partition in enumerate(partitions):
        value = values[i] if values is not None else f"r{i}".encode()
        producer.produce(topic, value, partition=partition, on_delivery=report)
    assert producer.flush(60) == 0
    assert failed == [], failed[:3]
    return len(delivered)


def zk_epoch(kazoo_factory: KazooFactory, zk_connect: str) -> int:
    return zd.decode_controller_epoch(kazoo_factory(zk_connect).get(zd.CONTROLLER_EPOCH)[0])


# -- the cluster and its clients ------------------------------------------------------------


@pytest.mark.java
def test_three_brokers_serve_one_cluster(cluster_brokers: Callable[..., ClusterBrokers],
                                         tmp_path: Path) -> None:
    brokers = cluster_brokers(3, offsets_topic_replication_factor="1")
    bootstrap = brokers.bootstrap()
    wait_until(lambda: all((controller_of(p.bootstrap) or -1) >= 0 for p in brokers.all),
               timeout_s=30, what="every broker to know the controller")
    controllers = {controller_of(p.bootstrap) for p in brokers.all}
    assert len(controllers) == 1 and controllers <= {1, 2, 3}
    # Replication factor 3: placement, leaders and ISR agree on every broker.
    client = admin(bootstrap)
    try:
        client.create_topics([NewTopic("rf3", num_partitions=6, replication_factor=3)],
                             timeout_ms=60000)
    finally:
        client.close()
    # CreateTopics answers once the broker asked knows the topic; the others learn it from
    # the controller's UpdateMetadata, as in Kafka, so wait until each of them can say.
    wait_until(lambda: all(knows_partitions(p.bootstrap, "rf3", 6) for p in brokers.all),
               timeout_s=30, what="every broker to know rf3's six partitions")
    views = [describe(p.bootstrap, "rf3") for p in brokers.all]
    assert views[0] == views[1] == views[2]
    assert all(replicas == [1, 2, 3] and isr == [1, 2, 3] for _, replicas, isr in views[0].values())
    assert sorted(leader for leader, _, _ in views[0].values()) == [1, 1, 2, 2, 3, 3]
    # Kafka's own tool describes it through any broker.
    described = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
                           brokers.brokers[2].bootstrap, "--describe", "--topic", "rf3",
                           work_dir=tmp_path).stdout
    assert "PartitionCount: 6" in described and "ReplicationFactor: 3" in described
    assert described.count("Replicas: ") == 6
    # The data path across brokers: three single-replica partitions, one per broker.
    create(bootstrap, "spread", {0: [1], 1: [2], 2: [3]})
    wait_until(lambda: everyone_sees(brokers, "spread", {0: 1, 1: 2, 2: 3}), timeout_s=30,
               what="the spread topic's leaders")
    assert produce_all(bootstrap, "spread", [i % 3 for i in range(300)],
                       values=[f"v{i}".encode() for i in range(300)]) == 300
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spread-readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
    consumer.subscribe(["spread"])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 300 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(300))
    # Kafka's console tools against the cluster.
    kafka_tool("kafka.tools.ConsoleProducer", "--bootstrap-server", bootstrap, "--topic",
               "spread", "--property", "parse.key=true", work_dir=tmp_path,
               input_text="".join(f"k{i}\tjava {i}\n" for i in range(3)))
    out = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                     bootstrap, "--topic", "spread", "--from-beginning", "--max-messages", "303",
                     "--timeout-ms", "30000", work_dir=tmp_path).stdout
    assert sum(1 for line in out.splitlines() if line.startswith("java ")) == 3
    # A produce to a broker that does not lead the partition: NOT_LEADER_OR_FOLLOWER.
    with SyncClient(brokers.brokers[2].bootstrap) as raw:
        batch = build_batch([NewRecord(None, b"misrouted")])
        response = raw.send(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name="spread", partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])]), version=9)
    (topic,) = response.responses
    assert topic.partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


# -- failover ---------------------------------------------------------------------------------


def test_kill_the_controller(cluster_brokers: Callable[..., ClusterBrokers], zk_connect: str,
                             kazoo_factory: KazooFactory) -> None:
    brokers = cluster_brokers(3)
    old = controller_of(brokers.bootstrap())
    assert old is not None
    epoch = zk_epoch(kazoo_factory, zk_connect)
    others = [i for i in (1, 2, 3) if i != old]
    create(brokers.bootstrap(), "moved", {0: [old, *others], 1: [others[0], old, others[1]]})
    wait_until(lambda: everyone_sees(brokers, "moved", {0: old, 1: others[0]}), timeout_s=30,
               what="the initial leaders")
    killed_at = time.monotonic()
    brokers.brokers[old].kill9()
    survivors = brokers.bootstrap(exclude=old)
    wait_until(lambda: controller_of(survivors) in others, timeout_s=SESSION_TIMEOUT_S + 20,
               what="a new controller")
    elapsed = time.monotonic() - killed_at
    assert elapsed < SESSION_TIMEOUT_S + 10, elapsed
    assert zk_epoch(kazoo_factory, zk_connect) > epoch
    # Its partition moved to the next in-sync replica, and it left the ISRs.
    wait_until(lambda: everyone_sees(brokers, "moved", {0: others[0], 1: others[0]}),
               timeout_s=30, what="partition 0's new leader everywhere")
    for _, replicas, isr in describe(survivors, "moved").values():
        assert old in replicas and old not in isr
    # Clients carry on with the new leader (acks=1: with acks=all the ISR's followers would
    # have to replicate, which they do not yet).
    assert produce_all(survivors, "moved", [0] * 20, acks=1) == 20
    # It returns (after its old session expired) as a follower, and learns the cluster.
    restarted = brokers.start(old)
    wait_until(lambda: leaders_of(brokers, "moved", old) == {0: others[0], 1: others[0]},
               timeout_s=30, what="the returning broker to follow")
    assert controller_of(restarted.bootstrap) in others


def test_paused_controller_is_fenced(cluster_brokers: Callable[..., ClusterBrokers],
                                     zk_connect: str, kazoo_factory: KazooFactory) -> None:
    brokers = cluster_brokers(3)
    old = controller_of(brokers.bootstrap())
    assert old is not None
    epoch = zk_epoch(kazoo_factory, zk_connect)
    proc = brokers.brokers[old]
    proc.signal(signal.SIGSTOP)
    try:
        survivors = brokers.bootstrap(exclude=old)
        wait_until(lambda: controller_of(survivors) not in (old, -1),
                   timeout_s=SESSION_TIMEOUT_S + 20, what="a new controller")
        new = controller_of(survivors)
        assert zk_epoch(kazoo_factory, zk_connect) == epoch + 1
        # While it is paused, topics still get created and led by the live brokers.
        create(survivors, "during-pause", {0: [new]})
    finally:
        proc.signal(signal.SIGCONT)
    # The zombie wakes up: its session is gone; it resigns, registers again and follows.
    wait_until(lambda: "Resigned as the controller" in proc.stderr_text(), timeout_s=30,
               what="the old controller to resign")
    wait_until(lambda: controller_of(proc.bootstrap) == new, timeout_s=30,
               what="the old controller to know the new one")
    assert zk_epoch(kazoo_factory, zk_connect) == epoch + 1  # nobody else took the office
    registration = zd.ControllerRegistration.decode(kazoo_factory(zk_connect).get(zd.CONTROLLER)[0])
    assert registration.broker_id == new
    # What the zombie would send, with its old epoch, is refused; the new epoch is not.
    data, stat = kazoo_factory(zk_connect).get(zd.broker_path(new))
    registration = to_channel_registration(zd.BrokerRegistration.decode(new, data), stat.czxid)
    assert send_update_metadata(registration, old, epoch) == ErrorCode.STALE_CONTROLLER_EPOCH
    assert send_update_metadata(registration, new, epoch + 1) == ErrorCode.NO_ERROR
    wait_until(lambda: leaders_of(brokers, "during-pause", old) == {0: new}, timeout_s=30,
               what="the old controller to learn of the topic created while it was paused")


def test_sigterm_moves_leaderships_first(cluster_brokers: Callable[..., ClusterBrokers]) -> None:
    brokers = cluster_brokers(3)
    controller = controller_of(brokers.bootstrap())
    assert controller is not None
    leaving = next(i for i in (1, 2, 3) if i != controller)
    rest = [i for i in (1, 2, 3) if i != leaving]
    partitions = 12
    create(brokers.bootstrap(), "handover", {p: [leaving, *rest] for p in range(partitions)})
    wait_until(lambda: everyone_sees(brokers, "handover", dict.fromkeys(range(partitions), leaving)),
               timeout_s=30, what="the leaving broker to lead every partition")
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": brokers.bootstrap(), "linger.ms": 0,
                         "message.timeout.ms": 60000, "acks": 1})

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    proc = brokers.brokers[leaving]
    proc.signal(signal.SIGTERM)
    sent = 0
    deadline = time.monotonic() + 60
    while proc.is_running() and time.monotonic() < deadline:
        producer.produce("handover", b"x", partition=sent % partitions, on_delivery=delivered)
        producer.poll(0.01)
        sent += 1
    assert proc.wait() == 0
    assert producer.flush(60) == 0
    assert errors == []  # clients saw at most retriable errors, retried
    log = proc.stderr_text()
    assert "Controlled shutdown request returned successfully" in log
    # Before it exited, every leadership had moved to the first remaining replica.
    expected = dict.fromkeys(range(partitions), rest[0])
    assert leaders_of(brokers, "handover", rest[0]) == expected
    assert log.index("Controlled shutdown request returned successfully") < log.index(
        "Shutdown step 1/4")


# -- start-up failures ---------------------------------------------------------------------


@pytest.mark.broker_errors(r"Start-up failed: Broker id 1 is already registered in ZooKeeper",
                           exit_codes=(1,))
def test_duplicate_broker_id_fails_start_up(cluster_brokers: Callable[..., ClusterBrokers],
                                            tmp_path: Path, zk_connect: str) -> None:
    cluster_brokers(1)
    twin = BrokerProcess(tmp_path, {"broker.id": "1", "zookeeper.connect": zk_connect},
                         name="twin")
    with pytest.raises(BrokerStartError) as info:
        twin.start()
    assert twin.exit_codes == [1]
    assert "Broker id 1 is already registered in ZooKeeper" in str(info.value)


@pytest.mark.broker_errors(r"Start-up failed: Timed out waiting for connection to ZooKeeper",
                           exit_codes=(1,))
def test_unreachable_zookeeper_fails_start_up(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    broker = BrokerProcess(tmp_path, {"broker.id": "1",
                                      "zookeeper.connect": f"127.0.0.1:{port}/kafka",
                                      "zookeeper.connection.timeout.ms": "2000"})
    started = time.monotonic()
    with pytest.raises(BrokerStartError) as info:
        broker.start()
    assert 2.0 <= time.monotonic() - started < 30
    assert broker.exit_codes == [1]
    message = str(info.value)
    assert f"Timed out waiting for connection to ZooKeeper at 127.0.0.1:{port}" in message
    assert "zookeeper.connection.timeout.ms" in message


# -- ZooKeeper ensemble -------------------------------------------------------------------------


def test_ensemble_losing_one_node_keeps_the_cluster(
        healthy_ensemble: ZooKeeper, cluster_brokers: Callable[..., ClusterBrokers]) -> None:
    brokers = cluster_brokers(3, connect=healthy_ensemble.connect_string + "/ensemble-test")
    leader = healthy_ensemble.leader()
    assert leader is not None
    leader.kill()
    wait_until(lambda: healthy_ensemble.leader() is not None, timeout_s=30,
               what="a new ZooKeeper leader")
    create(brokers.bootstrap(), "after-zk-loss", {0: [1], 1: [2], 2: [3]})
    wait_until(lambda: everyone_sees(brokers, "after-zk-loss", {0: 1, 1: 2, 2: 3}),
               timeout_s=30, what="leaders after losing a ZooKeeper node")
    assert produce_all(brokers.bootstrap(), "after-zk-loss", [i % 3 for i in range(30)]) == 30
    assert all(p.is_running() for p in brokers.all)




# -- preferred leaders ---------------------------------------------------------------------------


def alter_partition_as_leader(brokers: ClusterBrokers, kazoo: KazooClient, topic: str,
                              partition: int, isr: list[int]) -> int:
    """What a leader does once a follower has caught up (replication): AlterPartition to
    the controller with the grown ISR. Returns the partition's error code."""
    state_data, state_stat = kazoo.get(zd.partition_state_path(TopicPartition(topic, partition)))
    state = zd.PartitionState.decode(state_data, state_stat.version)
    _, leader_stat = kazoo.get(zd.broker_path(state.leader))
    controller = zd.ControllerRegistration.decode(kazoo.get(zd.CONTROLLER)[0]).broker_id
    request = AlterPartitionRequest(broker_id=state.leader, broker_epoch=leader_stat.czxid, topics=[
        AlterPartitionRequest.TopicData(topic_name=topic, partitions=[
            AlterPartitionRequest.PartitionData(
                partition_index=partition, leader_epoch=state.leader_epoch, new_isr=isr,
                partition_epoch=state.zk_version)])])
    with SyncClient(brokers.brokers[controller].bootstrap) as raw:
        response = raw.send(request, version=1, node_id=None)
    assert response.error_code == 0, response
    return int(response.topics[0].partitions[0].error_code)


@pytest.mark.java
def test_returning_broker_and_preferred_leader_election(
        cluster_brokers: Callable[..., ClusterBrokers], zk_connect: str,
        kazoo_factory: KazooFactory, tmp_path: Path) -> None:
    brokers = cluster_brokers(3)
    controller = controller_of(brokers.bootstrap())
    assert controller is not None
    lost = next(i for i in (1, 2, 3) if i != controller)
    rest = [i for i in (1, 2, 3) if i != lost]
    create(brokers.bootstrap(), "pref", {0: [lost, *rest], 1: [lost, *rest]})
    wait_until(lambda: everyone_sees(brokers, "pref", {0: lost, 1: lost}), timeout_s=30,
               what="the preferred leaders")
    brokers.brokers[lost].kill9()
    wait_until(lambda: everyone_sees(brokers, "pref", {0: rest[0], 1: rest[0]}),
               timeout_s=SESSION_TIMEOUT_S + 30, what="leadership to move")
    # Gone (and so out of the ISR): the preferred election cannot pick it.
    out = subprocess_cli("leader-election", "--bootstrap-server", brokers.bootstrap(),
                         "--election-type", "preferred", "--topic", "pref", "--partition", "0")
    assert out.returncode == 1
    assert ("Error completing leader election (PREFERRED) for partition: pref-0: "
            "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException") in out.stdout
    assert "1 replica(s) could not be elected" in out.stderr
    brokers.start(lost)
    wait_until(lambda: leaders_of(brokers, "pref", lost) == {0: rest[0], 1: rest[0]},
               timeout_s=30, what="the returning broker to follow")
    # It catches up by replication and its leader puts it back in the ISR (AlterPartition);
    # then it is elected.
    wait_until(lambda: all(isr == sorted([lost, *rest]) for _, _, isr in
                           describe(brokers.bootstrap(), "pref").values()),
               timeout_s=30, what="the returning broker back in the ISR")
    out = subprocess_cli("leader-election", "--bootstrap-server", brokers.bootstrap(),
                         "--election-type", "PREFERRED", "--topic", "pref", "--partition", "0")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "Successfully completed leader election (PREFERRED) for partitions pref-0"
    wait_until(lambda: everyone_sees(brokers, "pref", {0: lost, 1: rest[0]}), timeout_s=30,
               what="partition 0 back on its preferred leader")
    # Kafka's own tool does the same through our controller for the other partition.
    result = kafka_tool("org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server",
                        brokers.bootstrap(), "--election-type", "PREFERRED",
                        "--all-topic-partitions", work_dir=tmp_path)
    assert "Successfully completed leader election (PREFERRED) for partitions pref-1" in result.stdout
    wait_until(lambda: everyone_sees(brokers, "pref", {0: lost, 1: lost}), timeout_s=30,
               what="both partitions on their preferred leader")


def test_auto_leader_rebalance(cluster_brokers: Callable[..., ClusterBrokers], zk_connect: str,
                               kazoo_factory: KazooFactory) -> None:
    brokers = cluster_brokers(3, leader_imbalance_check_interval_seconds="1")
    controller = controller_of(brokers.bootstrap())
    assert controller is not None
    lost = next(i for i in (1, 2, 3) if i != controller)
    rest = [i for i in (1, 2, 3) if i != lost]
    create(brokers.bootstrap(), "auto", {0: [lost, *rest]})
    wait_until(lambda: everyone_sees(brokers, "auto", {0: lost}), timeout_s=30, what="leaders")
    brokers.brokers[lost].kill9()
    wait_until(lambda: everyone_sees(brokers, "auto", {0: rest[0]}),
               timeout_s=SESSION_TIMEOUT_S + 30, what="leadership to move")
    brokers.start(lost)
    # Replication brings it back into the ISR (its leader's AlterPartition).
    wait_until(lambda: describe(brokers.bootstrap(), "auto")[0][2] == sorted([lost, *rest]),
               timeout_s=30, what="the returning broker back in the ISR")
    # auto.leader.rebalance.enable (default true): the imbalance check moves it back.
    wait_until(lambda: everyone_sees(brokers, "auto", {0: lost}), timeout_s=30,
               what="the automatic preferred leader election")


# -- group coordination ----------------------------------------------------------------------


def test_offsets_topic_waits_for_enough_brokers(
        cluster_brokers: Callable[..., ClusterBrokers]) -> None:
    brokers = cluster_brokers(2)  # offsets.topic.replication.factor is 3 (Kafka's default)
    request = FindCoordinatorRequest(key_type=0, coordinator_keys=["g"])
    with SyncClient(brokers.bootstrap()) as raw:
        (answer,) = raw.send(request, version=4).coordinators
    assert answer.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    brokers.start(3)
    deadline = time.monotonic() + 60
    while True:
        with SyncClient(brokers.bootstrap()) as raw:
            (answer,) = raw.send(request, version=4).coordinators
        if answer.error_code == ErrorCode.NO_ERROR or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert answer.error_code == ErrorCode.NO_ERROR
    # The coordinator is the leader of the group's __consumer_offsets partition.
    partition = partition_for("g", 50)
    offsets = describe(brokers.bootstrap(), "__consumer_offsets")
    assert len(offsets) == 50 and all(r == [1, 2, 3] for _, r, _ in offsets.values())
    assert answer.node_id == offsets[partition][0]


def subprocess_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)


# -- topics across the cluster ----------------------------------------------------------------


def test_topic_changes_reach_every_broker(cluster_brokers: Callable[..., ClusterBrokers]) -> None:
    brokers = cluster_brokers(0)
    for broker_id, rack in ((1, "a"), (2, "a"), (3, "b")):
        brokers.start(broker_id, broker_rack=rack)
    bootstrap = brokers.bootstrap()
    client = admin(bootstrap)
    try:
        # Rack-aware placement: with two racks, every partition has a replica in each.
        client.create_topics([NewTopic("racked", num_partitions=6, replication_factor=2)],
                             timeout_ms=60000)
        racks = {1: "a", 2: "a", 3: "b"}
        # (CreateTopics answers once the broker that handled it knows the leaders; the
        # others hear of them a moment later, as in Kafka.)
        wait_until(lambda: all(partition_count(p.bootstrap, "racked") == 6 for p in brokers.all),
                   timeout_s=30, what="every broker to know the topic")
        placed = describe(bootstrap, "racked")
        assert all({racks[r] for r in replicas} == {"a", "b"} for _, replicas, _ in placed.values())
        # A config change written through one broker is applied by every broker.
        altered = client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "racked",
                                             configs={"retention.ms": "123456"})])
        assert altered == {"topic": {"racked": "OK"}}, altered
    finally:
        client.close()
    for proc in brokers.all:
        wait_until(lambda p=proc: topic_config(p.bootstrap, "racked", "retention.ms") == "123456",
                   timeout_s=30, what=f"{proc.name} to apply the new config")
    # More partitions: every broker learns of them, the new replicas are hosted.
    with SyncClient(brokers.brokers[3].bootstrap, timeout_ms=30000) as raw:
        raw.create_partitions("racked", 8)
    wait_until(lambda: all(partition_count(p.bootstrap, "racked") == 8 for p in brokers.all),
               timeout_s=30, what="every broker to know 8 partitions")
    # Deletion: gone from every broker's metadata and from every log dir.
    with SyncClient(bootstrap, timeout_ms=60000) as raw:
        raw.delete_topics(["racked"])
    wait_until(lambda: all(not_found(p.bootstrap, "racked") for p in brokers.all),
               timeout_s=30, what="every broker to forget the topic")
    wait_until(lambda: not any(d.name.startswith("racked-") and not d.name.endswith("-delete")
                               for p in brokers.all for d in p.log_dir.iterdir()),
               timeout_s=30, what="the replicas' logs to go")


def topic_config(bootstrap: str, topic: str, name: str) -> str | None:
    with SyncClient(bootstrap, timeout_ms=10000) as raw:
        return raw.topic_config_overrides(topic).get(name)


def partition_count(bootstrap: str, topic: str) -> int:
    """How many partitions of ``topic`` the broker knows (0 while it knows none)."""
    try:
        return len(describe(bootstrap, topic))
    except ClientError:
        return 0


def not_found(bootstrap: str, topic: str) -> bool:
    try:
        describe(bootstrap, topic)
    except ClientError as exc:
        return exc.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
    return False

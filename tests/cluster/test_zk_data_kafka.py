"""controller.zk_data against Apache Kafka 3.9.1 in ZooKeeper mode, on the same ZooKeeper.

One Kafka broker (id 1, ``broker.rack=r1``) runs under its own chroot of the session's
ZooKeeper. Both directions are checked:

- what Kafka writes, our layer parses, and our encoder, given the same facts, writes the
  same JSON object (field by field; key order is a hash map's in Kafka and carries nothing);
- what our encoder writes, Kafka's controller reads and acts on (a topic it did not create,
  a config change, a topic deletion, the admin and notification znodes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kazoo.client import KazooClient

from controller import zk_data as zd
from controller.channel import ControlRequestBatch
from controller.leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch
from controller.network_channel import NetworkChannel
from controller.topic_store import TopicRecord
from controller.zk import to_channel_registration
from controller.zk_client import ZkClient
from controller.zk_registration import create_top_level_paths
from controller.zk_store import ZkTopicStore
from devcluster.apache_kafka import ApacheKafkaZk, kafka_tool
from devcluster.zookeeper import ZooKeeper
from protocol.errors import ErrorCode
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.topic_partition import TopicPartition
from tests.cluster.conftest import KazooFactory
from tests.cluster.zk_support import kazoo_client, wait_until

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]
ZERO_UUID = uuid.UUID(int=0)

TOPIC = "orders"


class KafkaOnZk:
    def __init__(self, kafka: ApacheKafkaZk, zk: KazooClient) -> None:
        self.kafka = kafka
        self.zk = zk

    def json(self, path: str) -> dict[str, object]:
        data, _ = self.zk.get(path)
        value = json.loads(data)
        assert isinstance(value, dict)
        return value

    def admin(self) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=self.kafka.bootstrap, request_timeout_ms=30000)


@pytest.fixture(scope="module")
def kafka_on_zk(zookeeper: ZooKeeper, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[KafkaOnZk]:
    chroot = f"/kafka-{uuid.uuid4().hex[:8]}"
    work = tmp_path_factory.mktemp("apache-kafka")
    kafka = ApacheKafkaZk(work, broker_id=1, zookeeper_connect=zookeeper.connect_string + chroot,
                          properties={"broker.rack": "r1"},
                          log_levels={"kafka.controller": "DEBUG"})
    kafka.start()
    client = kazoo_client(zookeeper.connect_string + chroot)
    try:
        kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", kafka.bootstrap,
                   "--create", "--topic", TOPIC, "--partitions", "3",
                   "--replication-factor", "1", "--config", "retention.ms=1000",
                   work_dir=Path(work))
        yield KafkaOnZk(kafka, client)
    finally:
        client.stop()
        client.close()
        kafka.stop()
        root = kazoo_client(zookeeper.connect_string)
        root.delete(chroot, recursive=True)
        root.stop()
        root.close()


def test_top_level_znodes(kafka_on_zk: KafkaOnZk) -> None:
    zk = kafka_on_zk.zk
    for path in zd.PERSISTENT_PATHS:
        data, _ = zk.get(path)
        assert data is None, path  # created with no data, as our layer creates them
    feature = zd.FeatureZNode.decode(zk.get(zd.FEATURE)[0])
    assert feature == zd.FeatureZNode()
    assert json.loads(feature.encode()) == kafka_on_zk.json(zd.FEATURE)
    cluster_id = zd.decode_cluster_id(zk.get(zd.CLUSTER_ID)[0])
    meta = (kafka_on_zk.kafka.work_dir / "data" / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}" in meta
    assert json.loads(zd.encode_cluster_id(cluster_id)) == kafka_on_zk.json(zd.CLUSTER_ID)


def test_broker_registration(kafka_on_zk: KafkaOnZk) -> None:
    data, stat = kafka_on_zk.zk.get(zd.broker_path(1))
    assert stat.ephemeralOwner != 0
    reg = zd.BrokerRegistration.decode(1, data)
    port = kafka_on_zk.kafka.port
    assert reg.endpoints == (zd.BrokerEndpoint("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT"),)
    assert (reg.rack, reg.jmx_port, reg.version, dict(reg.features)) == ("r1", -1, 5, {})
    ours = zd.BrokerRegistration(1, (zd.BrokerEndpoint("PLAINTEXT", "127.0.0.1", port),),
                                 reg.timestamp_ms, rack="r1")
    assert json.loads(ours.encode()) == json.loads(data)


def test_controller_and_epoch(kafka_on_zk: KafkaOnZk) -> None:
    data, stat = kafka_on_zk.zk.get(zd.CONTROLLER)
    assert stat.ephemeralOwner != 0
    controller = zd.ControllerRegistration.decode(data)
    assert controller.broker_id == 1
    assert json.loads(zd.ControllerRegistration(1, controller.timestamp_ms).encode()) \
        == json.loads(data)
    epoch_data, epoch_stat = kafka_on_zk.zk.get(zd.CONTROLLER_EPOCH)
    epoch = zd.decode_controller_epoch(epoch_data)
    assert epoch >= 1
    assert zd.encode_controller_epoch(epoch) == epoch_data
    # Created with the initial epoch (0), then set once per controller election.
    assert epoch_stat.version == epoch - zd.INITIAL_CONTROLLER_EPOCH


def test_topic_created_by_kafka_tools(kafka_on_zk: KafkaOnZk) -> None:
    zk = kafka_on_zk.zk
    data, _ = zk.get(zd.topic_path(TOPIC))
    assignment = zd.TopicAssignment.decode(TOPIC, data)
    assert assignment.replicas() == {0: (1,), 1: (1,), 2: (1,)}
    assert assignment.topic_id is not None
    ours = zd.TopicAssignment.of({0: [1], 1: [1], 2: [1]}, assignment.topic_id)
    assert json.loads(ours.encode()) == json.loads(data)
    # The id we parsed is the one Kafka serves: Metadata by topic id (v12+) finds the topic.
    assert _name_of_topic_id(kafka_on_zk, assignment.topic_id) == TOPIC
    controller_epoch = zd.decode_controller_epoch(zk.get(zd.CONTROLLER_EPOCH)[0])
    for p in range(3):
        tp = TopicPartition(TOPIC, p)
        assert zk.get(zd.topic_partitions_path(TOPIC))[0] is None
        assert zk.get(zd.partition_path(tp))[0] is None
        raw, stat = zk.get(zd.partition_state_path(tp))
        state = zd.PartitionState.decode(raw, stat.version)
        assert state == zd.PartitionState(1, 0, (1,), controller_epoch, zk_version=0)
        assert json.loads(zd.PartitionState(1, 0, (1,), controller_epoch).encode()) \
            == json.loads(raw)
    config = zd.decode_entity_config(zk.get(zd.topic_config_path(TOPIC))[0])
    assert config == {"retention.ms": "1000"}
    assert json.loads(zd.encode_entity_config(config)) == kafka_on_zk.json(
        zd.topic_config_path(TOPIC))


def _tree(zk: KazooClient, path: str) -> dict[str, bytes | None]:
    """``path`` and everything under it: path (relative to ``path``) -> data."""
    out: dict[str, bytes | None] = {}

    def walk(p: str) -> None:
        out[p[len(path):] or "/"] = zk.get(p)[0]
        for child in zk.get_children(p):
            walk(f"{p}/{child}")

    walk(path)
    return out


def _versions(zk: KazooClient, path: str) -> dict[str, int]:
    """Each znode's data version under ``path`` (the state znodes' partition epochs)."""
    return {p: zk.get(f"{path}{p}" if p != "/" else path)[1].version for p in _tree(zk, path)}


async def test_our_topic_store_writes_the_topic_kafka_writes(kafka_on_zk: KafkaOnZk,
                                                             zk_connect: str,
                                                             kazoo_factory: KazooFactory) -> None:
    """The same topic created by Kafka (with its tools) and by our topic store and
    controller writes, each under its own chroot: the same znodes, field by field."""
    kafka_zk = kafka_on_zk.zk
    kafka_assignment = zd.TopicAssignment.decode(TOPIC, kafka_zk.get(zd.topic_path(TOPIC))[0])
    assert kafka_assignment.topic_id is not None
    controller_epoch = zd.decode_controller_epoch(kafka_zk.get(zd.CONTROLLER_EPOCH)[0])
    zk = await ZkClient.connect(zk_connect, session_timeout_ms=6000)
    try:
        await create_top_level_paths(zk)
        store = ZkTopicStore(zk)
        record = TopicRecord(TOPIC, kafka_assignment.topic_id, {p: (1,) for p in range(3)})
        await store.create_topic(record, {"retention.ms": "1000"})
        await store.create_partition_states({
            TopicPartition(TOPIC, p): LeaderIsrAndControllerEpoch(
                LeaderAndIsr.initial(1, (1,)), controller_epoch) for p in range(3)})
    finally:
        await zk.close()
    ours = kazoo_factory(zk_connect)
    for root in (zd.topic_path(TOPIC), zd.topic_config_path(TOPIC)):
        theirs, mine = _tree(kafka_zk, root), _tree(ours, root)
        assert set(theirs) == set(mine), root
        for path, data in theirs.items():
            if data is None:
                assert mine[path] is None, f"{root}{path}"
            else:
                assert json.loads(mine[path] or b"") == json.loads(data), f"{root}{path}"
        assert _versions(kafka_zk, root) == _versions(ours, root), root


def test_config_change_written_by_kafka(kafka_on_zk: KafkaOnZk) -> None:
    zk = kafka_on_zk.zk
    before = set(zk.get_children(zd.CONFIG_CHANGES))
    admin = kafka_on_zk.admin()
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC,
                                            configs={"retention.ms": "2000",
                                                     "segment.ms": "100000"})])
    finally:
        admin.close()
    new = sorted(set(zk.get_children(zd.CONFIG_CHANGES)) - before)
    assert len(new) == 1
    zd.sequence_number(new[0], zd.CONFIG_CHANGE_PREFIX)
    data, _ = zk.get(f"{zd.CONFIG_CHANGES}/{new[0]}")
    assert zd.decode_config_change(data) == ("topics", TOPIC)
    assert json.loads(zd.encode_config_change("topics", TOPIC)) == json.loads(data)
    assert zd.decode_entity_config(zk.get(zd.topic_config_path(TOPIC))[0]) == \
        {"retention.ms": "2000", "segment.ms": "100000"}


def _name_of_topic_id(kafka_on_zk: KafkaOnZk, topic_id: uuid.UUID) -> str | None:
    """The topic's name from Metadata by topic id (v12+), None while Kafka does not know it."""
    admin = kafka_on_zk.admin()
    try:
        (described,) = admin.describe_topics([topic_id])
    finally:
        admin.close()
    return str(described["name"]) if described["error_code"] == 0 else None


def _describe_config(kafka_on_zk: KafkaOnZk, topic: str, name: str) -> str | None:
    admin = kafka_on_zk.admin()
    try:
        result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                        config_filter="all")
    finally:
        admin.close()
    entry = result.get("topic", {}).get(topic, {}).get(name)
    return None if entry is None else str(entry["value"])


def test_kafka_acts_on_a_topic_and_config_we_write(kafka_on_zk: KafkaOnZk) -> None:
    zk = kafka_on_zk.zk
    topic, topic_id = "written-by-us", uuid.uuid4()
    zk.create(zd.topic_config_path(topic), zd.encode_entity_config({"cleanup.policy": "compact"}))
    zk.create(zd.topic_path(topic), zd.TopicAssignment.of({0: [1], 1: [1]}, topic_id).encode())
    # Kafka's controller sees the new topic, elects leaders and writes the state znodes.
    wait_until(lambda: all(zk.exists(zd.partition_state_path(TopicPartition(topic, p)))
                           for p in range(2)), timeout_s=30, what="Kafka's partition states")
    state = zd.PartitionState.decode(zk.get(zd.partition_state_path(TopicPartition(topic, 1)))[0])
    assert (state.leader, state.isr) == (1, (1,))
    wait_until(lambda: _name_of_topic_id(kafka_on_zk, topic_id) == topic, timeout_s=30,
               what="Kafka to serve the topic under the id we wrote")
    # (the broker learns of the topic from the controller's UpdateMetadata, just after)
    wait_until(lambda: _describe_config(kafka_on_zk, topic, "cleanup.policy") == "compact",
               timeout_s=30, what="Kafka to report the topic config we wrote")
    # A config change: the entity znode, then the notification.
    zk.set(zd.topic_config_path(topic),
           zd.encode_entity_config({"cleanup.policy": "compact", "retention.ms": "12345"}))
    zk.create(f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
              zd.encode_config_change("topics", topic), sequence=True)
    wait_until(lambda: _describe_config(kafka_on_zk, topic, "retention.ms") == "12345",
               timeout_s=30, what="Kafka to apply our config change")
    # Deletion: an empty /admin/delete_topics/<t>.
    zk.create(zd.delete_topic_path(topic), None)
    # Kafka removes the topic znode, its config, then the deletion marker.
    wait_until(lambda: zk.exists(zd.delete_topic_path(topic)) is None, timeout_s=60,
               what="Kafka to delete the topic")
    assert zk.exists(zd.topic_path(topic)) is None
    assert zk.exists(zd.topic_config_path(topic)) is None


def test_kafka_reads_admin_and_notification_znodes_we_write(kafka_on_zk: KafkaOnZk) -> None:
    zk, kafka = kafka_on_zk.zk, kafka_on_zk.kafka
    tp0, tp1, tp2 = (TopicPartition(TOPIC, p) for p in range(3))

    mark = kafka.log_size()
    zk.create(f"{zd.ISR_CHANGE_NOTIFICATION}/{zd.ISR_CHANGE_PREFIX}",
              zd.encode_isr_change({tp0}), sequence=True)
    line = kafka.wait_for_log("Sending MetadataRequest to Brokers: List(1) for TopicPartitions",
                              since=mark)
    assert line.endswith(f"({tp0}) (kafka.controller.KafkaController)"), line
    wait_until(lambda: not zk.get_children(zd.ISR_CHANGE_NOTIFICATION), timeout_s=30,
               what="the ISR change notification to be consumed")

    mark = kafka.log_size()
    zk.create(f"{zd.LOG_DIR_EVENT_NOTIFICATION}/{zd.LOG_DIR_EVENT_PREFIX}",
              zd.encode_log_dir_event(1), sequence=True)
    kafka.wait_for_log("Handling log directory failure for brokers 1", since=mark)
    wait_until(lambda: not zk.get_children(zd.LOG_DIR_EVENT_NOTIFICATION), timeout_s=30,
               what="the log dir event notification to be consumed")

    mark = kafka.log_size()
    zk.create(zd.PREFERRED_REPLICA_ELECTION, zd.encode_preferred_replica_election({tp1}))
    # (not needed on one broker: Kafka answers ELECTION_NOT_NEEDED for the partition it read)
    kafka.wait_for_log(f"(PREFERRED) by ZkTriggered for partitions: Map({tp1} -> ", since=mark)
    wait_until(lambda: zk.exists(zd.PREFERRED_REPLICA_ELECTION) is None, timeout_s=30,
               what="the preferred replica election znode to be consumed")

    mark = kafka.log_size()
    zk.create(zd.REASSIGN_PARTITIONS, zd.encode_reassignment({tp2: (1,)}))
    wait_until(lambda: zk.exists(zd.REASSIGN_PARTITIONS) is None, timeout_s=30,
               what="the reassignment znode to be consumed")
    kafka.wait_for_log(f"Leader 1 for partition {tp2} being reassigned, is already in the new "
                       "list of replicas 1 and is alive", since=mark)
    # Kafka bumped the leader epoch with a conditional write: the znode's version follows.
    raw, stat = zk.get(zd.partition_state_path(tp2))
    state = zd.PartitionState.decode(raw, stat.version)
    assert (state.leader, state.isr, state.leader_epoch) == (1, (1,), 1)
    assert state.zk_version == 1



async def test_network_channel_speaks_to_a_kafka_broker(kafka_on_zk: KafkaOnZk) -> None:
    """Our controller channel's UpdateMetadata reaches Apache Kafka over the wire and is
    applied or fenced by Kafka's own checks (last in this module: it changes what Kafka
    thinks the controller is, and puts it back)."""
    zk = kafka_on_zk.zk
    data, stat = zk.get(zd.broker_path(1))
    kafka_broker = to_channel_registration(zd.BrokerRegistration.decode(1, data), stat.czxid)
    epoch = zd.decode_controller_epoch(zk.get(zd.CONTROLLER_EPOCH)[0])
    channel = NetworkChannel(99, "PLAINTEXT")
    channel.add_broker(kafka_broker)

    async def update_metadata(controller_id: int, controller_epoch: int,
                              broker_epoch: int) -> int:
        batch = ControlRequestBatch(controller_id, controller_epoch, "PLAINTEXT")
        batch.add_update_metadata([1])
        target = dataclasses.replace(kafka_broker, epoch=broker_epoch)
        ((_, request, future),) = batch.send_all(channel, {1: target}, lambda _t: ZERO_UUID)
        assert isinstance(request, UpdateMetadataRequest)
        response = await asyncio.wait_for(future, 60)
        assert isinstance(response, UpdateMetadataResponse)
        return response.error_code

    try:
        assert await update_metadata(99, epoch - 1, stat.czxid) == ErrorCode.STALE_CONTROLLER_EPOCH
        assert await update_metadata(99, epoch, stat.czxid - 1) == ErrorCode.STALE_BROKER_EPOCH
        assert _controller_id(kafka_on_zk) == 1
        assert await update_metadata(99, epoch, stat.czxid) == ErrorCode.NO_ERROR
        # Kafka applied it: it names no controller now (99 is not among the live brokers).
        assert _controller_id(kafka_on_zk) == -1
        assert await update_metadata(1, epoch, stat.czxid) == ErrorCode.NO_ERROR
        assert _controller_id(kafka_on_zk) == 1
    finally:
        await channel.close()


def _controller_id(kafka_on_zk: KafkaOnZk) -> int:
    admin = kafka_on_zk.admin()
    try:
        return int(admin.describe_cluster()["controller_id"])
    finally:
        admin.close()

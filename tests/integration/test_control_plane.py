"""The broker's side of the control plane over the wire: LeaderAndIsr, UpdateMetadata and
StopReplica sent to a real broker as a ZooKeeper controller would send them, and what
clients then see (Produce, Fetch, ListOffsets, Metadata), with Kafka's error codes.

The broker's own (single-node) controller has epoch 1; these requests speak as that
controller (or as an older one, to be fenced). Broker epoch -1 means "not checked", as
Kafka's controllers before KIP-380 sent; any small positive epoch is older than the
broker's (its start time in ms).
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.frames import decode_response
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.records import NewRecord, build_batch, iter_batches
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import BrokerFactory
from tests.integration.netclient import RawClient

pytestmark = pytest.mark.timeout(90)

_LaiR = LeaderAndIsrRequest
_UmR = UpdateMetadataRequest
_SrR = StopReplicaRequest
CONTROLLER_EPOCH = 1


def create_topic(client: RawClient, name: str, partitions: int = 1) -> uuid.UUID:
    _, resp = client.request(CreateTopicsRequest.API_KEY, 7, CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions,
                                                   replication_factor=1)],
        timeout_ms=10_000))
    (result,) = resp.topics
    assert result.error_code == 0, result.error_message
    return result.topic_id


def metadata(client: RawClient, *topics: str) -> Any:
    _, resp = client.request(MetadataRequest.API_KEY, 12, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False))
    return resp


def produce(client: RawClient, topic: str, partition: int = 0) -> tuple[int, int]:
    _, resp = client.request(ProduceRequest.API_KEY, 9, ProduceRequest(
        acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(topic, [
            ProduceRequest.PartitionProduceData(partition, build_batch([NewRecord(b"k", b"v")]))])]))
    (p,) = resp.responses[0].partition_responses
    return p.error_code, p.base_offset


def fetch(client: RawClient, topic: str, offset: int = 0, leader_epoch: int = -1,
          version: int = 12) -> Any:
    _, resp = client.request(FetchRequest.API_KEY, version, FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                        current_leader_epoch=leader_epoch,
                                        partition_max_bytes=1 << 20)])]))
    return resp.responses[0].partitions[0]


def list_latest(client: RawClient, topic: str) -> Any:
    _, resp = client.request(ListOffsetsRequest.API_KEY, 9, ListOffsetsRequest(
        replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                partition_index=0, timestamp=-1)])]))
    return resp.topics[0].partitions[0]


def leader_and_isr(client: RawClient, topic: str, topic_id: uuid.UUID, *, leader: int,
                   leader_epoch: int, replicas: list[int], isr: list[int],
                   partition_epoch: int, controller_epoch: int = CONTROLLER_EPOCH,
                   broker_epoch: int = -1, version: int = 7) -> Any:
    _, resp = client.request(_LaiR.API_KEY, version, _LaiR(
        controller_id=0, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=[_LaiR.LeaderAndIsrTopicState(topic_name=topic, topic_id=topic_id,
                                                   partition_states=[_LaiR.LeaderAndIsrPartitionState(
            topic_name=topic, partition_index=0, controller_epoch=controller_epoch,
            leader=leader, leader_epoch=leader_epoch, isr=isr, partition_epoch=partition_epoch,
            replicas=replicas)])]))
    return resp


def partition_errors(resp: Any) -> list[int]:
    return [e.error_code for t in resp.topics for e in t.partition_errors]


def live_broker(broker_id: int, host: str, port: int, rack: str | None = None) -> Any:
    return _UmR.UpdateMetadataBroker(id=broker_id, rack=rack, endpoints=[
        _UmR.UpdateMetadataEndpoint(port=port, host=host, listener="PLAINTEXT",
                                    security_protocol=0)])


def update_metadata(client: RawClient, brokers: list[Any], topic: str, topic_id: uuid.UUID,
                    partitions: list[tuple[int, int, int, list[int], list[int]]], *,
                    controller_epoch: int = CONTROLLER_EPOCH, broker_epoch: int = -1,
                    version: int = 8, controller_id: int = 0) -> int:
    """``partitions``: (index, leader, leader epoch, replicas, isr)."""
    _, resp = client.request(_UmR.API_KEY, version, _UmR(
        controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=[_UmR.UpdateMetadataTopicState(topic_name=topic, topic_id=topic_id,
                                                    partition_states=[
            _UmR.UpdateMetadataPartitionState(
                topic_name=topic, partition_index=p, controller_epoch=controller_epoch,
                leader=leader, leader_epoch=epoch, isr=isr, zk_version=epoch,
                replicas=replicas, offline_replicas=[r for r in replicas
                                                     if r not in {b.id for b in brokers}])
            for p, leader, epoch, replicas, isr in partitions])],
        live_brokers=brokers))
    return int(resp.error_code)


def stop_replica(client: RawClient, topic: str, *, leader_epoch: int, delete: bool,
                 controller_epoch: int = CONTROLLER_EPOCH, broker_epoch: int = -1,
                 version: int = 4) -> Any:
    _, resp = client.request(_SrR.API_KEY, version, _SrR(
        controller_id=0, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=[_SrR.StopReplicaTopicState(topic_name=topic, partition_states=[
            _SrR.StopReplicaPartitionState(partition_index=0, leader_epoch=leader_epoch,
                                           delete_partition=delete)])]))
    return resp


@pytest.mark.parametrize(("lai_v", "um_v", "sr_v"), [(5, 7, 3), (7, 8, 4)])
def test_stale_controller_broker_and_leader_epochs_are_refused(
        broker: BrokerProcess, lai_v: int, um_v: int, sr_v: int) -> None:
    with RawClient(broker.bootstrap) as client:
        topic_id = create_topic(client, "fenced")
        (meta,) = metadata(client, "fenced").topics
        assert meta.partitions[0].leader_epoch == 0
        kw: dict[str, Any] = {"leader": 0, "replicas": [0], "isr": [0], "version": lai_v}
        # An older controller: the whole request refused.
        old = leader_and_isr(client, "fenced", topic_id, leader_epoch=1, partition_epoch=1,
                             controller_epoch=CONTROLLER_EPOCH - 1, **kw)
        assert old.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert partition_errors(old) == [ErrorCode.STALE_CONTROLLER_EPOCH]
        # A request meant for an older incarnation of this broker.
        stale = leader_and_isr(client, "fenced", topic_id, leader_epoch=1, partition_epoch=1,
                               broker_epoch=1, **kw)
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert partition_errors(stale) == [ErrorCode.STALE_BROKER_EPOCH]
        # The current leader epoch again: ignored, as Kafka answers it.
        same = leader_and_isr(client, "fenced", topic_id, leader_epoch=0, partition_epoch=1,
                              **kw)
        assert (same.error_code, partition_errors(same)) == (0, [ErrorCode.STALE_CONTROLLER_EPOCH])
        # A newer epoch applies: clients with the old one are fenced.
        newer = leader_and_isr(client, "fenced", topic_id, leader_epoch=1, partition_epoch=1,
                               **kw)
        assert (newer.error_code, partition_errors(newer)) == (0, [0])
        assert fetch(client, "fenced", leader_epoch=0).error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert fetch(client, "fenced", leader_epoch=1).error_code == 0
        # StopReplica with an older leader epoch: FENCED_LEADER_EPOCH, nothing stopped.
        fenced = stop_replica(client, "fenced", leader_epoch=0, delete=True, version=sr_v)
        assert fenced.error_code == 0
        assert [e.error_code for e in fenced.partition_errors] == [ErrorCode.FENCED_LEADER_EPOCH]
        stale_stop = stop_replica(client, "fenced", leader_epoch=1, delete=True,
                                  controller_epoch=0, version=sr_v)
        assert stale_stop.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert produce(client, "fenced") == (0, 0)  # still hosted, still leader
        # UpdateMetadata from an older controller or for an older broker epoch.
        me = [live_broker(0, broker.host, broker.port)]
        args = ("fenced", topic_id, [(0, 0, 1, [0], [0])])
        assert update_metadata(client, me, *args, controller_epoch=0,
                               version=um_v) == ErrorCode.STALE_CONTROLLER_EPOCH
        assert update_metadata(client, me, *args, broker_epoch=1,
                               version=um_v) == ErrorCode.STALE_BROKER_EPOCH
        assert update_metadata(client, me, *args, version=um_v) == 0
        (meta,) = metadata(client, "fenced").topics
        assert meta.partitions[0].leader_epoch == 1


def test_follower_refuses_produce_and_next_epoch_makes_it_leader_again(
        broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        topic_id = create_topic(client, "roles")
        assert produce(client, "roles") == (0, 0)
        # The cluster gains broker 1, which now leads roles-0; this broker follows it.
        brokers = [live_broker(0, broker.host, broker.port), live_broker(1, "127.0.0.1", 1)]
        assert update_metadata(client, brokers, "roles", topic_id,
                               [(0, 1, 1, [0, 1], [1, 0])]) == 0
        follow = leader_and_isr(client, "roles", topic_id, leader=1, leader_epoch=1,
                                replicas=[0, 1], isr=[1, 0], partition_epoch=1)
        assert partition_errors(follow) == [0]
        assert produce(client, "roles")[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # Consumers of Fetch v10 and older read only from the leader; v11+ may read a
        # follower (KIP-392), up to its HW.
        assert fetch(client, "roles", version=10).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert fetch(client, "roles").error_code == ErrorCode.NO_ERROR
        assert list_latest(client, "roles").error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        (meta,) = metadata(client, "roles").topics
        assert (meta.partitions[0].leader_id, meta.partitions[0].leader_epoch) == (1, 1)
        # The next epoch makes it leader again: produce works, stamped with epoch 2.
        lead = leader_and_isr(client, "roles", topic_id, leader=0, leader_epoch=2,
                              replicas=[0, 1], isr=[0], partition_epoch=2)
        assert partition_errors(lead) == [0]
        assert produce(client, "roles") == (0, 1)
        data = fetch(client, "roles", offset=1, leader_epoch=2)
        assert data.error_code == 0
        (batch,) = iter_batches(bytes(data.records))
        assert batch.partition_leader_epoch == 2
        latest = list_latest(client, "roles")
        assert (latest.error_code, latest.offset, latest.leader_epoch) == (0, 2, 2)
        _, resp = client.request(OffsetForLeaderEpochRequest.API_KEY, 4, OffsetForLeaderEpochRequest(
            replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic="roles", partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=2, leader_epoch=0)])]))
        end = resp.topics[0].partitions[0]
        assert (end.error_code, end.leader_epoch, end.end_offset) == (0, 0, 1)  # epoch 2 from 1


def test_stop_replica_with_delete_removes_the_log(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        create_topic(client, "doomed")
        assert produce(client, "doomed") == (0, 0)
        assert (broker.log_dir / "doomed-0").is_dir()
        resp = stop_replica(client, "doomed", leader_epoch=-2, delete=True)
        assert resp.error_code == 0
        assert [(e.topic_name, e.partition_index, e.error_code)
                for e in resp.partition_errors] == [("doomed", 0, 0)]
        assert not (broker.log_dir / "doomed-0").exists()
        assert [p.name for p in broker.log_dir.glob("doomed-0.*-delete")]
        # The cluster still has the partition (the cache), this broker no longer hosts it.
        assert produce(client, "doomed")[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert fetch(client, "doomed").error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_metadata_of_partitions_this_broker_does_not_host(broker: BrokerProcess) -> None:
    other_id = uuid.uuid4()
    with RawClient(broker.bootstrap) as client:
        brokers = [live_broker(0, broker.host, broker.port),
                   live_broker(2, "127.0.0.1", 19092, rack="r2")]
        assert update_metadata(client, brokers, "elsewhere", other_id, [
            (0, 2, 5, [2], [2]),
            (1, 3, 7, [3, 2], [3]),  # its leader, broker 3, is not alive
        ]) == 0
        resp = metadata(client, "elsewhere")
        assert sorted((b.node_id, b.host, b.port, b.rack) for b in resp.brokers) == [
            (0, broker.host, broker.port, None), (2, "127.0.0.1", 19092, "r2")]
        (topic,) = resp.topics
        assert (topic.error_code, topic.name, topic.topic_id) == (0, "elsewhere", other_id)
        p0, p1 = topic.partitions
        assert (p0.error_code, p0.leader_id, p0.leader_epoch, p0.replica_nodes, p0.isr_nodes,
                p0.offline_replicas) == (0, 2, 5, [2], [2], [])
        assert (p1.error_code, p1.leader_id, p1.leader_epoch, p1.replica_nodes,
                p1.offline_replicas) == (ErrorCode.LEADER_NOT_AVAILABLE, -1, 7, [3, 2], [3])
        # Known to the cluster, not hosted here: NOT_LEADER_OR_FOLLOWER; unknown: UNKNOWN.
        assert produce(client, "elsewhere")[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert fetch(client, "elsewhere").error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert list_latest(client, "elsewhere").error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert produce(client, "nowhere")[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert fetch(client, "nowhere").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        _, cluster = client.request(DescribeClusterRequest.API_KEY, 1, DescribeClusterRequest(
            endpoint_type=1))
        assert sorted(b.broker_id for b in cluster.brokers) == [0, 2]
        assert cluster.controller_id == 0


@pytest.mark.parametrize("um_version", [7, 8])
def test_metadata_names_the_leader_and_controller_the_controller_sent(
        broker: BrokerProcess, um_version: int) -> None:
    """Each partition's leader is the one the controller chose, not a replica picked by
    position (it is neither the first nor the last replica here), and the controller is
    the one that sent the update, not this broker: Metadata and DescribeCluster both."""
    topic_id = uuid.uuid4()
    with RawClient(broker.bootstrap) as client:
        brokers = [live_broker(0, broker.host, broker.port),
                   live_broker(1, "127.0.0.1", 19091), live_broker(2, "127.0.0.1", 19092)]
        assert update_metadata(client, brokers, "led-elsewhere", topic_id, [
            (0, 1, 4, [2, 1, 0], [0, 1, 2]),
            (1, 2, 6, [0, 2, 1], [2, 1]),
            (2, 0, 3, [1, 0, 2], [0]),
        ], version=um_version, controller_id=2) == 0
        for version in (1, 9, 12):  # before flexible versions, the first, the latest
            _, resp = client.request(MetadataRequest.API_KEY, version, MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name="led-elsewhere")],
                allow_auto_topic_creation=version < 4))  # v1-3 always auto-create
            assert resp.controller_id == 2, version
            (topic,) = resp.topics
            assert [(p.partition_index, p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes)
                    for p in topic.partitions] == [
                (0, 0, 1, [2, 1, 0], [0, 1, 2]),
                (1, 0, 2, [0, 2, 1], [2, 1]),
                (2, 0, 0, [1, 0, 2], [0]),
            ], version
            if version >= 7:
                assert [p.leader_epoch for p in topic.partitions] == [4, 6, 3], version
        _, cluster = client.request(DescribeClusterRequest.API_KEY, 1, DescribeClusterRequest(
            endpoint_type=1))
        assert cluster.controller_id == 2
        assert sorted(b.broker_id for b in cluster.brokers) == [0, 1, 2]


def test_topic_created_before_start_is_hosted_from_the_store(tmp_path: Path) -> None:
    """Start-up: the controller reads the topic store and makes the broker leader of
    every partition (LeaderAndIsr), with the leader epochs it stored."""
    from tests.integration.broker_process import register_topic

    proc = BrokerProcess(tmp_path)
    register_topic(proc.log_dir, "stored", partitions=2)
    with proc, RawClient(proc.bootstrap) as client:
        (topic,) = metadata(client, "stored").topics
        assert [(p.partition_index, p.leader_id, p.leader_epoch) for p in topic.partitions] == [
            (0, 0, 0), (1, 0, 0)]
        assert produce(client, "stored", 1) == (0, 0)
    store = (proc.log_dir / "minikafka-topics.json").read_text()
    assert '"leader_epoch": 0' in store and '"controller_epoch": 1' in store


def test_creating_consumer_offsets_does_not_hold_up_other_clients(
        broker_factory: BrokerFactory) -> None:
    """The first FindCoordinator creates __consumer_offsets (here 200 partitions) through
    the controller, off the event loop: another client is answered while it waits, and then
    it gets its coordinator."""
    broker = broker_factory(offsets_topic_num_partitions="200")
    with RawClient(broker.bootstrap) as waiting, RawClient(broker.bootstrap) as other:
        cid, frame = waiting.frame(FindCoordinatorRequest.API_KEY, 3,
                                   FindCoordinatorRequest(key="g", key_type=0))
        waiting.send(frame)
        _, versions = other.request(ApiVersionsRequest.API_KEY, 3, ApiVersionsRequest(
            client_software_name="t", client_software_version="1"))
        assert versions.error_code == 0
        # Answered while the creation is still going on: nothing for the first client yet.
        waiting.sock.settimeout(0)
        with pytest.raises(BlockingIOError):
            waiting.sock.recv(1, socket.MSG_PEEK)
        waiting.sock.settimeout(60)
        got_cid, found = decode_response(waiting.recv_frame(), FindCoordinatorRequest.API_KEY, 3)
        assert got_cid == cid
        assert (found.error_code, found.node_id, found.port) == (0, 0, broker.port)
        (topic,) = metadata(other, "__consumer_offsets").topics
        assert len(topic.partitions) == 200 and topic.is_internal


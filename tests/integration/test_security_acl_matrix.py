"""The ACL matrix: for each API and resource, a principal without the ACL Kafka requires
gets Kafka's authorization error (and no data), the same principal with it is served.

One broker with an authorizer and a SASL/PLAIN listener; ``admin`` is a super user, the
rows run as ``alice``: first with no ACL at all (expecting the error in the table), then
with exactly the ACLs of the row (expecting NO_ERROR); the row's ACLs are removed after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from broker.security.acl import AclOperation as Op
from broker.security.acl import AclPermissionType, PatternType, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import AlterPartitionRequest
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from protocol.messages.create_partitions import CreatePartitionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.delete_records import DeleteRecordsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.records import NewRecord, build_batch
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import ModuleBrokerFactory
from tests.integration.data_path_client import create_topic
from tests.integration.netclient import RawClient, sasl_plain_login

pytestmark = pytest.mark.timeout(180)

T = ResourceType.TOPIC
G = ResourceType.GROUP
C = ResourceType.CLUSTER
TOPIC, GROUP = "orders", "billing"
DENIED_TOPIC = ErrorCode.TOPIC_AUTHORIZATION_FAILED
DENIED_GROUP = ErrorCode.GROUP_AUTHORIZATION_FAILED
DENIED_CLUSTER = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_admin="admin-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def matrix_broker(module_broker_factory: ModuleBrokerFactory) -> BrokerProcess:
    proc = module_broker_factory("matrix-broker", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "auto.create.topics.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
    })
    create_topic(proc.endpoints["PLAINTEXT"], TOPIC)
    return proc


def login(bootstrap: str, user: str = "alice") -> RawClient:
    return sasl_plain_login(RawClient(bootstrap), user, f"{user}-secret")


def grant(admin: RawClient, acls: list[tuple[ResourceType, str, Op]]) -> None:
    _cid, body = admin.request(30, 3, CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=rt, resource_name=name, resource_pattern_type=PatternType.LITERAL,
        principal="User:alice", host="*", operation=op, permission_type=AclPermissionType.ALLOW)
        for rt, name, op in acls]))
    assert isinstance(body, CreateAclsResponse) and all(r.error_code == 0 for r in body.results)


def revoke_all(admin: RawClient) -> None:
    _cid, body = admin.request(31, 3, DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=ResourceType.ANY, resource_name_filter=None,
        pattern_type_filter=PatternType.ANY, principal_filter="User:alice", host_filter=None,
        operation=Op.ANY, permission_type=AclPermissionType.ANY)]))
    assert isinstance(body, DeleteAclsResponse)


def _one(body: Any, *path: str) -> int:
    value = body
    for step in path:
        value = getattr(value, step)
        if isinstance(value, list):
            value = value[0]
    return int(value)


# -- the rows: each sends one request and returns the error code that matters ------------------

def metadata_named(c: RawClient) -> int:
    return _one(c.request(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                                  allow_auto_topic_creation=False))[1], "topics", "error_code")


def metadata_all(c: RawClient) -> int:
    body = c.request(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))[1]
    return 0 if TOPIC in {t.name for t in body.topics} else int(DENIED_TOPIC)


def produce(c: RawClient) -> int:
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(TOPIC, [ProduceRequest.PartitionProduceData(
            0, build_batch([NewRecord(None, b"v", (), None)]))])])
    return _one(c.request(0, 9, request)[1], "responses", "partition_responses", "error_code")


def fetch(c: RawClient) -> int:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=[
                               FetchRequest.FetchTopic(topic=TOPIC, partitions=[FetchRequest.FetchPartition(
                                   partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    return _one(c.request(1, 12, request)[1], "responses", "partitions", "error_code")


def list_offsets(c: RawClient) -> int:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    return _one(c.request(2, 7, request)[1], "topics", "partitions", "error_code")


def offset_for_leader_epoch(c: RawClient) -> int:
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=TOPIC, partitions=[
            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                                 leader_epoch=0)])])
    return _one(c.request(23, 4, request)[1], "topics", "partitions", "error_code")


def offset_delete(c: RawClient) -> int:
    request = OffsetDeleteRequest(group_id=GROUP, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name=TOPIC, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])])
    body = c.request(47, 0, request)[1]
    return int(body.error_code) or _one(body, "topics", "partitions", "error_code")


def create_topics(c: RawClient) -> int:
    request = CreateTopicsRequest(timeout_ms=5000, topics=[CreateTopicsRequest.CreatableTopic(
        name="created-by-alice", num_partitions=1, replication_factor=1)], validate_only=True)
    return _one(c.request(19, 7, request)[1], "topics", "error_code")


def create_partitions(c: RawClient) -> int:
    request = CreatePartitionsRequest(timeout_ms=5000, validate_only=True, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=TOPIC, count=2, assignments=None)])
    return _one(c.request(37, 3, request)[1], "results", "error_code")


def delete_records(c: RawClient) -> int:
    request = DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
        name=TOPIC, partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=0)])])
    return _one(c.request(21, 2, request)[1], "topics", "partitions", "error_code")


def delete_topics(c: RawClient) -> int:
    request = DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=5000)
    return _one(c.request(20, 5, request)[1], "responses", "error_code")


def describe_topic_configs(c: RawClient) -> int:
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name=TOPIC, configuration_keys=None)])
    return _one(c.request(32, 4, request)[1], "results", "error_code")


def describe_broker_configs(c: RawClient) -> int:
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=4, resource_name="0", configuration_keys=None)])
    return _one(c.request(32, 4, request)[1], "results", "error_code")


def alter_topic_configs(c: RawClient) -> int:
    request = IncrementalAlterConfigsRequest(validate_only=True, resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=2, resource_name=TOPIC, configs=[
            IncrementalAlterConfigsRequest.AlterableConfig(name="retention.ms", config_operation=0,
                                                           value="100000")])])
    return _one(c.request(44, 1, request)[1], "responses", "error_code")


def find_coordinator(c: RawClient) -> int:
    return _one(c.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]))[1],
                "coordinators", "error_code")


def join_group(c: RawClient) -> int:
    request = JoinGroupRequest(group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                               member_id="", group_instance_id=None, protocol_type="consumer",
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
    return _one(c.request(11, 5, request)[1], "error_code")


def offset_commit(c: RawClient) -> int:
    request = OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                      name=TOPIC, partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                                          partition_index=0, committed_offset=0, committed_metadata="")])])
    return _one(c.request(8, 8, request)[1], "topics", "partitions", "error_code")


def offset_fetch(c: RawClient) -> int:
    request = OffsetFetchRequest(group_id=GROUP, topics=None)
    return _one(c.request(9, 7, request)[1], "error_code")


def offset_fetch_topic(c: RawClient) -> int:
    request = OffsetFetchRequest(group_id=GROUP, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])])
    body = c.request(9, 7, request)[1]
    return int(body.error_code) or _one(body, "topics", "partitions", "error_code")


def offset_fetch_all_hides(c: RawClient) -> int:
    body = c.request(9, 7, OffsetFetchRequest(group_id=GROUP, topics=None))[1]
    return int(body.error_code) or (0 if TOPIC in {t.name for t in body.topics} else int(DENIED_TOPIC))


def follower_fetch(c: RawClient) -> int:
    request = FetchRequest(replica_id=1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=[
                               FetchRequest.FetchTopic(topic=TOPIC, partitions=[FetchRequest.FetchPartition(
                                   partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    return _one(c.request(1, 12, request)[1], "responses", "partitions", "error_code")


def follower_offset_for_leader_epoch(c: RawClient) -> int:
    request = OffsetForLeaderEpochRequest(replica_id=1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=TOPIC, partitions=[
            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                                 leader_epoch=0)])])
    return _one(c.request(23, 4, request)[1], "topics", "partitions", "error_code")


# The controller's and the brokers' own requests. Allowed, they carry broker epoch 0 (older
# than the broker's: STALE_BROKER_EPOCH, nothing applied) or name another broker.
def leader_and_isr(c: RawClient) -> int:
    return _one(c.request(4, 7, LeaderAndIsrRequest(controller_id=1, controller_epoch=1,
                                                     broker_epoch=0))[1], "error_code")


def update_metadata(c: RawClient) -> int:
    return _one(c.request(6, 8, UpdateMetadataRequest(controller_id=1, controller_epoch=1,
                                                       broker_epoch=0))[1], "error_code")


def stop_replica(c: RawClient) -> int:
    return _one(c.request(5, 4, StopReplicaRequest(controller_id=1, controller_epoch=1,
                                                    broker_epoch=0))[1], "error_code")


def alter_partition(c: RawClient) -> int:
    return _one(c.request(56, 3, AlterPartitionRequest(broker_id=1, broker_epoch=0))[1], "error_code")


def controlled_shutdown(c: RawClient) -> int:
    return _one(c.request(7, 3, ControlledShutdownRequest(broker_id=999, broker_epoch=0))[1],
                "error_code")


def describe_groups(c: RawClient) -> int:
    return _one(c.request(15, 5, DescribeGroupsRequest(groups=[GROUP]))[1], "groups", "error_code")


def list_groups(c: RawClient) -> int:
    body = c.request(16, 4, ListGroupsRequest(states_filter=[]))[1]
    return 0 if GROUP in {g.group_id for g in body.groups} else int(DENIED_GROUP)


def delete_groups(c: RawClient) -> int:
    return _one(c.request(42, 2, DeleteGroupsRequest(groups_names=["empty-group"]))[1], "results", "error_code")


def init_producer_id(c: RawClient) -> int:
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    return _one(c.request(22, 4, request)[1], "error_code")


def describe_log_dirs(c: RawClient) -> int:
    return _one(c.request(35, 4, DescribeLogDirsRequest(topics=None))[1], "error_code")


@dataclass(frozen=True)
class Row:
    call: Callable[[RawClient], int]
    denied: int
    acls: tuple[tuple[ResourceType, str, Op], ...]
    allowed: int = 0  # the code with the ACLs (0, or an error past authorization)
    given: tuple[tuple[ResourceType, str, Op], ...] = ()  # ACLs held in both runs


MATRIX: dict[str, Row] = {
    "Metadata(topic)": Row(metadata_named, DENIED_TOPIC, ((T, TOPIC, Op.DESCRIBE),)),
    "Metadata(all topics) hides": Row(metadata_all, DENIED_TOPIC, ((T, TOPIC, Op.DESCRIBE),)),
    "Produce": Row(produce, DENIED_TOPIC, ((T, TOPIC, Op.WRITE),)),
    "Fetch": Row(fetch, DENIED_TOPIC, ((T, TOPIC, Op.READ),)),
    "ListOffsets": Row(list_offsets, DENIED_TOPIC, ((T, TOPIC, Op.DESCRIBE),)),
    "OffsetForLeaderEpoch": Row(offset_for_leader_epoch, DENIED_TOPIC, ((T, TOPIC, Op.DESCRIBE),)),
    "OffsetDelete": Row(offset_delete, DENIED_GROUP, ((G, GROUP, Op.DELETE), (T, TOPIC, Op.READ))),
    "CreateTopics": Row(create_topics, DENIED_TOPIC, ((C, "kafka-cluster", Op.CREATE),)),
    "CreatePartitions": Row(create_partitions, DENIED_TOPIC, ((T, TOPIC, Op.ALTER),)),
    "DeleteRecords": Row(delete_records, DENIED_TOPIC, ((T, TOPIC, Op.DELETE),)),
    "DeleteTopics": Row(delete_topics, DENIED_TOPIC, ((T, "doomed", Op.DELETE),),
                        allowed=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    "DescribeConfigs(topic)": Row(describe_topic_configs, DENIED_TOPIC, ((T, TOPIC, Op.DESCRIBE_CONFIGS),)),
    "DescribeConfigs(broker)": Row(describe_broker_configs, DENIED_CLUSTER, ((C, "kafka-cluster", Op.DESCRIBE_CONFIGS),)),
    "IncrementalAlterConfigs(topic)": Row(alter_topic_configs, DENIED_TOPIC, ((T, TOPIC, Op.ALTER_CONFIGS),)),
    "FindCoordinator": Row(find_coordinator, DENIED_GROUP, ((G, GROUP, Op.DESCRIBE),)),
    "JoinGroup": Row(join_group, DENIED_GROUP, ((G, GROUP, Op.READ),), allowed=ErrorCode.MEMBER_ID_REQUIRED),
    "OffsetCommit": Row(offset_commit, DENIED_GROUP, ((G, GROUP, Op.READ), (T, TOPIC, Op.READ))),
    "OffsetFetch": Row(offset_fetch, DENIED_GROUP, ((G, GROUP, Op.DESCRIBE),)),
    "OffsetFetch(topic)": Row(offset_fetch_topic, DENIED_TOPIC, ((T, TOPIC, Op.DESCRIBE),),
                              given=((G, GROUP, Op.DESCRIBE),)),
    "OffsetFetch(all topics) hides": Row(offset_fetch_all_hides, DENIED_TOPIC, ((T, TOPIC, Op.DESCRIBE),),
                                         given=((G, GROUP, Op.DESCRIBE),)),
    "OffsetCommit(topic)": Row(offset_commit, DENIED_TOPIC, ((T, TOPIC, Op.READ),),
                               given=((G, GROUP, Op.READ),)),
    "Fetch(follower)": Row(follower_fetch, DENIED_TOPIC, ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
                           given=((T, TOPIC, Op.READ),)),
    "OffsetForLeaderEpoch(follower)": Row(follower_offset_for_leader_epoch, DENIED_TOPIC,
                                          ((C, "kafka-cluster", Op.CLUSTER_ACTION),)),
    "LeaderAndIsr": Row(leader_and_isr, DENIED_CLUSTER, ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
                        allowed=ErrorCode.STALE_BROKER_EPOCH),
    "UpdateMetadata": Row(update_metadata, DENIED_CLUSTER, ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
                          allowed=ErrorCode.STALE_BROKER_EPOCH),
    "StopReplica": Row(stop_replica, DENIED_CLUSTER, ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
                       allowed=ErrorCode.STALE_BROKER_EPOCH),
    "AlterPartition": Row(alter_partition, DENIED_CLUSTER, ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
                          allowed=ErrorCode.STALE_BROKER_EPOCH),
    "ControlledShutdown": Row(controlled_shutdown, DENIED_CLUSTER,
                              ((C, "kafka-cluster", Op.CLUSTER_ACTION),),
                              allowed=ErrorCode.BROKER_NOT_AVAILABLE),
    "DescribeGroups": Row(describe_groups, DENIED_GROUP, ((G, GROUP, Op.DESCRIBE),)),
    "ListGroups hides": Row(list_groups, DENIED_GROUP, ((G, GROUP, Op.DESCRIBE),)),
    "DeleteGroups": Row(delete_groups, DENIED_GROUP, ((G, "empty-group", Op.DELETE),),
                        allowed=ErrorCode.GROUP_ID_NOT_FOUND),
    "InitProducerId(idempotent)": Row(init_producer_id, DENIED_CLUSTER, ((C, "kafka-cluster", Op.IDEMPOTENT_WRITE),)),
    "DescribeLogDirs": Row(describe_log_dirs, DENIED_CLUSTER, ((C, "kafka-cluster", Op.DESCRIBE),)),
}


@pytest.mark.parametrize("api", list(MATRIX))
def test_acl_matrix(matrix_broker: BrokerProcess, api: str) -> None:
    row = MATRIX[api]
    with RawClient(matrix_broker.endpoints["PLAINTEXT"]) as admin:
        revoke_all(admin)
        # The committed offset that OffsetCommit / OffsetFetch / ListGroups rows look at.
        offset_commit(admin)
        if row.given:
            grant(admin, list(row.given))
        with login(matrix_broker.endpoints["SASL_PLAINTEXT"]) as alice:
            assert row.call(alice) == row.denied, f"{api} without {row.acls}"
        grant(admin, list(row.acls))
        try:
            with login(matrix_broker.endpoints["SASL_PLAINTEXT"]) as alice:
                assert row.call(alice) == row.allowed, f"{api} with {row.acls}"
        finally:
            revoke_all(admin)


def _create_one(c: RawClient, name: str, *, timeout_ms: int = 10000) -> Any:
    request = CreateTopicsRequest(timeout_ms=timeout_ms, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)])
    return c.request(19, 7, request)[1].topics[0]


def test_create_topics_answers_configs_only_to_describe_configs(matrix_broker: BrokerProcess) -> None:
    """Kafka's KafkaApis: a topic's partitions, replication factor, configs and id are in the
    CreateTopics answer only for a principal allowed DESCRIBE_CONFIGS on it; else the config
    part fails with TOPIC_AUTHORIZATION_FAILED and the topic is created all the same. A topic
    whose creation failed (here: not waited for) answers none of them either."""
    with RawClient(matrix_broker.endpoints["PLAINTEXT"]) as admin:
        revoke_all(admin)
        grant(admin, [(C, "kafka-cluster", Op.CREATE)])
        try:
            with login(matrix_broker.endpoints["SASL_PLAINTEXT"]) as alice:
                hidden = _create_one(alice, "alice-hidden")
            grant(admin, [(T, "alice-described", Op.DESCRIBE_CONFIGS)])
            with login(matrix_broker.endpoints["SASL_PLAINTEXT"]) as alice:
                shown = _create_one(alice, "alice-described")
        finally:
            revoke_all(admin)
        timed_out = _create_one(admin, "not-waited-for", timeout_ms=0)
    assert (hidden.error_code, hidden.topic_config_error_code) == (0, DENIED_TOPIC)
    assert (hidden.num_partitions, hidden.replication_factor, hidden.configs) == (-1, -1, [])
    assert hidden.topic_id.int == 0
    assert (shown.error_code, shown.topic_config_error_code) == (0, 0)
    assert (shown.num_partitions, shown.replication_factor) == (1, 1)
    assert "retention.ms" in {c.name for c in shown.configs} and shown.topic_id.int != 0
    assert (timed_out.error_code, timed_out.topic_config_error_code) == (ErrorCode.REQUEST_TIMED_OUT, 0)
    assert (timed_out.num_partitions, timed_out.replication_factor, timed_out.configs) == (-1, -1, [])

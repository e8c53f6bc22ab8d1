"""Cases for every (api key, version) pair the broker advertises: one function per API key,
``CASES[api_key](env, version)`` sends a meaningful request encoded at exactly that version
over a raw socket (``RawClient``; the request header version follows the API's flexible
versions) and asserts a semantically right answer.

What "right" means per API: Produce appends and a Fetch reads the records back; Fetch reads
what was produced; ListOffsets finds the earliest and latest offsets; Metadata lists the topic
and its leader; admin APIs change what a later request reads; group APIs move a real group
through its states; ACL APIs round-trip on a broker with the authorizer on; SASL APIs on a
SASL listener; controller requests from a "previous incarnation" (an old broker epoch) get
STALE_BROKER_EPOCH and change nothing, as in Kafka.

The target broker (``Target``) runs with ``PROPS``: listeners PLAINTEXT (ANONYMOUS, a super
user) and SASL_PLAINTEXT (PLAIN), the ACL authorizer on, no initial rebalance delay, no
auto-created topics. The same cases run against minikafka
(tests/integration/test_every_api_version.py) and against Apache Kafka 3.9.1 in ZooKeeper
mode (tests/cluster/test_every_api_version_kafka.py), so each assertion is Kafka's answer.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from broker.handlers import REGISTRY
from broker.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from protocol.messages.alter_configs import AlterConfigsRequest
from protocol.messages.alter_partition import AlterPartitionRequest
from protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.create_acls import CreateAclsRequest
from protocol.messages.create_partitions import CreatePartitionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.delete_acls import DeleteAclsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.delete_records import DeleteRecordsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.describe_acls import DescribeAclsRequest
from protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from protocol.messages.elect_leaders import ElectLeadersRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.sync_group import SyncGroupRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from tests.integration.data_path_client import batch, records_of
from tests.integration.netclient import RawClient

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret";')
PROPS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
}
TOPIC = "every-api"  # 1 partition, created by the fixture
LATEST = -1
EARLIEST = -2


class Target(Protocol):
    """The broker under test (a ``BrokerProcess``, or Apache Kafka's stand-in)."""

    @property
    def broker_id(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...  # the PLAINTEXT listener's
    @property
    def endpoints(self) -> dict[str, str]: ...  # listener name -> "host:port"
    @property
    def log_dir(self) -> Path: ...


@dataclass
class Env:
    broker: Target
    client: RawClient  # on PLAINTEXT: ANONYMOUS, a super user
    topic_id: uuid.UUID
    names: Iterator[int]
    # ApiVersions lists exactly the handler registry (minikafka); else it covers it (Kafka)
    exact_api_versions: bool = True

    def call(self, request: Any, version: int) -> Any:
        return self.client.request(type(request).API_KEY, version, request)[1]

    def latest(self, request: Any) -> Any:
        return self.call(request, REGISTRY[type(request).API_KEY].max_version)

    def fresh(self, prefix: str) -> str:
        return f"{prefix}-{next(self.names)}"


@contextlib.contextmanager
def open_env(target: Target, *, exact_api_versions: bool = True) -> Iterator[Env]:
    """A client on ``target``'s PLAINTEXT listener and the module's topic, created."""
    with RawClient(target.endpoints["PLAINTEXT"]) as client:
        e = Env(target, client, uuid.UUID(int=0), itertools.count(), exact_api_versions)
        create(e, TOPIC, 1)
        e.topic_id = metadata_topic(e, TOPIC).topic_id
        yield e


# -- helpers at the latest version -------------------------------------------------------


def create(e: Env, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    resp = e.latest(CreateTopicsRequest(timeout_ms=10_000, topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, configs=[
            CreateTopicsRequest.CreatableTopicConfig(k, v) for k, v in (configs or {}).items()])]))
    assert resp.topics[0].error_code == 0, resp


def metadata_topic(e: Env, name: str) -> Any:
    resp = e.latest(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                    allow_auto_topic_creation=False))
    (t,) = resp.topics
    return t


def produce(e: Env, values: list[bytes], topic: str = TOPIC) -> int:
    resp = e.latest(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(topic, [ProduceRequest.PartitionProduceData(0, batch(values))])]))
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == 0, p
    return int(p.base_offset)


def fetch_values(e: Env, offset: int, topic: str = TOPIC) -> list[bytes | None]:
    resp = e.latest(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                 session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                     topic=topic, topic_id=metadata_topic(e, topic).topic_id,
                                     partitions=[FetchRequest.FetchPartition(
                                         partition=0, fetch_offset=offset,
                                         partition_max_bytes=1 << 20)])]))
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0, p
    return [r.value for r in records_of(p.records) if r.offset >= offset]


def list_offset(e: Env, timestamp: int, topic: str = TOPIC, version: int | None = None) -> Any:
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(topic, [
            ListOffsetsRequest.ListOffsetsPartition(0, -1, timestamp)])])
    resp = e.latest(req) if version is None else e.call(req, version)
    return resp.topics[0].partitions[0]


def config_value(e: Env, topic: str, key: str) -> str | None:
    resp = e.latest(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name=topic, configuration_keys=[key])]))
    (r,) = resp.results
    assert r.error_code == 0, r
    return {c.name: c.value for c in r.configs}.get(key)


def broker_defaults(e: Env) -> list[tuple[str, str | None, int, list[tuple[str, str | None, int]]]]:
    """The cluster-wide dynamic broker defaults: (name, value, source, synonyms) each."""
    resp = e.latest(DescribeConfigsRequest(include_synonyms=True, resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="",
                                                       configuration_keys=None)]))
    (r,) = resp.results
    assert r.error_code == 0, r
    return [(c.name, c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in r.configs]


def join(e: Env, group: str, version: int | None = None, member_id: str = "") -> Any:
    """Join ``group`` as its only consumer; answers the JoinGroup response (v4+: after the
    MEMBER_ID_REQUIRED round trip, as Kafka's clients do)."""
    v = REGISTRY[11].max_version if version is None else version
    req = JoinGroupRequest(group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                           member_id=member_id, group_instance_id=None, protocol_type="consumer",
                           protocols=[JoinGroupRequest.JoinGroupRequestProtocol("range", b"meta")])
    resp = e.call(req, v)
    if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        assert v >= 4 and resp.member_id, resp
        req.member_id = resp.member_id
        resp = e.call(req, v)
    assert resp.error_code == 0, resp
    return resp


def stable_group(e: Env, group: str) -> tuple[str, int]:
    """A consumer group with one member, Stable; (member id, generation)."""
    j = join(e, group)
    s = e.latest(SyncGroupRequest(group_id=group, generation_id=j.generation_id, member_id=j.member_id,
                                  group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                  assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                                      j.member_id, b"assigned")]))
    assert s.error_code == 0 and s.assignment == b"assigned", s
    return j.member_id, j.generation_id


def group_state(e: Env, group: str) -> str:
    resp = e.latest(DescribeGroupsRequest(groups=[group]))
    return str(resp.groups[0].group_state)


def commit(e: Env, group: str, offsets: dict[int, int], version: int | None = None,
           topic: str = TOPIC) -> Any:
    req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None, retention_time_ms=-1, topics=[
                                  OffsetCommitRequest.OffsetCommitRequestTopic(topic, [
                                      OffsetCommitRequest.OffsetCommitRequestPartition(
                                          partition_index=p, committed_offset=o,
                                          committed_metadata="m") for p, o in offsets.items()])])
    return e.latest(req) if version is None else e.call(req, version)


def committed(e: Env, group: str, topic: str = TOPIC) -> dict[int, int]:
    resp = e.latest(OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id=group, topics=None)]))
    (g,) = resp.groups
    assert g.error_code == 0, g
    return {p.partition_index: p.committed_offset for t in g.topics if t.name == topic
            for p in t.partitions if p.committed_offset >= 0}


# -- the cases, one function per API key: (env, version) -> None --------------------------

Case = Callable[[Env, int], None]
CASES: dict[int, Case] = {}


def case(request_cls: Any) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[request_cls.API_KEY] = fn
        return fn
    return register


@case(ProduceRequest)
def produce_appends(e: Env, v: int) -> None:
    end = list_offset(e, LATEST).offset
    value = b"produce-v%d" % v
    resp = e.call(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(TOPIC, [ProduceRequest.PartitionProduceData(
            0, batch([value, value + b"-2"]))])]), v)
    ((t,),) = [resp.responses]
    assert t.name == TOPIC
    (p,) = t.partition_responses
    assert (p.error_code, p.base_offset) == (0, end), p
    assert p.log_append_time_ms == -1  # CreateTime topic
    if v >= 5:
        assert p.log_start_offset == 0
    assert fetch_values(e, end) == [value, value + b"-2"]
    assert list_offset(e, LATEST).offset == end + 2


@case(FetchRequest)
def fetch_reads_back(e: Env, v: int) -> None:
    value = b"fetch-v%d" % v
    offset = produce(e, [value])
    topic = FetchRequest.FetchTopic(topic=TOPIC, topic_id=e.topic_id, partitions=[
        FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])
    resp = e.call(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                               session_id=0, session_epoch=-1, topics=[topic]), v)
    if v >= 7:
        assert (resp.error_code, resp.session_id) == (0, 0)
    (t,) = resp.responses
    assert (t.topic_id == e.topic_id) if v >= 13 else (t.topic == TOPIC)
    (p,) = t.partitions
    assert (p.partition_index, p.error_code, p.high_watermark) == (0, 0, offset + 1), p
    assert p.last_stable_offset == offset + 1
    if v >= 5:
        assert p.log_start_offset == 0
    got = [(r.offset, r.value) for r in records_of(p.records)]
    assert (offset, value) in got and all(o <= offset for o, _ in got), got


@case(ListOffsetsRequest)
def list_offsets_finds(e: Env, v: int) -> None:
    end = produce(e, [b"list-offsets-v%d" % v]) + 1
    latest = list_offset(e, LATEST, version=v)
    assert (latest.error_code, latest.offset) == (0, end), latest
    assert latest.leader_epoch == (0 if v >= 4 else -1)
    earliest = list_offset(e, EARLIEST, version=v)
    assert (earliest.error_code, earliest.offset) == (0, 0), earliest
    missing = e.call(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        TOPIC, [ListOffsetsRequest.ListOffsetsPartition(7, -1, LATEST)])]), v)
    assert missing.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@case(MetadataRequest)
def metadata_lists_topic(e: Env, v: int) -> None:
    name = e.fresh(f"metadata-v{v}")
    create(e, name, 2)
    resp = e.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                  allow_auto_topic_creation=v < 4), v)
    assert [(b.node_id, b.port) for b in resp.brokers] == [(e.broker.broker_id, e.broker.port)]
    assert resp.controller_id == e.broker.broker_id
    if v >= 2:
        assert resp.cluster_id
    (t,) = resp.topics
    assert (t.error_code, t.name, t.is_internal) == (0, name, False), t
    if v >= 10:
        assert t.topic_id == metadata_topic(e, name).topic_id != uuid.UUID(int=0)
    assert sorted((p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in t.partitions) \
        == [(i, e.broker.broker_id, [e.broker.broker_id], [e.broker.broker_id]) for i in (0, 1)]
    if v >= 7:
        assert all(p.leader_epoch == 0 for p in t.partitions)
    # an unknown topic is not created (auto.create.topics.enable=false) and is named with its error
    gone = e.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name + "-no")],
                                  allow_auto_topic_creation=v < 4), v)
    assert [(t.name, t.error_code) for t in gone.topics] == [
        (name + "-no", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


@case(LeaderAndIsrRequest)
def leader_and_isr_old_epoch(e: Env, v: int) -> None:
    bid = e.broker.broker_id
    state = LeaderAndIsrRequest.LeaderAndIsrPartitionState(
        topic_name=TOPIC, partition_index=0, controller_epoch=99, leader=-1, leader_epoch=99,
        isr=[], partition_epoch=99, replicas=[bid])
    resp = e.call(LeaderAndIsrRequest(controller_id=bid, controller_epoch=99, broker_epoch=1, type=0,
                                      topic_states=[LeaderAndIsrRequest.LeaderAndIsrTopicState(
                                          topic_name=TOPIC, topic_id=e.topic_id, partition_states=[state])],
                                      live_leaders=[]), v)
    assert resp.error_code == ErrorCode.STALE_BROKER_EPOCH, resp
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partition_errors])
            for t in resp.topics] == [(e.topic_id, [(0, ErrorCode.STALE_BROKER_EPOCH)])]
    assert metadata_topic(e, TOPIC).partitions[0].leader_id == bid  # nothing applied


@case(StopReplicaRequest)
def stop_replica_old_epoch(e: Env, v: int) -> None:
    # Its own record first: the case must not lean on what earlier cases produced (run
    # alone, or first on an xdist worker's broker, the partition was empty).
    offset = produce(e, [b"before-stop-replica"])
    resp = e.call(StopReplicaRequest(controller_id=e.broker.broker_id, controller_epoch=99, broker_epoch=1,
                                     topic_states=[StopReplicaRequest.StopReplicaTopicState(TOPIC, [
                                         StopReplicaRequest.StopReplicaPartitionState(0, -2, True)])]), v)
    assert resp.error_code == ErrorCode.STALE_BROKER_EPOCH, resp
    assert resp.partition_errors == []  # Kafka names no partition then
    # The partition is still here with its records.
    assert fetch_values(e, offset)[:1] == [b"before-stop-replica"]


@case(UpdateMetadataRequest)
def update_metadata_old_epoch(e: Env, v: int) -> None:
    resp = e.call(UpdateMetadataRequest(controller_id=e.broker.broker_id, controller_epoch=99,
                                        broker_epoch=1, topic_states=[], live_brokers=[]), v)
    assert resp.error_code == ErrorCode.STALE_BROKER_EPOCH, resp
    # not applied: the broker still knows itself and the topic
    assert metadata_topic(e, TOPIC).error_code == 0


@case(ControlledShutdownRequest)
def controlled_shutdown_answers(e: Env, v: int) -> None:
    other = e.call(ControlledShutdownRequest(broker_id=e.broker.broker_id + 1000, broker_epoch=-1), v)
    assert (other.error_code, other.remaining_partitions) == (ErrorCode.BROKER_NOT_AVAILABLE, [])
    if v >= 2:  # an older incarnation of this broker
        stale = e.call(ControlledShutdownRequest(broker_id=e.broker.broker_id, broker_epoch=1), v)
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH, stale


@case(OffsetCommitRequest)
def offset_commit_stores(e: Env, v: int) -> None:
    group = e.fresh(f"commit-v{v}")
    resp = commit(e, group, {0: 10 + v}, version=v)
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in resp.topics] == [(TOPIC, [(0, 0)])]
    assert committed(e, group) == {0: 10 + v}


@case(OffsetFetchRequest)
def offset_fetch_reads(e: Env, v: int) -> None:
    group = e.fresh(f"fetch-offsets-v{v}")
    commit(e, group, {0: 20 + v})
    if v >= 8:
        resp = e.call(OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopics(TOPIC, [0])])]), v)
        (g,) = resp.groups
        assert (g.group_id, g.error_code) == (group, 0)
        parts = [(t.name, p.partition_index, p.committed_offset, p.metadata, p.error_code)
                 for t in g.topics for p in t.partitions]
    else:
        resp = e.call(OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(TOPIC, [0])]), v)
        if v >= 2:
            assert resp.error_code == 0
        parts = [(t.name, p.partition_index, p.committed_offset, p.metadata, p.error_code)
                 for t in resp.topics for p in t.partitions]
    assert parts == [(TOPIC, 0, 20 + v, "m", 0)]


@case(FindCoordinatorRequest)
def find_coordinator_is_this_broker(e: Env, v: int) -> None:
    group = e.fresh(f"coordinator-v{v}")
    if v >= 4:
        resp = e.call(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), v)
        (c,) = resp.coordinators
        got = (c.key, c.error_code, c.error_message, c.node_id, c.port)
        assert got == (group, 0, "", e.broker.broker_id, e.broker.port), c
    else:
        resp = e.call(FindCoordinatorRequest(key=group, key_type=0), v)
        assert (resp.error_code, resp.node_id, resp.port) == (0, e.broker.broker_id, e.broker.port), resp
        if v >= 1:  # Kafka's Errors.NONE.message()
            assert resp.error_message == "NONE"


@case(JoinGroupRequest)
def join_group_elects_leader(e: Env, v: int) -> None:
    group = e.fresh(f"join-v{v}")
    resp = join(e, group, version=v)
    assert resp.generation_id == 1 and resp.member_id and resp.leader == resp.member_id, resp
    assert resp.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in resp.members] == [(resp.member_id, b"meta")]
    if v >= 4:  # a join without a member id is first answered MEMBER_ID_REQUIRED
        first = e.call(JoinGroupRequest(group_id=e.fresh("join-id"), session_timeout_ms=30_000,
                                        rebalance_timeout_ms=30_000, member_id="",
                                        protocol_type="consumer", protocols=[
                                            JoinGroupRequest.JoinGroupRequestProtocol("range", b"")]), v)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    assert group_state(e, group) == "CompletingRebalance"


@case(HeartbeatRequest)
def heartbeat_in_stable_group(e: Env, v: int) -> None:
    group = e.fresh(f"heartbeat-v{v}")
    member, generation = stable_group(e, group)
    ok = e.call(HeartbeatRequest(group_id=group, generation_id=generation, member_id=member), v)
    assert ok.error_code == 0, ok
    old = e.call(HeartbeatRequest(group_id=group, generation_id=generation + 5, member_id=member), v)
    assert old.error_code == ErrorCode.ILLEGAL_GENERATION, old
    stranger = e.call(HeartbeatRequest(group_id=group, generation_id=generation, member_id="who"), v)
    assert stranger.error_code == ErrorCode.UNKNOWN_MEMBER_ID, stranger


@case(LeaveGroupRequest)
def leave_group_empties(e: Env, v: int) -> None:
    group = e.fresh(f"leave-v{v}")
    member, _ = stable_group(e, group)
    if v >= 3:
        resp = e.call(LeaveGroupRequest(group_id=group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None)]), v)
        assert [(m.member_id, m.error_code) for m in resp.members] == [(member, 0)]
    else:
        resp = e.call(LeaveGroupRequest(group_id=group, member_id=member), v)
    assert resp.error_code == 0, resp
    assert group_state(e, group) == "Empty"


@case(SyncGroupRequest)
def sync_group_hands_out_assignment(e: Env, v: int) -> None:
    group = e.fresh(f"sync-v{v}")
    j = join(e, group)
    resp = e.call(SyncGroupRequest(group_id=group, generation_id=j.generation_id, member_id=j.member_id,
                                   protocol_type="consumer", protocol_name="range",
                                   assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                                       j.member_id, b"assignment-v%d" % v)]), v)
    assert (resp.error_code, resp.assignment) == (0, b"assignment-v%d" % v), resp
    if v >= 5:
        assert (resp.protocol_type, resp.protocol_name) == ("consumer", "range")
    assert group_state(e, group) == "Stable"


@case(DescribeGroupsRequest)
def describe_groups_shows_member(e: Env, v: int) -> None:
    group = e.fresh(f"describe-v{v}")
    member, _ = stable_group(e, group)
    resp = e.call(DescribeGroupsRequest(groups=[group, group + "-none"],
                                        include_authorized_operations=v >= 3), v)
    g, none = resp.groups
    assert (g.error_code, g.group_id, g.group_state, g.protocol_type, g.protocol_data) == (
        0, group, "Stable", "consumer", "range"), g
    assert [(m.member_id, m.client_id, m.member_metadata, m.member_assignment) for m in g.members] == [
        (member, "test-client", b"meta", b"assigned")]
    assert (none.group_id, none.group_state) == (group + "-none", "Dead")


@case(ListGroupsRequest)
def list_groups_lists(e: Env, v: int) -> None:
    group = e.fresh(f"list-v{v}")
    stable_group(e, group)
    resp = e.call(ListGroupsRequest(states_filter=["Stable"] if v >= 4 else []), v)
    assert resp.error_code == 0
    listed = {g.group_id: g for g in resp.groups}
    assert listed[group].protocol_type == "consumer"
    if v >= 4:
        assert {g.group_state for g in resp.groups} == {"Stable"}
        empty = e.call(ListGroupsRequest(states_filter=["Dead"]), v)
        assert empty.groups == []


@case(SaslHandshakeRequest)
def sasl_handshake_mechanisms(e: Env, v: int) -> None:
    with RawClient(e.broker.endpoints["SASL_PLAINTEXT"]) as sasl:
        _cid, resp = sasl.request(17, v, SaslHandshakeRequest(mechanism="PLAIN"))
        assert (resp.error_code, resp.mechanisms) == (0, ["PLAIN"]), resp
    with RawClient(e.broker.endpoints["SASL_PLAINTEXT"]) as sasl:
        _cid, resp = sasl.request(17, v, SaslHandshakeRequest(mechanism="GSSAPI"))
        assert (resp.error_code, resp.mechanisms) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
    # on a PLAINTEXT listener: not in a SASL exchange
    resp = e.call(SaslHandshakeRequest(mechanism="PLAIN"), v)
    assert resp.error_code == ErrorCode.ILLEGAL_SASL_STATE, resp


@case(ApiVersionsRequest)
def api_versions_lists_registry(e: Env, v: int) -> None:
    resp = e.call(ApiVersionsRequest(client_software_name="every-api", client_software_version="1.0"), v)
    assert resp.error_code == 0
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    ours = {k: (s.min_version, s.max_version) for k, s in REGISTRY.items()}
    if e.exact_api_versions:
        assert got == ours
    else:
        assert all(got[k][0] <= low and high <= got[k][1] for k, (low, high) in ours.items()), got


@case(CreateTopicsRequest)
def create_topics_creates(e: Env, v: int) -> None:
    name = e.fresh(f"create-v{v}")
    req = CreateTopicsRequest(timeout_ms=10_000, topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=3, replication_factor=1,
        configs=[CreateTopicsRequest.CreatableTopicConfig("retention.ms", "123456")])])
    resp = e.call(req, v)
    (t,) = resp.topics
    assert (t.name, t.error_code) == (name, 0), t
    if v >= 5:
        assert (t.num_partitions, t.replication_factor) == (3, 1)
        assert {c.name: c.value for c in (t.configs or [])}["retention.ms"] == "123456"
    if v >= 7:
        assert t.topic_id == metadata_topic(e, name).topic_id
    assert len(metadata_topic(e, name).partitions) == 3
    assert config_value(e, name, "retention.ms") == "123456"
    again = e.call(req, v).topics[0]
    assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    if v >= 5:  # nothing created: no partitions, no configs (an empty list, as Kafka)
        assert (again.num_partitions, again.replication_factor, again.configs) == (-1, -1, [])


def wait_unknown(e: Env, name: str) -> None:
    deadline = time.monotonic() + 20
    while metadata_topic(e, name).error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        assert time.monotonic() < deadline, f"{name} still listed"
        time.sleep(0.05)


@case(DeleteTopicsRequest)
def delete_topics_deletes(e: Env, v: int) -> None:
    name = e.fresh(f"delete-v{v}")
    create(e, name, 1)
    if v >= 6:
        req = DeleteTopicsRequest(timeout_ms=10_000, topics=[DeleteTopicsRequest.DeleteTopicState(name=name)])
    else:
        req = DeleteTopicsRequest(timeout_ms=10_000, topic_names=[name])
    resp = e.call(req, v)
    assert [(r.name, r.error_code) for r in resp.responses] == [(name, 0)], resp
    if v >= 6:  # ZooKeeper-mode Kafka answers the id asked by: none for a name
        assert resp.responses[0].topic_id == uuid.UUID(int=0), resp
    wait_unknown(e, name)
    again = e.call(req, v).responses[0]
    assert again.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if v >= 5:
        assert again.error_message is None, again  # the code alone


@case(DeleteRecordsRequest)
def delete_records_moves_start(e: Env, v: int) -> None:
    name = e.fresh(f"delete-records-v{v}")
    create(e, name, 1)
    produce(e, [b"a", b"b", b"c"], topic=name)
    resp = e.call(DeleteRecordsRequest(timeout_ms=10_000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
        name, [DeleteRecordsRequest.DeleteRecordsPartition(0, 2)])]), v)
    p = resp.topics[0].partitions[0]
    assert (p.partition_index, p.error_code, p.low_watermark) == (0, 0, 2), p
    assert list_offset(e, EARLIEST, topic=name).offset == 2
    assert fetch_values(e, 2, topic=name) == [b"c"]
    beyond = e.call(DeleteRecordsRequest(timeout_ms=10_000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
        name, [DeleteRecordsRequest.DeleteRecordsPartition(0, 99)])]), v)
    assert beyond.topics[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


@case(InitProducerIdRequest)
def init_producer_id_gives_id(e: Env, v: int) -> None:
    resp = e.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), v)
    assert resp.error_code == 0 and resp.producer_id >= 0 and resp.producer_epoch == 0, resp
    other = e.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), v)
    assert other.producer_id != resp.producer_id
    # the id is usable: an idempotent batch with it is appended, its duplicate is not
    created = 1_700_000_000_000 + v
    records = batch([b"idempotent-v%d" % v], producer_id=resp.producer_id,
                    producer_epoch=resp.producer_epoch, base_sequence=0, timestamp_ms=created)
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(TOPIC, [ProduceRequest.PartitionProduceData(0, records)])])
    first = e.latest(req).responses[0].partition_responses[0]
    dup = e.latest(req).responses[0].partition_responses[0]
    assert (first.error_code, first.log_append_time_ms) == (0, -1)
    # the duplicate: the first one's offset and, as its log append time, the batch's timestamp
    assert (dup.error_code, dup.base_offset, dup.log_append_time_ms) == (0, first.base_offset, created)
    assert list_offset(e, LATEST).offset == first.base_offset + 1


@case(OffsetForLeaderEpochRequest)
def offset_for_leader_epoch_end(e: Env, v: int) -> None:
    end = produce(e, [b"epoch-v%d" % v]) + 1
    resp = e.call(OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(TOPIC, [
            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(0, -1 if v >= 2 else 0, 0)])]), v)
    p = resp.topics[0].partitions[0]
    assert (p.error_code, p.end_offset) == (0, end), p
    if v >= 1:
        assert p.leader_epoch == 0


def acl_creation(principal: str, v: int) -> Any:
    return CreateAclsRequest.AclCreation(
        resource_type=ResourceType.TOPIC, resource_name="acl-topic",
        resource_pattern_type=PatternType.LITERAL, principal=principal, host="*",
        operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW)


def describe_acls(e: Env, principal: str, v: int | None = None) -> Any:
    req = DescribeAclsRequest(resource_type_filter=ResourceType.ANY, resource_name_filter=None,
                              pattern_type_filter=PatternType.LITERAL if v == 0 else PatternType.ANY,
                              principal_filter=principal, host_filter=None, operation=AclOperation.ANY,
                              permission_type=AclPermissionType.ANY)
    return e.latest(req) if v is None else e.call(req, v)


def acl_set(resp: Any) -> set[tuple[Any, ...]]:
    assert (resp.error_code, resp.error_message) == (0, ""), resp
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
             a.permission_type) for r in resp.resources for a in r.acls}


def delete_acls(e: Env, principal: str, v: int | None = None) -> Any:
    req = DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=ResourceType.ANY, resource_name_filter=None,
        pattern_type_filter=PatternType.LITERAL if v == 0 else PatternType.ANY,
        principal_filter=principal, host_filter=None, operation=AclOperation.ANY,
        permission_type=AclPermissionType.ANY)])
    return e.latest(req) if v is None else e.call(req, v)


EXPECTED_ACL = (ResourceType.TOPIC, "acl-topic", PatternType.LITERAL)


@case(CreateAclsRequest)
def create_acls_stores(e: Env, v: int) -> None:
    principal = f"User:{e.fresh(f'create-acls-v{v}')}"
    resp = e.call(CreateAclsRequest(creations=[acl_creation(principal, v)]), v)
    assert [(r.error_code, r.error_message) for r in resp.results] == [(0, "")], resp
    assert acl_set(describe_acls(e, principal)) == {
        (*EXPECTED_ACL, principal, "*", AclOperation.READ, AclPermissionType.ALLOW)}
    delete_acls(e, principal)


@case(DescribeAclsRequest)
def describe_acls_finds(e: Env, v: int) -> None:
    principal = f"User:{e.fresh(f'describe-acls-v{v}')}"
    assert acl_set(describe_acls(e, principal, v)) == set()
    e.latest(CreateAclsRequest(creations=[acl_creation(principal, v)]))
    assert acl_set(describe_acls(e, principal, v)) == {
        (*EXPECTED_ACL, principal, "*", AclOperation.READ, AclPermissionType.ALLOW)}
    delete_acls(e, principal)


@case(DeleteAclsRequest)
def delete_acls_removes(e: Env, v: int) -> None:
    principal = f"User:{e.fresh(f'delete-acls-v{v}')}"
    e.latest(CreateAclsRequest(creations=[acl_creation(principal, v)]))
    resp = delete_acls(e, principal, v)
    (f,) = resp.filter_results
    assert f.error_code == 0
    assert [(m.error_code, m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
             m.operation, m.permission_type) for m in f.matching_acls] == [
        (0, *EXPECTED_ACL, principal, "*", AclOperation.READ, AclPermissionType.ALLOW)]
    assert acl_set(describe_acls(e, principal)) == set()


@case(DescribeConfigsRequest)
def describe_configs_shows_override(e: Env, v: int) -> None:
    name = e.fresh(f"describe-configs-v{v}")
    create(e, name, 1, {"retention.ms": "7654321"})
    resp = e.call(DescribeConfigsRequest(
        include_synonyms=v >= 1, include_documentation=v >= 3,
        resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name=name,
            configuration_keys=["retention.ms", "cleanup.policy", "segment.ms"])]), v)
    (r,) = resp.results
    assert (r.error_code, r.error_message, r.resource_type, r.resource_name) == (0, "", 2, name), r
    by_name = {c.name: c for c in r.configs}
    assert set(by_name) == {"retention.ms", "cleanup.policy", "segment.ms"}
    assert (by_name["retention.ms"].value, by_name["retention.ms"].config_source) == ("7654321", 1)
    assert (by_name["cleanup.policy"].value, by_name["cleanup.policy"].config_source) == ("delete", 5)
    # synonyms as Kafka lists them (none of log.retention.hours's default for retention.ms)
    assert [(s.name, s.value, s.source) for s in by_name["retention.ms"].synonyms] == [
        ("retention.ms", "7654321", 1)]
    assert [(s.name, s.value, s.source) for s in by_name["cleanup.policy"].synonyms] == [
        ("log.cleanup.policy", "delete", 5)]
    segment_ms = by_name["segment.ms"]  # log.roll.ms unset: its default log.roll.hours is not listed
    assert (segment_ms.value, segment_ms.config_source, segment_ms.synonyms) == ("604800000", 5, [])
    if v >= 3:
        assert by_name["retention.ms"].config_type == 5  # LONG
    missing = e.call(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name=name + "-no", configuration_keys=None)]), v)
    assert (missing.results[0].error_code, missing.results[0].error_message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ""), missing
    # num.io.threads is a dynamic broker config (not read-only); the cluster-wide defaults
    # (resource "") answer only what is set: nothing here.
    broker = e.call(DescribeConfigsRequest(include_synonyms=v >= 1, resources=[
        DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=4, resource_name=str(e.broker.broker_id),
            configuration_keys=["num.io.threads"]),
        DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=4, resource_name="", configuration_keys=None)]), v)
    threads, defaults = broker.results
    assert [(c.name, c.value, c.read_only, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in threads.configs] == [("num.io.threads", "8", False, 5, [("num.io.threads", "8", 5)])], threads
    assert (defaults.error_code, defaults.resource_name, defaults.configs) == (0, "", []), defaults


@case(AlterConfigsRequest)
def alter_configs_sets(e: Env, v: int) -> None:
    name = e.fresh(f"alter-configs-v{v}")
    create(e, name, 1)
    resp = e.call(AlterConfigsRequest(validate_only=False, resources=[AlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name=name, configs=[
            AlterConfigsRequest.AlterableConfig("retention.ms", str(1000 + v))])]), v)
    assert [(r.error_code, r.resource_name) for r in resp.responses] == [(0, name)], resp
    assert config_value(e, name, "retention.ms") == str(1000 + v)
    bad = e.call(AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name=name, configs=[
            AlterConfigsRequest.AlterableConfig("retention.ms", "soon")])]), v)
    assert bad.responses[0].error_code == ErrorCode.INVALID_CONFIG
    assert config_value(e, name, "retention.ms") == str(1000 + v)
    missing = e.call(AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name=name + "-no", configs=[
            AlterConfigsRequest.AlterableConfig("retention.ms", "1000")])]), v).responses[0]
    assert (missing.error_code, missing.error_message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}-no' does not exist."), missing


@case(IncrementalAlterConfigsRequest)
def incremental_alter_configs_sets(e: Env, v: int) -> None:
    name = e.fresh(f"incremental-v{v}")
    create(e, name, 1, {"retention.ms": "5000"})
    _R = IncrementalAlterConfigsRequest
    resp = e.call(_R(validate_only=False, resources=[_R.AlterConfigsResource(
        resource_type=2, resource_name=name, configs=[
            _R.AlterableConfig("segment.ms", 0, "600000"),  # SET
            _R.AlterableConfig("retention.ms", 1, None)])]), v)  # DELETE
    assert [(r.error_code, r.resource_name) for r in resp.responses] == [(0, name)], resp
    assert config_value(e, name, "segment.ms") == "600000"
    assert config_value(e, name, "retention.ms") == "604800000"  # back to the default
    missing = e.call(_R(validate_only=False, resources=[_R.AlterConfigsResource(
        resource_type=2, resource_name=name + "-no", configs=[
            _R.AlterableConfig("segment.ms", 0, "600000")])]), v).responses[0]
    assert (missing.error_code, missing.error_message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}-no' does not exist."), missing
    # A cluster-wide dynamic default (resource BROKER ""), applied by the broker when the
    # change notification reaches it, then removed. Its value equals num.io.threads' own,
    # so the broker's thread count stays as it is.
    for op, shown in ((0, [("num.io.threads", "8", 3, [("num.io.threads", "8", 3)])]), (1, [])):
        resp = e.call(_R(validate_only=False, resources=[_R.AlterConfigsResource(
            resource_type=4, resource_name="", configs=[
                _R.AlterableConfig("num.io.threads", op, "8" if op == 0 else None)])]), v)
        assert [(r.error_code, r.resource_type, r.resource_name) for r in resp.responses] == [
            (0, 4, "")], resp
        deadline = time.monotonic() + 10
        while (got := broker_defaults(e)) != shown:
            assert time.monotonic() < deadline, got
            time.sleep(0.05)


@case(DescribeLogDirsRequest)
def describe_log_dirs_lists_partition(e: Env, v: int) -> None:
    name = e.fresh(f"log-dirs-v{v}")
    create(e, name, 1)
    produce(e, [b"x" * 100], topic=name)
    resp = e.call(DescribeLogDirsRequest(topics=[DescribeLogDirsRequest.DescribableLogDirTopic(name, [0])]), v)
    if v >= 3:
        assert resp.error_code == 0
    (d,) = resp.results
    assert d.error_code == 0 and os.path.realpath(d.log_dir) == os.path.realpath(e.broker.log_dir), d
    assert [(t.name, [(p.partition_index, p.is_future_key) for p in t.partitions]) for t in d.topics] == [
        (name, [(0, False)])]
    size = d.topics[0].partitions[0].partition_size
    assert size > 100, size
    if v >= 4:
        assert d.total_bytes > 0 and 0 <= d.usable_bytes <= d.total_bytes


@case(SaslAuthenticateRequest)
def sasl_authenticate_logs_in(e: Env, v: int) -> None:
    with RawClient(e.broker.endpoints["SASL_PLAINTEXT"]) as sasl:
        sasl.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        _cid, resp = sasl.request(36, v, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        assert (resp.error_code, resp.error_message, resp.auth_bytes) == (0, "", b""), resp
        if v >= 1:
            assert resp.session_lifetime_ms == 0  # connections.max.reauth.ms is 0
        # authenticated as alice: Metadata answers (the topic is hidden, no Describe ACL)
        _cid, meta = sasl.request(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name=TOPIC)], allow_auto_topic_creation=False))
        assert meta.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with RawClient(e.broker.endpoints["SASL_PLAINTEXT"]) as sasl:
        sasl.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        _cid, bad = sasl.request(36, v, SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"))
        assert bad.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and bad.error_message, bad
        assert sasl.is_closed_by_peer()


@case(CreatePartitionsRequest)
def create_partitions_grows(e: Env, v: int) -> None:
    name = e.fresh(f"partitions-v{v}")
    create(e, name, 1)
    req = CreatePartitionsRequest(timeout_ms=10_000, validate_only=False, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=3, assignments=None)])
    resp = e.call(req, v)
    assert [(r.name, r.error_code) for r in resp.results] == [(name, 0)], resp
    assert len(metadata_topic(e, name).partitions) == 3
    again = e.call(req, v).results[0]
    assert again.error_code == ErrorCode.INVALID_PARTITIONS


@case(DeleteGroupsRequest)
def delete_groups_deletes(e: Env, v: int) -> None:
    group = e.fresh(f"delete-group-v{v}")
    commit(e, group, {0: 3})
    busy = e.fresh(f"delete-busy-v{v}")
    stable_group(e, busy)
    resp = e.call(DeleteGroupsRequest(groups_names=[group, busy]), v)
    assert {(r.group_id, r.error_code) for r in resp.results} == {
        (group, 0), (busy, ErrorCode.NON_EMPTY_GROUP)}
    assert committed(e, group) == {}
    assert group_state(e, group) == "Dead"


@case(ElectLeadersRequest)
def elect_leaders_not_needed(e: Env, v: int) -> None:
    resp = e.call(ElectLeadersRequest(election_type=0, timeout_ms=10_000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(TOPIC, [0, 9])]), v)
    if v >= 1:
        assert resp.error_code == 0
    ((t,),) = [resp.replica_election_results]
    assert t.topic == TOPIC
    assert sorted((p.partition_id, p.error_code) for p in t.partition_result) == [
        (0, ErrorCode.ELECTION_NOT_NEEDED), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


@case(AlterPartitionReassignmentsRequest)
def alter_reassignments(e: Env, v: int) -> None:
    _R = AlterPartitionReassignmentsRequest
    resp = e.call(_R(timeout_ms=10_000, topics=[_R.ReassignableTopic(TOPIC, [
        _R.ReassignablePartition(0, [e.broker.broker_id])])]), v)
    assert (resp.error_code, resp.error_message) == (0, "")
    assert [(p.partition_index, p.error_code) for t in resp.responses for p in t.partitions] == [(0, 0)]
    cancel = e.call(_R(timeout_ms=10_000, topics=[_R.ReassignableTopic(TOPIC, [
        _R.ReassignablePartition(0, None)])]), v)
    assert [p.error_code for t in cancel.responses for p in t.partitions] == [
        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS]
    elsewhere = e.call(_R(timeout_ms=10_000, topics=[_R.ReassignableTopic(TOPIC, [
        _R.ReassignablePartition(0, [e.broker.broker_id + 1000])])]), v)
    assert [p.error_code for t in elsewhere.responses for p in t.partitions] == [
        ErrorCode.INVALID_REPLICA_ASSIGNMENT]


@case(ListPartitionReassignmentsRequest)
def list_reassignments_none(e: Env, v: int) -> None:
    resp = e.call(ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=None), v)
    assert (resp.error_code, resp.error_message, resp.topics) == (0, "", []), resp


@case(OffsetDeleteRequest)
def offset_delete_removes(e: Env, v: int) -> None:
    name = e.fresh(f"offset-delete-v{v}")
    create(e, name, 2)
    group = e.fresh(f"offset-delete-group-v{v}")
    commit(e, group, {0: 5, 1: 6}, topic=name)
    resp = e.call(OffsetDeleteRequest(group_id=group, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name, [OffsetDeleteRequest.OffsetDeleteRequestPartition(0)])]), v)
    assert resp.error_code == 0
    assert [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions] == [
        (name, 0, 0)]
    assert committed(e, group, topic=name) == {1: 6}


def quota_entity(user: str) -> Any:
    return [AlterClientQuotasRequest.EntityData(entity_type="user", entity_name=user)]


def describe_quotas(e: Env, user: str, v: int | None = None) -> dict[str, float]:
    req = DescribeClientQuotasRequest(strict=True, components=[
        DescribeClientQuotasRequest.ComponentData(entity_type="user", match_type=0, match=user)])
    resp = e.latest(req) if v is None else e.call(req, v)
    assert (resp.error_code, resp.error_message) == (0, ""), resp
    return {val.key: val.value for entry in resp.entries for val in entry.values}


@case(DescribeClientQuotasRequest)
def describe_quotas_reads(e: Env, v: int) -> None:
    user = e.fresh(f"quota-describe-v{v}")
    assert describe_quotas(e, user, v) == {}
    e.latest(AlterClientQuotasRequest(validate_only=False, entries=[AlterClientQuotasRequest.EntryData(
        entity=quota_entity(user), ops=[AlterClientQuotasRequest.OpData("producer_byte_rate", 2048.0, False)])]))
    assert describe_quotas(e, user, v) == {"producer_byte_rate": 2048.0}


@case(AlterClientQuotasRequest)
def alter_quotas_sets(e: Env, v: int) -> None:
    user = e.fresh(f"quota-alter-v{v}")
    resp = e.call(AlterClientQuotasRequest(validate_only=False, entries=[AlterClientQuotasRequest.EntryData(
        entity=quota_entity(user), ops=[AlterClientQuotasRequest.OpData("consumer_byte_rate", 4096.0, False)])]), v)
    assert [(x.error_code, [(d.entity_type, d.entity_name) for d in x.entity]) for x in resp.entries] == [
        (0, [("user", user)])], resp
    assert describe_quotas(e, user) == {"consumer_byte_rate": 4096.0}
    e.call(AlterClientQuotasRequest(entries=[AlterClientQuotasRequest.EntryData(
        entity=quota_entity(user), ops=[AlterClientQuotasRequest.OpData("consumer_byte_rate", 0.0, True)])]), v)
    assert describe_quotas(e, user) == {}


def scram_upsertion(user: str) -> Any:
    salt = b"every-api-salt"
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    return AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=user, mechanism=2, iterations=4096, salt=salt, salted_password=salted)


@case(AlterUserScramCredentialsRequest)
def alter_scram_upserts(e: Env, v: int) -> None:
    user = e.fresh(f"scram-alter-v{v}")
    resp = e.call(AlterUserScramCredentialsRequest(deletions=[], upsertions=[scram_upsertion(user)]), v)
    assert [(r.user, r.error_code, r.error_message) for r in resp.results] == [(user, 0, "")], resp
    got = e.latest(DescribeUserScramCredentialsRequest(users=[
        DescribeUserScramCredentialsRequest.UserName(user)]))
    assert [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in got.results] == [(user, 0, [(2, 4096)])]
    gone = e.call(AlterUserScramCredentialsRequest(deletions=[
        AlterUserScramCredentialsRequest.ScramCredentialDeletion(user, 2)], upsertions=[]), v)
    assert [r.error_code for r in gone.results] == [0]


@case(DescribeUserScramCredentialsRequest)
def describe_scram(e: Env, v: int) -> None:
    user = e.fresh(f"scram-describe-v{v}")
    e.latest(AlterUserScramCredentialsRequest(deletions=[], upsertions=[scram_upsertion(user)]))
    resp = e.call(DescribeUserScramCredentialsRequest(users=[
        DescribeUserScramCredentialsRequest.UserName(user),
        DescribeUserScramCredentialsRequest.UserName(user + "-none")]), v)
    assert (resp.error_code, resp.error_message) == (0, "")
    assert [r.error_message for r in resp.results if r.user == user] == [""]
    assert sorted((r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
                  for r in resp.results) == [
        (user, 0, [(2, 4096)]), (user + "-none", ErrorCode.RESOURCE_NOT_FOUND, [])]


@case(AlterPartitionRequest)
def alter_partition_single_node(e: Env, v: int) -> None:
    bid = e.broker.broker_id
    part = AlterPartitionRequest.PartitionData(partition_index=0, leader_epoch=0, partition_epoch=0,
                                               new_isr=[bid] if v < 3 else [],
                                               new_isr_with_epochs=[] if v < 3 else [
                                                   AlterPartitionRequest.BrokerState(bid, -1)])
    resp = e.call(AlterPartitionRequest(broker_id=bid, broker_epoch=-1, topics=[
        AlterPartitionRequest.TopicData(topic_name=TOPIC, topic_id=e.topic_id, partitions=[part])]), v)
    # from an unknown incarnation of the leader (-1): refused before anything else, as by
    # Kafka's controller
    assert (resp.error_code, resp.topics) == (ErrorCode.STALE_BROKER_EPOCH, []), resp
    other = e.call(AlterPartitionRequest(broker_id=bid + 1000, broker_epoch=5, topics=[]), v)
    assert other.error_code == ErrorCode.STALE_BROKER_EPOCH


@case(DescribeClusterRequest)
def describe_cluster_self(e: Env, v: int) -> None:
    resp = e.call(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1), v)
    assert resp.error_code == 0 and resp.cluster_id, resp
    assert resp.controller_id == e.broker.broker_id
    assert [(b.broker_id, b.host, b.port) for b in resp.brokers] == [
        (e.broker.broker_id, e.broker.host, e.broker.port)]
    if v >= 1:
        assert resp.endpoint_type == 1


# -- the pairs ------------------------------------------------------------------------------

PAIRS = [(k, v) for k in sorted(REGISTRY) for v in range(REGISTRY[k].min_version, REGISTRY[k].max_version + 1)]


def pair_id(pair: tuple[int, int]) -> str:
    return f"{REGISTRY[pair[0]].request.__name__.removesuffix('Request')}-v{pair[1]}"

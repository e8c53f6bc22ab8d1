"""The group APIs over a raw socket, at every advertised version, against a real broker:
the advertised ranges, a whole member life cycle per JoinGroup version, Kafka's error codes
for bad input (and that it leaves the group intact), and durability across restarts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.group.partitioning import partition_for
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.sync_group import SyncGroupRequest
from tests.integration.broker_process import BrokerProcess
from tests.integration.netclient import RawClient
from tests.integration.test_groups_support import create_topic, start_group_broker

pytestmark = pytest.mark.timeout(120)

TOPIC = "proto-topic"
ADVERTISED = {
    FindCoordinatorRequest.API_KEY: (0, 6),
    JoinGroupRequest.API_KEY: (0, 9),
    SyncGroupRequest.API_KEY: (0, 5),
    HeartbeatRequest.API_KEY: (0, 4),
    LeaveGroupRequest.API_KEY: (0, 5),
    OffsetCommitRequest.API_KEY: (1, 9),
    OffsetFetchRequest.API_KEY: (1, 9),
    ListGroupsRequest.API_KEY: (0, 5),
    DescribeGroupsRequest.API_KEY: (0, 5),
    DeleteGroupsRequest.API_KEY: (0, 2),
    OffsetDeleteRequest.API_KEY: (0, 0),
}


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_group_broker(tmp_path_factory.mktemp("groups-proto"))
    try:
        create_topic(proc.bootstrap, TOPIC, 3)
        yield proc
    finally:
        proc.stop()


def subscription(*topics: str) -> bytes:
    return (1).to_bytes(2, "big") + ConsumerProtocolSubscription(list(topics)).encode(1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    body = ConsumerProtocolAssignment([ConsumerProtocolAssignment.TopicPartition(topic, partitions)])
    return (0).to_bytes(2, "big") + body.encode(0)


def call(client: RawClient, request: Any, version: int) -> Any:
    return client.request(request.API_KEY, version, request)[1]


def join(client: RawClient, version: int, group: str, member_id: str = "", *,
         instance: str | None = None, protocol_type: str = "consumer", session_ms: int = 10_000) -> Any:
    req = JoinGroupRequest(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=10_000,
        member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol("range", subscription(TOPIC))],
    )
    return call(client, req, version)


def join_member(client: RawClient, version: int, group: str, instance: str | None = None) -> Any:
    """Join as a new member, doing the MEMBER_ID_REQUIRED round trip where the version has it."""
    resp = join(client, version, group, instance=instance)
    if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        assert version >= 4 and instance is None
        resp = join(client, version, group, resp.member_id, instance=instance)
    assert resp.error_code == 0, ErrorCode(resp.error_code).name
    return resp


def test_advertised_versions(gbroker: BrokerProcess) -> None:
    with RawClient(gbroker.bootstrap) as c:
        resp = call(c, ApiVersionsRequest(), 0)
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    for key, versions in ADVERTISED.items():
        assert got.get(key) == versions, key


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator_points_at_this_broker(gbroker: BrokerProcess, version: int) -> None:
    with RawClient(gbroker.bootstrap) as c:
        if version >= 4:
            resp = call(c, FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"]), version)
            assert [(x.key, x.error_code, x.node_id, x.host, x.port) for x in resp.coordinators] == [
                (k, 0, gbroker.broker_id, "127.0.0.1", gbroker.port) for k in ("g1", "g2")
            ]
            bad = call(c, FindCoordinatorRequest(key_type=7, coordinator_keys=["x"]), version)
            assert bad.coordinators[0].error_code == ErrorCode.INVALID_REQUEST
            txn = call(c, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]), version)
            assert txn.coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            resp = call(c, FindCoordinatorRequest(key="g1"), version)
            assert (resp.error_code, resp.node_id, resp.host, resp.port) == (
                0, gbroker.broker_id, "127.0.0.1", gbroker.port)
        # __consumer_offsets exists now: 50 compacted partitions, internal
        meta = call(c, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")]), 9)
        (topic,) = meta.topics
        assert topic.error_code == 0 and topic.is_internal and len(topic.partitions) == 50


@pytest.mark.parametrize("version", range(10))
def test_member_life_cycle_at_every_version(gbroker: BrokerProcess, version: int) -> None:
    """JoinGroup at ``version``; the other group APIs at the matching version (clamped to
    their ranges), so every advertised version of every API is exercised."""
    group = f"life-{version}"
    sync_v, hb_v, leave_v = min(version, 5), min(version, 4), min(version, 5)
    commit_v, fetch_v = max(1, version), max(1, version)
    desc_v, list_v = min(version, 5), min(version, 5)
    with RawClient(gbroker.bootstrap) as c:
        joined = join_member(c, version, group)
        me, gen = joined.member_id, joined.generation_id
        assert gen == 1 and joined.leader == me and [m.member_id for m in joined.members] == [me]
        assert joined.members[0].metadata == subscription(TOPIC)
        assert joined.protocol_name == "range"
        mine = assignment(TOPIC, [0, 1, 2])
        sync = call(c, SyncGroupRequest(
            group_id=group, generation_id=gen, member_id=me, protocol_type="consumer",
            protocol_name="range", assignments=[SyncGroupRequest.SyncGroupRequestAssignment(me, mine)],
        ), sync_v)
        assert sync.error_code == 0 and sync.assignment == mine
        hb = call(c, HeartbeatRequest(group_id=group, generation_id=gen, member_id=me), hb_v)
        assert hb.error_code == 0
        commit = call(c, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=gen, member_id=me,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=100 + p, committed_leader_epoch=0,
                    committed_metadata=f"m{p}")
                for p in range(3)
            ])],
        ), commit_v)
        assert [p.error_code for p in commit.topics[0].partitions] == [0, 0, 0]
        offsets = fetch(c, fetch_v, group, [0, 1, 2, 5])
        assert offsets[0] == (100, 0 if commit_v >= 6 and fetch_v >= 5 else -1, "m0", 0)
        assert offsets[2][0] == 102
        assert offsets[5] == (-1, -1, "", 0)  # nothing committed there
        described = call(c, DescribeGroupsRequest(groups=[group]), desc_v).groups[0]
        assert (described.error_code, described.group_state, described.protocol_type,
                described.protocol_data) == (0, "Stable", "consumer", "range")
        assert described.members[0].member_id == me and described.members[0].member_assignment == mine
        if desc_v >= 3:
            with_ops = call(c, DescribeGroupsRequest(groups=[group], include_authorized_operations=True), desc_v)
            assert with_ops.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE
        listed = call(c, ListGroupsRequest(), list_v)
        assert (group, "consumer") in {(g.group_id, g.protocol_type) for g in listed.groups}
        if leave_v >= 3:
            leave = call(c, LeaveGroupRequest(group_id=group, members=[
                LeaveGroupRequest.MemberIdentity(member_id=me, reason="done")]), leave_v)
            assert leave.error_code == 0 and [m.error_code for m in leave.members] == [0]
        else:
            leave = call(c, LeaveGroupRequest(group_id=group, member_id=me), leave_v)
            assert leave.error_code == 0
        empty = call(c, DescribeGroupsRequest(groups=[group]), desc_v).groups[0]
        assert empty.group_state == "Empty" and empty.members == []
        assert fetch(c, fetch_v, group, [1])[1][0] == 101  # offsets outlive the members


def fetch(c: RawClient, version: int, group: str, partitions: list[int]) -> dict[int, tuple[int, int, str | None, int]]:
    if version >= 8:
        resp = call(c, OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopics(TOPIC, partitions)])]), version)
        (g,) = resp.groups
        assert g.error_code == 0
        parts = g.topics[0].partitions
    else:
        resp = call(c, OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(TOPIC, partitions)]), version)
        assert resp.error_code == 0
        parts = resp.topics[0].partitions
    return {p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
            for p in parts}


def test_offset_fetch_several_groups_and_all_topics(gbroker: BrokerProcess) -> None:
    with RawClient(gbroker.bootstrap) as c:
        for group, offset in (("multi-a", 7), ("multi-b", 9)):
            resp = call(c, OffsetCommitRequest(group_id=group, topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=1, committed_offset=offset)])]), 9)
            assert resp.topics[0].partitions[0].error_code == 0
        resp = call(c, OffsetFetchRequest(require_stable=True, groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="multi-a", topics=None),
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="multi-b", topics=None),
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="", topics=None),
        ]), 9)
        got = {g.group_id: [(t.name, p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions]
               for g in resp.groups}
        assert got == {"multi-a": [(TOPIC, 1, 7)], "multi-b": [(TOPIC, 1, 9)], "": []}
        v1 = call(c, OffsetFetchRequest(group_id="multi-a", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(TOPIC, [1])]), 1)
        assert v1.topics[0].partitions[0].committed_offset == 7


def test_bad_input_gets_kafka_errors_and_leaves_the_group_intact(gbroker: BrokerProcess) -> None:
    group = "bad-input"
    with RawClient(gbroker.bootstrap) as c:
        joined = join_member(c, 9, group)
        me, gen = joined.member_id, joined.generation_id
        mine = assignment(TOPIC, [0])
        call(c, SyncGroupRequest(group_id=group, generation_id=gen, member_id=me, protocol_type="consumer",
                                 protocol_name="range",
                                 assignments=[SyncGroupRequest.SyncGroupRequestAssignment(me, mine)]), 5)
        # a join with another protocol type
        other = join(c, 9, group, protocol_type="connect")
        assert other.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        # an empty protocol type for a new group, and an empty group id
        assert join(c, 9, "fresh", protocol_type="").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert join(c, 9, "").error_code == ErrorCode.INVALID_GROUP_ID
        # session timeout below group.min.session.timeout.ms (500 in these tests)
        assert join(c, 9, group, session_ms=100).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        # heartbeats: stale generation, unknown member, unknown group
        stale = call(c, HeartbeatRequest(group_id=group, generation_id=gen - 1, member_id=me), 4)
        assert stale.error_code == ErrorCode.ILLEGAL_GENERATION
        unknown = call(c, HeartbeatRequest(group_id=group, generation_id=gen, member_id="who"), 4)
        assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # commits: from a non-member, from a stale generation, without member id to a live group
        for member, generation, expected in (("intruder", gen, ErrorCode.UNKNOWN_MEMBER_ID),
                                             (me, gen + 3, ErrorCode.ILLEGAL_GENERATION),
                                             ("", -1, ErrorCode.UNKNOWN_MEMBER_ID)):
            resp = call(c, OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]), 9)
            assert resp.topics[0].partitions[0].error_code == expected
        # a commit to a partition that does not exist
        resp = call(c, OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=gen, member_id=me, topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic("no-such-topic", [
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]), 9)
        assert resp.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # SyncGroup v5 without protocol type/name
        bad_sync = call(c, SyncGroupRequest(group_id=group, generation_id=gen, member_id=me), 5)
        assert bad_sync.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        # nothing of that changed the group or its offsets
        assert call(c, HeartbeatRequest(group_id=group, generation_id=gen, member_id=me), 4).error_code == 0
        described = call(c, DescribeGroupsRequest(groups=[group]), 5).groups[0]
        assert described.group_state == "Stable" and [m.member_id for m in described.members] == [me]
        assert fetch(c, 9, group, [0])[0][0] == -1


def test_delete_groups_and_offsets(gbroker: BrokerProcess) -> None:
    with RawClient(gbroker.bootstrap) as c:
        for group in ("del-a", "del-b"):
            call(c, OffsetCommitRequest(group_id=group, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=p, committed_offset=3)
                for p in (0, 1)])]), 8)
        live = join_member(c, 9, "del-live")
        # OffsetDelete v0
        resp = call(c, OffsetDeleteRequest(group_id="del-a", topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
            TOPIC, [OffsetDeleteRequest.OffsetDeleteRequestPartition(0)])]), 0)
        assert resp.error_code == 0 and resp.topics[0].partitions[0].error_code == 0
        assert fetch(c, 9, "del-a", [0, 1]) == {0: (-1, -1, "", 0), 1: (3, -1, "", 0)}
        missing = call(c, OffsetDeleteRequest(group_id="nope", topics=[]), 0)
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        for version in range(3):
            resp = call(c, DeleteGroupsRequest(groups_names=[f"del-{'ab'[version % 2]}", "del-live", "nope"]), version)
            results = {r.group_id: r.error_code for r in resp.results}
            if version == 0:
                assert results == {"del-a": 0, "del-live": ErrorCode.NON_EMPTY_GROUP,
                                   "nope": ErrorCode.GROUP_ID_NOT_FOUND}
            elif version == 1:
                assert results["del-b"] == 0
            else:
                assert results["del-a"] == ErrorCode.GROUP_ID_NOT_FOUND  # already gone
        listed = {g.group_id for g in call(c, ListGroupsRequest(), 5).groups}
        assert "del-a" not in listed and "del-b" not in listed and "del-live" in listed
        assert live.member_id


def test_list_groups_filters(gbroker: BrokerProcess) -> None:
    with RawClient(gbroker.bootstrap) as c:
        join_member(c, 9, "filter-stable-ish")
        call(c, OffsetCommitRequest(group_id="filter-empty", topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
            TOPIC, [OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 9)
        empty = call(c, ListGroupsRequest(states_filter=["empty"]), 4)
        states = {g.group_id: g.group_state for g in empty.groups}
        assert states.get("filter-empty") == "Empty" and "filter-stable-ish" not in states
        classic = call(c, ListGroupsRequest(types_filter=["classic"]), 5)
        assert {g.group_type for g in classic.groups} == {"classic"}
        assert call(c, ListGroupsRequest(types_filter=["consumer"]), 5).groups == []


def make_durable_group(bootstrap: str, group: str) -> tuple[str, int, bytes]:
    """A static member in a Stable group with committed offsets; (member id, generation, assignment)."""
    with RawClient(bootstrap) as c:
        joined = join_member(c, 9, group, instance="static-1")
        me, gen = joined.member_id, joined.generation_id
        mine = assignment(TOPIC, [0, 1, 2])
        call(c, SyncGroupRequest(group_id=group, generation_id=gen, member_id=me, group_instance_id="static-1",
                                 protocol_type="consumer", protocol_name="range",
                                 assignments=[SyncGroupRequest.SyncGroupRequestAssignment(me, mine)]), 5)
        commit = call(c, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=gen, member_id=me, group_instance_id="static-1",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=40 + p, committed_leader_epoch=0,
                    committed_metadata=f"meta-{p}") for p in range(3)])]), 9)
        assert all(p.error_code == 0 for p in commit.topics[0].partitions)
        call(c, OffsetCommitRequest(group_id=f"{group}-standalone", topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
            TOPIC, [OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=2, committed_offset=77)])]), 9)
    return me, gen, mine


def check_durable_group(bootstrap: str, group: str, me: str, gen: int, mine: bytes) -> None:
    with RawClient(bootstrap) as c:
        coordinator = call(c, FindCoordinatorRequest(key=group), 3)
        assert coordinator.error_code == 0
        # the member carries on with its id and generation: no rebalance was needed
        hb = call(c, HeartbeatRequest(group_id=group, generation_id=gen, member_id=me,
                                      group_instance_id="static-1"), 4)
        assert hb.error_code == 0
        described = call(c, DescribeGroupsRequest(groups=[group]), 5).groups[0]
        assert described.group_state == "Stable"
        assert [(m.member_id, m.group_instance_id, m.member_assignment) for m in described.members] == [
            (me, "static-1", mine)]
        assert fetch(c, 9, group, [0, 1, 2]) == {p: (40 + p, 0, f"meta-{p}", 0) for p in range(3)}
        assert fetch(c, 9, f"{group}-standalone", [2])[2][0] == 77
        sync = call(c, SyncGroupRequest(group_id=group, generation_id=gen, member_id=me, group_instance_id="static-1",
                                        protocol_type="consumer", protocol_name="range"), 5)
        assert sync.error_code == 0 and sync.assignment == mine


@pytest.mark.timeout(180)
def test_groups_and_offsets_survive_sigterm_and_kill9_restarts(tmp_path: Path) -> None:
    proc = start_group_broker(tmp_path)
    try:
        create_topic(proc.bootstrap, TOPIC, 3)
        first = make_durable_group(proc.bootstrap, "durable-sigterm")
        proc.restart()
        check_durable_group(proc.bootstrap, "durable-sigterm", *first)
        second = make_durable_group(proc.bootstrap, "durable-kill9")
        proc.kill9_and_restart()
        check_durable_group(proc.bootstrap, "durable-kill9", *second)
        check_durable_group(proc.bootstrap, "durable-sigterm", *first)
        # the records are in each group's own __consumer_offsets partition
        for group in ("durable-sigterm", "durable-kill9"):
            dirs = list(proc.log_dir.rglob(f"__consumer_offsets-{partition_for(group, 50)}"))
            assert sum(f.stat().st_size for d in dirs for f in d.glob("*.log")) > 0
    finally:
        proc.stop()


def test_deleting_a_topic_removes_its_committed_offsets(gbroker: BrokerProcess) -> None:
    from client.sync import SyncClient

    create_topic(gbroker.bootstrap, "doomed", 2)
    with RawClient(gbroker.bootstrap) as c:
        resp = call(c, OffsetCommitRequest(group_id="doomed-group", topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name, [
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=4)])
            for name in ("doomed", TOPIC)]), 9)
        assert [t.partitions[0].error_code for t in resp.topics] == [0, 0]
        with SyncClient(gbroker.bootstrap) as admin:
            admin.delete_topics(["doomed"])
        resp = call(c, OffsetFetchRequest(group_id="doomed-group", topics=None), 7)
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics] == [(TOPIC, [0])]

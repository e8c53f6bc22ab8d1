"""Group tools against a real broker: ``minikafka consumer-groups`` (list, describe with lag,
reset offsets, delete), Apache Kafka's own kafka-consumer-groups
(org.apache.kafka.tools.consumer.group.ConsumerGroupCommand, Kafka 3.9 jars), and Kafka's
DumpLogSegments --offsets-decoder reading our ``__consumer_offsets`` records."""

from __future__ import annotations

import datetime
import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.group.partitioning import partition_for
from cli.consumer_groups import main as groups_main
from protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.sync_group import SyncGroupRequest
from tests.integration.broker_process import REPO_ROOT, BrokerProcess
from tests.integration.netclient import RawClient
from tests.integration.test_groups_support import create_topic, produce, start_group_broker

pytestmark = pytest.mark.timeout(180)

CLASSPATH = str(REPO_ROOT / "tools" / "kafka-jars" / "libs" / "*")
JVM_TIMEOUT_S = 90
TOPIC = "cli-topic"
# An active member must outlive the Java tool runs between its heartbeats (each up to
# JVM_TIMEOUT_S on a loaded machine): a session longer than any of them.
SESSION_TIMEOUT_MS = 300_000


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_group_broker(tmp_path_factory.mktemp("groups-cli"))
    try:
        create_topic(proc.bootstrap, TOPIC, 2)
        produce(proc.bootstrap, TOPIC, 2, 10, "cli")  # log end offset 10 on both partitions
        yield proc
    finally:
        proc.stop()


def tool(bootstrap: str, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = groups_main(["--bootstrap-server", bootstrap, *args], out=out)
    return code, out.getvalue()


def rows(text: str, first_column: str) -> list[list[str]]:
    """Table rows (split on whitespace) after the header line that starts with ``first_column``."""
    lines = [line for line in text.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.split()[0] == first_column)
    return [line.split() for line in lines[start + 1:]]


def commit(bootstrap: str, group: str, offsets: dict[int, int], member: str = "", generation: int = -1) -> None:
    with RawClient(bootstrap) as c:
        resp = c.request(OffsetCommitRequest.API_KEY, 9, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=generation, member_id=member,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=p, committed_offset=o)
                for p, o in offsets.items()])]))[1]
    assert all(p.error_code == 0 for p in resp.topics[0].partitions)


class ActiveMember:
    """A member (raw protocol) that owns both partitions and heartbeats until closed."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.client = RawClient(bootstrap)
        self.group = group
        sub = (1).to_bytes(2, "big") + ConsumerProtocolSubscription([TOPIC]).encode(1)
        join = JoinGroupRequest(group_id=group, session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=30_000,
                                member_id="", protocol_type="consumer",
                                protocols=[JoinGroupRequest.JoinGroupRequestProtocol("range", sub)])
        resp = self.client.request(JoinGroupRequest.API_KEY, 3, join)[1]  # v3: no MEMBER_ID_REQUIRED round
        assert resp.error_code == 0
        self.member_id, self.generation = resp.member_id, resp.generation_id
        assignment = (0).to_bytes(2, "big") + ConsumerProtocolAssignment(
            [ConsumerProtocolAssignment.TopicPartition(TOPIC, [0, 1])]).encode(0)
        sync = self.client.request(SyncGroupRequest.API_KEY, 3, SyncGroupRequest(
            group_id=group, generation_id=self.generation, member_id=self.member_id,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(self.member_id, assignment)]))[1]
        assert sync.error_code == 0

    def heartbeat(self) -> int:
        hb = HeartbeatRequest(group_id=self.group, generation_id=self.generation, member_id=self.member_id)
        code: int = self.client.request(HeartbeatRequest.API_KEY, 3, hb)[1].error_code
        return code

    def close(self) -> None:
        self.client.close()


def test_list_describe_with_lag_reset_and_delete(gbroker: BrokerProcess) -> None:
    bs = gbroker.bootstrap
    commit(bs, "cli-idle", {0: 3, 1: 5})
    member = ActiveMember(bs, "cli-active")
    try:
        commit(bs, "cli-active", {0: 9}, member.member_id, member.generation)
        code, out = tool(bs, "--list")
        assert code == 0 and {"cli-idle", "cli-active"} <= set(out.split())

        code, out = tool(bs, "--describe", "--group", "cli-idle")
        assert code == 0 and "Consumer group 'cli-idle' has no active members." in out
        assert [r[:6] for r in rows(out, "GROUP")] == [
            ["cli-idle", TOPIC, "0", "3", "10", "7"], ["cli-idle", TOPIC, "1", "5", "10", "5"]]

        code, out = tool(bs, "--describe", "--group", "cli-active")
        assert code == 0
        assert rows(out, "GROUP") == [
            ["cli-active", TOPIC, "0", "9", "10", "1", member.member_id, "/127.0.0.1", "test-client"],
            ["cli-active", TOPIC, "1", "-", "10", "-", member.member_id, "/127.0.0.1", "test-client"]]
        code, out = tool(bs, "--describe", "--group", "cli-active", "--members")
        assert code == 0 and rows(out, "GROUP") == [
            ["cli-active", member.member_id, "-", "/127.0.0.1", "test-client", "2"]]
        code, out = tool(bs, "--describe", "--group", "cli-active", "--state")
        assert code == 0 and rows(out, "GROUP") == [
            ["cli-active", f"127.0.0.1:{gbroker.port}", "(0)", "range", "Stable", "1"]]

        # resets: refused for an active group; dry run changes nothing; execute commits
        code, _ = tool(bs, "--reset-offsets", "--group", "cli-active", "--all-topics", "--to-earliest", "--execute")
        assert code == 1
        code, out = tool(bs, "--reset-offsets", "--group", "cli-idle", "--topic", TOPIC, "--to-latest", "--dry-run")
        assert code == 0 and rows(out, "GROUP") == [["cli-idle", TOPIC, "0", "10"], ["cli-idle", TOPIC, "1", "10"]]
        assert [r[3] for r in rows(tool(bs, "--describe", "--group", "cli-idle")[1], "GROUP")] == ["3", "5"]
        code, out = tool(bs, "--reset-offsets", "--group", "cli-idle", "--topic", f"{TOPIC}:1", "--to-offset", "4",
                         "--execute")
        assert code == 0 and rows(out, "GROUP") == [["cli-idle", TOPIC, "1", "4"]]
        code, out = tool(bs, "--reset-offsets", "--group", "cli-idle", "--all-topics", "--to-earliest", "--execute")
        assert code == 0
        assert [r[3:6] for r in rows(tool(bs, "--describe", "--group", "cli-idle")[1], "GROUP")] == [
            ["0", "10", "10"], ["0", "10", "10"]]
        future = (datetime.datetime.now() + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000")
        code, out = tool(bs, "--reset-offsets", "--group", "cli-idle", "--all-topics", "--to-datetime", future,
                         "--execute")
        assert code == 0 and [r[3] for r in rows(out, "GROUP")] == ["10", "10"]  # nothing that late: log end

        # delete: refused while members remain, done for the idle group
        code, _ = tool(bs, "--delete", "--group", "cli-active")
        assert code == 1
        code, out = tool(bs, "--delete", "--group", "cli-idle")
        assert code == 0 and "Deletion of requested consumer groups ('cli-idle') was successful." in out
        assert "cli-idle" not in tool(bs, "--list")[1].split()
        assert member.heartbeat() == 0  # the active group never noticed
    finally:
        member.close()


def test_list_states_all_groups_and_more_resets(gbroker: BrokerProcess, tmp_path: Path) -> None:
    bs = gbroker.bootstrap
    commit(bs, "more-a", {0: 4, 1: 6})
    commit(bs, "more-b", {0: 2})
    member = ActiveMember(bs, "more-active")
    try:
        code, out = tool(bs, "--list", "--state")
        listed = {r[0]: r[1] for r in rows(out, "GROUP")}
        assert code == 0 and listed["more-a"] == "Empty" and listed["more-active"] == "Stable"
        code, out = tool(bs, "--list", "--state", "stable")
        stable = rows(out, "GROUP")
        assert code == 0 and "more-active" in [r[0] for r in stable] and {r[1] for r in stable} == {"Stable"}
        assert tool(bs, "--list", "--state", "Sleepy")[0] == 1

        code, out = tool(bs, "--describe", "--all-groups")
        described = {r[0] for r in rows(out, "GROUP") if r[0] != "GROUP"}
        assert code == 0 and {"more-a", "more-b", "more-active"} <= described

        code, out = tool(bs, "--reset-offsets", "--group", "more-a", "--topic", TOPIC, "--shift-by", "-5")
        assert code == 0 and rows(out, "GROUP") == [["more-a", TOPIC, "0", "0"], ["more-a", TOPIC, "1", "1"]]
        code, out = tool(bs, "--reset-offsets", "--group", "more-b", "--topic", TOPIC, "--to-current")
        assert code == 0 and rows(out, "GROUP") == [["more-b", TOPIC, "0", "2"], ["more-b", TOPIC, "1", "10"]]
        code, out = tool(bs, "--reset-offsets", "--group", "more-a", "--all-topics", "--by-duration", "PT1H")
        assert code == 0 and [r[3] for r in rows(out, "GROUP")] == ["0", "0"]  # produced within the hour
        # shifting a partition without a committed offset is an error, as in Kafka
        code, _ = tool(bs, "--reset-offsets", "--group", "more-b", "--topic", TOPIC, "--shift-by", "1")
        assert code == 1

        code, plan = tool(bs, "--reset-offsets", "--group", "more-a", "--group", "more-b", "--topic", TOPIC,
                          "--to-offset", "7", "--export")
        assert code == 0 and sorted(plan.split()) == sorted(
            f"{g},{TOPIC},{p},7" for g in ("more-a", "more-b") for p in (0, 1))
        code, one = tool(bs, "--reset-offsets", "--group", "more-a", "--topic", f"{TOPIC}:1", "--to-latest",
                         "--export")
        assert code == 0 and one.split() == [f"{TOPIC},1,10"]
        (tmp_path / "plan.csv").write_text(plan)
        code, _ = tool(bs, "--reset-offsets", "--group", "more-a", "--group", "more-b", "--from-file",
                       str(tmp_path / "plan.csv"), "--execute")
        assert code == 0
        assert [r[3] for r in rows(tool(bs, "--describe", "--group", "more-b")[1], "GROUP")] == ["7", "7"]

        code, out = tool(bs, "--delete-offsets", "--group", "more-b", "--topic", f"{TOPIC}:0")
        assert code == 0 and f"Request succeed for deleting offsets with topic {TOPIC}:0 group more-b" in out
        assert rows(out, "TOPIC") == [[TOPIC, "0", "Successful"]]
        assert [r[2:4] for r in rows(tool(bs, "--describe", "--group", "more-b")[1], "GROUP")] == [["1", "7"]]

        code, _ = tool(bs, "--reset-offsets", "--all-groups", "--all-topics", "--to-earliest", "--execute")
        assert code == 1  # the active group is refused; the others are reset
        assert [r[3] for r in rows(tool(bs, "--describe", "--group", "more-a")[1], "GROUP")] == ["0", "0"]
        assert member.heartbeat() == 0
    finally:
        member.close()


def consumer_groups_java(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", CLASSPATH,
         "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", bootstrap, *args],
        capture_output=True, text=True, timeout=JVM_TIMEOUT_S, check=False)


@pytest.mark.java
def test_kafka_consumer_groups_lists_and_describes_with_lag(gbroker: BrokerProcess) -> None:
    bs = gbroker.bootstrap
    commit(bs, "java-idle", {0: 2, 1: 6})
    member = ActiveMember(bs, "java-active")
    try:
        commit(bs, "java-active", {0: 4, 1: 10}, member.member_id, member.generation)
        listed = consumer_groups_java(bs, "--list")
        assert listed.returncode == 0, listed.stdout + listed.stderr
        assert {"java-idle", "java-active"} <= set(listed.stdout.split())
        assert member.heartbeat() == 0
        described = consumer_groups_java(bs, "--describe", "--group", "java-active", "--group", "java-idle")
        assert described.returncode == 0, described.stdout + described.stderr
        by_group: dict[str, list[list[str]]] = {}
        for line in described.stdout.splitlines():
            cols = line.split()
            if cols and cols[0] in ("java-active", "java-idle"):
                by_group.setdefault(cols[0], []).append(cols)
        assert sorted(r[1:6] for r in by_group["java-idle"]) == [
            [TOPIC, "0", "2", "10", "8"], [TOPIC, "1", "6", "10", "4"]]
        assert sorted(r[1:9] for r in by_group["java-active"]) == [
            [TOPIC, "0", "4", "10", "6", member.member_id, "/127.0.0.1", "test-client"],
            [TOPIC, "1", "10", "10", "0", member.member_id, "/127.0.0.1", "test-client"]]
        assert "Consumer group 'java-idle' has no active members." in described.stdout + described.stderr
        assert member.heartbeat() == 0
    finally:
        member.close()


def dump_offsets_segment(segment: Path) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """(key, payload) of every record, decoded by Kafka's DumpLogSegments --offsets-decoder."""
    out = subprocess.run(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", CLASSPATH, "kafka.tools.DumpLogSegments",
         "--files", str(segment), "--offsets-decoder", "--print-data-log"],
        capture_output=True, text=True, timeout=JVM_TIMEOUT_S, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    records = []
    for line in out.stdout.splitlines():
        if " key: " not in line:
            continue
        key_text, payload_text = line.split(" key: ", 1)[1].split(" payload: ", 1)
        payload = None if payload_text.strip() == "<DELETE>" else json.loads(payload_text)
        records.append((json.loads(key_text), payload))
    return records


@pytest.mark.java
def test_kafka_decodes_our_group_and_offset_records(gbroker: BrokerProcess) -> None:
    """Kafka's DumpLogSegments --offsets-decoder reads what this broker wrote, field by field."""
    group = "java-decoded"
    sub = (1).to_bytes(2, "big") + ConsumerProtocolSubscription([TOPIC]).encode(1)
    mine = (0).to_bytes(2, "big") + ConsumerProtocolAssignment(
        [ConsumerProtocolAssignment.TopicPartition(TOPIC, [0, 1])]).encode(0)
    with RawClient(gbroker.bootstrap) as c:
        joined = c.request(JoinGroupRequest.API_KEY, 5, JoinGroupRequest(
            group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id="",
            group_instance_id="inst-1", protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol("range", sub)]))[1]
        me, gen = joined.member_id, joined.generation_id
        assert joined.error_code == 0
        synced = c.request(SyncGroupRequest.API_KEY, 5, SyncGroupRequest(
            group_id=group, generation_id=gen, member_id=me, group_instance_id="inst-1",
            protocol_type="consumer", protocol_name="range",
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(me, mine)]))[1]
        assert synced.error_code == 0
        committed = c.request(OffsetCommitRequest.API_KEY, 9, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=gen, member_id=me, group_instance_id="inst-1",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=1, committed_offset=1234, committed_leader_epoch=7,
                    committed_metadata="hello")])]))[1]
        assert committed.topics[0].partitions[0].error_code == 0
        # OffsetCommit v2 with a retention time: Kafka's value version 1 with an expire timestamp
        retained = c.request(OffsetCommitRequest.API_KEY, 2, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=gen, member_id=me, retention_time_ms=60_000,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]))[1]
        assert retained.topics[0].partitions[0].error_code == 0
    (segment,) = gbroker.log_dir.glob(f"__consumer_offsets-{partition_for(group, 50)}/*.log")
    records = [(k, v) for k, v in dump_offsets_segment(segment) if k["data"].get("group") == group]
    key, value = [(k, v) for k, v in records if k["type"] == "2"][-1]
    assert key["data"] == {"group": group}
    assert value is not None and value["version"] == "3"
    data = value["data"]
    assert (data["protocolType"], data["generation"], data["protocol"], data["leader"]) == ("consumer", gen, "range", me)
    (member,) = data["members"]
    assert (member["memberId"], member["groupInstanceId"], member["clientId"], member["clientHost"]) == (
        me, "inst-1", "test-client", "/127.0.0.1")
    assert member["subscription"]["topics"] == [TOPIC]
    assert member["assignment"]["assignedPartitions"] == [{"topic": TOPIC, "partitions": [0, 1]}]
    by_partition = {k["data"]["partition"]: (k, v) for k, v in records if k["type"] in ("0", "1")}
    key1, value1 = by_partition[1]
    assert key1 == {"type": "1", "data": {"group": group, "topic": TOPIC, "partition": 1}}
    assert value1 is not None and value1["version"] == "3"
    assert {k: value1["data"][k] for k in ("offset", "leaderEpoch", "metadata")} == {
        "offset": 1234, "leaderEpoch": 7, "metadata": "hello"}
    _, value0 = by_partition[0]
    assert value0 is not None and value0["version"] == "1"
    assert value0["data"]["expireTimestamp"] - value0["data"]["commitTimestamp"] == 60_000

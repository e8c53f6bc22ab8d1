"""Our ``__consumer_offsets`` records read by Apache Kafka itself: kafka.tools.DumpLogSegments
``--offsets-decoder`` (Kafka 3.9 jars) decodes the group metadata and offset commit records a
real broker wrote, field by field."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from broker.group.partitioning import partition_for
from protocol.messages.offset_commit import OffsetCommitRequest
from tests.integration.broker_process import REPO_ROOT
from tests.integration.netclient import RawClient
from tests.integration.test_groups_protocol import TOPIC, assignment, call, join_member
from tests.integration.test_groups_support import create_topic, start_group_broker

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]

CLASSPATH = str(REPO_ROOT / "tools" / "kafka-jars" / "libs" / "*")


def dump(segment: Path) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    out = subprocess.run(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", CLASSPATH, "kafka.tools.DumpLogSegments",
         "--files", str(segment), "--offsets-decoder", "--print-data-log"],
        capture_output=True, text=True, timeout=90, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    records = []
    for line in out.stdout.splitlines():
        if " key: " not in line:
            continue
        key_text, payload_text = line.split(" key: ", 1)[1].split(" payload: ", 1)
        records.append((json.loads(key_text), None if payload_text.strip() == "<DELETE>" else json.loads(payload_text)))
    return records


def test_kafka_decodes_our_group_and_offset_records(tmp_path: Path) -> None:
    from protocol.messages.sync_group import SyncGroupRequest

    group = "java-decoded"
    proc = start_group_broker(tmp_path)
    try:
        create_topic(proc.bootstrap, TOPIC, 3)
        with RawClient(proc.bootstrap) as c:
            joined = join_member(c, 9, group, instance="inst-1")
            me, gen = joined.member_id, joined.generation_id
            call(c, SyncGroupRequest(group_id=group, generation_id=gen, member_id=me, group_instance_id="inst-1",
                                     protocol_type="consumer", protocol_name="range",
                                     assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                                         me, assignment(TOPIC, [0, 2]))]), 5)
            call(c, OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=gen, member_id=me, group_instance_id="inst-1",
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=2, committed_offset=1234, committed_leader_epoch=7,
                        committed_metadata="hello")])]), 9)
            # v2 with retention: Kafka's value version 1 with an expire timestamp
            call(c, OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=gen, member_id=me, retention_time_ms=60_000,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]), 2)
    finally:
        assert proc.stop() == 0
    (segment,) = proc.log_dir.glob(f"__consumer_offsets-{partition_for(group, 50)}/*.log")
    records = dump(segment)
    groups = [(k, v) for k, v in records if k["type"] == "2"]
    offsets = [(k, v) for k, v in records if k["type"] in ("0", "1")]
    key, value = groups[-1]
    assert key["data"] == {"group": group}
    assert value is not None and value["version"] == "3"
    data = value["data"]
    assert (data["protocolType"], data["generation"], data["protocol"], data["leader"]) == ("consumer", gen, "range", me)
    (member,) = data["members"]
    assert (member["memberId"], member["groupInstanceId"], member["clientId"], member["clientHost"]) == (
        me, "inst-1", "test-client", "/127.0.0.1")
    assert member["subscription"]["topics"] == [TOPIC]
    assert member["assignment"]["assignedPartitions"] == [{"topic": TOPIC, "partitions": [0, 2]}]
    by_partition = {k["data"]["partition"]: (k, v) for k, v in offsets}
    key2, value2 = by_partition[2]
    assert key2 == {"type": "1", "data": {"group": group, "topic": TOPIC, "partition": 2}}
    assert value2 is not None and value2["version"] == "3"
    assert {k: value2["data"][k] for k in ("offset", "leaderEpoch", "metadata")} == {
        "offset": 1234, "leaderEpoch": 7, "metadata": "hello"}
    _, value0 = by_partition[0]
    assert value0 is not None and value0["version"] == "1"
    assert value0["data"]["expireTimestamp"] - value0["data"]["commitTimestamp"] == 60_000

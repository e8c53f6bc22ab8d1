"""Apache Kafka's own kafka-topics (org.apache.kafka.tools.TopicCommand, Kafka 3.9 jars)
against our broker: create, list, describe, alter, delete. The Java admin client
negotiates versions with ApiVersions and uses Metadata, CreateTopics, DescribeConfigs,
DescribeCluster, CreatePartitions and DeleteTopics."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from broker.tools.client import AdminClient
from tests.integration.broker_process import REPO_ROOT

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]

CLASSPATH = str(REPO_ROOT / "tools" / "kafka-jars" / "libs" / "*")
JVM_TIMEOUT_S = 60


def kafka_topics(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", CLASSPATH,
         "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, *args],
        capture_output=True, text=True, timeout=JVM_TIMEOUT_S, check=False)


def test_kafka_topics_round_trip(broker: Any) -> None:
    bs = broker.bootstrap
    created = kafka_topics(bs, "--create", "--topic", "java-t", "--partitions", "2",
                           "--replication-factor", "1", "--config", "retention.ms=90000")
    assert created.returncode == 0, created.stdout + created.stderr
    assert "Created topic java-t." in created.stdout

    exists = kafka_topics(bs, "--create", "--topic", "java-t", "--partitions", "1")
    assert exists.returncode == 1
    assert "Topic 'java-t' already exists." in exists.stdout + exists.stderr

    listed = kafka_topics(bs, "--list")
    assert listed.returncode == 0 and listed.stdout.split() == ["java-t"], listed.stderr

    altered = kafka_topics(bs, "--alter", "--topic", "java-t", "--partitions", "3")
    assert altered.returncode == 0, altered.stdout + altered.stderr

    described = kafka_topics(bs, "--describe", "--topic", "java-t")
    assert described.returncode == 0, described.stdout + described.stderr
    lines = [line for line in described.stdout.splitlines() if line.strip()]
    with AdminClient(bs) as admin:
        (meta,) = admin.describe_topics(["java-t"])
    assert lines[0].startswith("Topic: java-t\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=90000" in lines[0]
    assert [line.split("\t")[1:6] for line in lines[1:]] == [
        ["Topic: java-t", f"Partition: {p}", "Leader: 0", "Replicas: 0", "Isr: 0"] for p in range(3)]
    assert len(meta.partitions) == 3

    deleted = kafka_topics(bs, "--delete", "--topic", "java-t")
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    with AdminClient(bs) as admin:
        assert admin.list_topics() == []

"""Apache Kafka's own tools (Kafka 3.9 jars) against our broker: kafka-topics
(org.apache.kafka.tools.TopicCommand: create, list, describe, alter, delete) and
kafka-configs (kafka.admin.ConfigCommand: alter and describe topic configs, a refused
value). Each JVM start costs seconds, so the invocations are few. The Java admin client
negotiates versions with ApiVersions and uses Metadata, CreateTopics, DescribeConfigs,
IncrementalAlterConfigs, DescribeCluster, CreatePartitions and DeleteTopics."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from client.sync import SyncClient
from tests.integration.broker_process import REPO_ROOT

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]

CLASSPATH = str(REPO_ROOT / "tools" / "kafka-jars" / "libs" / "*")
JVM_TIMEOUT_S = 60


def java_tool(main_class: str, bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", CLASSPATH,
         main_class, "--bootstrap-server", bootstrap, *args],
        capture_output=True, text=True, timeout=JVM_TIMEOUT_S, check=False)


def kafka_topics(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return java_tool("org.apache.kafka.tools.TopicCommand", bootstrap, *args)


def kafka_configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return java_tool("kafka.admin.ConfigCommand", bootstrap, *args)


def test_kafka_topics_round_trip(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    created = kafka_topics(bs, "--create", "--topic", "java-t", "--partitions", "2",
                           "--replication-factor", "1", "--config", "retention.ms=90000")
    assert created.returncode == 0, created.stdout + created.stderr
    assert "Created topic java-t." in created.stdout

    listed = kafka_topics(bs, "--list")
    assert listed.returncode == 0 and "java-t" in listed.stdout.split(), listed.stderr

    altered = kafka_topics(bs, "--alter", "--topic", "java-t", "--partitions", "3")
    assert altered.returncode == 0, altered.stdout + altered.stderr

    described = kafka_topics(bs, "--describe", "--topic", "java-t")
    assert described.returncode == 0, described.stdout + described.stderr
    lines = [line for line in described.stdout.splitlines() if line.strip()]
    with SyncClient(bs) as admin:
        (meta,) = admin.describe_topics(["java-t"])
    assert lines[0].startswith("Topic: java-t\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=90000" in lines[0]
    assert [line.split("\t")[1:6] for line in lines[1:]] == [
        ["Topic: java-t", f"Partition: {p}", "Leader: 0", "Replicas: 0", "Isr: 0"] for p in range(3)]
    assert len(meta.partitions) == 3

    deleted = kafka_topics(bs, "--delete", "--topic", "java-t")
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    with SyncClient(bs) as admin:
        assert "java-t" not in [t.name for t in admin.list_topics()]


def test_kafka_configs_alter_and_describe(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    with SyncClient(bs) as admin:
        admin.create_topic("java-cfg", 1, 1, {"retention.ms": "5000"})
    topic = ("--entity-type", "topics", "--entity-name", "java-cfg")
    altered = kafka_configs(bs, *topic, "--alter", "--add-config",
                            "segment.ms=100000,cleanup.policy=[compact,delete]",
                            "--delete-config", "retention.ms")
    assert altered.returncode == 0, altered.stdout + altered.stderr
    assert "Completed updating config for topic java-cfg." in altered.stdout

    described = kafka_configs(bs, *topic, "--describe")
    assert described.returncode == 0, described.stdout + described.stderr
    lines = sorted(line.strip() for line in described.stdout.splitlines()[1:] if line.strip())
    assert lines == [
        "cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "segment.ms=100000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.ms=100000}",
    ]
    with SyncClient(bs) as admin:
        assert admin.topic_config_overrides("java-cfg") == {
            "cleanup.policy": "compact,delete", "segment.ms": "100000"}

    refused = kafka_configs(bs, *topic, "--alter", "--add-config", "segment.ms=abc")
    assert refused.returncode != 0
    assert ("InvalidConfigurationException: Invalid value abc for configuration segment.ms:"
            " Not a number of type LONG") in refused.stdout + refused.stderr

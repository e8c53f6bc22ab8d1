"""Topic config changes reach the live logs at once (no restart): max.message.bytes set
and removed with IncrementalAlterConfigs changes what Produce accepts, and deleting a topic
makes its partitions unknown to Produce."""

from __future__ import annotations

from typing import Any

import pytest

from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from tests.integration.data_path_client import batch, produce
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(60)


def test_max_message_bytes_applies_to_the_live_log(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    big = batch([b"v" * 3000])
    with SyncClient(bs, timeout_ms=10_000) as admin, SyncClient(bs, timeout_ms=10_000) as client:
        admin.create_topic("live-cfg", 1, 1, {})
        assert produce(client, "live-cfg", 0, big).error_code == ErrorCode.NO_ERROR

        admin.alter_topic_configs("live-cfg", {"max.message.bytes": "1000"}, [])
        assert produce(client, "live-cfg", 0, big).error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert produce(client, "live-cfg", 0, batch([b"small"])).error_code == ErrorCode.NO_ERROR

        admin.alter_topic_configs("live-cfg", {}, ["max.message.bytes"])
        assert produce(client, "live-cfg", 0, big).error_code == ErrorCode.NO_ERROR

        # DescribeLogDirs reports the bytes of the partition's segments
        dirs: DescribeLogDirsResponse = client.send(DescribeLogDirsRequest(topics=[
            DescribeLogDirsRequest.DescribableLogDirTopic(topic="live-cfg", partitions=[0])]), 4)
    (result,) = dirs.results
    (topic,) = result.topics
    (partition,) = topic.partitions
    on_disk = sum(f.stat().st_size for f in (module_broker.log_dir / "live-cfg-0").glob("*.log"))
    assert partition.partition_size == on_disk > 2 * 3000  # two big batches were accepted
    assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes


def test_deleted_topic_is_unknown_to_produce(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    with SyncClient(bs, timeout_ms=10_000) as admin, SyncClient(bs, timeout_ms=10_000) as client:
        admin.create_topic("live-del", 2, 1, {})
        assert produce(client, "live-del", 1, batch([b"x"])).error_code == ErrorCode.NO_ERROR
        admin.delete_topics(["live-del"])
        assert produce(client, "live-del", 1, batch([b"x"])).error_code == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_incremental_append_and_subtract_on_a_dynamic_broker_list(module_broker: Any) -> None:
    """IncrementalAlterConfigs APPEND / SUBTRACT on a broker's dynamic LIST config
    (log.cleanup.policy, a dynamic log default) start from Kafka's default when the level
    has no value (ConfigAdminManager), reach the topics without an override at once, and
    are refused on a config that is not a list, with Kafka's message."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    bs = module_broker.bootstrap
    with SyncClient(bs) as client:
        client.create_topic("incr-list", 1, 1)
    admin = AdminClient({"bootstrap.servers": bs})

    def alter(name: str, value: str, op: AlterConfigOpType) -> None:
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry(name, value, incremental_operation=op)])
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)

    def topic_policy() -> str:
        resource = ConfigResource(ResourceType.TOPIC, "incr-list")
        entries = admin.describe_configs([resource])[resource].result(timeout=30)
        return str(entries["cleanup.policy"].value)

    def broker_policy() -> str | None:
        resource = ConfigResource(ResourceType.BROKER, "0")
        entry = admin.describe_configs([resource])[resource].result(timeout=30)[
            "log.cleanup.policy"]
        return str(entry.value) if entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value else None

    def shows(broker: str | None, topic: str) -> None:
        # The broker applies a stored change when its notification arrives (as Kafka).
        wait_for(lambda: (broker_policy(), topic_policy()) == (broker, topic), timeout_s=10,
                 what=f"log.cleanup.policy {broker}, the topic's {topic}", step_s=0.05)

    try:
        alter("log.cleanup.policy", "compact", AlterConfigOpType.APPEND)
        shows("delete,compact", "delete,compact")
        alter("log.cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)
        shows("compact", "compact")
        with pytest.raises(Exception, match=r"Config value append is not allowed for config "
                                            r"key: num\.io\.threads"):
            alter("num.io.threads", "9", AlterConfigOpType.APPEND)
    finally:
        alter("log.cleanup.policy", "", AlterConfigOpType.DELETE)
    shows(None, "delete")

"""Admin APIs through confluent-kafka's AdminClient (librdkafka) against a real broker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

pytestmark = pytest.mark.timeout(60)
TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def admin(module_broker: Any) -> Iterator[AdminClient]:
    client = AdminClient({"bootstrap.servers": module_broker.bootstrap, "socket.timeout.ms": 10_000})
    yield client


def _create(admin: AdminClient, *topics: NewTopic, validate_only: bool = False) -> None:
    for future in admin.create_topics(list(topics), validate_only=validate_only,
                                      operation_timeout=10).values():
        future.result(timeout=TIMEOUT_S)


def _error_code(future: Any) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=TIMEOUT_S)
    code: int = info.value.args[0].code()
    return code


def _source(entry: ConfigEntry) -> int:
    """librdkafka hands the source over as an int; the type hints say ConfigSource."""
    source: Any = entry.source
    return int(source if isinstance(source, int) else source.value)


def _configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    result: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    return result


def test_create_list_and_describe(admin: AdminClient, module_broker: Any) -> None:
    _create(admin, NewTopic("ck-events", num_partitions=3, replication_factor=1,
                            config={"retention.bytes": "1048576", "compression.type": "zstd"}))
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    assert metadata.cluster_id and metadata.controller_id == 0
    assert [(b.id, b.host, b.port) for b in metadata.brokers.values()] == [
        (0, "127.0.0.1", module_broker.port)]
    topic = metadata.topics["ck-events"]
    assert topic.error is None and sorted(topic.partitions) == [0, 1, 2]
    for p in topic.partitions.values():
        assert p.leader == 0 and p.replicas == [0] and p.isrs == [0]

    description = admin.describe_topics(TopicCollection(["ck-events"]))["ck-events"].result(
        timeout=TIMEOUT_S)
    assert description.name == "ck-events" and len(description.partitions) == 3
    assert str(description.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA"

    configs = _configs(admin, "ck-events")
    assert configs["retention.bytes"].value == "1048576"
    assert _source(configs["retention.bytes"]) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["compression.type"].value == "zstd"
    assert configs["segment.ms"].value == "604800000"
    assert _source(configs["segment.ms"]) == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["segment.ms"].is_read_only


def test_validate_only(admin: AdminClient) -> None:
    _create(admin, NewTopic("ck-dry", num_partitions=2, replication_factor=1), validate_only=True)
    assert "ck-dry" not in admin.list_topics(timeout=TIMEOUT_S).topics


@pytest.mark.parametrize(("topic", "code"), [
    (NewTopic("ck-rf", num_partitions=1, replication_factor=2), KafkaError.INVALID_REPLICATION_FACTOR),
    (NewTopic("ck bad", num_partitions=1, replication_factor=1), KafkaError.TOPIC_EXCEPTION),
    (NewTopic("ck-cfg", num_partitions=1, replication_factor=1, config={"segment.bytes": "tiny"}),
     KafkaError.INVALID_CONFIG),
    (NewTopic("ck-cfg2", num_partitions=1, replication_factor=1,
              config={"cleanup.policy": "forever"}), KafkaError.INVALID_CONFIG),
])
def test_create_refusals(admin: AdminClient, topic: NewTopic, code: int) -> None:
    (future,) = admin.create_topics([topic], operation_timeout=10).values()
    assert _error_code(future) == code
    assert topic.topic not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_existing_topic(admin: AdminClient) -> None:
    _create(admin, NewTopic("ck-twice", num_partitions=1, replication_factor=1))
    (future,) = admin.create_topics([NewTopic("ck-twice", num_partitions=2)]).values()
    assert _error_code(future) == KafkaError.TOPIC_ALREADY_EXISTS


def test_alter_configs_both_apis(admin: AdminClient) -> None:
    _create(admin, NewTopic("ck-alter", num_partitions=1, replication_factor=1,
                            config={"retention.ms": "1000", "segment.ms": "7000"}))
    # legacy AlterConfigs replaces the whole override set
    legacy = ConfigResource(ConfigResource.Type.TOPIC, "ck-alter", set_config={"flush.messages": "10"})
    admin.alter_configs([legacy])[legacy].result(timeout=TIMEOUT_S)
    configs = _configs(admin, "ck-alter")
    assert configs["flush.messages"].value == "10"
    assert _source(configs["retention.ms"]) == ConfigSource.DEFAULT_CONFIG.value
    assert configs["segment.ms"].value == "604800000"

    incremental = ConfigResource(ConfigResource.Type.TOPIC, "ck-alter", incremental_configs=[
        ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("flush.messages", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin.incremental_alter_configs([incremental])[incremental].result(timeout=TIMEOUT_S)
    configs = _configs(admin, "ck-alter")
    assert configs["retention.ms"].value == "5000"
    assert _source(configs["retention.ms"]) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert _source(configs["flush.messages"]) == ConfigSource.DEFAULT_CONFIG.value

    bad = ConfigResource(ConfigResource.Type.TOPIC, "ck-alter", incremental_configs=[
        ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET)])
    assert _error_code(admin.incremental_alter_configs([bad])[bad]) == KafkaError.INVALID_CONFIG
    assert _configs(admin, "ck-alter")["retention.ms"].value == "5000"

    unknown = ConfigResource(ConfigResource.Type.TOPIC, "ck-missing", set_config={"retention.ms": "1"})
    assert _error_code(admin.alter_configs([unknown])[unknown]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_partitions_and_delete(admin: AdminClient) -> None:
    _create(admin, NewTopic("ck-grow", num_partitions=2, replication_factor=1))
    for future in admin.create_partitions([NewPartitions("ck-grow", 5)]).values():
        future.result(timeout=TIMEOUT_S)
    assert sorted(admin.list_topics("ck-grow", timeout=TIMEOUT_S).topics["ck-grow"].partitions) == [
        0, 1, 2, 3, 4]
    (shrink,) = admin.create_partitions([NewPartitions("ck-grow", 3)]).values()
    assert _error_code(shrink) == KafkaError.INVALID_PARTITIONS

    for future in admin.delete_topics(["ck-grow"], operation_timeout=10).values():
        future.result(timeout=TIMEOUT_S)
    assert "ck-grow" not in admin.list_topics(timeout=TIMEOUT_S).topics
    (again,) = admin.delete_topics(["ck-grow"]).values()
    assert _error_code(again) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_cluster(admin: AdminClient, module_broker: Any) -> None:
    cluster = admin.describe_cluster().result(timeout=TIMEOUT_S)
    assert cluster.cluster_id == admin.list_topics(timeout=TIMEOUT_S).cluster_id
    assert cluster.controller.id == 0
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, "127.0.0.1", module_broker.port)]

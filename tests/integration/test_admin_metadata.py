"""Metadata (auto-creation on and off, lookups by topic id, versions) and the durability of
topics and their configs across broker restarts (SIGTERM and kill -9)."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer

from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(90)


def _metadata(bootstrap: str, names: list[str] | None, *, version: int = 12,
              allow_auto: bool = True, ids: list[uuid.UUID] | None = None) -> MetadataResponse:
    topics: list[MetadataRequest.MetadataRequestTopic] | None = None
    if names is not None:
        topics = [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    if ids is not None:
        topics = (topics or []) + [MetadataRequest.MetadataRequestTopic(name=None, topic_id=i)
                                   for i in ids]
    with SyncClient(bootstrap, timeout_ms=10_000) as client:
        response: MetadataResponse = client.send(
            MetadataRequest(topics=topics, allow_auto_topic_creation=allow_auto), version)
    return response


def test_auto_create_uses_broker_defaults(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions=3)
    response = _metadata(broker.bootstrap, ["auto-a", "auto-a"])
    (topic,) = response.topics  # a name asked twice is answered once
    assert topic.error_code == ErrorCode.NO_ERROR and topic.name == "auto-a"
    assert topic.topic_id.int != 0
    assert sorted(p.partition_index for p in topic.partitions) == [0, 1, 2]
    assert all(p.error_code == 0 and p.leader_id == 0 and p.leader_epoch == 0
               for p in topic.partitions)
    assert (broker.log_dir / "auto-a-2").is_dir()
    assert response.controller_id == 0 and response.cluster_id
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(0, "127.0.0.1", broker.port)]

    # the client may forbid it; an illegal name is refused, not created
    refused = _metadata(broker.bootstrap, ["auto-b", "bad/name"], allow_auto=False)
    assert [(t.name, t.error_code) for t in refused.topics] == [
        ("auto-b", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("bad/name", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    invalid = _metadata(broker.bootstrap, ["bad/name"])
    assert invalid.topics[0].error_code == ErrorCode.INVALID_TOPIC
    everything = _metadata(broker.bootstrap, None)
    assert [t.name for t in everything.topics] == ["auto-a"]

    # a stock producer's first send creates its topic (librdkafka asks Metadata to)
    deliveries = _produce_with_librdkafka(broker.bootstrap, "auto-p")
    assert [error for error, _ in deliveries] == [None, None]
    assert "auto-p" in [t.name for t in _metadata(broker.bootstrap, None).topics]


def _produce_with_librdkafka(bootstrap: str, topic: str) -> list[tuple[Any, int | None]]:
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 2000})
    deliveries: list[tuple[Any, int | None]] = []
    for value in (b"a", b"b"):
        producer.produce(topic, value=value,
                         on_delivery=lambda err, msg: deliveries.append((err, msg.offset())))
    producer.flush(15)
    return deliveries


def test_auto_create_disabled(broker_factory: Any) -> None:
    broker = broker_factory(auto_create_topics_enable="false")
    response = _metadata(broker.bootstrap, ["never-made"])
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    deliveries = _produce_with_librdkafka(broker.bootstrap, "never-made")
    assert len(deliveries) == 2 and all(error is not None for error, _ in deliveries)
    assert _metadata(broker.bootstrap, None).topics == []


def test_lookup_and_delete_by_topic_id_and_old_versions(module_broker: Any) -> None:
    broker = module_broker
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as admin:
        admin.create_topic("by-id", 2, 1, {})
        (meta,) = admin.describe_topics(["by-id"])
    missing = uuid.uuid4()
    response = _metadata(broker.bootstrap, None, ids=[meta.topic_id, missing])
    assert [(t.name, t.topic_id, t.error_code) for t in response.topics] == [
        ("by-id", meta.topic_id, ErrorCode.NO_ERROR),
        (None, missing, ErrorCode.UNKNOWN_TOPIC_ID)]
    for version in (1, 4, 7, 9, 11):
        old = _metadata(broker.bootstrap, ["by-id"], version=version)
        (topic,) = old.topics
        assert topic.error_code == 0 and len(topic.partitions) == 2, version

    state = DeleteTopicsRequest.DeleteTopicState
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as client:
        deleted: DeleteTopicsResponse = client.send(DeleteTopicsRequest(topics=[
            state(name=None, topic_id=meta.topic_id), state(name=None, topic_id=missing),
            state(name="by-id", topic_id=meta.topic_id)], timeout_ms=5000), 6)
    assert [(r.name, r.topic_id, r.error_code) for r in deleted.responses] == [
        ("by-id", meta.topic_id, ErrorCode.NO_ERROR),
        (None, missing, ErrorCode.UNKNOWN_TOPIC_ID),
        ("by-id", meta.topic_id, ErrorCode.INVALID_REQUEST)]
    assert "by-id" not in [t.name for t in _metadata(broker.bootstrap, None).topics]


def test_describe_configs_wire_fields(module_broker: Any) -> None:
    broker = module_broker
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as admin:
        admin.create_topic("wire", 1, 1, {"cleanup.policy": "compact"})
    resource = DescribeConfigsRequest.DescribeConfigsResource
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as client:
        response: DescribeConfigsResponse = client.send(DescribeConfigsRequest(
            resources=[resource(resource_type=2, resource_name="wire",
                                configuration_keys=["cleanup.policy", "segment.bytes", "nope"]),
                       resource(resource_type=2, resource_name="absent", configuration_keys=None),
                       resource(resource_type=4, resource_name="7", configuration_keys=None)],
            include_synonyms=False, include_documentation=True), 4)
    wire, absent, other_broker = response.results
    by_name = {c.name: c for c in wire.configs}
    assert sorted(by_name) == ["cleanup.policy", "segment.bytes"]
    policy = by_name["cleanup.policy"]
    assert (policy.value, policy.config_source, policy.config_type, policy.read_only) == (
        "compact", 1, 7, False)  # DYNAMIC_TOPIC_CONFIG, LIST
    assert policy.documentation is None and policy.synonyms == []
    assert by_name["segment.bytes"].config_type == 3  # INT
    assert absent.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert other_broker.error_code == ErrorCode.INVALID_REQUEST


def test_topics_and_configs_survive_sigterm_and_kill9(broker: Any) -> None:
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as admin:
        admin.create_topic("keep-a", 2, 1, {"retention.ms": "120000", "cleanup.policy": "compact"})
        admin.create_topic("keep-b", 1, 1, {})
        admin.create_topic("drop-c", 1, 1, {})
        admin.create_partitions("keep-b", 3)
        admin.alter_topic_configs("keep-a", {"segment.bytes": "1048576"}, ["cleanup.policy"])
        admin.delete_topics(["drop-c"])
        before = {t.name: t for t in admin.list_topics()}
        configs_before = admin.topic_config_overrides("keep-a")
    assert configs_before == {"retention.ms": "120000", "segment.bytes": "1048576"}

    for restart in (broker.restart, broker.kill9_and_restart):
        restart()
        with SyncClient(broker.bootstrap, timeout_ms=10_000) as admin:
            after = {t.name: t for t in admin.list_topics()}
            assert sorted(after) == ["keep-a", "keep-b"], restart
            for name in after:
                assert after[name].topic_id == before[name].topic_id
                assert len(after[name].partitions) == len(before[name].partitions)
                assert all(p.leader == 0 for p in after[name].partitions.values())
            assert admin.topic_config_overrides("keep-a") == configs_before
            assert admin.topic_config_overrides("keep-b") == {}


def test_metadata_answer_follows_every_change_at_once(module_broker: Any) -> None:
    """Metadata answers are cached per metadata-cache snapshot: after each change (new
    topic, more partitions, deletion) the very next answer, at every version asked
    before, shows it; a named request gets exactly the topics it names."""
    broker = module_broker
    versions = (1, 7, 9, 12)

    def everything(version: int) -> dict[str, list[int]]:
        return {t.name or "": sorted(p.partition_index for p in t.partitions)
                for t in _metadata(broker.bootstrap, None, version=version).topics
                if (t.name or "").startswith("fresh-")}

    def warm() -> dict[int, dict[str, list[int]]]:
        return {v: [everything(v) for _ in range(3)][-1] for v in versions}

    with SyncClient(broker.bootstrap, timeout_ms=10_000) as admin:
        assert warm() == {v: {} for v in versions}
        admin.create_topic("fresh-a", 2, 1, {})
        assert warm() == {v: {"fresh-a": [0, 1]} for v in versions}
        admin.create_partitions("fresh-a", 5)
        assert warm() == {v: {"fresh-a": [0, 1, 2, 3, 4]} for v in versions}
        admin.create_topic("fresh-b", 1, 1, {})
        assert warm() == {v: {"fresh-a": [0, 1, 2, 3, 4], "fresh-b": [0]} for v in versions}
        named = _metadata(broker.bootstrap, ["fresh-b", "fresh-zz"], allow_auto=False)
        assert [(t.name, t.error_code, len(t.partitions)) for t in named.topics] == [
            ("fresh-b", ErrorCode.NO_ERROR, 1),
            ("fresh-zz", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)]
        admin.delete_topics(["fresh-a"])
        assert warm() == {v: {"fresh-b": [0]} for v in versions}
        admin.delete_topics(["fresh-b"])
        assert warm() == {v: {} for v in versions}


def test_partition_topic_ids_after_kill9_right_after_creation(broker: Any) -> None:
    """partition.metadata is written after CreateTopics answers (as Kafka does). A kill -9
    right after it may leave partitions without the file (here: half of them, removed by
    the test as a crash before the write would leave them, and a temp file of a torn
    write); after the restart every partition has the file again, with the topic's id."""
    partitions = 40
    with SyncClient(broker.bootstrap, timeout_ms=30_000) as admin:
        admin.create_topic("crash-ids", partitions, 1, {})
        (info,) = admin.describe_topics(["crash-ids"])
    broker.kill9()
    files = [broker.log_dir / f"crash-ids-{i}" / "partition.metadata" for i in range(partitions)]
    assert all(f.parent.is_dir() for f in files)
    for f in files[: partitions // 2]:
        f.unlink(missing_ok=True)
    files[0].with_name("partition.metadata.tmp").write_text("version: 0\ntopic_id: AAA")
    broker.kill9_and_restart()
    expected = f"version: 0\ntopic_id: {_kafka_uuid(info.topic_id)}\n"
    wait_for(lambda: all(f.exists() for f in files), 30, "every partition.metadata written")
    assert all(f.read_text() == expected for f in files)
    assert not files[0].with_name("partition.metadata.tmp").exists()
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as admin:
        (after,) = admin.describe_topics(["crash-ids"])
    assert after.topic_id == info.topic_id and len(after.partitions) == partitions


def _kafka_uuid(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")

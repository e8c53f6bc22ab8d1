"""Admin APIs through kafka-python's KafkaAdminClient against a real broker.

CreateTopics (configs, validate_only, defaults, every refusal), Metadata (list/describe),
DescribeConfigs (sources, synonyms, broker resource), AlterConfigs and
IncrementalAlterConfigs, CreatePartitions, DeleteTopics, DescribeCluster, DescribeLogDirs.
Each test uses its own topic names on a module-scoped broker.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import kafka.errors as Errors
import pytest
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def admin(module_broker: Any) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap, request_timeout_ms=10_000,
                              client_id="admin-test")
    yield client
    client.close()


def _topic(admin: KafkaAdminClient, name: str) -> dict[str, Any]:
    (topic,) = admin.describe_topics([name])
    assert topic["name"] == name
    return dict(topic)


def _topic_configs(admin: KafkaAdminClient, name: str, config_filter: str = "all",
                   include_synonyms: bool = False) -> dict[str, Any]:
    result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)],
                                    include_synonyms=include_synonyms, config_filter=config_filter)
    return dict(result["topic"][name])


def test_create_with_configs_list_and_describe(admin: KafkaAdminClient) -> None:
    result = admin.create_topics({"kp-orders": {
        "num_partitions": 3, "replication_factor": 1,
        "configs": {"retention.ms": "3600000", "cleanup.policy": "compact"}}})
    (created,) = result["topics"]
    assert created["error_code"] == 0 and created["name"] == "kp-orders"
    assert created["num_partitions"] == 3 and created["replication_factor"] == 1
    assert created["configs"]["retention.ms"]["value"] == "3600000"
    assert created["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert uuid.UUID(str(created["topic_id"])).int != 0

    assert "kp-orders" in admin.list_topics()
    topic = _topic(admin, "kp-orders")
    assert topic["error_code"] == 0 and not topic["is_internal"]
    assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1, 2]
    for p in topic["partitions"]:
        assert p["error_code"] == 0 and p["leader_id"] == 0
        assert p["replica_nodes"] == [0] and p["isr_nodes"] == [0] and p["leader_epoch"] >= 0

    modified = _topic_configs(admin, "kp-orders", "modified")
    assert {k: v["value"] for k, v in modified.items()} == {
        "retention.ms": "3600000", "cleanup.policy": "compact"}
    everything = _topic_configs(admin, "kp-orders", include_synonyms=True)
    assert everything["segment.bytes"]["value"] == "1073741824"
    assert everything["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    synonyms = [(s["name"], s["source"]) for s in everything["retention.ms"]["synonyms"]]
    # as Kafka: the default of log.retention.hours (not log.retention.ms) is not listed
    assert synonyms == [("retention.ms", "DYNAMIC_TOPIC_CONFIG")]
    assert everything["retention.ms"]["config_type"] == "LONG"


def test_defaults_when_counts_are_minus_one(admin: KafkaAdminClient) -> None:
    admin.create_topics(["kp-defaults"])
    topic = _topic(admin, "kp-defaults")
    assert len(topic["partitions"]) == 1  # num.partitions default


def test_validate_only_creates_nothing(admin: KafkaAdminClient) -> None:
    result = admin.create_topics({"kp-dry": {"num_partitions": 2, "replication_factor": 1}},
                                 validate_only=True)
    assert result["topics"][0]["error_code"] == 0
    assert result["topics"][0]["num_partitions"] == 2
    assert "kp-dry" not in admin.list_topics()
    with pytest.raises(Errors.InvalidConfigurationError):
        admin.create_topics({"kp-dry": {"num_partitions": 1, "replication_factor": 1,
                                        "configs": {"retention.ms": "never"}}}, validate_only=True)


@pytest.mark.parametrize(("spec", "error"), [
    ({"kp-bad name": {"num_partitions": 1, "replication_factor": 1}}, Errors.InvalidTopicError),
    ({"x" * 250: {"num_partitions": 1, "replication_factor": 1}}, Errors.InvalidTopicError),
    ({"..": {"num_partitions": 1, "replication_factor": 1}}, Errors.InvalidTopicError),
    ({"kp-rf2": {"num_partitions": 1, "replication_factor": 2}}, Errors.InvalidReplicationFactorError),
    ({"kp-p0": {"num_partitions": 0, "replication_factor": 1}}, Errors.InvalidPartitionsError),
    ({"kp-cfg": {"num_partitions": 1, "replication_factor": 1,
                 "configs": {"min.cleanable.dirty.ratio": "2"}}}, Errors.InvalidConfigurationError),
    ({"kp-cfg2": {"num_partitions": 1, "replication_factor": 1,
                  "configs": {"no.such.config": "1"}}}, Errors.InvalidConfigurationError),
    ({"kp-asg": {"assignments": {0: [7]}}}, Errors.InvalidReplicationAssignmentError),
])
def test_create_refusals(admin: KafkaAdminClient, spec: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        admin.create_topics(spec)
    assert next(iter(spec)) not in admin.list_topics()


def test_create_existing_topic(admin: KafkaAdminClient) -> None:
    admin.create_topics({"kp-twice": {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(Errors.TopicAlreadyExistsError):
        admin.create_topics({"kp-twice": {"num_partitions": 4, "replication_factor": 1}})
    assert len(_topic(admin, "kp-twice")["partitions"]) == 1


def test_manual_assignment(admin: KafkaAdminClient) -> None:
    admin.create_topics({"kp-manual": {"assignments": {0: [0], 1: [0]}}})
    assert len(_topic(admin, "kp-manual")["partitions"]) == 2


def test_alter_configs_legacy_replaces_the_set(admin: KafkaAdminClient) -> None:
    admin.create_topics({"kp-alter": {"num_partitions": 1, "replication_factor": 1,
                                      "configs": {"retention.ms": "1000"}}})
    result = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "kp-alter", {"segment.ms": "60000"})],
        incremental=False, raise_on_unknown=False)
    assert result["topic"]["kp-alter"] == "OK"
    # kafka-python re-sends the modified keys it read, so retention.ms survives
    modified = _topic_configs(admin, "kp-alter", "modified")
    assert {k: v["value"] for k, v in modified.items()} == {
        "retention.ms": "1000", "segment.ms": "60000"}
    bad = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "kp-alter", {"segment.ms": "0"})],
        incremental=False, raise_on_unknown=False)
    assert "InvalidConfigurationError" in bad["topic"]["kp-alter"]
    assert _topic_configs(admin, "kp-alter", "modified")["segment.ms"]["value"] == "60000"


def test_incremental_alter_configs(admin: KafkaAdminClient) -> None:
    admin.create_topics({"kp-incr": {"num_partitions": 1, "replication_factor": 1,
                                     "configs": {"retention.ms": "1000", "segment.ms": "5000"}}})
    result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-incr", {
        "retention.ms": (AlterConfigOp.DELETE, None),
        "max.message.bytes": (AlterConfigOp.SET, "2000000"),
        "cleanup.policy": (AlterConfigOp.APPEND, "compact"),
    })], incremental=True)
    assert result["topic"]["kp-incr"] == "OK"
    modified = {k: v["value"] for k, v in _topic_configs(admin, "kp-incr", "modified").items()}
    assert modified == {"segment.ms": "5000", "max.message.bytes": "2000000",
                        "cleanup.policy": "delete,compact"}
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-incr", {
        "cleanup.policy": (AlterConfigOp.SUBTRACT, "delete")})], incremental=True)
    assert _topic_configs(admin, "kp-incr", "modified")["cleanup.policy"]["value"] == "compact"
    append_to_long = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-incr", {
        "segment.ms": (AlterConfigOp.APPEND, "1")})], incremental=True)
    assert "InvalidConfigurationError" in append_to_long["topic"]["kp-incr"]
    unknown = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-nope", {
        "segment.ms": "1000"})], incremental=True, raise_on_unknown=False)
    assert "UnknownTopicOrPartitionError" in unknown["topic"]["kp-nope"]


def test_broker_configs_are_static_and_read_only(admin: KafkaAdminClient) -> None:
    """Every broker config is read-only but the dynamic ones (num.io.threads, as in Kafka,
    the replication throttle rates, the broker-level log defaults of Kafka's
    DynamicLogConfig, and the log cleaner's settings)."""
    result = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                                    config_filter="all")
    configs = result["broker"]["0"]
    assert configs["num.partitions"]["value"] == "1"
    assert configs["num.partitions"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["log.dirs"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert {n for n, c in configs.items() if not c["read_only"]} == {
        "num.io.threads", "leader.replication.throttled.rate",
        "follower.replication.throttled.rate", "replica.alter.log.dirs.io.max.bytes.per.second",
        # Kafka 3.9's DynamicLogConfig.ReconfigurableConfigs
        "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
        "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes",
        "log.retention.ms", "message.max.bytes", "log.index.interval.bytes",
        "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio", "log.cleanup.policy",
        "unclean.leader.election.enable", "min.insync.replicas", "compression.type",
        "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
        "log.preallocate", "log.message.timestamp.type",
        "log.message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms", "log.message.downconversion.enable",
        "log.local.retention.ms", "log.local.retention.bytes",
        # Kafka 3.9's LogCleaner.ReconfigurableConfigs
        "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms"}
    refused = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0", {
        "num.partitions": "3"})], incremental=True, raise_on_unknown=False)
    assert "InvalidConfigurationError" in refused["broker"]["0"]


def test_create_partitions(admin: KafkaAdminClient) -> None:
    admin.create_topics({"kp-grow": {"num_partitions": 1, "replication_factor": 1}})
    admin.create_partitions({"kp-grow": 4})
    topic = _topic(admin, "kp-grow")
    assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1, 2, 3]
    assert all(p["leader_id"] == 0 for p in topic["partitions"])
    with pytest.raises(Errors.InvalidPartitionsError):
        admin.create_partitions({"kp-grow": 2})
    with pytest.raises(Errors.InvalidPartitionsError):
        admin.create_partitions({"kp-grow": 4})
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        admin.create_partitions({"kp-never": 3})
    admin.create_partitions({"kp-grow": 6}, validate_only=True)
    assert len(_topic(admin, "kp-grow")["partitions"]) == 4


def test_delete_topics(admin: KafkaAdminClient, module_broker: Any) -> None:
    admin.create_topics({"kp-gone": {"num_partitions": 2, "replication_factor": 1}})
    assert (module_broker.log_dir / "kp-gone-0").is_dir()
    admin.delete_topics(["kp-gone"])
    assert "kp-gone" not in admin.list_topics()
    assert not (module_broker.log_dir / "kp-gone-0").exists()
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        admin.delete_topics(["kp-gone"])
    # the name can be used again, with a new topic id
    admin.create_topics({"kp-gone": {"num_partitions": 1, "replication_factor": 1}})
    assert len(_topic(admin, "kp-gone")["partitions"]) == 1


def test_describe_cluster_and_log_dirs(admin: KafkaAdminClient, module_broker: Any) -> None:
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 0
    assert cluster["cluster_id"]
    (node,) = cluster["brokers"]
    assert (node["host"], node["port"]) == ("127.0.0.1", module_broker.port)

    admin.create_topics({"kp-dirs": {"num_partitions": 2, "replication_factor": 1}})
    (per_broker,) = admin.describe_log_dirs({"kp-dirs": [0, 1]})
    (log_dir,) = per_broker["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(module_broker.log_dir.resolve())
    (topic,) = log_dir["topics"]
    assert topic["name"] == "kp-dirs"
    assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1]
    assert all(p["partition_size"] == 0 for p in topic["partitions"])

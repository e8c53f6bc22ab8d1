"""TopicRegistry and topic configs: validation with Kafka's error codes, durability on disk."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from broker import topic_config
from broker.topic_config import ConfigSource, TopicConfigError
from broker.topics import REGISTRY_FILE, TopicError, TopicRegistry, TopicRegistryError
from protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(10)


def test_create_is_durable_and_reloads_identically(tmp_path: Path) -> None:
    reg = TopicRegistry.load(tmp_path)
    info = reg.create("orders", 3, 1, {"retention.ms": "1000", "cleanup.policy": "compact"})
    assert info.topic_id.version == 4
    again = TopicRegistry.load(tmp_path)
    assert again.get("orders") == info
    assert again.by_id(info.topic_id) == info
    assert again.names() == ["orders"]


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("", ErrorCode.INVALID_TOPIC),
        (".", ErrorCode.INVALID_TOPIC),
        ("..", ErrorCode.INVALID_TOPIC),
        ("a" * 250, ErrorCode.INVALID_TOPIC),
        ("has space", ErrorCode.INVALID_TOPIC),
        ("slash/no", ErrorCode.INVALID_TOPIC),
        ("ünï", ErrorCode.INVALID_TOPIC),
    ],
)
def test_bad_names_are_invalid_topic(tmp_path: Path, name: str, code: ErrorCode) -> None:
    reg = TopicRegistry.load(tmp_path)
    with pytest.raises(TopicError) as err:
        reg.create(name, 1, 1)
    assert err.value.code == code
    assert reg.names() == []
    assert not (tmp_path / REGISTRY_FILE).exists()


def test_longest_legal_name_is_accepted(tmp_path: Path) -> None:
    reg = TopicRegistry.load(tmp_path)
    reg.create("a.B_9-" + "x" * 243, 1, 1)
    assert len(reg.names()[0]) == 249


def test_errors_for_exists_partitions_replication_config(tmp_path: Path) -> None:
    reg = TopicRegistry.load(tmp_path)
    reg.create("t", 1, 1)
    cases: list[tuple[tuple[str, int, int, dict[str, str | None]], ErrorCode]] = [
        (("t", 1, 1, {}), ErrorCode.TOPIC_ALREADY_EXISTS),
        (("u", 0, 1, {}), ErrorCode.INVALID_PARTITIONS),
        (("u", 1, 2, {}), ErrorCode.INVALID_REPLICATION_FACTOR),
        (("u", 1, 0, {}), ErrorCode.INVALID_REPLICATION_FACTOR),
        (("u", 1, 1, {"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
        (("u", 1, 1, {"retention.ms": "-5"}), ErrorCode.INVALID_CONFIG),
        (("u", 1, 1, {"no.such.config": "1"}), ErrorCode.INVALID_CONFIG),
        (("u", 1, 1, {"cleanup.policy": "shred"}), ErrorCode.INVALID_CONFIG),
        (("u", 1, 1, {"min.cleanable.dirty.ratio": "1.5"}), ErrorCode.INVALID_CONFIG),
        (("u", 1, 1, {"segment.ms": None}), ErrorCode.INVALID_CONFIG),
    ]
    for args, code in cases:
        with pytest.raises(TopicError) as err:
            reg.create(*args)
        assert err.value.code == code, args
    assert reg.names() == ["t"]


def test_dot_and_underscore_collide(tmp_path: Path) -> None:
    reg = TopicRegistry.load(tmp_path)
    reg.create("a.b", 1, 1)
    with pytest.raises(TopicError) as err:
        reg.create("a_b", 1, 1)
    assert err.value.code == ErrorCode.INVALID_TOPIC


def test_delete_add_partitions_set_configs_persist(tmp_path: Path) -> None:
    reg = TopicRegistry.load(tmp_path)
    a = reg.create("a", 1, 1)
    reg.create("b", 2, 1)
    reg.delete("b")
    grown = reg.add_partitions("a", 4)
    assert grown.topic_id == a.topic_id and grown.num_partitions == 4
    reg.set_configs("a", {"retention.bytes": "100"})
    again = TopicRegistry.load(tmp_path)
    assert again.names() == ["a"]
    info = again.get("a")
    assert info is not None
    assert info.num_partitions == 4 and info.configs == {"retention.bytes": "100"}
    with pytest.raises(TopicError) as err:
        again.add_partitions("a", 4)
    assert err.value.code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(TopicError) as err:
        again.add_partitions("a", 2)
    assert err.value.code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(TopicError) as err:
        again.delete("b")
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_leftover_tmp_is_ignored_and_corrupt_file_fails_loudly(tmp_path: Path) -> None:
    reg = TopicRegistry.load(tmp_path)
    reg.create("keep", 1, 1)
    (tmp_path / (REGISTRY_FILE + ".tmp")).write_bytes(b'{"version": 1, "topi')
    assert TopicRegistry.load(tmp_path).names() == ["keep"]
    assert not (tmp_path / (REGISTRY_FILE + ".tmp")).exists()
    (tmp_path / REGISTRY_FILE).write_text('{"version": 1, "topics": [{"name": 1}]}')
    with pytest.raises(TopicRegistryError, match=REGISTRY_FILE):
        TopicRegistry.load(tmp_path)
    (tmp_path / REGISTRY_FILE).write_text(json.dumps({"version": 1, "topics": []}))
    assert TopicRegistry.load(tmp_path).names() == []


def test_topic_ids_are_unique(tmp_path: Path) -> None:
    reg = TopicRegistry.load(tmp_path)
    ids = {reg.create(f"t{i}", 1, 1).topic_id for i in range(20)}
    assert len(ids) == 20 and uuid.UUID(int=0) not in ids


def test_config_validation_parses_kafka_types() -> None:
    assert topic_config.validate("retention.ms", " 1000 ") == 1000
    assert topic_config.validate("cleanup.policy", "compact, delete") == ["compact", "delete"]
    assert topic_config.validate("preallocate", "TRUE") is True
    assert topic_config.validate("min.cleanable.dirty.ratio", "0.25") == 0.25
    with pytest.raises(TopicConfigError):
        topic_config.validate("segment.bytes", str(2**31))  # INT overflow
    with pytest.raises(TopicConfigError):
        topic_config.validate("preallocate", "yes")
    with pytest.raises(TopicConfigError):
        topic_config.validate("remote.storage.enable", "true")


def test_resolve_sources_and_synonyms() -> None:
    default = topic_config.resolve("retention.ms", {}, {})
    assert default.value == "604800000" and default.source == ConfigSource.DEFAULT_CONFIG
    assert [(s.name, s.value) for s in default.synonyms] == [("log.retention.hours", "168")]
    static = topic_config.resolve("retention.ms", {}, {"log.retention.hours": "2"})
    assert static.value == str(2 * 3_600_000)
    assert static.source == ConfigSource.STATIC_BROKER_CONFIG
    topic = topic_config.resolve("retention.ms", {"retention.ms": "5"}, {"log.retention.ms": "7"})
    assert topic.value == "5" and topic.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert [(s.name, s.source) for s in topic.synonyms] == [
        ("retention.ms", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG),
    ]
    values = topic_config.effective_values({"segment.bytes": "2048"}, {"log.cleanup.policy": "compact"})
    assert values["segment.bytes"] == 2048 and values["cleanup.policy"] == ["compact"]


def test_log_config_layers_topic_over_broker_over_default(tmp_path: Path) -> None:
    from broker.config import BrokerConfig
    from broker.topics import log_config_for, log_config_resolver

    config = BrokerConfig.from_properties({
        "log.dirs": str(tmp_path), "log.retention.hours": "2", "log.segment.bytes": "2048"})
    reg = TopicRegistry.load(tmp_path)
    plain = reg.create("plain", 1, 1)
    tuned = reg.create("tuned", 1, 1, {"retention.ms": "5", "cleanup.policy": "compact"})
    a = log_config_for(config, plain)
    assert (a.retention_ms, a.segment_bytes, a.cleanup_policy) == (7_200_000, 2048, ("delete",))
    b = log_config_for(config, tuned)
    assert (b.retention_ms, b.segment_bytes, b.cleanup_policy) == (5, 2048, ("compact",))
    resolve = log_config_resolver(config, reg)
    assert resolve("tuned") == b
    assert resolve("unregistered").retention_ms == 7_200_000


def test_bad_values_get_kafka_messages() -> None:
    for name, raw, message in [
        ("segment.ms", "abc", "Invalid value abc for configuration segment.ms: Not a number of type LONG"),
        ("segment.bytes", "1_000", "Not a number of type INT"),
        ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"),
        ("min.cleanable.dirty.ratio", "inf", "Not a number of type DOUBLE"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("retention.ms", "-5", "Value must be at least -1"),
    ]:
        with pytest.raises(TopicConfigError, match=message):
            topic_config.validate(name, raw)

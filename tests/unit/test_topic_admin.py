"""Topic admin checks (broker.admin_manager over a real topic store and metadata cache)
with Kafka's error codes, durability through the topic store, and topic configs."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest

from broker import topic_config
from broker.admin_manager import AdminManager
from broker.config import BrokerConfig
from broker.log_configs import LogConfigs
from broker.metadata_cache import MetadataCache
from broker.topic_config import ConfigSource, TopicConfigError
from broker.topics import TopicError
from controller.channel import BrokerEndpoint, BrokerRegistration, ControlRequestBatch
from controller.local_store import STORE_FILE, LocalTopicStore
from controller.topic_store import TopicRecord
from protocol.errors import ErrorCode
from protocol.messages.update_metadata import UpdateMetadataRequest

pytestmark = pytest.mark.timeout(10)


def one_live_broker(cache: MetadataCache) -> None:
    """UpdateMetadata naming broker 0 as the only live broker (as the controller sends)."""
    live = {0: BrokerRegistration(0, (BrokerEndpoint("PLAINTEXT", "h", 9092),))}
    batch = ControlRequestBatch(0, 1, "PLAINTEXT")
    batch.add_update_metadata(live)
    sent: list[UpdateMetadataRequest] = []

    class Capture:
        def send(self, broker_id: int, request: UpdateMetadataRequest) -> None:
            sent.append(request)

    batch.send_all(Capture(), live, lambda t: uuid.UUID(int=0))  # type: ignore[arg-type]
    cache.update_metadata(sent[0])


def admin_for(tmp_path: Path) -> AdminManager:
    config = BrokerConfig.from_properties({"log.dirs": str(tmp_path)})
    store = LocalTopicStore.load(tmp_path, 0)
    cache = MetadataCache(0)
    one_live_broker(cache)
    return AdminManager(config=config, store=store, metadata_cache=cache,
                        log_configs=LogConfigs(config, store))


async def create(admin: AdminManager, name: str, partitions: int, rf: int,
                 configs: Mapping[str, str | None] | None = None) -> TopicRecord:
    """Every admin check, then the store write (the controller is not running here)."""
    placed, clean = await admin.check_create(name, partitions, rf, configs or {})
    record = TopicRecord(name, uuid.uuid4(), placed)
    await admin.store.create_topic(record, clean)
    return record


async def test_create_is_durable_and_reloads_identically(tmp_path: Path) -> None:
    admin = admin_for(tmp_path)
    record = await create(admin, "orders", 3, 1, {"retention.ms": "1000",
                                                   "cleanup.policy": "compact"})
    assert record.assignment == {0: (0,), 1: (0,), 2: (0,)}
    again = LocalTopicStore.load(tmp_path, 0)
    assert (await again.topics())["orders"] == record
    assert await again.topic_names() == {"orders"}
    assert await again.topic_configs("orders") == {"retention.ms": "1000",
                                                    "cleanup.policy": "compact"}


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
async def test_bad_names_are_invalid_topic(tmp_path: Path, name: str, code: ErrorCode) -> None:
    admin = admin_for(tmp_path)
    with pytest.raises(TopicError) as err:
        await create(admin, name, 1, 1)
    assert err.value.error_code == code
    assert await admin.store.topic_names() == set()
    assert not (tmp_path / STORE_FILE).exists()


async def test_longest_legal_name_is_accepted(tmp_path: Path) -> None:
    admin = admin_for(tmp_path)
    await create(admin, "a.B_9-" + "x" * 243, 1, 1)
    assert len((await admin.store.topic_names()).pop()) == 249


async def test_errors_for_exists_partitions_replication_config(tmp_path: Path) -> None:
    admin = admin_for(tmp_path)
    await create(admin, "t", 1, 1)
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
            await create(admin, *args)
        assert err.value.error_code == code, args
    assert await admin.store.topic_names() == {"t"}


async def test_dot_and_underscore_collide(tmp_path: Path) -> None:
    admin = admin_for(tmp_path)
    await create(admin, "a.b", 1, 1)
    with pytest.raises(TopicError) as err:
        await create(admin, "a_b", 1, 1)
    assert err.value.error_code == ErrorCode.INVALID_TOPIC


async def test_topic_marked_for_deletion_still_exists(tmp_path: Path) -> None:
    admin = admin_for(tmp_path)
    await create(admin, "gone", 1, 1)
    await admin.store.mark_for_deletion("gone")
    with pytest.raises(TopicError, match="marked for deletion") as err:
        await create(admin, "gone", 1, 1)
    assert err.value.error_code == ErrorCode.TOPIC_ALREADY_EXISTS


async def test_topic_ids_are_unique_and_creation_waits_for_leaders(tmp_path: Path) -> None:
    admin = admin_for(tmp_path)
    ids = set()
    for i in range(20):
        record, _, error = await admin.create_topic(f"t{i}", 1, 1, {}, timeout_ms=0)
        assert error == ErrorCode.REQUEST_TIMED_OUT  # no controller here: no leaders
        ids.add(record.topic_id)
    assert len(ids) == 20 and uuid.UUID(int=0) not in ids


async def test_add_partitions_checks(tmp_path: Path) -> None:
    admin = admin_for(tmp_path)
    record = await create(admin, "a", 1, 1)
    with pytest.raises(TopicError) as err:  # the brokers do not know it yet
        await admin.check_add_partitions("a", 4)
    assert err.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    batch = ControlRequestBatch(0, 1, "PLAINTEXT")
    live = {0: BrokerRegistration(0, (BrokerEndpoint("PLAINTEXT", "h", 9092),))}
    from controller.leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch
    from protocol.topic_partition import TopicPartition

    batch.add_update_metadata(live, TopicPartition("a", 0),
                              LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(0, [0]), 1), (0,))
    sent: list[UpdateMetadataRequest] = []

    class Capture:
        def send(self, broker_id: int, request: UpdateMetadataRequest) -> None:
            sent.append(request)

    batch.send_all(Capture(), live, lambda t: record.topic_id)  # type: ignore[arg-type]
    admin.metadata_cache.update_metadata(sent[0])
    assert (await admin.check_add_partitions("a", 4)) == record
    for total, message in [(1, "Topic already has 1 partitions."),
                           (0, "which is higher than the requested 0")]:
        with pytest.raises(TopicError, match=message) as err:
            await admin.check_add_partitions("a", total)
        assert err.value.error_code == ErrorCode.INVALID_PARTITIONS
    await admin.add_partitions("a", 3, timeout_ms=0)
    grown = (await LocalTopicStore.load(tmp_path, 0).topics())["a"]
    assert grown.topic_id == record.topic_id and grown.assignment == {0: (0,), 1: (0,), 2: (0,)}


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
    # Kafka lists broker synonyms from log.retention.ms on: none here, nor below
    assert default.synonyms == ()
    static = topic_config.resolve("retention.ms", {}, {"log.retention.hours": "2"})
    assert static.value == str(2 * 3_600_000)
    assert static.source == ConfigSource.STATIC_BROKER_CONFIG and static.synonyms == ()
    policy = topic_config.resolve("cleanup.policy", {}, {})
    assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG)]
    topic = topic_config.resolve("retention.ms", {"retention.ms": "5"}, {"log.retention.ms": "7"})
    assert topic.value == "5" and topic.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert [(s.name, s.source) for s in topic.synonyms] == [
        ("retention.ms", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG),
    ]
    values = topic_config.effective_values({"segment.bytes": "2048"}, {"log.cleanup.policy": "compact"})
    assert values["segment.bytes"] == 2048 and values["cleanup.policy"] == ["compact"]


def test_resolve_over_dynamic_broker_levels() -> None:
    """Kafka's precedence (this broker's dynamic value > the cluster default > the static
    value, per synonym) and ConfigHelper's synonym order: by level, then Kafka's defaults,
    each one's default listed even where it is set."""
    both = topic_config.resolve(
        "retention.ms", {}, {"log.retention.ms": "7", "log.retention.hours": "2"},
        dynamic_broker={"log.retention.ms": "5"}, dynamic_default={"log.retention.ms": "6"})
    assert (both.value, both.source) == ("5", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in both.synonyms] == [
        ("log.retention.ms", "5", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "6", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "7", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    # A dynamic log.retention.ms wins over a static log.retention.hours (synonym order).
    ms = topic_config.resolve("retention.ms", {}, {"log.retention.hours": "2"},
                              dynamic_default={"log.retention.ms": "6"})
    assert (ms.value, ms.source) == ("6", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    segment = topic_config.resolve("segment.bytes", {"segment.bytes": "2048"}, {},
                                   dynamic_default={"log.segment.bytes": "1024"})
    assert (segment.value, segment.source) == ("2048", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("segment.bytes", "2048", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.segment.bytes", "1024", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG)]


async def test_log_config_layers_topic_over_broker_over_default(tmp_path: Path) -> None:
    from broker.topics import log_config_for

    config = BrokerConfig.from_properties({
        "log.dirs": str(tmp_path), "log.retention.hours": "2", "log.segment.bytes": "2048"})
    store = LocalTopicStore.load(tmp_path, 0)
    await store.create_topic(TopicRecord("plain", uuid.uuid4(), {0: (0,)}), {})
    await store.create_topic(TopicRecord("tuned", uuid.uuid4(), {0: (0,)}),
                             {"retention.ms": "5", "cleanup.policy": "compact"})
    a = log_config_for(config, {})
    assert (a.retention_ms, a.segment_bytes, a.cleanup_policy) == (7_200_000, 2048, ("delete",))
    b = log_config_for(config, await store.topic_configs("tuned"))
    assert (b.retention_ms, b.segment_bytes, b.cleanup_policy) == (5, 2048, ("compact",))
    configs = LogConfigs(config, store)
    await configs.load()
    assert configs.get("tuned") == b and configs.get("plain") == a
    assert configs.get("unregistered").retention_ms == 7_200_000


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

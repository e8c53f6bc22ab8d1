"""The pure parts of dynamic replica throttling: which values a broker accepts as dynamic
configs (``broker.dynamic_broker_config.validate``) and which replicas
``minikafka reassign-partitions --throttle`` lists (Kafka's calculateLeaderThrottles /
calculateFollowerThrottles), ``num.io.threads``' bounds, and the single node's store of
dynamic broker configs, and the log cleaner's settings with Kafka's bounds on them. The
whole path runs in tests/cluster/test_replication.py, tests/integration/test_cli_tools.py
and tests/integration/test_dynamic_cleaner_configs.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.dynamic_broker_config import (
    DynamicBrokerConfig,
    DynamicConfigError,
    thread_count_error,
    validate,
)
from broker.log_cleaning import reconfiguration_error
from cli.reassign_partitions import throttled_replicas
from controller.local_broker_configs import STORE_FILE, LocalBrokerConfigStore
from controller.local_store import TopicStoreLoadError
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from storage.cleaner import CleanerConfig


def test_the_replication_rates_are_dynamic_and_they_are_longs() -> None:
    assert validate({"leader.replication.throttled.rate": " 1000 ",
                     "follower.replication.throttled.rate": None,
                     "replica.alter.log.dirs.io.max.bytes.per.second": "0"}) == {
        "leader.replication.throttled.rate": "1000",
        "replica.alter.log.dirs.io.max.bytes.per.second": "0"}
    cases = {
        "log.retention.hours": "Cannot update these configs dynamically: "
                               "['log.retention.hours']",
        "leader.replication.throttled.rate": "Invalid value x for configuration "
                                             "leader.replication.throttled.rate: Not a number of "
                                             "type LONG",
    }
    for name, message in cases.items():
        with pytest.raises(DynamicConfigError) as info:
            validate({name: "x"})
        assert (info.value.error_code, info.value.message) == (ErrorCode.INVALID_CONFIG, message)
    with pytest.raises(DynamicConfigError, match="Value must be at least 0"):
        validate({"follower.replication.throttled.rate": "-1"})


def test_the_log_defaults_are_dynamic_as_kafkas_dynamic_log_config() -> None:
    """Kafka's DynamicLogConfig.ReconfigurableConfigs: the first broker synonym of each topic
    config (not log.message.format.version, not log.retention.hours), each checked as its
    topic config is, with Kafka's messages."""
    assert validate({"log.retention.ms": " 60000 ", "log.cleanup.policy": "compact,delete",
                     "min.insync.replicas": "2", "log.cleaner.min.cleanable.ratio": "0.1",
                     "unclean.leader.election.enable": "true", "compression.type": "lz4",
                     "log.message.timestamp.type": "LogAppendTime"}) == {
        "log.retention.ms": "60000", "log.cleanup.policy": "compact,delete",
        "min.insync.replicas": "2", "log.cleaner.min.cleanable.ratio": "0.1",
        "unclean.leader.election.enable": "true", "compression.type": "lz4",
        "log.message.timestamp.type": "LogAppendTime"}
    cases = {
        ("log.retention.ms", "x"): "Invalid value x for configuration log.retention.ms: Not a "
                                   "number of type LONG",
        ("log.cleanup.policy", "tidy"): "Invalid value tidy for configuration "
                                        "log.cleanup.policy: Invalid value(s) ['tidy']: must "
                                        "be one of ['delete', 'compact']",
        ("min.insync.replicas", "0"): "Invalid value 0 for configuration min.insync.replicas: "
                                      "Value must be at least 1",
        ("log.segment.bytes", "13"): "Invalid value 13 for configuration log.segment.bytes: "
                                     "Value must be at least 14",
        ("log.message.format.version", "3.0"): "Cannot update these configs dynamically: "
                                               "['log.message.format.version']",
        ("log.roll.hours", "1"): "Cannot update these configs dynamically: ['log.roll.hours']",
    }
    for (name, value), message in cases.items():
        with pytest.raises(DynamicConfigError) as info:
            validate({name: value})
        assert (info.value.error_code, info.value.message) == (ErrorCode.INVALID_CONFIG, message)


def test_throttled_replicas_of_a_reassignment() -> None:
    foo0, foo1, bar10, baz0 = (TopicPartition("foo", 0), TopicPartition("foo", 1),
                               TopicPartition("bar", 10), TopicPartition("baz", 0))
    current = {foo0: [1, 2], foo1: [2, 1], bar10: [4], baz0: [1, 2]}
    targets = {foo0: [1, 3], foo1: [3, 4], bar10: [5], baz0: [1, 2]}  # baz-0 does not move
    assert throttled_replicas(current, targets) == {
        "bar": ("10:4", "10:5"),
        "foo": ("0:1,0:2,1:1,1:2", "0:3,1:3,1:4"),
    }


def test_num_io_threads_is_an_int_of_at_least_one_changed_by_at_most_double_or_half() -> None:
    assert validate({"num.io.threads": "16"}) == {"num.io.threads": "16"}
    with pytest.raises(DynamicConfigError, match="Value must be at least 1"):
        validate({"num.io.threads": "0"})
    with pytest.raises(DynamicConfigError, match="Not a number of type INT"):
        validate({"num.io.threads": str(2**31)})
    assert thread_count_error("num.io.threads", 16, 8) is None
    assert thread_count_error("num.io.threads", 4, 8) is None
    assert thread_count_error("num.io.threads", 17, 8) == (
        "Dynamic thread count update validation failed for num.io.threads=17, value should not "
        "be greater than double the current value 8")
    assert thread_count_error("num.io.threads", 3, 8) == (
        "Dynamic thread count update validation failed for num.io.threads=3, value should be "
        "at least half the current value 8")


async def test_local_broker_config_store_keeps_both_levels_across_a_restart(tmp_path: Path) -> None:
    store = LocalBrokerConfigStore.load(tmp_path)
    heard: list[str] = []
    store.watch_broker_configs(heard.append)
    await store.set_broker_configs("<default>", {"num.io.threads": "4"})
    await store.set_broker_configs("0", {"leader.replication.throttled.rate": "10"})
    await asyncio.sleep(0)  # callbacks run on the loop, after the write
    assert heard == ["<default>", "0"]
    again = LocalBrokerConfigStore.load(tmp_path)
    assert await again.broker_configs("<default>") == {"num.io.threads": "4"}
    assert await again.broker_configs("0") == {"leader.replication.throttled.rate": "10"}
    await again.set_broker_configs("0", {})
    assert json.loads((tmp_path / STORE_FILE).read_text()) == {
        "version": 1, "entities": {"<default>": {"num.io.threads": "4"}}}
    (tmp_path / STORE_FILE).write_text("{not json")
    with pytest.raises(TopicStoreLoadError, match=STORE_FILE):
        LocalBrokerConfigStore.load(tmp_path)


async def test_a_broker_starts_with_both_stored_levels_in_kafkas_precedence(tmp_path: Path) -> None:
    """Start-up reads this broker's dynamic configs and the cluster defaults: its own over
    the default over server.properties; a later change of the default is applied when its
    notification arrives, bounded by the thread count in force."""
    written = LocalBrokerConfigStore.load(tmp_path)
    await written.set_broker_configs("<default>", {"num.io.threads": "4",
                                                   "leader.replication.throttled.rate": "7"})
    await written.set_broker_configs("0", {"leader.replication.throttled.rate": "10"})
    config = BrokerConfig.from_properties({"follower.replication.throttled.rate": "99",
                                           "leader.replication.throttled.rate": "5"})
    applied: list[dict[str, int]] = []
    dynamic = DynamicBrokerConfig(config, LocalBrokerConfigStore.load(tmp_path),
                                  lambda values: applied.append(dict(values)))
    await dynamic.start()
    assert applied == [{"num.io.threads": 4, "leader.replication.throttled.rate": 10,
                        "follower.replication.throttled.rate": 99,
                        "replica.alter.log.dirs.io.max.bytes.per.second": 2**63 - 1}]
    with pytest.raises(DynamicConfigError, match="not be greater than double the current value 4"):
        await dynamic.alter("", {"num.io.threads": "9"}, validate_only=True)
    await dynamic.alter("", {"num.io.threads": "8"}, validate_only=False)
    for _ in range(100):  # the store's notification, then the reload task
        if len(applied) == 2:
            break
        await asyncio.sleep(0.01)
    assert applied[-1]["num.io.threads"] == 8
    assert applied[-1]["leader.replication.throttled.rate"] == 10  # its own value still
    assert dynamic.defaults == {"num.io.threads": "8"}


def test_the_log_cleaner_settings_are_dynamic_each_checked_as_server_properties() -> None:
    """Kafka's LogCleaner.ReconfigurableConfigs, each value checked by its ConfigDef type and
    range, with Kafka's messages."""
    assert validate({"log.cleaner.threads": " 2 ", "log.cleaner.dedupe.buffer.size": "33554432",
                     "log.cleaner.io.buffer.load.factor": "0.8",
                     "log.cleaner.io.buffer.size": "65536",
                     "log.cleaner.io.max.bytes.per.second": "1e6",
                     "log.cleaner.backoff.ms": "100"}) == {
        "log.cleaner.threads": "2", "log.cleaner.dedupe.buffer.size": "33554432",
        "log.cleaner.io.buffer.load.factor": "0.8", "log.cleaner.io.buffer.size": "65536",
        "log.cleaner.io.max.bytes.per.second": "1e6", "log.cleaner.backoff.ms": "100"}
    cases = {
        ("log.cleaner.threads", "two"): "Not a number of type INT",
        ("log.cleaner.threads", "2147483648"): "Not a number of type INT",
        ("log.cleaner.threads", "-1"): "Value must be at least 0",
        ("log.cleaner.dedupe.buffer.size", "1.5"): "Not a number of type LONG",
        ("log.cleaner.io.max.bytes.per.second", "fast"): "Not a number of type DOUBLE",
        ("log.cleaner.io.buffer.size", "-1"): "Value must be at least 0",
        ("log.cleaner.backoff.ms", "-5"): "Value must be at least 0",
    }
    for (name, value), complaint in cases.items():
        with pytest.raises(DynamicConfigError) as info:
            validate({name: value})
        assert (info.value.error_code, info.value.message) == (
            ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {complaint}")
    with pytest.raises(DynamicConfigError, match=r"Cannot update these configs dynamically: "
                                                 r"\['log.cleaner.enable'\]"):
        validate({"log.cleaner.enable": "false"})


def test_the_running_cleaner_takes_new_settings_within_kafkas_bounds() -> None:
    """Kafka's LogCleaner.validateReconfiguration (at least 1 thread, at least half and at
    most double the threads in force) and KafkaConfig's 1 MB of dedupe buffer per thread."""
    now = CleanerConfig(threads=2)
    assert reconfiguration_error(now, CleanerConfig(threads=4)) is None
    assert reconfiguration_error(now, CleanerConfig(threads=1)) is None
    assert reconfiguration_error(now, CleanerConfig(threads=2, backoff_ms=1)) is None
    assert reconfiguration_error(now, CleanerConfig(threads=5)) == (
        "Log cleaner threads cannot be increased to more than double the current value 2")
    assert reconfiguration_error(CleanerConfig(threads=5), CleanerConfig(threads=1)) == (
        "Log cleaner threads cannot be reduced to less than half the current value 5")
    assert reconfiguration_error(now, CleanerConfig(threads=0)) == (
        "Log cleaner threads should be at least 1")
    assert reconfiguration_error(now, CleanerConfig(threads=2, dedupe_buffer_size=2 << 20)) == (
        "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner "
        "thread.")
    assert reconfiguration_error(now, CleanerConfig(threads=1, dedupe_buffer_size=2 << 20)) is None

"""The log cleaner's settings are dynamic broker configs on a real broker (Kafka's
LogCleaner.ReconfigurableConfigs): IncrementalAlterConfigs on the broker and AlterConfigs
on the cluster default restart the cleaner's threads and workers with the new settings at
once, DescribeConfigs shows each level as Kafka does, compaction goes on, and values
Kafka refuses are refused with its error code and message, nothing applied."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from client.admin import ConfigEntry as DescribedEntry
from client.sync import SyncClient
from protocol.config_codes import ConfigResourceType, ConfigSource
from protocol.errors import ErrorCode
from protocol.messages.alter_configs import AlterConfigsRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from tests.integration.broker_process import BrokerProcess
from tests.integration.test_compaction import (
    FAST_CLEANER,
    check_compacted,
    consume_all,
    create_topic,
    process_runs,
    produce,
    roll_and_wait_cleaned,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)
STARTED = re.compile(r"Log cleaner worker (\d+) started \(pid (\d+),")
DOUBLE_MAX = "1.7976931348623157E308"  # Kafka's default of log.cleaner.io.max.bytes.per.second


def workers_since(broker: BrokerProcess, marker: str, occurrence: int) -> dict[int, int]:
    """Worker id -> pid of the workers started after the ``occurrence``-th ``marker`` line
    of the broker's log (none if it is not there yet)."""
    text = broker.stderr_text()
    at = -1
    for _ in range(occurrence):
        at = text.find(marker, at + 1)
        if at < 0:
            return {}
    return {int(m.group(1)): int(m.group(2)) for m in STARTED.finditer(text, at)}


def describe(bootstrap: str, name: str) -> DescribedEntry:
    with SyncClient(bootstrap, timeout_ms=10_000) as c:
        (entry,) = c.run(c.admin.describe_configs(ConfigResourceType.BROKER, "0", [name],
                                                  include_synonyms=True))
    return entry


def alter(admin: AdminClient, resource_name: str, name: str, value: str) -> None:
    resource = ConfigResource(ConfigResource.Type.BROKER, resource_name, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def refusal(bootstrap: str, resource_name: str, name: str, value: str) -> tuple[int, str | None]:
    """IncrementalAlterConfigs SET of one broker config: the resource's (code, message)."""
    with SyncClient(bootstrap, timeout_ms=10_000) as c:
        response = c.send(IncrementalAlterConfigsRequest(resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=ConfigResourceType.BROKER, resource_name=resource_name,
                configs=[IncrementalAlterConfigsRequest.AlterableConfig(
                    name, AlterConfigOpType.SET.value, value)])]), 1)
    (result,) = response.responses
    return result.error_code, result.error_message


def test_cleaner_settings_change_without_a_restart(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(FAST_CLEANER)
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    marker = "Starting the log cleaner (%d threads"
    wait_until("the cleaner's worker", lambda: len(workers_since(broker, marker % 1, 1)) == 1)
    (first_pid,) = workers_since(broker, marker % 1, 1).values()
    entry = describe(bs, "log.cleaner.threads")
    assert (entry.value, entry.source, entry.read_only) == ("1", ConfigSource.DEFAULT_CONFIG, False)

    # This broker's own value (IncrementalAlterConfigs): two threads, each with a worker.
    alter(admin, "0", "log.cleaner.threads", "2")
    wait_until("two new cleaner workers", lambda: sorted(
        workers_since(broker, marker % 2, 1)) == [0, 1])
    pids = workers_since(broker, marker % 2, 1)
    assert all(process_runs(pid) for pid in pids.values())
    assert first_pid not in pids.values() and not process_runs(first_pid)
    entry = describe(bs, "log.cleaner.threads")
    assert (entry.value, entry.source, entry.synonyms) == ("2", ConfigSource.DYNAMIC_BROKER_CONFIG, (
        ("log.cleaner.threads", "2", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.cleaner.threads", "1", ConfigSource.DEFAULT_CONFIG)))

    # The cluster default (the legacy AlterConfigs): the I/O rate, applied by a restart.
    with SyncClient(bs, timeout_ms=10_000) as c:
        response = c.send(AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
            resource_type=ConfigResourceType.BROKER, resource_name="", configs=[
                AlterConfigsRequest.AlterableConfig("log.cleaner.io.max.bytes.per.second",
                                                    "50000000")])]), 2)
    assert [(r.error_code, r.resource_name) for r in response.responses] == [(0, "")]
    wait_until("the cleaner restarted with the new rate", lambda: sorted(
        workers_since(broker, "Updating logCleanerIoMaxBytesPerSecond: 50000000.0", 1)) == [0, 1])
    assert not any(process_runs(pid) for pid in pids.values())
    entry = describe(bs, "log.cleaner.io.max.bytes.per.second")
    assert (entry.value, entry.source, entry.synonyms) == (
        "50000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, (
            ("log.cleaner.io.max.bytes.per.second", "50000000",
             ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            ("log.cleaner.io.max.bytes.per.second", DOUBLE_MAX, ConfigSource.DEFAULT_CONFIG)))

    # Compaction goes on with the new threads.
    topic = "reconfigured"
    create_topic(bs, topic, **{"cleanup.policy": "compact", "segment.ms": "1000",
                               "min.cleanable.dirty.ratio": "0.01"})
    updates = [(b"key-%d" % (i % 50), b"value-%d" % i) for i in range(2000)]
    produce(bs, topic, updates)
    roll_and_wait_cleaned(broker, topic, 1000)
    check_compacted(consume_all(bs, topic), dict(updates), set())
    assert re.search(rf"Log cleaner thread [01] cleaned log {topic}-0", broker.stderr_text())

    # Refused as Kafka refuses them, nothing applied.
    refusals = [
        ("0", "log.cleaner.threads", "5",
         "Log cleaner threads cannot be increased to more than double the current value 2"),
        ("0", "log.cleaner.threads", "0", "Log cleaner threads should be at least 1"),
        ("0", "log.cleaner.threads", "-1",
         "Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0"),
        ("0", "log.cleaner.dedupe.buffer.size", "2097152",
         "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner "
         "thread."),
        ("", "log.cleaner.io.max.bytes.per.second", "fast",
         "Invalid value fast for configuration log.cleaner.io.max.bytes.per.second: Not a "
         "number of type DOUBLE"),
        ("", "log.cleaner.backoff.ms", "-1",
         "Invalid value -1 for configuration log.cleaner.backoff.ms: Value must be at least 0"),
    ]
    for resource_name, name, value, message in refusals:
        assert refusal(bs, resource_name, name, value) == (ErrorCode.INVALID_CONFIG, message)
    with pytest.raises(KafkaException) as refused:  # what a stock client shows of one
        alter(admin, "0", "log.cleaner.threads", "5")
    error: KafkaError = refused.value.args[0]
    assert (error.code(), error.str()) == (KafkaError.INVALID_CONFIG, refusals[0][3])
    assert describe(bs, "log.cleaner.threads").value == "2"
    assert describe(bs, "log.cleaner.backoff.ms").value == "100"
    assert broker.stderr_text().count("Starting the log cleaner") == 3

"""Retention in a running broker: the periodic retention job (``log.retention.check.interval.ms``)
deletes old segments by ``retention.ms`` (record timestamps) and by ``retention.bytes``, a live
AlterConfigs of ``retention.ms`` takes effect without a restart, the new log start offset is
what ListOffsets (earliest), Fetch and a stock consumer see (and survives a restart), and the
active segment is never deleted, even when every record in it is past retention.

Small segments (``segment.bytes``), a 100 ms check interval and ``file.delete.delay.ms=0``
(segment files are unlinked in the same pass) keep each test to a few seconds. Waits are on
a condition (files in the log dir, the broker's log lines), bounded; a "nothing happened"
claim is made only after a witness topic shows that a later retention pass ran.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from client.sync import SyncClient
from protocol.errors import ErrorCode
from tests.integration.broker_process import BrokerProcess
from tests.integration.data_path_client import (
    EARLIEST,
    LATEST,
    batch,
    create_topic,
    fetch,
    list_offset,
    produce,
    records_of,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

CHECK_INTERVAL_MS = 100
HOUR_MS = 3_600_000
SEGMENT_BYTES = 1024
SMALL_SEGMENTS = {"segment.bytes": str(SEGMENT_BYTES), "file.delete.delay.ms": "0"}
BATCHES = 20  # one ~280-byte record batch each: 3 to a segment, 7 segments
WAIT_S = 30.0  # bound on a wait that takes a few check intervals on a quiet machine


@pytest.fixture
def retention_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(log_retention_check_interval_ms=CHECK_INTERVAL_MS)


def segment_sizes(proc: BrokerProcess, topic: str) -> dict[int, int]:
    """Base offset -> size of the segment files on disk (``*.deleted`` excluded), in order.

    The broker renames segments to ``*.deleted`` while this runs: a file listed by the glob
    and renamed before its ``stat`` is no longer a segment, so it is left out."""
    sizes: dict[int, int] = {}
    for f in sorted((proc.log_dir / f"{topic}-0").glob("*.log")):
        try:
            sizes[int(f.name.split(".")[0])] = f.stat().st_size
        except FileNotFoundError:
            continue
    return sizes


def fill(proc: BrokerProcess, topic: str, timestamp_ms: int) -> int:
    """BATCHES one-record batches with CreateTime ``timestamp_ms``; the log end offset."""
    with SyncClient(proc.bootstrap, timeout_ms=10_000) as client:
        for i in range(BATCHES):
            result = produce(client, topic, 0, batch([b"v" * 200 + b"%d" % i], timestamp_ms=timestamp_ms))
            assert (result.error_code, result.base_offset) == (0, i)
    return BATCHES


def deletions(proc: BrokerProcess, topic: str) -> list[tuple[str, int]]:
    """(rule, log start offset) of every retention deletion the broker logged for ``topic``."""
    pattern = re.compile(rf"\] INFO {re.escape(topic)}-0: deleted \d+ segment\(s\) \[[\d, ]*\]: "
                         r"(retention\.\w+) [^;]*; log start offset now (\d+)")
    return [(m.group(1), int(m.group(2))) for m in pattern.finditer(proc.stderr_text())]


def wait_only_active_segment(proc: BrokerProcess, topic: str) -> int:
    wait_for(lambda: len(segment_sizes(proc, topic)) == 1, WAIT_S, f"{topic}: only the active segment left")
    (base,) = segment_sizes(proc, topic)
    return base


def earliest_and_latest(proc: BrokerProcess, topic: str) -> tuple[int, int]:
    with SyncClient(proc.bootstrap, timeout_ms=10_000) as client:
        err_e, _, earliest, _ = list_offset(client, topic, 0, EARLIEST)
        err_l, _, latest, _ = list_offset(client, topic, 0, LATEST)
    assert (err_e, err_l) == (0, 0)
    return earliest, latest


def consumed_from_zero(proc: BrokerProcess, topic: str, count: int) -> list[int]:
    """A kafka-python consumer positioned at offset 0 (below the log start) gets
    OFFSET_OUT_OF_RANGE, resets to the earliest offset and reads on: the offsets it reads."""
    consumer = KafkaConsumer(bootstrap_servers=proc.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=15_000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        offsets: list[int] = []
        for message in consumer:
            offsets.append(message.offset)
            if len(offsets) == count:
                break
        return offsets
    finally:
        consumer.close()


def check_log_start_everywhere(proc: BrokerProcess, topic: str, log_start: int, leo: int) -> None:
    """ListOffsets, Fetch, a stock consumer and the files on disk agree on the log start."""
    assert earliest_and_latest(proc, topic) == (log_start, leo)
    with SyncClient(proc.bootstrap, timeout_ms=10_000) as client:
        below = fetch(client, topic, 0, 0).responses[0].partitions[0]
        assert (below.error_code, below.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, log_start)
        at = fetch(client, topic, 0, log_start).responses[0].partitions[0]
        assert (at.error_code, at.log_start_offset) == (0, log_start)
        assert records_of(at.records)[0].offset == log_start
    assert consumed_from_zero(proc, topic, leo - log_start) == list(range(log_start, leo))
    assert next(iter(segment_sizes(proc, topic))) == log_start


def run_a_later_pass(proc: BrokerProcess, witness: str, old_ms: int) -> None:
    """Proof that a retention pass ran over every log after this call: a new topic whose
    records are all past its retention.ms loses its old segments (one pass visits all logs)."""
    create_topic(proc.bootstrap, witness, 1, {**SMALL_SEGMENTS, "retention.ms": str(HOUR_MS)})
    fill(proc, witness, old_ms)
    wait_only_active_segment(proc, witness)


def test_retention_ms_deletes_old_segments_but_never_the_active_one(
        retention_broker: BrokerProcess) -> None:
    """Every record is two hours old, retention.ms is one hour: every segment but the active
    one goes; the log start offset moves to the active segment's base offset; later passes
    keep the active segment; the log still takes and serves records."""
    proc, topic = retention_broker, "ret-ms"
    create_topic(proc.bootstrap, topic, 1, {**SMALL_SEGMENTS, "retention.ms": str(HOUR_MS)})
    old_ms = int(time.time() * 1000) - 2 * HOUR_MS
    leo = fill(proc, topic, old_ms)
    active = wait_only_active_segment(proc, topic)
    assert 0 < active < leo  # old segments went, the newest records stayed
    assert {rule for rule, _ in deletions(proc, topic)} == {"retention.ms"}
    assert deletions(proc, topic)[-1][1] == active
    check_log_start_everywhere(proc, topic, active, leo)

    seen = len(deletions(proc, topic))
    run_a_later_pass(proc, "ret-ms-witness", old_ms)
    assert list(segment_sizes(proc, topic)) == [active] and len(deletions(proc, topic)) == seen
    with SyncClient(proc.bootstrap, timeout_ms=10_000) as client:
        assert produce(client, topic, 0, batch([b"after"])).base_offset == leo
    assert earliest_and_latest(proc, topic) == (active, leo + 1)


def test_retention_bytes_deletes_the_oldest_segments_down_to_the_limit(
        retention_broker: BrokerProcess) -> None:
    """Kafka's rule: the oldest segments go while what is left stays at or above
    retention.bytes, so the log ends between the limit and the limit plus one segment."""
    proc, topic, limit = retention_broker, "ret-bytes", 2048
    create_topic(proc.bootstrap, topic, 1, {**SMALL_SEGMENTS, "retention.bytes": str(limit)})
    leo = fill(proc, topic, int(time.time() * 1000))  # new records: retention.ms plays no part

    def trimmed() -> bool:
        sizes = list(segment_sizes(proc, topic).values())
        return sum(sizes) - sizes[0] < limit

    wait_for(trimmed, WAIT_S, f"{topic}: log trimmed to retention.bytes")
    sizes = segment_sizes(proc, topic)
    assert sum(sizes.values()) >= limit and len(sizes) > 1
    log_start = next(iter(sizes))
    assert 0 < log_start < leo
    assert {rule for rule, _ in deletions(proc, topic)} == {"retention.bytes"}
    check_log_start_everywhere(proc, topic, log_start, leo)


def test_live_alter_configs_of_retention_ms(retention_broker: BrokerProcess) -> None:
    """retention.ms one day: two-hour-old records stay through later retention passes;
    AlterConfigs (kafka-python's admin client) sets one hour: the next passes delete them,
    without a restart."""
    proc, topic = retention_broker, "ret-live"
    create_topic(proc.bootstrap, topic, 1, {**SMALL_SEGMENTS, "retention.ms": str(24 * HOUR_MS)})
    old_ms = int(time.time() * 1000) - 2 * HOUR_MS
    leo = fill(proc, topic, old_ms)
    before = list(segment_sizes(proc, topic))
    assert len(before) > 3
    run_a_later_pass(proc, "ret-live-witness", old_ms)
    assert list(segment_sizes(proc, topic)) == before and deletions(proc, topic) == []

    admin = KafkaAdminClient(bootstrap_servers=proc.bootstrap, request_timeout_ms=10_000)
    try:  # AlterConfigs (not the incremental API): the request replaces every override
        result = admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, topic, configs={**SMALL_SEGMENTS, "retention.ms": str(HOUR_MS)})],
            incremental=False)
    finally:
        admin.close()
    assert result == {"topic": {topic: "OK"}}
    active = wait_only_active_segment(proc, topic)
    assert active == before[-1]
    assert deletions(proc, topic)[-1] == ("retention.ms", active)
    check_log_start_everywhere(proc, topic, active, leo)


def test_log_start_offset_survives_a_restart(retention_broker: BrokerProcess) -> None:
    proc, topic = retention_broker, "ret-restart"
    create_topic(proc.bootstrap, topic, 1, {**SMALL_SEGMENTS, "retention.ms": str(HOUR_MS)})
    leo = fill(proc, topic, int(time.time() * 1000) - 2 * HOUR_MS)
    log_start = wait_only_active_segment(proc, topic)
    proc.restart()
    check_log_start_everywhere(proc, topic, log_start, leo)

"""Log compaction on a real broker with stock clients: the latest value of every key,
tombstones gone after delete.retention.ms, Kafka's DumpLogSegments reading the cleaned
files, keyless produce refused, and a kill -9 at each step of a segment swap."""

from __future__ import annotations

import random
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from storage.checkpoints import read_offset_checkpoint
from storage.naming import CLEANER_CHECKPOINT
from storage.naming import TopicPartition as StorageTP
from tests.integration.broker_process import BrokerProcess, BrokerStartError
from tests.integration.metrics_scrape import base_url, scrape
from tests.integration.test_dump_log_compat import JARS

pytestmark = pytest.mark.timeout(300)
FAST_CLEANER = {"log.cleaner.backoff.ms": "100"}
WAIT_S = 60.0


def kafka_dump(files: list[Path]) -> str:
    """Kafka's DumpLogSegments over ``files``: it must exit 0 and report nothing but the gaps
    compaction leaves ("Non-consecutive offsets ... N is followed by M", which it prints
    for any compacted log)."""
    proc = subprocess.run(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", str(JARS / "*"),
         "kafka.tools.DumpLogSegments",
         "--files", ",".join(str(f) for f in files), "--print-data-log"],
        capture_output=True, text=True, timeout=150,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    gap = re.compile(r"^(Non-consecutive offsets in \S+|\s*\d+ is followed by \d+)$")
    problems = [line for line in proc.stderr.splitlines()
                if "log4j" not in line and not gap.match(line)]
    assert not problems, "\n".join(problems[:40])
    return proc.stdout


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=configs)],
                                  operation_timeout=10)
    futures[topic].result(timeout=30)


def alter_topic(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config=configs)
    admin.alter_configs([resource])[resource].result(timeout=30)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> list[int]:
    """Produce in order (one partition, idempotent producer); returns the offsets."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "enable.idempotence": True, "batch.num.messages": 500})
    offsets: list[int] = [0] * len(records)
    errors: list[str] = []

    def done(i: int) -> Callable[[KafkaError | None, object], None]:
        def cb(err: KafkaError | None, msg: object) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                offsets[i] = msg.offset()  # type: ignore[attr-defined]
        return cb

    for i, (key, value) in enumerate(records):
        for _ in range(1000):
            try:
                producer.produce(topic, value=value, key=key, partition=0, on_delivery=done(i))
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    return offsets


def consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from offset 0 to the high watermark, as a consumer sees them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + WAIT_S
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                out.append((msg.offset(), msg.key(), msg.value()))
        assert out and out[-1][0] == high - 1, "did not reach the high watermark"
        return out
    finally:
        consumer.close()


def cleaner_checkpoint(broker: BrokerProcess, topic: str) -> int:
    path = broker.log_dir / CLEANER_CHECKPOINT
    try:
        return read_offset_checkpoint(path).get(StorageTP(topic, 0), -1)
    except (OSError, ValueError):
        return -1


def process_runs(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


def wait_until(what: str, predicate: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def roll_and_wait_cleaned(broker: BrokerProcess, topic: str, segment_ms: int) -> int:
    """Write a marker after ``segment.ms`` (it rolls the active segment) and wait until the
    cleaner has cleaned up to it; returns the marker's offset."""
    time.sleep(segment_ms / 1000 + 0.1)
    (marker,) = produce(broker.bootstrap, topic, [(b"__roll__", b"%f" % time.time())])
    wait_until(f"cleaning up to {marker}", lambda: cleaner_checkpoint(broker, topic) >= marker)
    return marker


def check_compacted(records: list[tuple[int, bytes | None, bytes | None]],
                    live: dict[bytes, bytes], deleted: set[bytes]) -> None:
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets out of order or repeated"
    data = [(k, v) for _, k, v in records if k != b"__roll__"]
    keys = [k for k, _ in data]
    assert len(keys) == len(set(keys)), "a key appears twice after cleaning"
    assert dict(data) == live
    assert not deleted & set(keys)


def test_compaction_keeps_the_latest_value_and_drops_old_tombstones(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({**FAST_CLEANER, "metrics.prometheus.listener": "127.0.0.1:0"})
    topic = "changelog"
    create_topic(broker.bootstrap, topic, **{
        "cleanup.policy": "compact", "segment.bytes": str(512 * 1024), "segment.ms": "1000",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "3000",
        # a log whose dirty part is older than this is cleaned whatever its dirty ratio:
        # what removes the tombstones once the log is mostly clean
        "max.compaction.lag.ms": "1000"})
    rng = random.Random(7)
    updates = [(b"key-%04d" % rng.randrange(1000), b"value-%06d" % i) for i in range(100_000)]
    tombstones: list[tuple[bytes, bytes | None]] = [(b"key-%04d" % k, None) for k in range(100)]
    revived = [(b"key-%04d" % k, b"revived-%d" % k) for k in range(10)]
    produce(broker.bootstrap, topic, updates + tombstones + revived)
    live = {k: v for k, v in updates}
    for k, _ in tombstones:
        live.pop(k, None)
    live.update(revived)
    deleted = {b"key-%04d" % k for k in range(10, 100)}
    roll_and_wait_cleaned(broker, topic, 1000)
    first = consume_all(broker.bootstrap, topic)
    check_compacted([r for r in first if r[2] is not None], live, set())
    assert {k for _, k, v in first if v is None} == deleted  # tombstones kept for now
    cleaned_at = time.monotonic()
    assert "Log cleaner thread 0 cleaned log changelog-0" in broker.stderr_text()
    # the cleaning ran in the cleaner's worker process, a child of the broker
    started = re.search(r"Log cleaner worker 0 started \(pid (\d+), record scan ",
                        broker.stderr_text())
    assert started is not None
    worker_pid = int(started.group(1))
    stat = Path(f"/proc/{worker_pid}/stat").read_text()
    assert stat[stat.rindex(")") + 2 :].split()[1] == str(broker.pid)  # its parent
    # after delete.retention.ms the next cleaning removes the tombstones
    time.sleep(max(0.0, 3.2 - (time.monotonic() - cleaned_at)))
    roll_and_wait_cleaned(broker, topic, 1000)
    check_compacted(consume_all(broker.bootstrap, topic), live, deleted)
    # the cleanings show in the metrics
    metrics = scrape(base_url(broker))
    assert metrics.value("kafka_log_logcleaner_cleanings_total") >= 2
    assert metrics.value("kafka_log_logcleaner_read_bytes_total") > 1_000_000
    assert 0 < metrics.value("kafka_log_logcleaner_cleaner_recopy_percent") <= 100
    assert metrics.value("kafka_log_logcleaner_deadthreadcount") == 0
    assert metrics.value("kafka_log_logcleaner_worker_restarts_total") == 0
    # Kafka's DumpLogSegments reads every cleaned segment and index
    assert broker.stop() == 0
    assert not Path(f"/proc/{worker_pid}").exists()  # the worker ended with the broker
    assert f"Log cleaner worker 0 (pid {worker_pid}) stopped (exited with code 0)" in \
        broker.stderr_text()
    if not JARS.is_dir():
        pytest.skip("needs tools/fetch-kafka-jars")
    part = broker.log_dir / f"{topic}-0"
    files = [f for suffix in (".log", ".index", ".timeindex")
             for f in sorted(part.glob(f"*{suffix}"))]
    out = kafka_dump(files)
    for bad in ("Mismatches", "mismatch", "out of order", "isvalid: false", "Exception"):
        assert bad not in out, bad
    assert out.count("Log starting offset:") == sum(f.suffix == ".log" for f in files)
    assert "baseOffset" in out


def test_produce_without_a_key_to_a_compacted_topic_is_invalid_record(
        broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "keyed", **{"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False,
                         "retries": 0})
    errors: list[KafkaError] = []
    producer.produce("keyed", value=b"no key", partition=0,
                     on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD


STEPS = ["cleaned-written", "swap-renamed", "old-deleted", "swap-done", "checkpointed"]


@pytest.mark.parametrize("step", STEPS)
def test_kill9_at_each_swap_step_loses_and_repeats_no_live_key(
        tmp_path: Path, step: str) -> None:
    broker = BrokerProcess(tmp_path, FAST_CLEANER,
                           env={"MINIKAFKA_TEST_PAUSE_AT": f"cleaner:{step}"})
    broker.start()
    try:
        topic = "swap"
        # written while cleanup.policy=delete, then switched to compact (the cleaner follows
        # the live change): the pause points inside the swap hold the log's lock, so
        # nothing may be producing by then
        configs = {"segment.bytes": str(64 * 1024), "segment.ms": "1000",
                   "min.cleanable.dirty.ratio": "0.01", "retention.ms": "-1"}
        create_topic(broker.bootstrap, topic, **configs, **{"cleanup.policy": "delete"})
        rng = random.Random(step)
        updates = [(b"k%03d" % rng.randrange(300), b"v%05d" % i) for i in range(8000)]
        produce(broker.bootstrap, topic, updates)
        live = dict(updates)
        time.sleep(1.1)
        produce(broker.bootstrap, topic, [(b"__roll__", b"x")])
        alter_topic(broker.bootstrap, topic, **configs, **{"cleanup.policy": "compact"})
        wait_until(f"the cleaner to pause at {step}",
                   lambda: f"test hook: paused at cleaner:{step}" in broker.stderr_text())
        started = re.search(r"Log cleaner worker 0 started \(pid (\d+),", broker.stderr_text())
        assert started is not None
        worker_pid = int(started.group(1))
        broker.env = {}
        broker.kill9()
        # the worker dies with the broker: it must not write into the next broker's log dir
        wait_until(f"the cleaner worker {worker_pid} to end", lambda: not process_runs(worker_pid))
        broker.start()
        after = consume_all(broker.bootstrap, topic)
        offsets = [o for o, _, _ in after]
        assert offsets == sorted(set(offsets))
        assert {k: v for _, k, v in after if k != b"__roll__"} == live  # last value per key
        marker = roll_and_wait_cleaned(broker, topic, 1000)
        assert marker > offsets[-1]
        check_compacted(consume_all(broker.bootstrap, topic), live, set())
        assert not [p.name for p in (broker.log_dir / f"{topic}-0").iterdir()
                    if p.name.endswith((".cleaned", ".swap"))]
    finally:
        broker.kill9()


@pytest.mark.broker_errors(r"Start-up failed: Invalid value 100 for configuration "
                           r"log\.cleaner\.dedupe\.buffer\.size", exit_codes=(1,))
def test_a_dedupe_buffer_too_small_for_one_key_fails_start_up(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, {"log.cleaner.dedupe.buffer.size": "100"})
    with pytest.raises(BrokerStartError) as failed:
        broker.start()
    assert broker.exit_codes == [1]
    assert "log.cleaner.dedupe.buffer.size" in str(failed.value)

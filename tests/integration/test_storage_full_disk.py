"""A full disk loses nothing acknowledged: a real broker on a real 64 MiB tmpfs.

The operator's reproducer: a kafka-python producer with default settings (idempotent,
acks=all, retries until delivery.timeout.ms) writes 1 KiB records until the log dir is
full (the last bytes its 16 KiB batches leave are then filled by a file); producers that do not retry (kafka-python and librdkafka with ``retries=0``) then
see KAFKA_STORAGE_ERROR, and consumers with a group get a retriable error, not a closed
connection; a file placed there beforehand is deleted to free space; the producer's
retries then land, new records are produced and a group consumer commits; the broker is
killed with SIGKILL and restarted. Counted at the end, from the consumer's view and from
the segment files: acknowledged records missing, offsets given twice, unacknowledged
records stored. All must be 0.

A full tmpfs still takes a few bytes: it allocates whole pages, so the unused end of the
last page of each partition's active ``.log`` needs no free space (seen: 3998 bytes in
one partition with ``f_bavail`` 0, where librdkafka's 2-record batch was acknowledged).
Each probe therefore sends every partition more record bytes than that tail holds, so
some must be refused; whatever fits is acknowledged and must be kept like any record.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaStorageError, KafkaTimeoutError

from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.records import iter_batches
from storage.config import LogConfig
from storage.loader import load_log
from storage.naming import TopicPartition as StorageTopicPartition
from tests.integration.broker_process import BrokerProcess
from tests.integration.netclient import RawClient

pytestmark = pytest.mark.timeout(240)

DISK = "64m"
BALLAST_BYTES = 8 * 1024 * 1024
RECORD_BYTES = 1024
TOPIC = "full"
PARTITIONS = 2
CHUNK = 200  # records sent between two waits for their acknowledgements
FILL_DEADLINE_S = 120.0
FULL_BELOW_BYTES = 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 MiB tmpfs, unmounted at teardown (``mount`` needs root, as CI runs)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mnt)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs at {mnt} (this test needs root): {done.stderr}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


class _StorageErrorLines(logging.Handler):
    """Counts kafka-python's "retrying ... KafkaStorageError" warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "KafkaStorageError" in record.getMessage():
            self.count += 1


def _free_bytes(path: Path) -> int:
    usage = os.statvfs(path)
    return usage.f_bavail * usage.f_frsize


def _fill_up(path: Path) -> None:
    """Append to ``path`` until the file system has no free page left (bounded by its
    size); called again, it takes what was freed since."""
    chunk = b"\xff" * 4096
    with open(path, "ab", buffering=0) as f:
        for _ in range(64 * 1024 * 1024 // len(chunk)):
            try:
                f.write(chunk)
            except OSError:  # ENOSPC: full
                break


def _records_overflowing_tail(data_dir: Path, partition: int) -> int:
    """How many RECORD_BYTES records carry more bytes than the active segment of
    ``partition`` can still take without a free page: the allocated but unused end of its
    ``.log``'s last page (tmpfs allocates whole pages, ``st_blocks`` counts them)."""
    active = sorted((data_dir / f"{TOPIC}-{partition}").glob("*.log"))[-1].stat()
    tail = max(0, active.st_blocks * 512 - active.st_size)
    return tail // RECORD_BYTES + 1


def _payload(tag: bytes, i: int) -> bytes:
    head = b"%s-%08d|" % (tag, i)
    return head + b"x" * (RECORD_BYTES - len(head))


def _find_coordinator_error(bootstrap: str) -> int:
    with RawClient(bootstrap) as c:
        _, resp = c.request(FindCoordinatorRequest.API_KEY, 1,
                            FindCoordinatorRequest(key="g-full", key_type=0))
    return int(resp.error_code)


@pytest.mark.broker_errors(r"cannot create __consumer_offsets|creating the partitions of topic "
                           r"__consumer_offsets failed")  # FindCoordinator on a full disk
def test_full_tmpfs_loses_nothing_acknowledged(small_disk: Path, tmp_path: Path) -> None:
    data_dir = small_disk / "data"
    ballast = small_disk / "ballast"
    with open(ballast, "wb") as f:
        f.write(os.urandom(BALLAST_BYTES))
    broker = BrokerProcess(tmp_path, {"log.dirs": str(data_dir),
                                      "log.segment.bytes": str(4 * 1024 * 1024)})
    broker.start()
    sender_lines = _StorageErrorLines()
    logging.getLogger("kafka.producer.sender").addHandler(sender_lines)
    acked: dict[bytes, tuple[int, int]] = {}
    failed: dict[bytes, BaseException] = {}
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        admin.close()

        def ack(key: bytes) -> object:
            return lambda md: acked.__setitem__(key, (md.partition, md.offset))

        def fail(key: bytes) -> object:
            return lambda exc: failed.__setitem__(key, exc)

        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)  # defaults
        # 1. Fill the disk: stop once the producer cannot get its records acknowledged.
        sent = 0
        deadline = time.monotonic() + FILL_DEADLINE_S
        while True:
            assert time.monotonic() < deadline, "the disk never filled up"
            for _ in range(CHUNK):
                key = _payload(b"main", sent)
                producer.send(TOPIC, key).add_callback(ack(key)).add_errback(fail(key))
                sent += 1
            try:
                producer.flush(timeout=5)
            except KafkaTimeoutError:
                # The default producer keeps retrying: the disk is full (not just slow).
                if _free_bytes(small_disk) < FULL_BELOW_BYTES and sender_lines.count > 0:
                    break
        assert sender_lines.count > 0, "the producer never saw KAFKA_STORAGE_ERROR"
        # What the producer's batches no longer fit in may still hold a small record: fill
        # the last bytes as another process would, so the probes below meet a full disk.
        filler = small_disk / "filler"
        _fill_up(filler)

        # 2. While full: producers that do not retry get KAFKA_STORAGE_ERROR per record,
        #    group coordination answers a retriable error instead of closing connections.
        #    Each partition is sent more than its last page's unused end can hold.
        probe = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0,
                              enable_idempotence=False, acks=1)
        probe_futures = [(key, probe.send(TOPIC, key, partition=p))
                         for p in range(PARTITIONS)
                         for i in range(max(10, _records_overflowing_tail(data_dir, p)))
                         for key in [_payload(b"probe%d" % p, i)]]
        for key, future in probe_futures:
            try:
                md = future.get(timeout=30)
            except KafkaStorageError as exc:
                failed[key] = exc
            else:  # room for one more record: acknowledged, so it must be kept
                acked[key] = (md.partition, md.offset)
        probe.close()
        probe_errors = [k for k in failed if k.startswith(b"probe")]
        assert probe_errors, "no probe record got KAFKA_STORAGE_ERROR"
        assert all(isinstance(failed[k], KafkaStorageError) for k in probe_errors)

        reports: list[tuple[int, KafkaError | None]] = []

        def delivered(err: KafkaError | None, msg: Any) -> None:
            reports.append((msg.partition(), err))
            if err is None:
                acked[msg.value()] = (msg.partition(), msg.offset())
            else:
                failed[msg.value()] = RuntimeError(str(err))

        _fill_up(filler)  # a page freed meanwhile is taken again
        rdk = ConfluentProducer({"bootstrap.servers": broker.bootstrap, "retries": 0,
                                 "enable.idempotence": False, "acks": 1})
        for p in range(PARTITIONS):
            for i in range(_records_overflowing_tail(data_dir, p)):
                rdk.produce(TOPIC, _payload(b"rdk%d" % p, i), partition=p,
                            on_delivery=delivered)
        assert rdk.flush(30) == 0
        del rdk  # librdkafka's threads stop with the handle
        for p in range(PARTITIONS):  # every partition refused some, each with the storage error
            errors = [e for q, e in reports if q == p and e is not None]
            assert errors, (p, reports)
            assert all(e.code() == KafkaError.KAFKA_STORAGE_ERROR for e in errors), reports

        # __consumer_offsets cannot be created: COORDINATOR_NOT_AVAILABLE (retriable), an
        # answer and not a closed connection.
        assert _find_coordinator_error(broker.bootstrap) == 15

        # 3. The operator frees space: the default producer's retries land; more records.
        ballast.unlink()
        filler.unlink()
        producer.flush(timeout=60)
        for i in range(1000):
            key = _payload(b"after", i)
            producer.send(TOPIC, key).add_callback(ack(key)).add_errback(fail(key))
        producer.flush(timeout=60)
        producer.close()
        assert not [k for k in failed if not k.startswith((b"probe", b"rdk"))], \
            "a retrying producer lost records"
        group = KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id="g-full",
                              auto_offset_reset="earliest", enable_auto_commit=False,
                              consumer_timeout_ms=20_000)
        assert next(iter(group)) is not None
        group.commit()
        group.close()

        # 4. kill -9 and restart; then read everything back.
        broker.kill9_and_restart()
        consumed = _consume_all(broker.bootstrap)
    finally:
        logging.getLogger("kafka.producer.sender").removeHandler(sender_lines)
        broker.stop()

    stored = _scan_segments(data_dir)
    print(f"\nfull disk: {sent} sent by the default producer, {len(acked)} acknowledged, "
          f"{len(failed)} refused, {sender_lines.count} KafkaStorageError retries logged; "
          f"librdkafka probe: {sum(e is None for _, e in reports)} of {len(reports)} "
          f"acknowledged")
    assert broker.exit_codes[-1] == 0
    missing = [k for k, where in acked.items() if consumed.get(where) != k]
    twice = len(acked) - len(set(acked.values()))
    unacked_stored = [k for k in failed if k in stored.values()]
    assert (len(missing), twice, len(unacked_stored)) == (0, 0, 0), (
        f"{len(missing)} acknowledged records missing, {twice} offsets given twice, "
        f"{len(unacked_stored)} unacknowledged records stored")
    assert stored == consumed  # the files hold what consumers read, nothing else
    assert len(acked) > 40_000  # the disk really was filled: (64 - 8) MiB of 1 KiB records
    assert "Traceback" not in broker.stderr_text()


def _consume_all(bootstrap: str) -> dict[tuple[int, int], bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10_000, fetch_max_bytes=8 * 1024 * 1024)
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(tps)
    out: dict[tuple[int, int], bytes] = {}
    for record in consumer:
        out[(record.partition, record.offset)] = record.value
        if all(consumer.position(tp) >= ends[tp] for tp in tps):
            break
    consumer.close()
    return out


def _scan_segments(data_dir: Path) -> dict[tuple[int, int], bytes]:
    """Every record in the segment files, by (partition, offset); asserts that batches
    follow each other with no offset twice."""
    out: dict[tuple[int, int], bytes] = {}
    for p in range(PARTITIONS):
        lg = load_log(data_dir / f"{TOPIC}-{p}", StorageTopicPartition(TOPIC, p), LogConfig(),
                      clean_shutdown=True)
        expected = 0
        try:
            while expected < lg.log_end_offset:  # one segment per read
                data = lg.read(expected, 1 << 30).read_bytes()
                assert data, (p, expected, lg.log_end_offset)
                for batch in iter_batches(data):
                    assert batch.verify_crc()
                    assert batch.base_offset == expected, (p, batch.base_offset, expected)
                    for record in batch.records():
                        assert record.value is not None
                        out[(p, record.offset)] = bytes(record.value)
                    expected = batch.last_offset + 1
        finally:
            lg.abandon()
    return out

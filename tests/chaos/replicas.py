"""Every replica read back from its broker's log dir, after the brokers have stopped.

Apache Kafka and minikafka keep a partition the same way on disk (``<log.dirs>/<topic>-<p>/``,
segments ``<20-digit base offset>.log`` of magic-2 batches; the high watermarks in
``<log.dirs>/replication-offset-checkpoint``), so one reader serves both. Each segment is
scanned with ``protocol.records.scan_batches`` (CRC checked), in base-offset order; a scan
stops at a torn or corrupt batch, which is noted (a clean stop leaves none). Control
batches are skipped but their offsets still count.

A record of a workload is ``(offset, writer, seq)`` (``history.parse_value``); other records
(none are expected in the harness's topics) are kept as ``writer=None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from protocol.records import scan_batches
from storage.checkpoints import read_offset_checkpoint
from storage.naming import LOG_SUFFIX, REPLICATION_CHECKPOINT, parse_segment_file
from tests.chaos.history import parse_value


@dataclass(frozen=True, slots=True)
class StoredRecord:
    offset: int
    writer: str | None
    seq: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int = 0


@dataclass(slots=True)
class ReplicaLog:
    """One replica of one partition as its broker left it."""

    broker_id: int
    topic: str
    partition: int
    records: list[StoredRecord] = field(default_factory=list)
    high_watermark: int | None = None  # from replication-offset-checkpoint (None: absent)
    log_end_offset: int = 0
    problems: list[str] = field(default_factory=list)

    def committed(self) -> list[StoredRecord]:
        """The records below the high watermark (all of them when it is unknown)."""
        if self.high_watermark is None:
            return self.records
        return [r for r in self.records if r.offset < self.high_watermark]


def _partition_of(dirname: str) -> tuple[str, int] | None:
    topic, sep, number = dirname.rpartition("-")
    if not sep or not number.isdigit() or "." in number:
        return None
    return topic, int(number)


def read_replica(broker_id: int, directory: Path, topic: str, partition: int,
                 high_watermark: int | None) -> ReplicaLog:
    replica = ReplicaLog(broker_id, topic, partition, high_watermark=high_watermark)
    segments = []
    for path in directory.iterdir():
        parsed = parse_segment_file(path.name)
        if parsed is not None and parsed[1] == LOG_SUFFIX:
            segments.append((parsed[0], path))
    segments.sort()
    for base, path in segments:
        data = path.read_bytes()
        scan = scan_batches(data)
        if scan.stop_reason is not None:
            replica.problems.append(f"{path.name}: {scan.stop_reason.name} at byte "
                                    f"{scan.valid_bytes} of {len(data)}: {scan.message}")
        for batch in scan.batches:
            replica.log_end_offset = max(replica.log_end_offset, batch.next_offset)
            if batch.is_control:
                continue
            for record in batch.records():
                value = parse_value(record.value)
                replica.records.append(StoredRecord(
                    record.offset, value[0] if value else None, value[1] if value else -1,
                    batch.partition_leader_epoch, batch.producer_id, batch.producer_epoch))
        if not scan.batches and base > replica.log_end_offset:
            replica.log_end_offset = base
    return replica


def read_broker(broker_id: int, log_dir: Path, topics: set[str]) -> list[ReplicaLog]:
    """Every replica of ``topics`` in one broker's log dir."""
    checkpoint = log_dir / REPLICATION_CHECKPOINT
    hws = {(tp.topic, tp.partition): offset
           for tp, offset in read_offset_checkpoint(checkpoint).items()}
    replicas = []
    for entry in sorted(log_dir.iterdir()):
        parsed = _partition_of(entry.name)
        if parsed is None or not entry.is_dir() or parsed[0] not in topics:
            continue
        replicas.append(read_replica(broker_id, entry, parsed[0], parsed[1], hws.get(parsed)))
    return replicas

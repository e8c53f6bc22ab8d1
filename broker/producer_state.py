"""Idempotent-producer state of one partition (Kafka's ``ProducerStateManager``).

Per producer id the partition keeps its epoch and the metadata of its last
``NUM_BATCHES_TO_RETAIN`` (5) batches (sequence range, offsets, timestamp). A client append
(Kafka's ``ProducerAppendInfo``, origin CLIENT) is checked in this order:

1. Duplicate: same epoch and the same first and last sequence as a retained batch -> the
   append is skipped and the ORIGINAL offsets are answered with NO_ERROR (what Kafka does
   since 0.11 for v3+ produce; DUPLICATE_SEQUENCE_NUMBER is never sent).
2. Epoch older than the partition's epoch for that producer -> INVALID_PRODUCER_EPOCH
   (Kafka replaced PRODUCER_FENCED by this in the produce path in 2.7).
3. Sequence: with a new epoch the first sequence must be 0 (OUT_OF_ORDER_SEQUENCE_NUMBER
   otherwise, unless the producer was unknown); with the same epoch it must follow the last
   one (``last + 1``, or 0 after ``2**31 - 1``). An unknown producer (no state: new, expired, or
   its records deleted) is accepted with any sequence, so UNKNOWN_PRODUCER_ID is not sent.

Follower and recovery appends (``update`` only) are not checked.

Snapshot files, Kafka's own format (``ProducerStateManager`` v1), named by the log end
offset they describe, ``<20-digit offset>.snapshot`` in the partition directory
(big-endian)::

    version            int16   1
    crc                uint32  CRC32C of every byte after this field
    count              int32   number of entries
    entries, 46 bytes each:
      producer_id               int64
      producer_epoch            int16
      last_sequence             int32
      last_offset               int64
      offset_delta              int32   last_offset - first offset of the last batch
      timestamp                 int64   max timestamp of the last batch
      coordinator_epoch         int32   -1 (no transactions)
      current_txn_first_offset  int64   -1 (no transactions)

Only the last batch of each producer is kept in a snapshot (as in Kafka), so after a restart
duplicates of that batch are still detected. Loading takes the newest snapshot at or below
the log end offset, then replays the batch headers after it from the log; with no usable
snapshot the whole log is replayed (headers only: no record is decoded). A snapshot is taken
on clean close; the two newest are kept.

Thread-safety: none; the broker's event loop only. ``take_snapshot`` does blocking IO
(write + fsync + rename): call it from a thread pool or at shutdown. ``load`` reads files
and the log: ``load_states`` runs it in worker threads for partitions not hosted yet
(opened by a LeaderAndIsr, at start-up for every partition), whose state nothing else
touches until they are.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from protocol import checksum
from protocol.errors import ErrorCode
from protocol.records import BatchHeader, RecordBatch
from storage.checkpoints import atomic_write_bytes

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
SNAPSHOTS_TO_KEEP = 2

_SNAP_HEADER = struct.Struct(">hI")  # version, crc
_SNAP_COUNT = struct.Struct(">i")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes
_SNAP_MAX_ENTRIES = 10_000_000  # bound on a corrupt count field
LOAD_THREADS = 4  # partitions whose producer state is loaded at once (load_states)


class ProducerStateError(Exception):
    """An append the producer state refuses; ``error_code`` is what the client gets."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class CorruptSnapshotError(ValueError):
    """A snapshot file that is cut short, has a bad CRC or an unknown version."""


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: wraps past ``2**31 - 1`` to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is retained of one appended batch of a producer."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp_ms: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    last_timestamp_ms: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp_ms: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp_ms))
        self.last_timestamp_ms = timestamp_ms


def snapshot_path(partition_dir: Path, offset: int) -> Path:
    return partition_dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(partition_dir: Path) -> list[tuple[int, Path]]:
    """(offset, path) of every snapshot file in the directory, oldest first."""
    found: list[tuple[int, Path]] = []
    try:
        names = os.listdir(partition_dir)
    except FileNotFoundError:
        return found
    for name in names:
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and stem.isdigit():
            found.append((int(stem), partition_dir / name))
    found.sort()
    return found


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    count = 0
    for e in entries:
        if not e.batches:
            continue
        last = e.batches[-1]
        body += _SNAP_ENTRY.pack(e.producer_id, e.producer_epoch, last.last_seq,
                                 last.last_offset, last.offset_delta, last.timestamp_ms,
                                 e.coordinator_epoch, -1)
        count += 1
    payload = _SNAP_COUNT.pack(count) + bytes(body)
    return _SNAP_HEADER.pack(SNAPSHOT_VERSION, checksum.crc32c(payload)) + payload


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse a snapshot; raises ``CorruptSnapshotError`` on anything unexpected."""
    if len(data) < _SNAP_HEADER.size + _SNAP_COUNT.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header")
    version, crc = _SNAP_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot version {version} at byte 0, expected 1")
    payload = memoryview(data)[_SNAP_HEADER.size:]
    if checksum.crc32c(payload) != crc:
        raise CorruptSnapshotError("snapshot CRC mismatch")
    (count,) = _SNAP_COUNT.unpack_from(payload, 0)
    if count < 0 or count > _SNAP_MAX_ENTRIES or len(payload) != 4 + count * _SNAP_ENTRY.size:
        raise CorruptSnapshotError(f"snapshot entry count {count} does not fit {len(data)} bytes")
    entries: list[ProducerStateEntry] = []
    for pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, _txn in _SNAP_ENTRY.iter_unpack(
        payload[4:]
    ):
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coord_epoch, last_timestamp_ms=ts)
        entry.batches.append(BatchMetadata(last_seq, last_offset, delta, ts))
        entries.append(entry)
    return entries


class ProducerStateManager:
    """The producer state of one partition. See the module docstring."""

    def __init__(self, partition_dir: Path, name: str = "") -> None:
        self.partition_dir = Path(partition_dir)
        self.name = name or self.partition_dir.name
        self.producers: dict[int, ProducerStateEntry] = {}
        self.snapshot_offset = -1  # offset of the newest snapshot written or loaded

    def __len__(self) -> int:
        return len(self.producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # ------------------------------------------------------------ client appends

    def check_append(self, batch: RecordBatch | BatchHeader) -> BatchMetadata | None:
        """Validate a client batch (or its header, already read) before it is appended.

        Returns the retained metadata of the original batch when ``batch`` is a duplicate
        (the caller answers with its offsets and appends nothing), None when the batch may
        be appended. Raises ``ProducerStateError`` with Kafka's error code otherwise.
        """
        pid = batch.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        epoch = batch.producer_epoch
        first_seq = batch.base_sequence
        last_seq = increment_sequence(first_seq, batch.last_offset_delta)
        current = self.producers.get(pid)
        if current is None:
            return None  # unknown producer: any sequence is accepted (Kafka 2.5+)
        duplicate = current.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return duplicate
        if epoch < current.producer_epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch of producer {pid} in {self.name} is {epoch}, "
                f"older than the last seen epoch {current.producer_epoch}",
            )
        if epoch != current.producer_epoch:
            if first_seq != 0 and current.producer_epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"invalid sequence {first_seq} for new epoch {epoch} of producer {pid} "
                    f"in {self.name} (current epoch {current.producer_epoch})",
                )
        elif current.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(
            current.last_seq, first_seq
        ):
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence {first_seq} for producer {pid} in {self.name}: "
                f"last sequence is {current.last_seq}",
            )
        return None

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp_ms: int) -> None:
        """Record an appended batch (client, follower or recovery replay)."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        del first_seq  # implied by last_seq and the offset delta
        entry.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, timestamp_ms)

    def update_from_batch(self, batch: RecordBatch) -> None:
        """Record an appended batch from its (offset-assigned) header."""
        pid = batch.producer_id
        if pid == NO_PRODUCER_ID or batch.is_control:
            return
        first_seq = batch.base_sequence
        self.update(pid, batch.producer_epoch, first_seq,
                    increment_sequence(first_seq, batch.last_offset_delta),
                    batch.base_offset, batch.last_offset, batch.max_timestamp)

    # ------------------------------------------------------------ housekeeping

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers silent for ``producer.id.expiration.ms``; returns how many."""
        expired = [pid for pid, e in self.producers.items()
                   if now_ms - e.last_timestamp_ms >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def remove_before(self, log_start_offset: int) -> int:
        """Forget producers whose last batch lies below the new log start offset (their
        data was deleted: retention, DeleteRecords); returns how many."""
        gone = [pid for pid, e in self.producers.items() if e.last_offset < log_start_offset]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def truncate_fully(self) -> None:
        """Forget everything (the log was emptied or replaced)."""
        self.producers.clear()
        for _, path in list_snapshots(self.partition_dir):
            path.unlink(missing_ok=True)
        self.snapshot_offset = -1

    # ------------------------------------------------------------ snapshots

    def take_snapshot(self, log_end_offset: int) -> Path:
        """Write ``<log_end_offset>.snapshot`` atomically; keep the two newest. Blocking IO."""
        return self.write_snapshot(log_end_offset, self.snapshot_bytes())

    def snapshot_bytes(self) -> bytes:
        """The current state encoded (cheap, in memory: on the event loop)."""
        return encode_snapshot(self.producers.values())

    def write_snapshot(self, log_end_offset: int, data: bytes, *, sync_dir: bool = True) -> Path:
        """Write encoded state as ``<log_end_offset>.snapshot`` (blocking: a thread pool);
        one writer per partition at a time. ``sync_dir=False``: the caller has the
        partition directory fsynced afterwards (the file itself is fsynced)."""
        path = snapshot_path(self.partition_dir, log_end_offset)
        # A background snapshot and the shutdown's may write the same offset at once: each
        # writes a temp file of its own, and the last rename wins (same state, same bytes).
        tmp_name = f"{path.name}.{threading.get_ident()}.tmp"
        atomic_write_bytes(path, data, tmp_name=tmp_name,  # OSError: temp file removed
                           sync_dir=sync_dir)
        self.snapshot_offset = max(self.snapshot_offset, log_end_offset)
        snapshots = list_snapshots(self.partition_dir)
        for offset, old in snapshots[:-SNAPSHOTS_TO_KEEP]:
            if offset != log_end_offset:
                old.unlink(missing_ok=True)
        return path

    def load(self, log_start_offset: int, log_end_offset: int,
             batches_from: Callable[[int], Iterable[RecordBatch]]) -> int:
        """Rebuild the state: newest valid snapshot <= LEO, then replay the log after it.

        ``batches_from(offset)`` yields the log's batches from the one containing ``offset``
        to the end. Snapshots above the log end (a truncated log) or unreadable are deleted.
        Returns the number of batches replayed.
        """
        self.producers.clear()
        self.snapshot_offset = -1
        start = log_start_offset
        for offset, path in reversed(list_snapshots(self.partition_dir)):
            if offset > log_end_offset:
                log.info("%s: deleting producer snapshot %s above the log end %d",
                         self.name, path.name, log_end_offset)
                path.unlink(missing_ok=True)
                continue
            try:
                entries = decode_snapshot(path.read_bytes())
            except (OSError, CorruptSnapshotError) as exc:
                log.warning("%s: deleting unreadable producer snapshot %s: %s",
                            self.name, path.name, exc)
                path.unlink(missing_ok=True)
                continue
            for entry in entries:
                if entry.last_offset >= log_start_offset:
                    self.producers[entry.producer_id] = entry
            self.snapshot_offset = offset
            start = max(offset, log_start_offset)
            break
        replayed = 0
        if start < log_end_offset:
            for batch in batches_from(start):
                if batch.last_offset < start:
                    continue
                if batch.base_offset >= log_end_offset:
                    break
                self.update_from_batch(batch)
                replayed += 1
        return replayed


class LoadJob(NamedTuple):
    """One partition's ``ProducerStateManager.load``, its log's offsets read on the loop."""

    state: ProducerStateManager
    log_start_offset: int
    log_end_offset: int
    batches_from: Callable[[int], Iterable[RecordBatch]]


def _load(jobs: Sequence[LoadJob]) -> list[int | Exception]:
    out: list[int | Exception] = []
    for job in jobs:
        try:
            out.append(job.state.load(job.log_start_offset, job.log_end_offset,
                                      job.batches_from))
        except Exception as exc:  # handed back with the job: the caller raises it in order
            out.append(exc)
    return out


def load_states(jobs: Sequence[LoadJob]) -> list[int | Exception]:
    """Load every job's state in ``LOAD_THREADS`` threads, each a share of the jobs one
    after the other (blocking: call it from a worker thread; one task a thread, not one a
    job, which cost more in hand-overs than the loads). Returns, job by job, the batches
    replayed or the exception ``load`` raised. A snapshot read or a log replay waits on
    the disk without the GIL; the parsing holds it, so a small pool leaves the event loop
    its turns."""
    if not jobs:
        return []
    threads = min(LOAD_THREADS, len(jobs))
    shares = [jobs[i::threads] for i in range(threads)]
    with ThreadPoolExecutor(max_workers=threads,
                            thread_name_prefix="producer-state-load") as pool:
        loaded = list(pool.map(_load, shares))
    out: list[int | Exception] = [0] * len(jobs)
    for i, results in enumerate(loaded):
        out[i::threads] = results
    return out

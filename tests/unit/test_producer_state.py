"""broker.producer_state: Kafka's sequence/epoch rules, duplicates, snapshots and replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.producer_state import (
    INT32_MAX,
    CorruptSnapshotError,
    ProducerStateError,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    increment_sequence,
    list_snapshots,
)
from protocol.errors import ErrorCode
from protocol.records import NewRecord, RecordBatch, build_batch

pytestmark = pytest.mark.timeout(10)


def batch(pid: int, epoch: int, seq: int, n: int = 1, base_offset: int = 0) -> RecordBatch:
    recs = [NewRecord(b"k", b"v%d" % i) for i in range(n)]
    return RecordBatch(build_batch(recs, producer_id=pid, producer_epoch=epoch,
                                   base_sequence=seq, base_offset=base_offset))


class FakeLog:
    """A list of appended batches standing in for the offsets a log assigns."""

    def __init__(self) -> None:
        self.batches: list[RecordBatch] = []
        self.end = 0

    def append(self, b: RecordBatch) -> RecordBatch:
        data = bytearray(b.buffer)
        placed = RecordBatch(data)
        placed.set_base_offset(self.end)
        self.end = placed.next_offset
        self.batches.append(placed)
        return placed

    def batches_from(self, offset: int) -> list[RecordBatch]:
        return [b for b in self.batches if b.last_offset >= offset]


def append(psm: ProducerStateManager, flog: FakeLog, b: RecordBatch) -> tuple[int, int]:
    dup = psm.check_append(b)
    if dup is not None:
        return dup.first_offset, dup.last_offset
    placed = flog.append(b)
    psm.update_from_batch(placed)
    return placed.base_offset, placed.last_offset


def test_in_order_then_duplicate_returns_original_offsets(tmp_path: Path) -> None:
    psm, flog = ProducerStateManager(tmp_path), FakeLog()
    assert append(psm, flog, batch(7, 0, 0, n=3)) == (0, 2)
    assert append(psm, flog, batch(7, 0, 3, n=2)) == (3, 4)
    # resend of the first batch: original offsets, nothing appended
    assert append(psm, flog, batch(7, 0, 0, n=3)) == (0, 2)
    assert flog.end == 5


def test_only_last_five_batches_detected_as_duplicates(tmp_path: Path) -> None:
    psm, flog = ProducerStateManager(tmp_path), FakeLog()
    for seq in range(6):
        append(psm, flog, batch(7, 0, seq))
    assert psm.check_append(batch(7, 0, 1)) is not None  # batches 1..5 retained
    with pytest.raises(ProducerStateError) as exc:
        psm.check_append(batch(7, 0, 0))
    assert exc.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_gap_in_sequence_is_out_of_order(tmp_path: Path) -> None:
    psm, flog = ProducerStateManager(tmp_path), FakeLog()
    append(psm, flog, batch(7, 0, 0, n=2))
    with pytest.raises(ProducerStateError) as exc:
        psm.check_append(batch(7, 0, 5))
    assert exc.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_unknown_producer_accepts_any_sequence(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    assert psm.check_append(batch(9, 3, 42)) is None


def test_old_epoch_is_invalid_producer_epoch(tmp_path: Path) -> None:
    psm, flog = ProducerStateManager(tmp_path), FakeLog()
    append(psm, flog, batch(7, 2, 0))
    with pytest.raises(ProducerStateError) as exc:
        psm.check_append(batch(7, 1, 1))
    assert exc.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_new_epoch_must_start_at_zero(tmp_path: Path) -> None:
    psm, flog = ProducerStateManager(tmp_path), FakeLog()
    append(psm, flog, batch(7, 0, 0))
    with pytest.raises(ProducerStateError) as exc:
        psm.check_append(batch(7, 1, 4))
    assert exc.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(psm, flog, batch(7, 1, 0)) == (1, 1)
    # the old epoch's batches are gone: its resend is now a stale epoch
    with pytest.raises(ProducerStateError):
        psm.check_append(batch(7, 0, 0))


def test_sequence_wraps_after_int32_max(tmp_path: Path) -> None:
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    psm, flog = ProducerStateManager(tmp_path), FakeLog()
    append(psm, flog, batch(7, 0, INT32_MAX - 1, n=2))  # seqs MAX-1, MAX
    assert psm.check_append(batch(7, 0, 0)) is None


def test_snapshot_round_trip_and_replay(tmp_path: Path) -> None:
    psm, flog = ProducerStateManager(tmp_path), FakeLog()
    append(psm, flog, batch(7, 0, 0, n=2))
    append(psm, flog, batch(8, 1, 0))
    psm.take_snapshot(flog.end)
    append(psm, flog, batch(7, 0, 2))  # after the snapshot: must come back by replay

    fresh = ProducerStateManager(tmp_path)
    replayed = fresh.load(0, flog.end, flog.batches_from)
    assert replayed == 1
    assert fresh.producers[7].last_seq == 2 and fresh.producers[8].producer_epoch == 1
    assert fresh.check_append(batch(7, 0, 2)) is not None  # duplicate of the replayed batch
    assert fresh.check_append(batch(7, 0, 3)) is None


def test_load_without_snapshot_replays_whole_log(tmp_path: Path) -> None:
    psm, flog = ProducerStateManager(tmp_path), FakeLog()
    for seq in range(3):
        append(psm, flog, batch(7, 0, seq))
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, flog.end, flog.batches_from) == 3
    assert fresh.producers[7].last_seq == 2


def test_corrupt_and_future_snapshots_are_deleted(tmp_path: Path) -> None:
    psm, flog = ProducerStateManager(tmp_path), FakeLog()
    append(psm, flog, batch(7, 0, 0))
    psm.take_snapshot(1)
    bad = tmp_path / f"{1:020d}.snapshot"
    data = bytearray(bad.read_bytes())
    data[-1] ^= 0xFF
    bad.write_bytes(bytes(data))
    (tmp_path / f"{99:020d}.snapshot").write_bytes(encode_snapshot([]))
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, flog.end, flog.batches_from) == 1  # rebuilt from the log
    assert list_snapshots(tmp_path) == []
    assert fresh.producers[7].last_seq == 0


def test_decode_snapshot_rejects_garbage() -> None:
    for data in (b"", b"\x00\x01", b"\x00\x02" + b"\x00" * 8, b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"):
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(data)


def test_only_two_newest_snapshots_kept(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    for off in (1, 2, 3, 4):
        psm.take_snapshot(off)
    assert [o for o, _ in list_snapshots(tmp_path)] == [3, 4]


def test_expiration(tmp_path: Path) -> None:
    psm, flog = ProducerStateManager(tmp_path), FakeLog()
    append(psm, flog, batch(7, 0, 0))
    ts = psm.producers[7].last_timestamp_ms
    assert psm.remove_expired(ts + 10, 1000) == 0
    assert psm.remove_expired(ts + 1000, 1000) == 1
    assert psm.check_append(batch(7, 0, 50)) is None


def test_remove_before_log_start(tmp_path: Path) -> None:
    psm, flog = ProducerStateManager(tmp_path), FakeLog()
    append(psm, flog, batch(7, 0, 0, n=3))  # offsets 0-2
    append(psm, flog, batch(8, 0, 0, n=3))  # offsets 3-5
    assert psm.remove_before(3) == 1
    assert sorted(psm.producers) == [8]
    assert psm.check_append(batch(7, 0, 40)) is None  # unknown again: any sequence

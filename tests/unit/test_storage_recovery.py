"""Recovery after unclean stops, crash safety under random cuts and bit flips."""

from __future__ import annotations

import logging
import random
import shutil
from pathlib import Path

import pytest

from protocol.compression import CompressionType
from protocol.records import NewRecord, build_batch, iter_batches, scan_batches
from storage.config import LogConfig
from storage.loader import load_log
from storage.log import Log
from storage.naming import TopicPartition

pytestmark = pytest.mark.timeout(120)
TP = TopicPartition("t", 0)
CFG = LogConfig.from_properties({"index.interval.bytes": "256", "segment.bytes": "1000000"})


def make_batch(rng: random.Random, i: int) -> bytes:
    n = rng.randint(1, 5)
    codec = rng.choice([CompressionType.NONE, CompressionType.NONE, CompressionType.LZ4,
                        CompressionType.ZSTD])
    recs = [NewRecord(b"k%d" % i, rng.randbytes(rng.randint(0, 300)), timestamp_ms=10_000 + i)
            for _ in range(n)]
    return build_batch(recs, compression=codec)


def write_log(d: Path, batches: int, seed: int = 1) -> tuple[Log, list[bytes]]:
    rng = random.Random(seed)
    lg = load_log(d, TP, CFG, clean_shutdown=True)
    for i in range(batches):
        lg.append(make_batch(rng, i), leader_epoch=i // 10)
    raw = list(iter_batches(lg.active_segment.log_path.read_bytes()))
    return lg, [bytes(b.buffer) for b in raw]


def test_unclean_restart_keeps_all_whole_batches_and_rebuilds_indexes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "t-0"
    lg, originals = write_log(d, 60)
    leo = lg.log_end_offset
    lg.abandon()  # index files stay preallocated, nothing flushed or trimmed
    assert (d / "00000000000000000000.index").stat().st_size == 10 * 1024 * 1024
    caplog.set_level(logging.INFO)
    lg2 = load_log(d, TP, CFG, recovery_point=0, clean_shutdown=False)
    assert "unclean shutdown" in caplog.text
    assert lg2.log_end_offset == leo
    assert [e.epoch for e in lg2.leader_epoch_cache.entries()] == [0, 1, 2, 3, 4, 5]
    for b in originals:  # every batch readable through the rebuilt index
        got = next(iter_batches(lg2.read(next(iter_batches(b)).base_offset, 1).read_bytes()))
        assert bytes(got.buffer) == b
    lg2.close()


def test_torn_tail_is_truncated_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "t-0"
    lg, originals = write_log(d, 20)
    lg.abandon()
    seg = d / "00000000000000000000.log"
    keep = sum(len(b) for b in originals[:15])
    with open(seg, "r+b") as f:
        f.truncate(keep + 30)  # 30 bytes of the 16th batch survive
    caplog.set_level(logging.WARNING)
    lg2 = load_log(d, TP, CFG, clean_shutdown=False)
    expected_leo = next(iter_batches(originals[14])).last_offset + 1
    assert lg2.log_end_offset == expected_leo
    assert seg.stat().st_size == keep
    assert "00000000000000000000.log" in caplog.text and f"offset {expected_leo}" in caplog.text
    assert lg2.append(make_batch(random.Random(5), 99), leader_epoch=9).first_offset == expected_leo
    lg2.close()


def test_clean_restart_scans_nothing(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg, originals = write_log(d, 30)
    leo = lg.log_end_offset
    lg.close()
    # Damage the middle of an early batch: a scan would find it, a clean start must not look.
    seg = d / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[len(originals[0]) + 40] ^= 0xFF
    seg.write_bytes(bytes(data))
    clean = load_log(d, TP, CFG, recovery_point=leo, clean_shutdown=True)
    assert clean.log_end_offset == leo and seg.stat().st_size == len(data)
    clean.abandon()
    unclean = load_log(d, TP, CFG, recovery_point=0, clean_shutdown=False)
    assert unclean.log_end_offset == next(iter_batches(originals[0])).last_offset + 1
    unclean.close()


def test_recovery_starts_at_the_recovery_point_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    cfg = LogConfig.from_properties({"segment.bytes": "3000", "index.interval.bytes": "256"})
    lg = load_log(d, TP, cfg, clean_shutdown=True)
    rng = random.Random(3)
    for i in range(40):
        lg.append(make_batch(rng, i), leader_epoch=0)
    bases = lg.segment_base_offsets
    leo = lg.log_end_offset
    lg.abandon()
    # Corrupt the first segment: it is below the recovery point, so it is not scanned.
    first = d / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    data[200] ^= 0xFF
    first.write_bytes(bytes(data))
    lg2 = load_log(d, TP, cfg, recovery_point=bases[-2], clean_shutdown=False)
    assert lg2.log_end_offset == leo and lg2.segment_base_offsets == bases
    lg2.close()


@pytest.mark.parametrize("seed", range(4))
def test_crash_safety_random_cuts_and_flips(tmp_path: Path, seed: int) -> None:
    """For random cut points and random flipped bytes in the tail, recovery keeps the
    longest prefix of intact batches (a batch whose only damage is in its
    partitionLeaderEpoch field, which Kafka's format leaves outside the CRC, may be kept:
    nothing can tell it from a real epoch), and never a batch with other damage."""
    src = tmp_path / "src" / "t-0"
    lg, originals = write_log(src, 80, seed=seed)
    lg.abandon()
    total = sum(len(b) for b in originals)
    starts = [0]
    for b in originals:
        starts.append(starts[-1] + len(b))
    rng = random.Random(seed * 1000 + 7)
    for trial in range(50):
        work = tmp_path / f"w{trial}" / "t-0"
        work.mkdir(parents=True)
        seg = work / "00000000000000000000.log"
        data = bytearray((src / seg.name).read_bytes())
        cut = rng.randint(total // 2, total)
        del data[cut:]
        flips = rng.randint(0, 3)
        for _ in range(flips):
            if cut > total // 2:
                pos = rng.randint(total // 2, cut - 1)
                data[pos] ^= 1 << rng.randint(0, 7)
        seg.write_bytes(bytes(data))
        recovered = load_log(work, TP, CFG, clean_shutdown=False)
        kept = seg.read_bytes()
        # intact prefix: whole batches inside the cut whose bytes are unchanged
        intact = 0
        for k, b in enumerate(originals):
            if starts[k + 1] > cut or bytes(data[starts[k] : starts[k + 1]]) != b:
                break
            intact += 1
        assert len(kept) >= starts[intact], f"trial {trial}: lost intact batches"
        assert kept[: starts[intact]] == b"".join(originals[:intact])
        result = scan_batches(kept)
        assert result.stop_reason is None and result.valid_bytes == len(kept)
        for k in range(intact, len(result.batches)):
            got = bytes(result.batches[k].buffer)
            orig = originals[k]
            assert len(got) == len(orig)
            assert got[:12] == orig[:12] and got[16:] == orig[16:], (
                f"trial {trial}: batch {k} kept with damage outside the epoch field"
            )
        expected_leo = result.batches[-1].last_offset + 1 if result.batches else 0
        assert recovered.log_end_offset == expected_leo
        # reads at every kept offset return a whole, CRC-valid batch holding it
        for kept_batch in result.batches[:: max(1, len(result.batches) // 10)]:
            start = kept_batch.base_offset
            got_batch = next(iter_batches(recovered.read(start, 1).read_bytes()))
            assert got_batch.verify_crc() and got_batch.base_offset == start
        recovered.abandon()  # no fsyncs: this copy is thrown away
        shutil.rmtree(work.parent)

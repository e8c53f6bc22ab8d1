"""The log cleaner on real files: latest value per key, offsets kept, tombstones and their
delete horizon, producer batches, grouping, dirty-ratio choice, and crash recovery of a
segment swap cut at every step."""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.compression import CompressionType
from protocol.records import (
    ATTR_DELETE_HORIZON,
    NewRecord,
    RecordBatch,
    build_batch,
    iter_batches,
    scan_batches,
)
from storage.cleaner import Cleaner, CleanerConfig, LogCleaner, PartitionState, Throttler
from storage.cleaner_filter import LastRecord
from storage.cleaner_manager import CleanerManager, cleanable_offsets
from storage.config import LogConfig
from storage.loader import load_log
from storage.log import Log
from storage.naming import TopicPartition

pytestmark = pytest.mark.timeout(120)
TP = TopicPartition("t", 0)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "8192", "index.interval.bytes": "512",
           "min.cleanable.dirty.ratio": "0.01"}


class Clock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def open_log(d: Path, clock: Clock, **props: str) -> Log:
    config = LogConfig.from_properties({**COMPACT, **props})
    return load_log(d / "t-0", TP, config, clean_shutdown=True, clock_ms=clock)


def reopen(d: Path, clock: Clock, **props: str) -> Log:
    """Load the log again after an unclean stop (as after kill -9)."""
    config = LogConfig.from_properties({**COMPACT, **props})
    return load_log(d / "t-0", TP, config, clean_shutdown=False, cleaned=True, clock_ms=clock)


def write(lg: Log, key: bytes, value: bytes | None, ts: int, **kw: object) -> int:
    info = lg.append(build_batch([NewRecord(key, value, timestamp_ms=ts)], **kw),  # type: ignore[arg-type]
                     leader_epoch=0)
    return int(info.first_offset)


def all_bytes(lg: Log) -> bytes:
    """Every batch from the log start to the end, read as a consumer reads (segment by
    segment)."""
    out = bytearray()
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 30).read_bytes()
        if not data:
            break
        out += data
        offset = list(iter_batches(data))[-1].next_offset
    return bytes(out)


def records_of(lg: Log) -> list[tuple[int, bytes | None, bytes | None, int]]:
    data = all_bytes(lg)
    assert scan_batches(data).stop_reason is None  # whole batches, CRCs good
    return [(r.offset, r.key, r.value, r.timestamp)
            for b in iter_batches(data) for r in b.records()]


def make_cleaner(lg: Log, clock: Clock, **kw: object) -> tuple[LogCleaner, Cleaner]:
    config = CleanerConfig(dedupe_buffer_size=kw.pop("buffer", 8 << 20), backoff_ms=10)  # type: ignore[arg-type]
    manager = CleanerManager(lg.dir.parent, lambda: {TP: lg})
    states: Callable[..., dict[TopicPartition, PartitionState]] = lambda tps: {  # noqa: E731
        TP: PartitionState(lg.log_end_offset, kw.get("producers", {}))}  # type: ignore[arg-type]
    cleaner = LogCleaner(config, manager, partition_states=states, clock_ms=clock)
    worker = Cleaner(0, config, Throttler(float("inf"), cleaner._stop), cleaner._check_done)
    return cleaner, worker


def fill(lg: Log, clock: Clock, n: int, keys: int, seed: int = 1) -> dict[bytes, tuple[int, bytes]]:
    """``n`` single-record updates over ``keys`` keys; returns key -> (offset, value)."""
    rnd = random.Random(seed)
    latest: dict[bytes, tuple[int, bytes]] = {}
    for i in range(n):
        key = b"key-%d" % rnd.randrange(keys)
        value = b"value-%d-" % i + b"x" * rnd.randrange(40)
        latest[key] = (write(lg, key, value, clock.now_ms + i), value)
    return latest


def test_cleaning_keeps_the_latest_value_of_every_key_at_its_offset(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock)
    latest = fill(lg, clock, 3000, 100)
    lg.roll()
    size_before = lg.size_bytes
    leo = lg.log_end_offset
    cleaner, worker = make_cleaner(lg, clock)
    assert cleaner.clean_filthiest(worker)
    got = records_of(lg)
    assert [(o, k, v) for o, k, v, _ in got] == sorted(
        (off, k, v) for k, (off, v) in latest.items())
    assert lg.log_end_offset == leo
    assert lg.size_bytes < size_before / 5
    assert cleaner.manager.checkpoints()[TP] == leo  # the next cleaning starts at the end
    assert cleaner.totals.cleanings == 1 and cleaner.totals.bytes_written > 0
    assert not cleaner.clean_filthiest(worker)  # nothing dirty left
    lg.close()
    # the cleaned log reopens (clean and unclean) with the same contents
    for clean in (True, False):
        again = load_log(tmp_path / "t-0", TP, lg.config, clean_shutdown=clean, cleaned=True,
                         clock_ms=clock)
        assert records_of(again) == got
        again.close()


def test_tombstones_get_a_delete_horizon_then_go(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, **{"delete.retention.ms": "1000"})
    for i in range(200):
        write(lg, b"k%d" % (i % 20), b"v%d" % i, clock.now_ms)
    for k in range(10):
        write(lg, b"k%d" % k, None, clock.now_ms)  # tombstones for k0..k9
    lg.roll()
    cleaner, worker = make_cleaner(lg, clock)
    assert cleaner.clean_filthiest(worker)
    got = records_of(lg)
    assert sorted(k for _, k, v, _ in got if v is None) == sorted(b"k%d" % k for k in range(10))
    data = all_bytes(lg)
    horizons = {b.base_timestamp for b in iter_batches(data) if b.attributes & ATTR_DELETE_HORIZON}
    assert horizons == {clock.now_ms + 1000}
    # record timestamps survive the new base timestamp
    assert {ts for _, _, v, ts in got if v is None} == {clock.now_ms}
    # past the horizon, the next cleaning drops them
    clock.now_ms += 1001
    write(lg, b"other", b"x", clock.now_ms)
    lg.roll()
    assert cleaner.clean_filthiest(worker)
    got = records_of(lg)
    assert not [k for _, k, v, _ in got if v is None]
    assert sorted(k for _, k, _, _ in got) == sorted([b"k%d" % k for k in range(10, 20)] + [b"other"])
    lg.close()


def test_headers_compression_and_producer_fields_survive_a_rewrite(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock)
    recs = [NewRecord(b"a", b"old", [("h", b"1")], clock.now_ms),
            NewRecord(b"b", b"keep", [("h2", None)], clock.now_ms + 5),
            NewRecord(b"c", b"keep-c", (), clock.now_ms + 9)]
    lg.append(build_batch(recs, compression=CompressionType.LZ4, producer_id=7,
                          producer_epoch=2, base_sequence=0), leader_epoch=3)
    write(lg, b"a", b"new", clock.now_ms + 20)
    lg.roll()
    cleaner, worker = make_cleaner(lg, clock)
    assert cleaner.clean_filthiest(worker)
    data = all_bytes(lg)
    first = next(iter_batches(data))
    assert (first.base_offset, first.last_offset, first.records_count) == (0, 2, 2)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 2, 0)
    assert first.partition_leader_epoch == 3
    assert first.compression is CompressionType.LZ4
    assert first.base_timestamp == clock.now_ms + 5  # the first kept record's
    assert first.max_timestamp == clock.now_ms + 9
    rs = list(first.records())
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in rs] == [
        (1, b"b", b"keep", [("h2", None)], clock.now_ms + 5),
        (2, b"c", b"keep-c", [], clock.now_ms + 9)]
    lg.close()


def test_last_batch_of_an_active_producer_stays_as_an_empty_batch(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock)
    write(lg, b"k", b"v1", clock.now_ms, producer_id=42, producer_epoch=0, base_sequence=0)
    write(lg, b"k", b"v2", clock.now_ms, producer_id=43, producer_epoch=0, base_sequence=0)
    write(lg, b"k", b"v3", clock.now_ms)
    write(lg, b"z", b"end", clock.now_ms)
    lg.roll()
    cleaner, worker = make_cleaner(lg, clock, producers={42: LastRecord(0, 0)})
    assert cleaner.clean_filthiest(worker)
    batches = list(iter_batches(all_bytes(lg)))
    # pid 42 (active) keeps an empty batch; pid 43 (expired) goes; the last batch of the
    # round is kept too
    assert [(b.base_offset, b.records_count, b.producer_id) for b in batches] == [
        (0, 0, 42), (2, 1, -1), (3, 1, -1)]
    empty = batches[0]
    assert empty.verify_crc() and empty.size_bytes == 61 and empty.base_sequence == 0
    lg.close()


def test_the_active_segment_and_min_compaction_lag_are_not_cleaned(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, **{"min.compaction.lag.ms": "60000"})
    for i in range(50):
        write(lg, b"k", b"v%d" % i, clock.now_ms)
    cleaner, worker = make_cleaner(lg, clock)
    assert not cleaner.clean_filthiest(worker)  # only the active segment holds data
    lg.roll()
    assert not cleaner.clean_filthiest(worker)  # rolled, but newer than the lag
    clock.now_ms += 60_001
    assert cleaner.clean_filthiest(worker)
    assert [v for _, _, v, _ in records_of(lg)] == [b"v49"]
    lg.close()


def test_checkpoint_reset_rules() -> None:
    from storage.log import CleaningView
    view = CleaningView([], 500, 0, 600, 100, 0, LogConfig.from_properties(COMPACT))
    assert cleanable_offsets(view, None, 600, 0) == (100, 500, False)
    assert cleanable_offsets(view, 50, 600, 0) == (100, 500, True)  # below the log start
    assert cleanable_offsets(view, 700, 600, 0) == (100, 500, True)  # past the log end
    assert cleanable_offsets(view, 200, 300, 0) == (200, 300, False)  # the LSO bounds it


def test_groups_respect_segment_bytes_and_many_segments_shrink(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, **{"segment.bytes": "4096"})
    latest = fill(lg, clock, 4000, 30)
    lg.roll()
    before = len(lg.segment_base_offsets)
    cleaner, worker = make_cleaner(lg, clock)
    assert cleaner.clean_filthiest(worker)
    # the first cleaning groups by the old sizes (full segments: one each); the next one
    # merges the small cleaned segments, at most segment.bytes a group
    assert len(lg.segment_base_offsets) == before
    for i in range(100):
        write(lg, b"key-%d" % (i % 30), b"again-%d" % i, clock.now_ms)
        latest[b"key-%d" % (i % 30)] = (lg.log_end_offset - 1, b"again-%d" % i)
    lg.roll()
    assert cleaner.clean_filthiest(worker)
    assert len(lg.segment_base_offsets) < 5
    assert all(os.path.getsize(p) <= 4096 for p in (tmp_path / "t-0").glob("*.log"))
    assert [(k, v) for _, k, v, _ in records_of(lg)] == [
        (k, v) for k, (_, v) in sorted(latest.items(), key=lambda kv: kv[1][0])]
    lg.close()


def test_a_small_offset_map_cleans_in_several_rounds(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock)
    latest = fill(lg, clock, 2000, 400)
    lg.roll()
    cleaner, worker = make_cleaner(lg, clock, buffer=136 * 60)  # ~50 keys a round
    rounds = 0
    while cleaner.clean_filthiest(worker) and rounds < 100:
        rounds += 1
    assert rounds > 2
    assert sorted((k, v) for _, k, v, _ in records_of(lg)) == sorted(
        (k, v) for k, (_, v) in latest.items())
    lg.close()


STEPS = ["cleaned-written", "swap-renamed", "old-deleted", "swap-done"]


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_each_swap_step_recovers_every_live_key(tmp_path: Path, step: str) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, **{"segment.bytes": "4096"})
    latest = fill(lg, clock, 1500, 40)
    lg.roll()
    cleaner, worker = make_cleaner(lg, clock)

    crash_dir = tmp_path / "crash"

    def crash_at(name: str) -> None:
        """What a kill -9 here leaves on disk: the files as they are now (the page cache
        survives the process), copied aside while the cleaner waits."""
        if name == f"cleaner:{step}" and not crash_dir.exists():
            shutil.copytree(tmp_path / "t-0", crash_dir / "t-0")

    import storage.cleaner as cleaner_module

    original = cleaner_module.pause_point
    cleaner_module.pause_point = crash_at
    try:
        assert cleaner.clean_filthiest(worker)
    finally:
        cleaner_module.pause_point = original
    assert cleaner.totals.cleanings == 1 and not cleaner.totals.failed
    lg.close()
    names = sorted(os.listdir(crash_dir / "t-0"))
    marks = {"cleaned-written": ".cleaned", "swap-renamed": ".swap", "old-deleted": ".deleted",
             "swap-done": ".deleted"}
    assert any(n.endswith(marks[step]) for n in names)
    again = reopen(crash_dir, clock, **{"segment.bytes": "4096"})
    got = records_of(again)
    live = {k: v for _, k, v, _ in got}  # the last value seen per key
    assert live == {k: v for k, (_, v) in latest.items()}
    offsets = [o for o, _, _, _ in got]
    assert offsets == sorted(set(offsets))  # increasing, none twice
    assert not [n for n in os.listdir(crash_dir / "t-0")
                if n.endswith((".cleaned", ".swap", ".deleted"))]
    # and a cleaning afterwards leaves exactly one record per key
    cleaner2, worker2 = make_cleaner(again, clock)
    assert cleaner2.clean_filthiest(worker2)
    assert sorted((k, v) for _, k, v, _ in records_of(again)) == sorted(
        (k, v) for k, (_, v) in latest.items())
    again.close()


def test_half_renamed_swap_is_dropped_and_the_old_segments_stay(tmp_path: Path) -> None:
    """The .log became .swap but the indexes are still .cleaned: the old segments are whole,
    so the loader deletes the swap (Kafka's rule for .swap at or above a .cleaned offset)."""
    clock = Clock()
    lg = open_log(tmp_path, clock)
    for i in range(100):
        write(lg, b"k%d" % (i % 3), b"v%d" % i, clock.now_ms)
    lg.roll()
    expected = records_of(lg)
    lg.close()
    d = tmp_path / "t-0"
    (d / "00000000000000000000.log.swap").write_bytes(build_batch([NewRecord(b"x", b"y")]))
    (d / "00000000000000000000.index.cleaned").write_bytes(b"")
    again = reopen(tmp_path, clock)
    assert records_of(again) == expected
    again.close()


def test_follower_accepts_cleaned_batches(tmp_path: Path) -> None:
    clock = Clock()
    leader = open_log(tmp_path / "leader", clock)
    fill(leader, clock, 300, 10)
    leader.roll()
    cleaner, worker = make_cleaner(leader, clock)
    assert cleaner.clean_filthiest(worker)
    data = all_bytes(leader)
    follower = open_log(tmp_path / "follower", clock)
    follower.append_as_follower(data)
    assert records_of(follower) == records_of(leader)
    assert any(b.records_count < b.last_offset - b.base_offset + 1 for b in iter_batches(data)) \
        or all(RecordBatch(bytes(b.buffer)).records_count == 1 for b in iter_batches(data))
    leader.close()
    follower.close()


def test_a_log_closed_during_a_cleaning_aborts_it_and_leaves_no_cleaned_files(
        tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock)
    fill(lg, clock, 500, 20)
    lg.roll()
    cleaner, worker = make_cleaner(lg, clock)
    import storage.cleaner as cleaner_module

    def delete_now(name: str) -> None:
        if name == "cleaner:cleaned-written":
            cleaner.manager.abort(TP)
            lg.close()

    original = cleaner_module.pause_point
    cleaner_module.pause_point = delete_now
    try:
        assert cleaner.clean_filthiest(worker)
    finally:
        cleaner_module.pause_point = original
    assert cleaner.totals.aborted == 1 and cleaner.totals.cleanings == 0
    assert TP not in cleaner.manager.checkpoints()
    assert not list((tmp_path / "t-0").glob("*.cleaned"))


def test_compact_and_delete_both_apply(tmp_path: Path) -> None:
    """cleanup.policy=compact,delete: the cleaner dedupes, retention.ms still deletes old
    segments, and the next cleaning starts from the new log start offset. (Real time: an
    emptied cleaned segment has no timestamp, so retention reads its mtime.)"""
    clock = Clock(int(time.time() * 1000))
    lg = open_log(tmp_path, clock, **{"cleanup.policy": "compact,delete",
                                      "retention.ms": "60000"})
    for i in range(600):
        write(lg, b"old-%d" % (i % 10), b"v%d" % i, clock.now_ms)
    lg.roll()
    cleaner, worker = make_cleaner(lg, clock)
    assert cleaner.clean_filthiest(worker)
    assert sorted(k for _, k, _, _ in records_of(lg)) == sorted(b"old-%d" % k for k in range(10))
    clock.now_ms += 120_000  # the old data passes retention.ms
    for i in range(300):
        write(lg, b"new-%d" % (i % 5), b"w%d" % i, clock.now_ms)
    lg.roll()
    assert lg.delete_old_segments(clock.now_ms) >= 1
    assert all(k.startswith(b"new-") for _, k, _, _ in records_of(lg))
    assert cleaner.clean_filthiest(worker)  # checkpoint below the log start: reset, clean
    assert sorted(k for _, k, _, _ in records_of(lg)) == sorted(b"new-%d" % k for k in range(5))
    lg.close()

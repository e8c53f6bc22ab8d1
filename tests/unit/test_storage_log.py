"""Log on real files: append, read, roll, truncate, follower appends, timestamps, flush."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.compression import CompressionType
from protocol.records import NewRecord, RecordBatch, build_batch, iter_batches
from storage.config import LogConfig
from storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    NonContiguousOffsetsError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnsupportedMessageFormatError,
)
from storage.loader import load_log
from storage.log import Log
from storage.map_budget import MAPS
from storage.naming import TopicPartition

pytestmark = pytest.mark.timeout(60)
TP = TopicPartition("t", 0)


def batch(n: int = 3, ts: int = 1_000, value_bytes: int = 100, **kw: object) -> bytes:
    recs = [NewRecord(b"k%d" % i, b"v" * value_bytes, timestamp_ms=ts + i) for i in range(n)]
    return build_batch(recs, **kw)  # type: ignore[arg-type]


def open_log(d: Path, **props: str) -> Log:
    return load_log(d / "t-0", TP, LogConfig.from_properties(props), clean_shutdown=True)


@pytest.fixture
def lg(tmp_path: Path) -> Iterator[Log]:
    log = open_log(tmp_path, **{"index.interval.bytes": "500"})
    yield log
    log.close()


def offsets_in(data: bytes) -> list[tuple[int, int]]:
    return [(b.base_offset, b.last_offset) for b in iter_batches(data)]


def test_append_assigns_offsets_by_patching_headers(lg: Log) -> None:
    first = bytearray(batch(3, base_offset=77))
    info = lg.append(first, leader_epoch=5)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 2, 3)
    info2 = lg.append(batch(2) + batch(4), leader_epoch=5)
    assert (info2.first_offset, info2.last_offset, info2.batch_count) == (3, 8, 2)
    assert lg.log_end_offset == 9
    raw = lg.active_segment.log_path.read_bytes()
    batches = list(iter_batches(raw))
    assert [(b.base_offset, b.last_offset, b.partition_leader_epoch) for b in batches] == [
        (0, 2, 5), (3, 4, 5), (5, 8, 5)
    ]
    assert all(b.verify_crc() for b in batches)
    assert raw[: len(first)] == bytes(first)  # the caller's bytearray was patched in place
    assert lg.leader_epoch_cache.entries() == [(5, 0)]


def test_append_compressed_batches_keeps_bytes(lg: Log) -> None:
    for codec in (CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD):
        data = batch(10, compression=codec)
        info = lg.append(data, leader_epoch=0)
        got = lg.read(info.first_offset, 1 << 20).read_bytes()
        b = RecordBatch(got[: len(data)])
        assert got[61:len(data)] == data[61:]  # payload untouched
        assert [r.offset for r in b.records()] == list(range(info.first_offset, info.last_offset + 1))


def test_read_starts_at_batch_holding_offset_and_stops_at_bound(lg: Log) -> None:
    for _ in range(10):
        lg.append(batch(3), leader_epoch=0)  # offsets 0..29, batches of 3
    assert offsets_in(lg.read(4, 1 << 20).read_bytes())[0] == (3, 5)
    assert offsets_in(lg.read(0, 1 << 20, upper_bound=9).read_bytes())[-1] == (6, 8)
    assert offsets_in(lg.read(0, 1 << 20, upper_bound=10).read_bytes())[-1] == (6, 8)
    assert offsets_in(lg.read(0, 1 << 20, upper_bound=12).read_bytes())[-1] == (9, 11)
    assert lg.read(9, 1 << 20, upper_bound=9).length == 0  # at the HW: nothing yet
    assert lg.read(30, 1 << 20).length == 0  # at the log end offset: empty, not an error
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(31, 100)
    lg.delete_records(6)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(5, 100)


def test_read_max_bytes_ends_on_batch_boundary_but_returns_one_whole_batch(lg: Log) -> None:
    sizes = []
    for _ in range(20):
        data = batch(3)
        sizes.append(len(data))
        lg.append(data, leader_epoch=0)
    one = sizes[0]
    got = lg.read(0, one * 3 + one // 2)
    assert got.length == one * 3 and offsets_in(got.read_bytes())[-1] == (6, 8)
    tiny = lg.read(7, 10)  # smaller than a batch: still the whole batch
    assert tiny.length == one and offsets_in(tiny.read_bytes()) == [(6, 8)]
    assert lg.read(7, 10, min_one_batch=False).length == 0
    assert lg.read(7, 10, upper_bound=7).length == 0  # the HW is inside the batch: nothing


@pytest.mark.parametrize("reopen", [False, True])
def test_read_ends_at_the_last_boundary_within_max_bytes_for_mixed_batch_sizes(
        tmp_path: Path, reopen: bool) -> None:
    """Large batches (P2L's: one or two fill a fetch) among small ones (many fill it): every
    read from every batch, with limits on and around each boundary, ends at the last batch
    boundary within max_bytes (at least one batch), as a walk of the batches says; with the
    newest heads in memory and, reopened, with every head read from the file."""
    log = open_log(tmp_path, **{"index.interval.bytes": "4096"})
    values = [20_000, 100, 100, 30_000, 100, 9_000, 100, 100, 100, 25_000, 100, 40_000, 100]
    try:
        for value_bytes in values:
            log.append(batch(2, value_bytes=value_bytes), leader_epoch=0)
        if reopen:
            log.close()
            log = open_log(tmp_path, **{"index.interval.bytes": "4096"})
        whole = log.read(0, 1 << 30).read_bytes()
        ends = [0]
        for b in iter_batches(whole):
            ends.append(ends[-1] + len(b.buffer))
        assert len(ends) == len(values) + 1
        for first in range(len(values)):
            begin = ends[first]
            limits = sorted({max(0, ends[k] - begin + d) for k in range(first, len(ends))
                             for d in (-1, 0, 1)})
            for limit in limits:
                got = log.read(first * 2, limit)
                fits = [e for e in ends[first + 1:] if e - begin <= limit]
                expected_end = fits[-1] if fits else ends[first + 1]
                assert (got.position, got.length) == (begin, expected_end - begin), (first, limit)
                assert log.read(first * 2, limit, min_one_batch=False).length == (
                    fits[-1] - begin if fits else 0)
    finally:
        log.close()


def test_read_spans_to_next_segment_and_rolls_on_size(tmp_path: Path) -> None:
    lg = open_log(tmp_path, **{"segment.bytes": "2000"})
    for _ in range(30):
        lg.append(batch(2, value_bytes=200), leader_epoch=0)
    bases = lg.segment_base_offsets
    assert len(bases) > 3 and bases[0] == 0
    for seg_base in bases[1:]:
        assert offsets_in(lg.read(seg_base, 1 << 20).read_bytes())[0][0] == seg_base
    # every segment stays within segment.bytes
    for p in (tmp_path / "t-0").glob("*.log"):
        assert p.stat().st_size <= 2000
    # reading the last offset of a segment returns the batch in that segment
    assert offsets_in(lg.read(bases[1] - 1, 10).read_bytes()) == [(bases[1] - 2, bases[1] - 1)]
    lg.close()


def test_roll_on_segment_ms_and_on_full_index(tmp_path: Path) -> None:
    lg = open_log(tmp_path, **{"segment.ms": "1000"})
    lg.append(batch(1, ts=10_000), leader_epoch=0, now_ms=10_000)
    lg.append(batch(1, ts=10_500), leader_epoch=0, now_ms=10_500)
    assert len(lg.segment_base_offsets) == 1
    lg.append(batch(1, ts=11_001), leader_epoch=0, now_ms=11_001)  # 1001 ms after the first
    assert lg.segment_base_offsets == [0, 2]
    lg.close()
    lg2 = load_log(tmp_path / "u-0", TP, LogConfig.from_properties(
        {"segment.index.bytes": "24", "index.interval.bytes": "0"}), clean_shutdown=True)
    for _ in range(8):
        lg2.append(batch(1), leader_epoch=0)
    assert len(lg2.segment_base_offsets) >= 3  # 3 entries per index file, then a roll
    lg2.close()


def test_rolled_segment_indexes_are_trimmed(tmp_path: Path) -> None:
    lg = open_log(tmp_path, **{"segment.bytes": "3000", "index.interval.bytes": "100"})
    for _ in range(20):
        lg.append(batch(2, value_bytes=200), leader_epoch=0)
    d = tmp_path / "t-0"
    first = d / "00000000000000000000.index"
    assert first.stat().st_size < 10 * 1024 * 1024 and first.stat().st_size % 8 == 0
    active = d / f"{lg.segment_base_offsets[-1]:020d}.index"
    assert active.stat().st_size == 10 * 1024 * 1024  # preallocated while active
    lg.close()
    assert active.stat().st_size < 1024  # trimmed on close


def test_truncate_to_and_fully(lg: Log) -> None:
    for _ in range(10):
        lg.append(batch(3), leader_epoch=1)
    lg.append(batch(3), leader_epoch=2)
    assert lg.leader_epoch_cache.entries() == [(1, 0), (2, 30)]
    assert not lg.truncate_to(40)
    assert lg.truncate_to(30)
    assert lg.log_end_offset == 30 and lg.leader_epoch_cache.entries() == [(1, 0)]
    assert lg.truncate_to(12)
    assert lg.log_end_offset == 12
    assert offsets_in(lg.read(0, 1 << 20).read_bytes())[-1] == (9, 11)
    info = lg.append(batch(2), leader_epoch=3)
    assert info.first_offset == 12
    lg.truncate_fully_and_start_at(500)
    assert (lg.log_start_offset, lg.log_end_offset) == (500, 500)
    assert lg.segment_base_offsets == [500]
    assert lg.leader_epoch_cache.entries() == []
    assert lg.append(batch(1), leader_epoch=4).first_offset == 500


def test_truncate_into_rolled_segment_makes_it_active(tmp_path: Path) -> None:
    lg = open_log(tmp_path, **{"segment.bytes": "2000", "index.interval.bytes": "100"})
    for _ in range(30):
        lg.append(batch(2, value_bytes=200), leader_epoch=0)
    bases = lg.segment_base_offsets
    target = bases[1] + 2
    lg.truncate_to(target)
    assert lg.segment_base_offsets == bases[:2] and lg.log_end_offset == target
    for _ in range(5):
        lg.append(batch(2, value_bytes=200), leader_epoch=0)
    got = offsets_in(lg.read(target, 1 << 20).read_bytes())
    assert got[0] == (target, target + 1)
    lg.close()
    lg2 = open_log(tmp_path, **{"segment.bytes": "2000", "index.interval.bytes": "100"})
    assert lg2.log_end_offset == lg.log_end_offset
    lg2.close()


def test_follower_append_keeps_offsets_and_learns_epochs(lg: Log) -> None:
    lg.append_as_follower(batch(3, base_offset=0, partition_leader_epoch=1))
    lg.append_as_follower(batch(2, base_offset=3, partition_leader_epoch=1)
                          + batch(2, base_offset=5, partition_leader_epoch=4))
    assert lg.log_end_offset == 7
    assert lg.leader_epoch_cache.entries() == [(1, 0), (4, 5)]
    assert lg.end_offset_for_epoch(1) == (1, 5)
    assert lg.end_offset_for_epoch(4) == (4, 7)
    with pytest.raises(NonContiguousOffsetsError):
        lg.append_as_follower(batch(1, base_offset=9, partition_leader_epoch=4))
    with pytest.raises(NonContiguousOffsetsError):
        lg.append_as_follower(batch(1, base_offset=7) + batch(1, base_offset=9))
    assert lg.log_end_offset == 7  # nothing written by refused appends


def test_bad_input_is_refused_with_kafka_errors(lg: Log) -> None:
    good = batch(2)
    with pytest.raises(InvalidRecordError):
        lg.append(b"\x00" * 100, leader_epoch=0)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    with pytest.raises(InvalidRecordError):
        lg.append(corrupt, leader_epoch=0)
    with pytest.raises(InvalidRecordError):
        lg.append(good[:-5], leader_epoch=0)
    with pytest.raises(InvalidRecordError):
        lg.append(b"", leader_epoch=0)
    legacy = bytearray(good)
    legacy[16] = 1
    with pytest.raises(UnsupportedMessageFormatError):
        lg.append(legacy, leader_epoch=0)
    with pytest.raises(RecordTooLargeError):
        lg.append(batch(1, value_bytes=1_100_000), leader_epoch=0)
    lying = bytearray(build_batch([NewRecord(b"k", b"v")], last_offset_delta=4))
    with pytest.raises(InvalidRecordError, match="lastOffsetDelta"):
        lg.append(lying, leader_epoch=0)
    assert lg.log_end_offset == 0 and lg.active_segment.size_bytes == 0
    assert lg.append(good, leader_epoch=0).first_offset == 0


def test_log_append_time_restamps_and_recomputes_crc(tmp_path: Path) -> None:
    lg = open_log(tmp_path, **{"message.timestamp.type": "LogAppendTime"})
    info = lg.append(batch(3, ts=5), leader_epoch=0, now_ms=1_700_000_000_000)
    assert info.log_append_time == 1_700_000_000_000
    (b,) = iter_batches(lg.read(0, 1 << 20).read_bytes())
    assert b.verify_crc() and b.max_timestamp == 1_700_000_000_000 and b.timestamp_type == 1
    assert [r.timestamp for r in b.records()] == [1_700_000_000_000] * 3
    lg.close()


def test_timestamp_bounds(tmp_path: Path) -> None:
    lg = open_log(tmp_path, **{"message.timestamp.before.max.ms": "1000",
                               "message.timestamp.after.max.ms": "1000"})
    lg.append(batch(1, ts=50_000), leader_epoch=0, now_ms=50_500)
    with pytest.raises(InvalidTimestampError):
        lg.append(batch(1, ts=40_000), leader_epoch=0, now_ms=50_500)
    with pytest.raises(InvalidTimestampError):
        lg.append(batch(1, ts=60_000), leader_epoch=0, now_ms=50_500)
    lg.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    lg = open_log(tmp_path, **{"segment.bytes": "3000", "index.interval.bytes": "100"})
    for i in range(40):
        lg.append(batch(2, ts=1000 + i * 10, value_bytes=100), leader_epoch=0)
    # batch i holds offsets 2i, 2i+1 with timestamps 1000+10i, 1001+10i
    assert lg.offset_for_timestamp(0) == (1000, 0)
    assert lg.offset_for_timestamp(1001) == (1001, 1)
    assert lg.offset_for_timestamp(1002) == (1010, 2)
    assert lg.offset_for_timestamp(1255) == (1260, 52)
    assert lg.offset_for_timestamp(1391) == (1391, 79)
    assert lg.offset_for_timestamp(1392) is None
    assert lg.max_timestamp_and_offset() == (1391, 79)
    lg.close()


def test_flush_advances_recovery_point_and_flush_messages(tmp_path: Path) -> None:
    lg = open_log(tmp_path, **{"flush.messages": "5"})
    assert not lg.append(batch(3), leader_epoch=0).needs_flush
    assert lg.append(batch(3), leader_epoch=0).needs_flush
    assert lg.recovery_point == 0
    lg.flush()
    assert lg.recovery_point == 6
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    assert not lg.append(batch(1), leader_epoch=0).needs_flush
    assert lg.flush_due(lg.last_flush_ms + 2**62) is False  # flush.ms is Long.MAX
    lg.close()


def test_index_entries_point_at_batches_with_their_last_offsets(tmp_path: Path) -> None:
    lg = open_log(tmp_path, **{"index.interval.bytes": "300"})
    for i in range(30):
        lg.append(batch(1 + i % 4), leader_epoch=0)
    seg = lg.active_segment
    raw = seg.log_path.read_bytes()
    idx = seg.offset_index
    assert idx.entries > 5
    for n in range(idx.entries):
        off, pos = idx.entry(n)
        (b,) = [next(iter_batches(raw[pos:]))]
        assert b.last_offset == off
    tidx = seg.time_index
    prev = -1
    for n in range(tidx.entries):
        ts, off = tidx.entry(n)
        assert ts > prev
        prev = ts
    lg.close()
    # the files on disk hold the same entries, big-endian
    data = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    rel, pos = struct.unpack(">ii", data[:8])
    assert next(iter_batches(raw[pos:])).last_offset == rel


def test_flush_and_retention_from_threads_while_appending_and_reading(tmp_path: Path) -> None:
    """The broker's split: appends and reads on one thread, flush and retention passes
    from a thread pool at the same time. Nothing fails and every offset stays readable."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    lg = open_log(tmp_path, **{"segment.bytes": "4000", "retention.bytes": "40000",
                               "file.delete.delay.ms": "0"})
    stop = threading.Event()
    errors: list[BaseException] = []

    def background(kind: str) -> int:
        turns = 0
        while not stop.is_set() and turns < 100_000:  # bounded
            try:
                if kind == "flush":
                    lg.flush()
                else:
                    lg.delete_old_segments()
                    lg.delete_pending_files()
            except BaseException as exc:
                errors.append(exc)
                raise
            turns += 1
            stop.wait(0.002)  # periodic passes, as the broker's scheduler runs them
        return turns

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(background, "flush"), pool.submit(background, "retention")]
        for i in range(600):
            info = lg.append(batch(2, ts=2**42, value_bytes=150), leader_epoch=0)
            start = lg.log_start_offset
            if i % 7 == 0 and start < info.last_offset:
                got = next(iter_batches(lg.read(info.last_offset, 1).read_bytes()))
                assert got.last_offset == info.last_offset
        stop.set()
        turns = [f.result(timeout=30) for f in futures]
    assert not errors and all(t > 0 for t in turns)
    lg.flush()
    lg.delete_old_segments()  # one last pass over what was appended after the threads stopped
    assert lg.recovery_point == lg.log_end_offset == 1200
    assert lg.size_bytes < 40000 + 4000 and lg.log_start_offset > 0
    got_offsets: list[int] = []
    offset: int = lg.log_start_offset
    for _ in range(1000):  # one segment per read, as Kafka
        if offset >= lg.log_end_offset:
            break
        batches = list(iter_batches(lg.read(offset, 1 << 30).read_bytes()))
        got_offsets += [b.base_offset for b in batches]
        offset = batches[-1].last_offset + 1
    assert got_offsets == list(range(got_offsets[0], 1200, 2))
    assert got_offsets[0] <= lg.log_start_offset < got_offsets[0] + 2
    lg.close()


@pytest.mark.broker_errors(r"corrupt batch at byte \d+ \(base offset 3\)",
                           r"bad batch length 5 at byte \d+")
def test_read_meeting_a_corrupt_batch_answers_corrupt_message_once_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Batches broken at rest (a bad CRC; a header that does not parse) are never served:
    a read stops before one, a read that starts at one is CORRUPT_MESSAGE, logged once."""
    import logging

    from protocol.errors import ErrorCode
    from storage.errors import CorruptSegmentError

    size = len(batch(3))
    lg = open_log(tmp_path, **{"segment.bytes": str(4 * size + 10)})  # 4 batches a segment
    for _ in range(6):
        lg.append(batch(3), leader_epoch=0)  # batch k holds offsets 3k..3k+2
    assert lg.segment_base_offsets == [0, 12]
    assert all(s.verified_bytes == s.size_bytes for s in lg._segments)  # checked on the way in
    lg.close()
    path = tmp_path / "t-0" / "00000000000000000000.log"
    raw = bytearray(path.read_bytes())
    raw[size + 70] ^= 0xFF  # a record byte of batch 1: its CRC no longer matches
    raw[3 * size + 8:3 * size + 12] = (5).to_bytes(4, "big")  # batch 3's length: nonsense
    path.write_bytes(bytes(raw))
    lg = open_log(tmp_path)  # after a clean shutdown the files are trusted: no scan
    caplog.set_level(logging.ERROR, logger="storage.log")
    try:
        assert offsets_in(lg.read(0, 1 << 20).read_bytes()) == [(0, 2)]  # stops before batch 1
        for _ in range(3):
            with pytest.raises(CorruptSegmentError) as raised:
                lg.read(3, 1 << 20)
            assert raised.value.error_code is ErrorCode.CORRUPT_MESSAGE
        lines = [r.getMessage() for r in caplog.records if "CORRUPT_MESSAGE" in r.getMessage()]
        assert len(lines) == 1, lines
        assert f"at byte {size} (base offset 3)" in lines[0] and "reading offset 3" in lines[0]
        assert str(path) in lines[0] and "CRC" in lines[0]
        assert offsets_in(lg.read(6, 1 << 20).read_bytes()) == [(6, 8)]  # stops before batch 3
        for _ in range(2):
            with pytest.raises(CorruptSegmentError) as raised:
                lg.read(9, 1 << 20)
            assert raised.value.error_code is ErrorCode.CORRUPT_MESSAGE
        lines = [r.getMessage() for r in caplog.records if "CORRUPT_MESSAGE" in r.getMessage()]
        assert len(lines) == 2 and f"bad batch length 5 at byte {3 * size}" in lines[1], lines
        assert offsets_in(lg.read(12, 1 << 20).read_bytes()) == [(12, 14), (15, 17)]
    finally:
        lg.close()


def test_flush_fsyncs_every_segment_before_the_recovery_point_moves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recovery point (below which recovery trusts the bytes) moves only after the
    segments holding those offsets were fsynced: a crash after the move must find them on
    disk. Every fsync goes through storage.fileio.fsync; it is wrapped to note which file
    was synced and what the recovery point was at that moment."""
    import storage.fileio as fileio

    lg = open_log(tmp_path, **{"segment.bytes": "2000"})
    try:
        for _ in range(8):
            lg.append(batch(3), leader_epoch=0)
        segments = [lg.dir / f"{base:020d}.log" for base in lg.segment_base_offsets]
        assert len(segments) >= 2 and lg.recovery_point == 0
        synced: list[tuple[str, int]] = []
        real = fileio.fsync

        def noting(fd: int, path: fileio.StrPath) -> None:
            real(fd, path)
            synced.append((str(path), int(lg.recovery_point)))

        monkeypatch.setattr(fileio, "fsync", noting)
        lg.flush()
        assert lg.recovery_point == lg.log_end_offset == 24
        assert {p for p, _ in synced} >= {str(p) for p in segments}
        assert all(point == 0 for _, point in synced)  # each before the point moved
    finally:
        lg.close()


@pytest.mark.parametrize("props", [{"retention.bytes": "0"}, {"retention.ms": "0"}])
def test_retention_never_deletes_the_active_segment(tmp_path: Path, props: dict[str, str]) -> None:
    """Everything breaches retention (0 bytes or 0 ms allowed) and is below the HW: every
    segment but the active one goes, the log end stays, appends go on; a second pass deletes
    nothing."""
    lg = open_log(tmp_path, **{"segment.bytes": "2000", **props})
    try:
        for _ in range(8):
            lg.append(batch(3), leader_epoch=0)
        bases = lg.segment_base_offsets
        assert len(bases) >= 2
        far_future = 10**13
        assert lg.delete_old_segments(now_ms=far_future, high_watermark=24) == len(bases) - 1
        assert lg.segment_base_offsets == [bases[-1]]
        assert (lg.log_start_offset, lg.log_end_offset) == (bases[-1], 24)
        assert lg.delete_old_segments(now_ms=far_future, high_watermark=24) == 0
        assert lg.append(batch(3), leader_epoch=0).first_offset == 24
    finally:
        lg.close()


def test_sealed_segments_files_are_closed_by_the_budget_and_slices_outlive_it(
        tmp_path: Path) -> None:
    """Under a budget of 2, 20 sealed segments keep at most 2 files and maps open besides the
    active one; a slice taken before its segment's file was closed still reads its bytes,
    and reads after it open the file again. A clean reopen keeps them closed too."""
    lg = open_log(tmp_path, **{"segment.bytes": "600"})
    sent = [batch(1, value_bytes=400) for _ in range(21)]
    for b in sent:
        lg.append(b, leader_epoch=0)
    assert len(lg.segment_base_offsets) == 21
    fd_dir = Path("/proc/self/fd")

    def segment_fds() -> int:
        return sum(1 for fd in fd_dir.iterdir()
                   if os.path.realpath(fd).startswith(str(tmp_path.resolve()) + "/"))

    limit = MAPS.limit
    MAPS.set_limit(2)
    try:
        slices = [lg.read(i, 1 << 20) for i in range(21)]  # each: one segment's file
        assert segment_fds() <= 1 + 2 + 21  # the active, the budget, files the slices hold
        del slices
        assert segment_fds() <= 1 + 2
        held = lg.read(0, 1 << 20)
        for i in range(1, 21):
            assert lg.read(i, 1 << 20).read_bytes()[16:] == sent[i][16:]  # from the magic byte
        assert segment_fds() <= 1 + 2 + 1
        assert held.read_bytes()[16:] == sent[0][16:]  # its file closed by the budget, not for it
        del held
        lg.close()
        assert segment_fds() == 0
        lg2 = open_log(tmp_path, **{"segment.bytes": "600"})
        assert segment_fds() <= 1 + 2
        for i in range(21):
            assert lg2.read(i, 1 << 20).read_bytes()[16:] == sent[i][16:]
        assert segment_fds() <= 1 + 2
        lg2.close()
    finally:
        MAPS.set_limit(limit)

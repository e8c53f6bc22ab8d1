"""Reads at the log's tail (a caught-up consumer, a parked fetch woken by an append) on real
files: the newest batches' heads are kept in memory, so such reads make no ``pread``; what
they return must be the batches on disk, also after a roll, a truncation, a failed append
and a reopen."""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.batch_header import HEAD_TO_MAX_TIMESTAMP as _HEAD_TO_MAX_TS
from protocol.records import NewRecord, build_batch, read_single_batch
from storage import fileio
from storage.config import LogConfig
from storage.errors import LogIOError
from storage.loader import load_log
from storage.log import Log
from storage.naming import TopicPartition
from storage.segment import RECENT_HEADS, BatchHead

pytestmark = pytest.mark.timeout(60)
TP = TopicPartition("t", 0)
_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")  # lastOffsetDelta @23


def batch(n: int, tag: bytes) -> bytes:
    return build_batch([NewRecord(b"k", tag + b"-%d" % i + b"." * 60, timestamp_ms=1_000 + i)
                        for i in range(n)])


def open_log(d: Path) -> Log:
    props = {"segment.bytes": "4000", "index.interval.bytes": "300"}
    return load_log(d / "t-0", TP, LogConfig.from_properties(props), clean_shutdown=True)


def on_disk(lg: Log, offset: int) -> bytes:
    """From the file: the batch holding ``offset`` and every later batch of its segment."""
    bases = lg.segment_base_offsets
    base = max(b for b in bases if b <= offset)
    data = (lg.dir / f"{base:020d}.log").read_bytes()
    pos = 0
    while pos < len(data):
        base_offset, length = _HEAD.unpack_from(data, pos)
        (delta,) = _LAST_DELTA.unpack_from(data, pos + 23)
        if base_offset + delta >= offset:
            return data[pos:]
        pos += length + 12
    raise AssertionError(f"offset {offset} is not in segment {base}")


@pytest.fixture
def preads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the ``pread`` calls made while reading (file bytes copied in are not counted)."""
    calls: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, position: int) -> bytes:
        calls.append(n)
        return real(fd, n, position)

    monkeypatch.setattr(os, "pread", counting)
    return calls


@pytest.fixture
def lg(tmp_path: Path) -> Iterator[Log]:
    log = open_log(tmp_path)
    yield log
    log.close()


def check_tail(lg: Log, preads: list[int], back: int, *, expect_no_pread: bool) -> None:
    """Every offset of the last ``back`` ones reads the bytes on disk (whole, and one batch
    with a tiny limit)."""
    leo = lg.log_end_offset
    preads.clear()
    got = [(o, lg.read(o, 1 << 20).read_bytes(), lg.read(o, 1).read_bytes())
           for o in range(max(0, leo - back), leo)]
    reads_preads = len(preads) - 2 * len(got)  # read_bytes itself preads once per slice
    for offset, whole, first in got:
        expected = on_disk(lg, offset)
        assert whole == expected, f"offset {offset}"
        assert expected.startswith(first) and len(first) == _HEAD.unpack_from(first)[1] + 12
    if expect_no_pread:
        assert reads_preads == 0


def test_tail_reads_make_no_pread_and_return_the_batches_on_disk(
        lg: Log, preads: list[int]) -> None:
    rolled = checked = 0
    for i in range(60):
        bases = len(lg.segment_base_offsets)
        lg.append(batch(1 + i % 4, b"a%d" % i), leader_epoch=3)
        rolled += len(lg.segment_base_offsets) > bases
        # The records of the newest RECENT_HEADS batches (at most 4 each) are at the tail;
        # those in the active segment are read without a pread (a sealed one keeps none).
        newest = sum(1 + j % 4 for j in range(max(0, i - RECENT_HEADS + 1), i + 1))
        in_active = lg.log_end_offset - lg.segment_base_offsets[-1]
        check_tail(lg, preads, min(newest, in_active), expect_no_pread=True)
        checked += min(newest, in_active)
        check_tail(lg, preads, 40, expect_no_pread=False)  # older ones: from the index
    assert rolled >= 3  # the reads crossed rolls: a new segment starts with no heads
    assert checked > 300


def test_tail_reads_after_truncation_and_new_appends(lg: Log, preads: list[int]) -> None:
    for i in range(12):
        lg.append(batch(3, b"old%d" % i), leader_epoch=1)
    leo = lg.log_end_offset
    assert lg.truncate_to(leo - 6)  # the last two batches, whose heads were in memory
    check_tail(lg, preads, 10, expect_no_pread=False)
    for i in range(5):  # different sizes at the same offsets and positions
        lg.append(batch(2, b"new-and-longer%d" % i), leader_epoch=2)
        check_tail(lg, preads, 2, expect_no_pread=True)
    check_tail(lg, preads, 30, expect_no_pread=False)
    assert b"new-and-longer4" in lg.read(lg.log_end_offset - 1, 1 << 20).read_bytes()


def test_tail_reads_after_a_failed_append(lg: Log, preads: list[int]) -> None:
    for i in range(6):
        lg.append(batch(2, b"x%d" % i), leader_epoch=0)
    path = str(lg.active_segment.log_path)
    with (fileio.injected(fileio.FaultPlan(nth=1, errno=errno.ENOSPC, op=fileio.Op.WRITE,
                                           path=path)),
          pytest.raises(LogIOError)):
        lg.append(batch(3, b"refused"), leader_epoch=0)
    check_tail(lg, preads, 12, expect_no_pread=False)
    lg.append(batch(3, b"after"), leader_epoch=0)
    check_tail(lg, preads, 3, expect_no_pread=True)
    check_tail(lg, preads, 15, expect_no_pread=False)


def test_tail_reads_after_a_reopen(tmp_path: Path, preads: list[int]) -> None:
    lg = open_log(tmp_path)
    for i in range(10):
        lg.append(batch(2, b"y%d" % i), leader_epoch=0)
    lg.close()
    reopened = open_log(tmp_path)
    try:
        check_tail(reopened, preads, 20, expect_no_pread=False)  # no heads kept: from disk
        reopened.append(batch(2, b"z"), leader_epoch=0)
        check_tail(reopened, preads, 2, expect_no_pread=True)
        check_tail(reopened, preads, 22, expect_no_pread=False)
    finally:
        reopened.close()


def heads_on_disk(lg: Log) -> list[BatchHead]:
    """The active segment's batch heads as its file holds them."""
    seg = lg.active_segment
    data = seg.log_path.read_bytes()
    heads, pos = [], 0
    while pos < len(data):
        base, length, epoch, *_, delta, _, max_ts = _HEAD_TO_MAX_TS.unpack_from(data, pos)
        heads.append(BatchHead(pos, base, length + 12, base + delta, max_ts, epoch))
        pos += length + 12
    return heads


def test_tail_reads_after_group_appends(lg: Log, preads: list[int]) -> None:
    """Client batches appended together (``append_client_batches``: a group of at least
    RECENT_HEADS leaves its heads to be made when read), among single appends, rolls and
    groups the log appends one by one: the same heads as the file's, without a pread."""
    lg.append(batch(1, b"first"), leader_epoch=1)
    counts = [1]
    grouped = rolled = 0
    for i in range(48):
        n = (1, 3, 7, 8, 9, 15)[i % 6]
        epoch = 2 + i % 3
        values = [batch(1 + (i + j) % 3, b"g%d-%d" % (i, j)) for j in range(n)]
        pairs = [read_single_batch(v) for v in values]
        assert all(p is not None for p in pairs)
        bases = len(lg.segment_base_offsets)
        group = lg.append_client_batches([(view, head[1:]) for view, head in
                                          (p for p in pairs if p is not None)], epoch, 1_000)
        if group is None:  # a roll before the last batch: one after the other
            for p in pairs:
                assert p is not None
                lg.append_checked_client_batch(p[0], p[1], epoch, 1_000)
        else:
            grouped += 1
        rolled += len(lg.segment_base_offsets) > bases
        counts += [1 + (i + j) % 3 for j in range(n)]
        if i % 2:
            lg.append(batch(2, b"single%d" % i), leader_epoch=epoch)
            counts.append(2)
        disk = heads_on_disk(lg)
        newest = disk[-RECENT_HEADS:]
        # the heads in memory: those translate_offset finds without a pread
        preads.clear()
        assert [lg.active_segment.translate_offset(h.last_offset) for h in newest] == newest
        assert preads == []
        in_active = lg.log_end_offset - lg.segment_base_offsets[-1]
        check_tail(lg, preads, min(sum(counts[-RECENT_HEADS:]), in_active),
                   expect_no_pread=True)
        check_tail(lg, preads, 40, expect_no_pread=False)
    assert grouped > 20 and rolled >= 2

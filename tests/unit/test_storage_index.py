"""Offset and time indexes on real files: layout, lookups, truncation, trimming, sanity."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from storage.errors import CorruptIndexError
from storage.index import InvalidIndexAppendError, OffsetIndex, TimeIndex
from storage.map_budget import MAPS

pytestmark = pytest.mark.timeout(30)


def test_offset_index_layout_is_kafkas(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, 100, 1024, writable=True)
    assert path.stat().st_size == 1024  # preallocated
    idx.append(105, 4100)
    idx.append(230, 9000)
    idx.close()  # trims
    raw = path.read_bytes()
    assert raw == struct.pack(">ii", 5, 4100) + struct.pack(">ii", 130, 9000)


def test_offset_index_lookup_floor(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 1000, 8 * 1000, writable=True)
    for i in range(1, 500):
        idx.append(1000 + i * 10, i * 4096)
    assert idx.lookup(999) == (1000, 0)  # before the first entry: base offset, position 0
    assert idx.lookup(1005) == (1000, 0)
    assert idx.lookup(1010) == (1010, 4096)
    assert idx.lookup(1019) == (1010, 4096)
    assert idx.lookup(1000 + 250 * 10 + 3) == (1000 + 2500, 250 * 4096)
    assert idx.lookup(10**9) == (1000 + 4990, 499 * 4096)
    assert idx.lookup_position(4095) == (1000, 0)
    assert idx.lookup_position(4096 * 7 + 1) == (1070, 4096 * 7)
    assert idx.lookup_position(2**31 - 1) == (5990, 499 * 4096)
    idx.close()


def test_offset_index_refuses_disorder_and_overflow(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 0, 16, writable=True)
    idx.append(5, 100)
    with pytest.raises(InvalidIndexAppendError):
        idx.append(5, 200)
    idx.append(6, 200)
    assert idx.is_full
    with pytest.raises(InvalidIndexAppendError):
        idx.append(7, 300)
    idx.close()


def test_offset_index_truncate_and_resize(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    idx = OffsetIndex(path, 0, 800, writable=True)
    for i in range(1, 50):
        idx.append(i * 2, i * 100)
    idx.truncate_to(21)  # removes offsets >= 21: 22, 24, ...
    assert idx.entries == 10
    assert idx.last_entry() == (20, 1000)
    idx.truncate_to(20)
    assert idx.last_entry() == (18, 900)
    idx.trim()
    assert path.stat().st_size == 9 * 8
    idx.resize(800)
    assert path.stat().st_size == 800
    idx.append(19, 950)
    assert idx.entries == 10
    idx.close()
    assert path.stat().st_size == 80


def test_reopen_reads_entries_and_readonly(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    idx = OffsetIndex(path, 0, 800, writable=True)
    idx.append(3, 10)
    idx.append(9, 20)
    idx.close()
    ro = OffsetIndex(path, 0, 800, writable=False)
    assert ro.entries == 2 and ro.lookup(10) == (9, 20)
    ro.sanity_check()
    with pytest.raises(InvalidIndexAppendError):
        ro.append(12, 30)
    ro.close()
    assert path.stat().st_size == 16  # read-only open never resizes


def test_untrimmed_index_fails_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    idx = OffsetIndex(path, 0, 800, writable=True)
    idx.append(3, 10)
    idx.append(9, 20)
    idx.flush()
    # Simulate an unclean stop: the file stays preallocated with a zero tail.
    idx.abandon()
    reopened = OffsetIndex(path, 0, 800, writable=False)
    assert reopened.entries == 100
    with pytest.raises(CorruptIndexError):
        reopened.sanity_check()
    reopened.close()


def test_wrong_size_index_fails_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(struct.pack(">ii", 1, 10) + b"\x00\x01\x02")
    idx = OffsetIndex(path, 0, 800, writable=False)
    with pytest.raises(CorruptIndexError, match="multiple of 8"):
        idx.sanity_check()
    idx.close()
    tpath = tmp_path / "a.timeindex"
    tpath.write_bytes(b"\x00" * 13)
    tidx = TimeIndex(tpath, 0, 1200, writable=False)
    with pytest.raises(CorruptIndexError, match="multiple of 12"):
        tidx.sanity_check()
    tidx.close()


def test_time_index_layout_lookup_and_monotonic(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    idx = TimeIndex(path, 50, 12 * 10, writable=True)
    assert idx.maybe_append(1000, 55)
    assert not idx.maybe_append(1000, 60)  # not above the last timestamp: skipped
    assert not idx.maybe_append(900, 61)
    assert idx.maybe_append(2000, 70)
    with pytest.raises(InvalidIndexAppendError):
        idx.maybe_append(3000, 65)  # offset going backwards
    assert idx.lookup(999) == (-1, 50)
    assert idx.lookup(1500) == (1000, 55)
    assert idx.lookup(2000) == (2000, 70)
    assert idx.last_entry() == (2000, 70)
    idx.close()
    assert path.read_bytes() == struct.pack(">qi", 1000, 5) + struct.pack(">qi", 2000, 20)


def test_time_index_keeps_a_slot_for_the_roll_entry(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "a.timeindex", 0, 12 * 3, writable=True)
    idx.maybe_append(1, 1)
    idx.maybe_append(2, 2)
    assert idx.is_full
    with pytest.raises(InvalidIndexAppendError):
        idx.maybe_append(3, 3)
    assert idx.maybe_append(3, 3, skip_full_check=True)
    idx.truncate_to(2)
    assert idx.entries == 1 and idx.last_entry() == (1, 1)
    idx.close()


def test_offset_index_lookups_match_brute_force_through_appends_and_truncations(
    tmp_path: Path,
) -> None:
    import random

    rng = random.Random(7)
    idx = OffsetIndex(tmp_path / "b.index", 500, 8 * 5000, writable=True)
    entries: list[tuple[int, int]] = []

    def brute(key: int, by_position: bool) -> tuple[int, int]:
        best = (500, 0)
        for off, pos in entries:
            if (pos if by_position else off) <= key:
                best = (off, pos)
        return best

    off, pos = 500, 0
    for round_ in range(6):
        for _ in range(rng.randint(50, 700)):
            off += rng.randint(1, 9)
            pos += rng.randint(1, 5000)
            idx.append(off, pos)
            entries.append((off, pos))
        for _ in range(300):
            key = rng.randint(400, off + 20)
            assert idx.lookup(key) == brute(key, False)
            pkey = rng.randint(0, pos + 20)
            assert idx.lookup_position(pkey) == brute(pkey, True)
        cut = rng.choice(entries)[0] if round_ % 2 == 0 else off + 1
        idx.truncate_to(cut)
        entries = [e for e in entries if e[0] < cut]
        off, pos = entries[-1] if entries else (500, 0)
        assert idx.entries == len(entries)
    idx.close()
    reopened = OffsetIndex(tmp_path / "b.index", 500, 8 * 5000, writable=False)
    for off, pos in entries[::37]:
        assert reopened.lookup(off) == (off, pos)
    reopened.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_active_index_holds_no_descriptor_and_reaches_the_file_at_flush(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    before = _open_fds()
    idx = OffsetIndex(path, 0, 800, writable=True)
    idx.append(3, 10)
    idx.append(9, 20)
    assert _open_fds() == before  # no file and no map held between calls
    assert idx.lookup(9) == (9, 20)
    assert path.read_bytes() == bytes(800)  # preallocated; entries not written yet
    idx.flush()
    assert path.read_bytes()[:16] == struct.pack(">iiii", 3, 10, 9, 20)
    idx.truncate_to(9)  # an entry the file holds: zeroed there at once
    assert path.read_bytes()[:16] == struct.pack(">ii", 3, 10) + bytes(8)
    idx.append(11, 30)
    idx.close()
    assert path.read_bytes() == struct.pack(">iiii", 3, 10, 11, 30)
    assert _open_fds() == before


def test_sealed_indexes_are_mapped_within_the_budget(tmp_path: Path) -> None:
    indexes: list[OffsetIndex] = []
    for n in range(6):
        path = tmp_path / f"{n:020d}.index"
        w = OffsetIndex(path, n * 1000, 8 * 100, writable=True)
        for i in range(1, 100):
            w.append(n * 1000 + i * 3, i * 50)
        w.seal()  # what a roll does: trimmed, read-only, the entries leave memory
        assert not w.writable and path.stat().st_size == 99 * 8
        indexes.append(w)
    limit = MAPS.limit
    MAPS.set_limit(2)
    try:
        before = _open_fds()
        for _ in range(2):
            for n, idx in enumerate(indexes):
                assert idx.lookup(n * 1000 + 151) == (n * 1000 + 150, 50 * 50)
                assert len(MAPS) <= 2 and _open_fds() <= before + 2
        held = indexes[0]._file_map(8)  # a reader's map stays valid after its eviction
        for n in range(1, 6):
            indexes[n].lookup(n * 1000 + 151)
        assert indexes[0]._map is None
        assert struct.unpack_from(">ii", held, 8) == (6, 100)
        del held
        for idx in indexes:
            idx.close()
        assert _open_fds() <= before
    finally:
        MAPS.set_limit(limit)


def test_active_index_keeps_a_bounded_tail_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With 8 entries in memory at most, lookups, truncations across the boundary between
    memory and file, a flush and a reopen all agree with the entries appended."""
    import random

    import storage.index as index_module

    monkeypatch.setattr(index_module, "MEMORY_ENTRIES", 8)
    rng = random.Random(3)
    path, tpath = tmp_path / "c.index", tmp_path / "c.timeindex"
    idx = OffsetIndex(path, 0, 8 * 2000, writable=True)
    tidx = TimeIndex(tpath, 0, 12 * 2000, writable=True)
    entries: list[tuple[int, int, int]] = []  # (offset, position, timestamp)
    off = pos = ts = 0
    for round_ in range(5):
        for _ in range(rng.randint(20, 300)):
            off, pos, ts = off + rng.randint(1, 9), pos + rng.randint(1, 5000), ts + 7
            idx.append(off, pos)
            assert tidx.maybe_append(ts, off)
            entries.append((off, pos, ts))
            assert len(idx._mem) <= 8 * 8 and len(tidx._mem) <= 8 * 12
        for _ in range(100):
            key = rng.randint(0, off + 5)
            want = max((e for e in entries if e[0] <= key), default=(0, 0, -1))
            assert idx.lookup(key) == want[:2]
            tkey = rng.randint(0, ts + 5)
            twant = max((e for e in entries if e[2] <= tkey), default=(0, 0, -1))
            assert tidx.lookup(tkey) == ((twant[2], twant[0]) if twant[2] >= 0 else (-1, 0))
        if round_ == 2:
            idx.flush()
            tidx.flush()
        cut = rng.choice(entries[: max(1, len(entries) - 20)])[0]  # mostly into the file
        idx.truncate_to(cut)
        tidx.truncate_to(cut)
        entries = [e for e in entries if e[0] < cut]
        assert idx.entries == tidx.entries == len(entries)
        off, pos, ts = entries[-1] if entries else (0, 0, 0)
        assert idx.last_entry() == ((off, pos) if entries else (0, 0))
    idx.close()
    tidx.close()
    assert path.read_bytes() == b"".join(struct.pack(">ii", o, p) for o, p, _ in entries)
    assert tpath.read_bytes() == b"".join(struct.pack(">qi", t, o) for o, _, t in entries)
    reopened = OffsetIndex(path, 0, 8 * 2000, writable=True)  # an active segment at start-up
    assert len(reopened._mem) <= 8 * 8
    for o, p, _ in entries[::13]:
        assert reopened.lookup(o) == (o, p)
    reopened.sanity_check()
    reopened.close()

"""The cleaner's per-record loops (``storage.cleaner_scan``), pure and compiled: the offset
map scan and the record selection agree with a reference built from ``protocol.records``
on random batches (short and long keys, null keys and values, headers, sparse offsets,
large and negative timestamp deltas, compression), rewritten records decode to the same
records, and cut or lying input raises ``CorruptRecordError`` in both builds."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage.cleaner_native as native
import storage.cleaner_scan as pure
from protocol.compression import CompressionType, CorruptRecordError
from protocol.record_codec import NewRecord
from protocol.records import RecordBatch, build_batch, iter_batches
from storage.cleaner_filter import batch_body

pytestmark = pytest.mark.timeout(300)
BUILDS: list[ModuleType] = [pure] + ([native.scan] if native.COMPILED else [])
BASE_TS = 1_700_000_000_000


def build_id(module: ModuleType) -> str:
    return "compiled" if module is not pure else "pure"


keys = st.one_of(st.none(), st.binary(max_size=15), st.binary(min_size=16, max_size=40),
                 st.sampled_from([b"k1", b"k2", b"k3", b"a-much-longer-key-of-many-bytes"]))
values = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.sampled_from(["h", "trace"]), st.one_of(st.none(), st.binary(max_size=5))),
                   max_size=2)
records = st.tuples(keys, values, headers,
                    st.one_of(st.integers(-5_000, 5_000), st.integers(-(2**40), 2**40)),
                    st.integers(1, 300))  # timestamp delta, gap to the previous offset


@st.composite
def logs(draw: st.DrawFn) -> list[bytes]:
    """Batches with increasing, possibly sparse offsets, as a compacted log has them."""
    out = []
    offset = draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(1, 6))):
        recs = draw(st.lists(records, min_size=1, max_size=25))
        new = []
        delta = 0
        for i, (key, value, hdrs, ts, gap) in enumerate(recs):
            delta = delta + gap if i else 0
            new.append(NewRecord(key, value, hdrs, BASE_TS + ts, delta))
        codec = draw(st.sampled_from([CompressionType.NONE, CompressionType.NONE,
                                      CompressionType.LZ4, CompressionType.GZIP]))
        out.append(build_batch(new, base_offset=offset, compression=codec,
                               base_timestamp_ms=BASE_TS))
        offset += delta + draw(st.integers(1, 50))
    return out


def map_key(key: bytes) -> bytes:
    return key if len(key) <= 15 else hashlib.md5(key).digest()


def reference_map(batches: list[bytes], start: int) -> tuple[dict[bytes, int], int]:
    entries: dict[bytes, int] = {}
    nulls = 0
    for raw in batches:
        for r in RecordBatch(raw).records():
            if r.offset < start:
                continue
            if r.key is None:
                nulls += 1
            else:
                entries[map_key(r.key)] = r.offset
    return entries, nulls


def body_of(chunk: bytes, pos: int, size: int, attributes: int) -> bytes:
    return batch_body(memoryview(chunk)[pos : pos + size], attributes)


@pytest.mark.parametrize("scan", BUILDS, ids=build_id)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=logs(), data=st.data())
def test_map_chunk_records_the_latest_offset_of_every_key(scan: ModuleType, batches: list[bytes],
                                                          data: st.DataObject) -> None:
    chunk = b"".join(batches)
    first = next(iter_batches(chunk)).base_offset
    last = list(iter_batches(chunk))[-1].last_offset
    start = data.draw(st.integers(first, last + 1))
    entries: dict[bytes, int] = {}
    used, latest, messages, nulls, full, in_order = scan.map_chunk(chunk, start, entries, 0,
                                                                   1 << 40, body_of)
    expected, expected_nulls = reference_map(batches, start)
    assert not full and in_order
    assert entries == expected
    assert nulls == expected_nulls
    assert used == sum(pure.ENTRY_OVERHEAD_BYTES + len(k) for k in expected)
    in_range = [b for b in iter_batches(chunk) if b.last_offset >= start]
    assert latest == (max(b.last_offset for b in in_range) if in_range else -1)
    assert messages == sum(b.records_count for b in in_range)


@pytest.mark.parametrize("scan", BUILDS, ids=build_id)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=logs(), data=st.data())
def test_a_full_map_stops_before_the_key_it_has_no_room_for(scan: ModuleType,
                                                            batches: list[bytes],
                                                            data: st.DataObject) -> None:
    chunk = b"".join(batches)
    expected, _ = reference_map(batches, 0)
    room = data.draw(st.integers(0, max(len(expected) - 1, 0)))
    budget = room * (pure.ENTRY_OVERHEAD_BYTES + 16)  # at least `room` keys fit
    entries: dict[bytes, int] = {}
    used, latest, _, _, full, _ = scan.map_chunk(chunk, 0, entries, 0, budget, body_of)
    # the keys put are exactly those of the records up to the last offset put
    stopped_at = latest
    prefix = {map_key(r.key): r.offset for raw in batches for r in RecordBatch(raw).records()
              if r.key is not None and r.offset <= stopped_at}
    assert entries == prefix
    assert used <= budget + pure.ENTRY_OVERHEAD_BYTES + 16
    if full:
        assert used > budget


def reference_keep(r_offset: int, key: bytes | None, has_value: bool, entries: dict[bytes, int],
                   latest: int, retain_deletes: bool) -> bool:
    """The rule as Kafka states it (``shouldRetainRecord``), record by record."""
    if r_offset > latest:
        return True
    if key is None:
        return False
    return r_offset >= entries.get(map_key(key), -1) and (has_value or retain_deletes)


@pytest.mark.parametrize("scan", BUILDS, ids=build_id)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=logs(), data=st.data())
def test_select_records_keeps_what_kafka_keeps_and_rewrites_them_intact(
        scan: ModuleType, batches: list[bytes], data: st.DataObject) -> None:
    """The dirty range is mapped from its own records; batches below it are checked by key;
    the map may stop early (records past its latest offset are kept)."""
    all_batches = [RecordBatch(raw) for raw in batches]
    split = data.draw(st.integers(0, len(batches)))  # batches before it are "clean"
    first_dirty = all_batches[split].base_offset if split < len(batches) else \
        all_batches[-1].last_offset + 1
    entries: dict[bytes, int] = {}
    cut = data.draw(st.integers(0, 64))
    budget = cut * (pure.ENTRY_OVERHEAD_BYTES + 16) if cut < 64 else 1 << 40
    _, latest, _, _, _, _ = scan.map_chunk(b"".join(batches[split:]), first_dirty, entries, 0,
                                           budget, body_of)
    kept_offsets = sorted(entries.values())
    retain_deletes = data.draw(st.booleans())
    for batch in all_batches:
        raw = bytes(batch.buffer)
        body = batch_body(raw, batch.attributes)
        spans: list[int] = []
        kept, _, nulls, tombstones = scan.select_records(
            body, 0, len(body), batch.records_count, batch.base_offset, first_dirty, latest,
            kept_offsets, 0, entries, retain_deletes, True, spans)
        recs = list(batch.records())
        expected = [r for r in recs if reference_keep(r.offset, r.key, r.value is not None,
                                                      entries, latest, retain_deletes)]
        assert kept == len(expected) == len(spans) // 4
        assert tombstones == any(r.value is None for r in expected)
        assert nulls == sum(r.key is None and latest >= r.offset and r.offset < first_dirty
                            for r in recs)
        if not expected:
            continue
        payload = bytearray()
        new_base = batch.base_timestamp + data.draw(st.integers(-1000, 1000))
        max_ts = scan.encode_records(body, spans, batch.base_timestamp, new_base, payload)
        assert max_ts == max(r.timestamp for r in expected)
        rebuilt = rebuild(batch, bytes(payload), len(expected), new_base)
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers)
                for r in RecordBatch(rebuilt).records()] == [
            (r.offset, r.timestamp, r.key, r.value, r.headers) for r in expected]


def rebuild(batch: RecordBatch, payload: bytes, count: int, base_ts: int) -> bytes:
    """An uncompressed batch around re-encoded records (only what decoding needs)."""
    from protocol.batch_header import HEADER

    out = bytearray(61 + len(payload))
    HEADER.pack_into(out, 0, batch.base_offset, len(out) - 12, -1, 2, 0, 0,
                     batch.last_offset - batch.base_offset, base_ts, base_ts, -1, -1, -1, count)
    out[61:] = payload
    return bytes(out)


@pytest.mark.parametrize("scan", BUILDS, ids=build_id)
def test_cut_and_lying_records_raise_corrupt_record(scan: ModuleType) -> None:
    batch = build_batch([NewRecord(b"key", b"value" * 10, (), BASE_TS, None),
                         NewRecord(b"other", None, (), BASE_TS + 1, None)])
    body = batch[61:]
    entries: dict[bytes, int] = {}
    for bad_body, count in (
        (body[:-3], 2),  # the last record is cut
        (body, 3),  # one record more than there are
        (body, 1),  # bytes left over
        (b"\x7f" + body[1:], 2),  # first record claims more bytes than remain
        (body[:1] + b"\xff" * 12, 1),  # a varint that never ends
    ):
        with pytest.raises(CorruptRecordError):
            scan.map_records(bad_body, 0, len(bad_body), count, 0, 0, entries, 0, 1 << 30)
        with pytest.raises(CorruptRecordError):
            scan.select_records(bad_body, 0, len(bad_body), count, 0, 0, -1, [], 0, entries,
                                True, True, [])
    # a batch whose declared length runs past the chunk
    with pytest.raises(CorruptRecordError):
        scan.map_chunk(batch[:-1], 0, entries, 0, 1 << 30, body_of)
    # reads never pass the end they are given, even with more bytes after it
    with pytest.raises(CorruptRecordError):
        scan.map_records(body + body, 0, len(body) - 1, 2, 0, 0, entries, 0, 1 << 30)


def can_build_native() -> bool:
    """What scripts/setup checks before it runs scripts/build-native."""
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which("cc") is not None and headers.exists()


def test_the_compiled_build_runs_where_setup_could_build_it() -> None:
    """scripts/setup builds it when a C compiler and Python's headers are there; CI must
    then run it, not the pure fallback. Elsewhere (no compiler; an edit of the source
    without a rebuild) the pure module runs and the loader says why."""
    if native.COMPILED:
        assert native.SCAN_BUILD.startswith("compiled by mypyc ("), native.SCAN_BUILD
        return
    assert native.SCAN_BUILD.startswith("pure Python ("), native.SCAN_BUILD
    assert not (os.environ.get("CI") == "true" and can_build_native()
                and (os.environ.get(native.ENV_VAR) or "auto") == "auto"), native.SCAN_BUILD


def test_without_a_compiled_module_the_pure_one_runs() -> None:
    """A fresh machine without a compiler: no extension module at all."""
    code = ("import sys; sys.modules['storage.cleaner_scan_native'] = None\n"
            "import storage.cleaner_native as n, storage.cleaner_scan as p\n"
            "assert n.scan is p and not n.COMPILED, n.SCAN_BUILD\n"
            "print(n.SCAN_BUILD)")
    env = {k: v for k, v in os.environ.items() if k != native.ENV_VAR}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=env, check=True).stdout
    assert out.startswith("pure Python (no compiled build: "), out


def test_the_environment_can_force_the_pure_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENV_VAR, "pure")
    assert native._load() == (pure, f"pure Python ({native.ENV_VAR}=pure)")
    monkeypatch.setenv(native.ENV_VAR, "fast")
    module, reason = native._load()
    assert module is pure and "'fast' is neither 'auto' nor 'pure'" in reason


def test_a_build_of_another_source_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(native.ENV_VAR, raising=False)
    monkeypatch.setattr(native, "source_sha256", lambda: "0" * 64)
    module, reason = native._load()
    assert module is pure
    assert "pure Python" in reason
    if any(Path(pure.__file__).parent.glob("cleaner_scan_native*.so")):
        assert "another version" in reason


@pytest.mark.parametrize("scan", BUILDS, ids=build_id)
def test_offsets_out_of_order_are_noticed_and_judged_by_key_as_kafka_does(
        scan: ModuleType) -> None:
    """Offsets inside a batch and from batch to batch must increase (the log requires it);
    if they do not, the map says so and the selection falls back to Kafka's rule by key."""
    recs = [NewRecord(b"a", b"1", (), BASE_TS, 5), NewRecord(b"b", b"2", (), BASE_TS, 0),
            NewRecord(b"a", b"3", (), BASE_TS, 3), NewRecord(b"c", b"4", (), BASE_TS, 9)]
    raw = build_batch(recs, base_offset=100, last_offset_delta=9)
    entries: dict[bytes, int] = {}
    _, latest, _, _, _, in_order = scan.map_chunk(raw, 100, entries, 0, 1 << 30, body_of)
    assert not in_order
    assert entries == {b"a": 103, b"b": 100, b"c": 109}  # the last put wins, as in Kafka
    spans: list[int] = []
    body = raw[61:]
    kept, _, _, _ = scan.select_records(body, 0, len(body), 4, 100, 100, latest,
                                        sorted(entries.values()), 0, entries, True, False, spans)
    expected = [r.offset - 100 for r in RecordBatch(raw).records()
                if reference_keep(r.offset, r.key, True, entries, latest, True)]
    assert [spans[i + 1] for i in range(0, len(spans), 4)] == expected == [5, 0, 3, 9]
    assert kept == 4
    # batch to batch: the second starts below the first's end
    later = build_batch([NewRecord(b"d", b"5", (), BASE_TS, 0)], base_offset=108)
    in_order = scan.map_chunk(build_batch([NewRecord(b"x", b"y", (), BASE_TS, 0)], base_offset=100,
                                          last_offset_delta=9) + later,
                              0, {}, 0, 1 << 30, body_of)[5]
    assert not in_order

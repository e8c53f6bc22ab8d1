"""spark_ingest.record_columns (the executor's column decoder) against protocol.records."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.records import (
    CompressionType,
    CorruptRecordError,
    NewRecord,
    RecordBatch,
    build_batch,
)
from spark_ingest.record_columns import Columns, add_batch_columns

pytestmark = pytest.mark.timeout(60)

_bytes = st.one_of(st.none(), st.binary(max_size=300))
_header = st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20)))
_record = st.builds(NewRecord, _bytes, _bytes, st.lists(_header, max_size=3),
                    st.one_of(st.none(), st.integers(0, 2**41)), st.none())


def _expected(batch: RecordBatch, start: int, end: int) -> list[tuple[object, ...]]:
    return [(r.key, r.value, r.offset, r.timestamp,
             [{"key": k, "value": v} for k, v in r.headers] or None)
            for r in batch.records() if start <= r.offset < end]


def _columns(batch: RecordBatch, start: int, end: int) -> list[tuple[object, ...]]:
    cols = Columns()
    add_batch_columns(batch, start, end, cols, want_headers=True)
    return list(zip(cols.keys, cols.values, cols.offsets, cols.timestamps_ms, cols.headers, strict=True))


@settings(max_examples=60, deadline=None)
@given(records=st.lists(_record, min_size=1, max_size=40),
       codec=st.sampled_from(list(CompressionType)),
       base_offset=st.integers(0, 2**40), log_append=st.booleans(),
       cut=st.tuples(st.integers(0, 45), st.integers(0, 45)))
def test_columns_equal_protocol_records(records: list[NewRecord], codec: CompressionType, base_offset: int,
                                        log_append: bool, cut: tuple[int, int]) -> None:
    batch = RecordBatch(build_batch(records, base_offset=base_offset, compression=codec,
                                    timestamp_type=int(log_append)))
    start, end = base_offset + min(cut), base_offset + max(cut)
    assert _columns(batch, start, end) == _expected(batch, start, end)
    assert _columns(batch, 0, 2**63 - 1) == _expected(batch, 0, 2**63 - 1)


def test_timestamp_type_column_follows_the_batch() -> None:
    for ts_type in (0, 1):
        cols = Columns()
        add_batch_columns(RecordBatch(build_batch([NewRecord(b"k", b"v")], timestamp_type=ts_type)),
                          0, 10, cols, want_headers=False)
        assert cols.types == [ts_type] and cols.headers == []


@pytest.mark.parametrize("damage", ["cut", "count", "length"])
def test_bad_records_raise_corrupt_record_error(damage: str) -> None:
    raw = bytearray(build_batch([NewRecord(b"key", b"value" * 10, [("h", b"x")])] * 3))
    if damage == "cut":
        raw = raw[:-20]
        raw[8:12] = (len(raw) - 12).to_bytes(4, "big")
    elif damage == "count":
        raw[57:61] = (5).to_bytes(4, "big")
    else:
        raw[61] = 0x02  # first record's length varint: 1, shorter than any record
    with pytest.raises(CorruptRecordError):
        add_batch_columns(RecordBatch(raw), 0, 100, Columns(), want_headers=True)

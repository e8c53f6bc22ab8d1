"""Fuzzing protocol.records: random bytes only ever raise ProtocolError subclasses, and end."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.compression import CompressionType
from protocol.errors import ProtocolError
from protocol.records import (
    HEADER_SIZE_BYTES,
    NewRecord,
    Record,
    RecordBatch,
    StopReason,
    build_batch,
    iter_batches,
    scan_batches,
)

pytestmark = pytest.mark.timeout(120)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX_OUT_BYTES = 1 << 20


def drain(batch: RecordBatch) -> None:
    try:
        for _ in batch.records(max_decompressed_bytes=MAX_OUT_BYTES):
            pass
    except ProtocolError:
        pass


def with_crc(raw: bytearray) -> bytearray:
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    return raw


@FUZZ
@given(st.binary(max_size=4096))
def test_scan_random_bytes_never_raises(data: bytes) -> None:
    result = scan_batches(data)
    assert 0 <= result.valid_bytes <= len(data)
    assert (result.stop_reason is None) == (result.valid_bytes == len(data))
    assert sum(b.size_bytes for b in result.batches) == result.valid_bytes


@FUZZ
@given(st.binary(max_size=4096))
def test_iter_random_bytes_raises_only_protocol_errors(data: bytes) -> None:
    try:
        for batch in iter_batches(data):
            drain(batch)
    except ProtocolError:
        pass


@FUZZ
@given(
    attributes=st.integers(0, 0x7F),
    count=st.integers(-3, 300),
    body=st.binary(max_size=2048),
)
def test_valid_header_random_body_raises_only_protocol_errors(
    attributes: int, count: int, body: bytes
) -> None:
    raw = bytearray(HEADER_SIZE_BYTES) + body
    struct.pack_into(">qiibIhiqqqhii", raw, 0, 0, len(raw) - 12, 0, 2, 0, attributes, 0, 0, 0, -1, -1, -1, count)
    scan = scan_batches(with_crc(raw))
    assert scan.stop_reason is None
    drain(scan.batches[0])


@st.composite
def new_records(draw: st.DrawFn) -> list[NewRecord]:
    blob = st.none() | st.binary(max_size=64)
    header = st.tuples(st.text(max_size=8), blob)
    return draw(
        st.lists(
            st.builds(
                NewRecord,
                key=blob,
                value=blob,
                headers=st.lists(header, max_size=3),
                timestamp_ms=st.integers(0, 2**40),
                offset_delta=st.none(),
            ),
            min_size=1,
            max_size=20,
        )
    )


@FUZZ
@given(records=new_records(), codec=st.sampled_from(list(CompressionType)), base=st.integers(0, 2**40))
def test_build_then_decode_round_trips(records: list[NewRecord], codec: CompressionType, base: int) -> None:
    batch = RecordBatch(build_batch(records, base_offset=base, compression=codec))
    assert batch.verify_crc()
    assert list(batch.records()) == [
        Record(base + i, r.timestamp_ms or 0, r.key, r.value, list(r.headers)) for i, r in enumerate(records)
    ]


@FUZZ
@given(
    records=new_records(),
    codec=st.sampled_from(list(CompressionType)),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_mutated_records_section_raises_only_protocol_errors(
    records: list[NewRecord], codec: CompressionType, flips: list[tuple[int, int]]
) -> None:
    original = build_batch(records, compression=codec)
    raw = bytearray(original)
    for where, mask in flips:
        raw[HEADER_SIZE_BYTES + where % (len(raw) - HEADER_SIZE_BYTES)] ^= mask
    if raw != original:  # two flips of one byte may cancel out
        assert scan_batches(raw).stop_reason is StopReason.CRC_MISMATCH
    drain(RecordBatch(with_crc(raw)))

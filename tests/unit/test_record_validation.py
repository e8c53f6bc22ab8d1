"""broker.record_validation: each Produce check gives Kafka's error code."""

from __future__ import annotations

import time

import pytest

from broker.record_validation import RecordValidationError, ValidationConfig, validate_client_batch
from protocol.errors import ErrorCode
from protocol.records import CompressionType, NewRecord, RecordBatch, build_batch

pytestmark = pytest.mark.timeout(10)
NOW_MS = int(time.time() * 1000)
CFG = ValidationConfig()


def good(**kw: object) -> bytes:
    recs = kw.pop("records", [NewRecord(b"k", b"v"), NewRecord(None, b"w")])
    return build_batch(recs, **kw)  # type: ignore[arg-type]


def code_of(data: bytes | None, version: int = 9, cfg: ValidationConfig = CFG) -> ErrorCode:
    with pytest.raises(RecordValidationError) as exc:
        validate_client_batch(data, version, cfg, NOW_MS)
    return exc.value.error_code


def test_good_batch_passes_every_codec() -> None:
    for codec in CompressionType:
        batch = validate_client_batch(good(compression=codec), 9, CFG, NOW_MS)
        assert batch.head.records_count == 2
        assert RecordBatch(batch.buffer).compression is codec


def test_empty_and_null() -> None:
    assert code_of(None) == ErrorCode.INVALID_RECORD
    assert code_of(b"") == ErrorCode.INVALID_RECORD


def test_bad_crc_is_corrupt_message() -> None:
    data = bytearray(good())
    data[-1] ^= 0x55
    assert code_of(bytes(data)) == ErrorCode.CORRUPT_MESSAGE


def test_truncated_is_corrupt_message() -> None:
    assert code_of(good()[:-3]) == ErrorCode.CORRUPT_MESSAGE
    assert code_of(b"\x00" * 10) == ErrorCode.CORRUPT_MESSAGE


def test_legacy_magic_is_invalid_record() -> None:
    data = bytearray(good())
    data[16] = 1
    assert code_of(bytes(data)) == ErrorCode.INVALID_RECORD


def test_two_batches_is_invalid_record() -> None:
    assert code_of(good() + good()) == ErrorCode.INVALID_RECORD


def test_too_large() -> None:
    data = good(records=[NewRecord(b"k", b"x" * 2000)])
    assert code_of(data, cfg=ValidationConfig(max_message_bytes=1000)) == ErrorCode.MESSAGE_TOO_LARGE


def test_zstd_needs_v7() -> None:
    assert code_of(good(compression=CompressionType.ZSTD), version=6) == (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    )


def test_header_rules() -> None:
    assert code_of(good(last_offset_delta=5)) == ErrorCode.INVALID_RECORD
    assert code_of(good(producer_id=5, producer_epoch=0, base_sequence=-1)) == ErrorCode.INVALID_RECORD
    assert code_of(good(is_control=True)) == ErrorCode.INVALID_RECORD
    assert code_of(good(producer_id=5, producer_epoch=0, base_sequence=0,
                        is_transactional=True)) == ErrorCode.INVALID_TXN_STATE


def test_compacted_topic_needs_keys_record_errors() -> None:
    cfg = ValidationConfig(compacted=True)
    with pytest.raises(RecordValidationError) as exc:
        validate_client_batch(good(), 9, cfg, NOW_MS)
    assert exc.value.error_code == ErrorCode.INVALID_RECORD
    assert [i for i, _ in exc.value.record_errors] == [1]


def test_timestamp_bounds() -> None:
    cfg = ValidationConfig(timestamp_before_max_ms=60_000)
    old = good(records=[NewRecord(b"k", b"v", timestamp_ms=NOW_MS),
                        NewRecord(b"k", b"v", timestamp_ms=NOW_MS - 3_600_000)])
    with pytest.raises(RecordValidationError) as exc:
        validate_client_batch(old, 9, cfg, NOW_MS)
    assert exc.value.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in exc.value.record_errors] == [1]
    validate_client_batch(good(), 9, cfg, NOW_MS)


def test_crc_left_to_the_caller_unless_records_are_read() -> None:
    data = bytearray(good())
    data[-1] ^= 0x55
    batch = validate_client_batch(bytes(data), 9, CFG, NOW_MS, verify_crc=False)
    assert not RecordBatch(batch.buffer).verify_crc()
    with pytest.raises(RecordValidationError) as exc:  # compacted: records are read, CRC first
        validate_client_batch(bytes(data), 9, ValidationConfig(compacted=True), NOW_MS,
                              verify_crc=False)
    assert exc.value.error_code == ErrorCode.CORRUPT_MESSAGE

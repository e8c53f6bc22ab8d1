"""protocol.records: the batch view, CRC, patching, iteration, scanning, cuts and flips."""

from __future__ import annotations

import mmap
import struct
import tempfile

import pytest

from protocol.errors import ErrorCode, ProtocolError
from protocol.records import (
    HEADER_SIZE_BYTES,
    CompressionType,
    ControlType,
    CorruptRecordError,
    NewRecord,
    Record,
    RecordBatch,
    StopReason,
    TimestampType,
    TruncatedBatchError,
    UnsupportedMagicError,
    build_batch,
    build_control_batch,
    decode_control_key,
    iter_batches,
    scan_batches,
)

pytestmark = pytest.mark.timeout(30)

RECORDS = [
    NewRecord(b"k0", b"v0", [("h1", b"x"), ("h2", None)], 1_700_000_000_000),
    NewRecord(None, b"value-with-null-key", (), 1_700_000_000_005),
    NewRecord(b"tombstone", None, (), 1_699_999_999_999),
    NewRecord(b"", b"", [("", b"")], 1_700_000_000_010),
]


def three_batches() -> bytes:
    """Three batches at offsets 0, 4 and 8 with different codecs."""
    return b"".join(
        build_batch(RECORDS, base_offset=base, compression=codec)
        for base, codec in ((0, CompressionType.NONE), (4, CompressionType.GZIP), (8, CompressionType.ZSTD))
    )


def test_header_fields_read_at_kafkas_byte_offsets() -> None:
    raw = build_batch(
        RECORDS,
        base_offset=1234,
        compression=CompressionType.LZ4,
        timestamp_type=1,
        producer_id=99,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=5,
        is_transactional=True,
    )
    # Independent decode of the fixed header with struct, Kafka's layout.
    fields = struct.unpack_from(">qiibIhiqqqhii", raw, 0)
    b = RecordBatch(raw)
    assert b.base_offset == fields[0] == 1234
    assert b.batch_length == fields[1] == len(raw) - 12
    assert b.size_bytes == len(raw)
    assert b.partition_leader_epoch == fields[2] == 5
    assert b.magic == fields[3] == 2
    assert b.crc == fields[4]
    assert b.attributes == fields[5] == 3 | 0x08 | 0x10
    assert b.compression is CompressionType.LZ4
    assert b.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert b.is_transactional and not b.is_control and not b.has_delete_horizon
    assert b.last_offset_delta == fields[6] == 3
    assert b.last_offset == 1237 and b.next_offset == 1238
    assert b.base_timestamp == fields[7] == 1_700_000_000_000
    assert b.max_timestamp == fields[8] == 1_700_000_000_010
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (99, 3, 17)
    assert b.records_count == fields[12] == 4
    assert b.verify_crc()


@pytest.mark.parametrize("codec", list(CompressionType))
def test_records_round_trip_every_codec(codec: CompressionType) -> None:
    raw = build_batch(RECORDS, base_offset=100, compression=codec)
    b = RecordBatch(raw)
    assert b.compression is codec and b.verify_crc()
    assert list(b.records()) == [
        Record(100 + i, r.timestamp_ms or 0, r.key, r.value, list(r.headers)) for i, r in enumerate(RECORDS)
    ]


def test_log_append_time_batches_report_max_timestamp_for_every_record() -> None:
    b = RecordBatch(build_batch(RECORDS, timestamp_type=TimestampType.LOG_APPEND_TIME))
    assert {r.timestamp for r in b.records()} == {b.max_timestamp}


def test_view_does_not_copy_and_patching_keeps_crc_valid() -> None:
    buf = bytearray(three_batches())
    batches = list(iter_batches(buf))
    assert [b.base_offset for b in batches] == [0, 4, 8]
    crcs = [b.crc for b in batches]
    for b in batches:
        b.set_base_offset(b.base_offset + 1_000_000)
        b.set_partition_leader_epoch(42)
    # The patch landed in the caller's buffer: the view is not a copy.
    assert struct.unpack_from(">q", buf, 0)[0] == 1_000_000
    again = scan_batches(buf)
    assert again.stop_reason is None and again.valid_bytes == len(buf)
    assert [b.base_offset for b in again.batches] == [1_000_000, 1_000_004, 1_000_008]
    assert [b.partition_leader_epoch for b in again.batches] == [42, 42, 42]
    assert [b.crc for b in again.batches] == crcs
    assert [r.offset for r in again.batches[2].records()] == [1_000_008 + i for i in range(4)]


def test_patching_a_read_only_buffer_is_refused() -> None:
    b = RecordBatch(build_batch(RECORDS))
    with pytest.raises(TypeError):
        b.set_base_offset(5)


def test_view_over_mmap_patches_the_file() -> None:
    raw = three_batches()
    with tempfile.TemporaryFile() as f:
        f.write(raw)
        f.flush()
        with mmap.mmap(f.fileno(), len(raw)) as mm:
            batches = list(iter_batches(memoryview(mm)))
            batches[1].set_base_offset(77)
            assert all(b.verify_crc() for b in batches)
            for b in batches:
                b.release()
        f.seek(0)
        on_disk = f.read()
    assert struct.unpack_from(">q", on_disk, len(build_batch(RECORDS)))[0] == 77


def test_control_batch_records_decode() -> None:
    raw = build_control_batch(ControlType.COMMIT, producer_id=7, producer_epoch=1, coordinator_epoch=9)
    b = RecordBatch(raw)
    assert b.is_control and b.is_transactional and b.verify_crc()
    (rec,) = list(b.records())
    assert decode_control_key(rec.key) == (0, ControlType.COMMIT)
    assert rec.value == struct.pack(">hi", 0, 9)
    with pytest.raises(CorruptRecordError):
        decode_control_key(b"\x00")


def test_every_truncation_point_is_reported_truncated() -> None:
    raw = three_batches()
    boundaries = [0]
    for b in iter_batches(raw):
        boundaries.append(boundaries[-1] + b.size_bytes)
    for cut in range(len(raw)):
        result = scan_batches(raw[:cut])
        whole = max(x for x in boundaries if x <= cut)
        assert result.valid_bytes == whole, cut
        assert sum(b.size_bytes for b in result.batches) == whole
        assert result.count == boundaries.index(whole) == len(result.batches)
        lean = scan_batches(raw[:cut], keep_batches=False)
        assert (lean.valid_bytes, lean.count, lean.batches) == (whole, result.count, [])
        if cut == whole:
            assert result.stop_reason is None
        else:
            assert result.stop_reason is StopReason.TRUNCATED, (cut, result)
            assert isinstance(result.error, TruncatedBatchError)
            with pytest.raises(TruncatedBatchError):
                list(iter_batches(raw[:cut]))


def test_flipped_byte_in_crc_region_is_detected() -> None:
    raw = three_batches()
    sizes = [b.size_bytes for b in iter_batches(raw)]
    first, second_end = sizes[0], sizes[0] + sizes[1]
    # every byte of the second batch from its attributes (byte 21) to its end
    for i in range(first + 21, second_end):
        flipped = bytearray(raw)
        flipped[i] ^= 0x40
        result = scan_batches(flipped)
        assert result.valid_bytes == first, i
        assert result.stop_reason is StopReason.CRC_MISMATCH, (i, result)
        assert f"byte {first}" in result.message


def test_flipped_crc_field_is_detected_and_crc_check_can_be_skipped() -> None:
    raw = bytearray(build_batch(RECORDS))
    raw[18] ^= 0xFF
    assert scan_batches(raw).stop_reason is StopReason.CRC_MISMATCH
    unchecked = scan_batches(raw, verify_crc=False)
    assert unchecked.stop_reason is None and len(unchecked.batches) == 1


def test_legacy_magic_is_refused_with_its_own_error() -> None:
    for magic in (0, 1):
        # A magic-0 message: offset, size, crc, magic, attributes, key -1, value "hello".
        body = struct.pack(">bbi", magic, 0, -1) + struct.pack(">i", 5) + b"hello"
        msg = struct.pack(">qiI", 0, 4 + len(body), 0) + body
        result = scan_batches(msg)
        assert result.stop_reason is StopReason.UNSUPPORTED_MAGIC
        assert isinstance(result.error, UnsupportedMagicError)
        assert result.error.error_code is ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
        with pytest.raises(UnsupportedMagicError, match="byte 16"):
            list(iter_batches(msg))
        with pytest.raises(UnsupportedMagicError):
            RecordBatch(msg)


def test_bad_magic_and_short_length_are_corrupt() -> None:
    raw = bytearray(build_batch(RECORDS))
    raw[16] = 7
    assert scan_batches(raw).stop_reason is StopReason.BAD_MAGIC
    with pytest.raises(CorruptRecordError, match="magic 7"):
        list(iter_batches(raw))
    raw = bytearray(build_batch(RECORDS))
    struct.pack_into(">i", raw, 8, 30)  # a magic-2 batch smaller than its header
    assert scan_batches(raw).stop_reason is StopReason.CORRUPT
    struct.pack_into(">i", raw, 8, -5)
    result = scan_batches(raw)
    assert result.stop_reason is StopReason.CORRUPT and "byte 8" in result.message
    assert result.error is not None and result.error.error_code is ErrorCode.CORRUPT_MESSAGE


def test_max_batch_bytes_stops_oversized_batches() -> None:
    raw = three_batches()
    result = scan_batches(raw, max_batch_bytes=HEADER_SIZE_BYTES + 10)
    assert result.stop_reason is StopReason.TOO_LARGE and result.valid_bytes == 0


def test_record_count_that_does_not_fit_raises() -> None:
    raw = bytearray(build_batch(RECORDS))
    for count in (5, 1_000_000, -1, 3):
        struct.pack_into(">i", raw, 57, count)
        with pytest.raises(CorruptRecordError, match="records"):
            list(RecordBatch(raw).records())


def test_record_length_that_does_not_fit_raises() -> None:
    raw = bytearray(build_batch([NewRecord(b"k", b"v" * 50, (), 0)]))
    raw[HEADER_SIZE_BYTES] = 0x7E  # zigzag 63: more bytes than remain
    with pytest.raises(CorruptRecordError, match="record 0"):
        list(RecordBatch(raw).records())


def test_constructor_wants_exactly_one_batch() -> None:
    raw = build_batch(RECORDS)
    with pytest.raises(CorruptRecordError):
        RecordBatch(raw + b"\x00")
    with pytest.raises(TruncatedBatchError):
        RecordBatch(raw[:40])
    with pytest.raises(ProtocolError):
        RecordBatch(b"")


def test_build_batch_keeps_given_offset_deltas() -> None:
    recs = [NewRecord(b"a", b"1", (), 10, offset_delta=0), NewRecord(b"b", b"2", (), 11, offset_delta=5)]
    b = RecordBatch(build_batch(recs, base_offset=10, last_offset_delta=9))
    assert [r.offset for r in b.records()] == [10, 15]
    assert b.last_offset == 19
    with pytest.raises(ValueError):
        build_batch([])

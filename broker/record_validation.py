"""Checks on the records of a client Produce, before they reach the log (Kafka's LogValidator).

One partition's ``records`` in a v3+ Produce must be exactly one magic-2 batch. The checks,
all on the 61-byte header plus one CRC32C over the batch (computed in C), so that no Python
code runs per record for an ordinary batch:

=========================================  ===============================================
check                                      error (Kafka's)
=========================================  ===============================================
null or empty records                      INVALID_RECORD
cut, garbled header, bad batchLength       CORRUPT_MESSAGE
magic 0 or 1 (legacy message set)          INVALID_RECORD (ProduceRequest.validateRecords)
more than one batch                        INVALID_RECORD
CRC32C mismatch                            CORRUPT_MESSAGE
batch larger than max.message.bytes        MESSAGE_TOO_LARGE
unknown compression codec (5-7)            CORRUPT_MESSAGE
zstd with Produce < v7                     UNSUPPORTED_COMPRESSION_TYPE
records count != lastOffsetDelta + 1, <=0  INVALID_RECORD
control batch from a client                INVALID_RECORD
producer id set, base sequence < 0         INVALID_RECORD
transactional batch                        INVALID_TXN_STATE (no transaction support)
=========================================  ===============================================

Per-record work happens only where Kafka's rules need it and the topic asks for it:
a compacted topic (``cleanup.policy`` contains ``compact``) needs a key in every record, and
``message.timestamp.before.max.ms`` / ``message.timestamp.after.max.ms`` below their
(unbounded) defaults bound each CreateTime timestamp. Such failures are record errors
(``record_errors``: batch index + message) with INVALID_RECORD or INVALID_TIMESTAMP, and the
whole batch is dropped, as in Kafka (KIP-467).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, NoReturn, TypeAlias

from protocol import checksum
from protocol.batch_header import CRC_START, HeaderFields
from protocol.batch_header import HEADER as _HEADER
from protocol.compression import CompressionType, CorruptRecordError
from protocol.errors import ErrorCode, ProtocolError
from protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    HEADER_SIZE_BYTES,
    LOG_OVERHEAD_BYTES,
    MAGIC,
    BatchHeader,
    RecordBatch,
    StopReason,
    TimestampType,
    batch_crc,
    compression_of,
    read_single_batch,
    scan_batches,
)

LONG_MAX = 2**63 - 1
_new_tuple = tuple.__new__
# An Enum member read on the per-request path, looked up once: on Python 3.11 a class
# attribute of an Enum costs a metaclass __getattr__ hook call (~10x a global read).
_ZSTD = CompressionType.ZSTD
_ZSTD_VALUE: int = _ZSTD.value  # the codecs below it (none, gzip, snappy, lz4) are allowed
ZSTD_MIN_PRODUCE_VERSION = 7


class RecordValidationError(Exception):
    """The partition's records are refused; ``error_code`` goes in the partition response."""

    def __init__(self, error_code: ErrorCode, message: str,
                 record_errors: list[tuple[int, str | None]] | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.record_errors = record_errors or []


@dataclass(frozen=True, slots=True)
class ValidationConfig:
    """The topic settings validation needs (from the topic's LogConfig)."""

    max_message_bytes: int = 1048588
    compacted: bool = False
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = LONG_MAX


class ValidBatch(NamedTuple):
    """A client's batch that passed the checks: its bytes and its header (read once)."""

    # builtins.memoryview: mypyc looks a NamedTuple's field types up by name in the module's
    # globals, where memoryview is not (it knows int, str and the like without that).
    buffer: builtins.memoryview
    head: BatchHeader


# A batch that passed the checks, (buffer, head): a ValidBatch, or the plain tuple the
# group's validation makes (a NamedTuple made with ``tuple.__new__`` costs ~1,300
# instructions more per batch); read by unpacking.
CheckedBatch: TypeAlias = "tuple[builtins.memoryview, BatchHeader]"
# A batch of a plain group (``validate_group``): its bytes, the whole buffer, and its
# header's fields, read by index (no ``BatchHeader`` made: see ``HeaderFields``).
PlainBatch: TypeAlias = "tuple[builtins.memoryview, HeaderFields]"


def validate_client_batch(
    records: memoryview | bytes | bytearray | None,
    produce_version: int,
    config: ValidationConfig,
    now_ms: int,
    *,
    verify_crc: bool = True,
) -> ValidBatch:
    """The single batch of a client's partition data, checked; raises RecordValidationError.

    The bytes are walked once: one header check and one ``struct`` call for the common case
    of exactly one whole batch (``read_single_batch``); anything else is scanned again only
    to say what is wrong. The header read here travels on to the log
    (``Log.append_client_batch``), which reads it no more.

    ``verify_crc=False`` leaves the CRC to the caller (the partition: the log verifies it
    on append, so the normal path computes it once; see ``check_crc``). Per-record checks
    always verify it first.
    """
    if records is None or len(records) == 0:
        raise RecordValidationError(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {produce_version} must have at least one record batch",
        )
    single = read_single_batch(records)
    if single is None:
        _refuse(records, produce_version)
    batch = _new_tuple(ValidBatch, single)  # NamedTuple's own __new__ is Python code
    view, head = single
    size = head.batch_length + LOG_OVERHEAD_BYTES
    if size > config.max_message_bytes:
        raise RecordValidationError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch size in the append is {size} bytes which exceeds the maximum "
            f"configured value of {config.max_message_bytes}.",
        )
    per_record = config.compacted or (
        config.timestamp_before_max_ms < LONG_MAX or config.timestamp_after_max_ms < LONG_MAX
    )
    if verify_crc or per_record:
        check_crc(batch)
    try:
        codec = compression_of(head.attributes)
    except ProtocolError as exc:
        raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if codec is _ZSTD and produce_version < ZSTD_MIN_PRODUCE_VERSION:
        raise RecordValidationError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Produce requests with version {produce_version} are not allowed to use ZStandard "
            "compression",
        )
    count = head.records_count
    if count <= 0 or head.last_offset_delta + 1 != count:
        raise RecordValidationError(
            ErrorCode.INVALID_RECORD,
            f"Inconsistent batch offset range [0, {head.last_offset_delta}] and count of "
            f"records {count}",
        )
    if head.attributes & ATTR_CONTROL:
        raise RecordValidationError(ErrorCode.INVALID_RECORD,
                                    "Clients are not allowed to write control records")
    if head.producer_id >= 0 and head.base_sequence < 0:
        raise RecordValidationError(
            ErrorCode.INVALID_RECORD,
            f"Invalid sequence number {head.base_sequence} for producer {head.producer_id}",
        )
    if head.attributes & ATTR_TRANSACTIONAL:
        raise RecordValidationError(
            ErrorCode.INVALID_TXN_STATE,
            "Transactional produce is not supported by this broker",
        )
    if per_record:
        _validate_records(RecordBatch(view), config, now_ms)
    return batch


def validate_group(
    records: Sequence[memoryview | bytes | bytearray | None],
    produce_version: int,
    config: ValidationConfig,
    now_ms: int,
) -> tuple[list[CheckedBatch | RecordValidationError], list[PlainBatch] | None]:
    """``validate_client_batch(..., verify_crc=False)`` of each of several requests' records
    (a group appended together), as ``(checked, plain)``.

    A plain group, where every batch passed the inline checks and its CRC and has no
    producer id (-1), so that the caller has neither refusals nor producer state to handle
    (P5's and most non-idempotent producers' groups): ``plain`` holds each batch with its
    header's fields (``PlainBatch``: no ``BatchHeader`` made) and ``checked`` is empty.
    Otherwise ``plain`` is None and ``checked`` holds, for each, the batch
    ``validate_client_batch`` returns or the error it raises (the CRCs left to the caller).

    A batch with nothing to refuse takes the checks inline here (one call per group rather
    than three per batch); anything else, and every batch of a topic that needs the
    per-record checks, goes through ``validate_client_batch`` itself, whose answer it is."""
    plain: list[PlainBatch] | None = []
    out: list[CheckedBatch | RecordValidationError] = []
    max_bytes = config.max_message_bytes
    inline = not (config.compacted or config.timestamp_before_max_ms < LONG_MAX
                  or config.timestamp_after_max_ms < LONG_MAX)
    zstd_ok = produce_version >= ZSTD_MIN_PRODUCE_VERSION
    crc32c = checksum.crc32c  # (a module with __getattr__: its attributes are not cached)
    for r in records:
        if inline and r is not None:
            # read_single_batch's common case, then validate_client_batch's checks in its
            # order, on the header's fields (HEADER: baseOffset, batchLength,
            # partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp,
            # maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount)
            view = r if type(r) is memoryview else memoryview(r)
            n = len(view)
            # A view of n bytes, one per item (what read_single_batch's cast to "B" would
            # give, as every reader of the batch sees it: by the buffer protocol): one
            # attribute, where its format and ndim are two, the format a new str each time.
            if n >= HEADER_SIZE_BYTES and view.nbytes == n:
                f = _HEADER.unpack_from(view, 0)
                attributes = f[5]
                codec = attributes & ATTR_COMPRESSION_MASK
                if (f[3] == MAGIC and f[1] + LOG_OVERHEAD_BYTES == n and n <= max_bytes
                        and (codec < _ZSTD_VALUE or (codec == _ZSTD_VALUE and zstd_ok))
                        and f[12] > 0 and f[6] + 1 == f[12]
                        and not attributes & (ATTR_CONTROL | ATTR_TRANSACTIONAL)
                        and (f[9] < 0 or f[11] >= 0)):
                    if plain is not None and f[9] == -1 and crc32c(view[CRC_START:]) == f[4]:
                        plain.append((view, f))
                        continue
                    if plain is not None:
                        out, plain = _with_headers(plain), None
                    out.append((view, _new_tuple(BatchHeader, (0, *f))))
                    continue
        if plain is not None:
            out, plain = _with_headers(plain), None
        try:
            out.append(validate_client_batch(r, produce_version, config, now_ms,
                                             verify_crc=False))
        except RecordValidationError as refused:
            out.append(refused)
    return out, plain


def _with_headers(plain: list[PlainBatch]) -> list[CheckedBatch | RecordValidationError]:
    """A plain group's batches so far, as ``validate_group`` returns a group that is not."""
    return [(view, _new_tuple(BatchHeader, (0, *f))) for view, f in plain]


def _refuse(records: memoryview | bytes | bytearray, produce_version: int) -> NoReturn:
    """Raise the error for records that are not exactly one whole batch (a full scan says
    which: legacy magic, a cut or garbled batch, or several batches)."""
    scan = scan_batches(records, verify_crc=False)
    if scan.stop_reason is StopReason.UNSUPPORTED_MAGIC:
        raise RecordValidationError(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {produce_version} are only allowed to contain "
            f"record batches with magic version 2 ({scan.message})",
        )
    if scan.stop_reason is not None:
        raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, scan.message)
    if len(scan.batches) != 1:
        raise RecordValidationError(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {produce_version} are only allowed to contain "
            f"exactly one record batch, got {len(scan.batches)}",
        )
    raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, "not one whole record batch")


def check_crc(batch: CheckedBatch) -> None:
    """CORRUPT_MESSAGE unless the stored CRC32C matches (computed in C)."""
    buffer, head = batch
    actual_crc = batch_crc(buffer)
    if actual_crc != head.crc:
        raise RecordValidationError(
            ErrorCode.CORRUPT_MESSAGE,
            f"Record batch is corrupt (stored crc = {head.crc}, computed crc = {actual_crc})",
        )


def _validate_records(batch: RecordBatch, config: ValidationConfig, now_ms: int) -> None:
    """Per-record checks (compacted topics, bounded timestamps): KIP-467 record errors."""
    check_ts = batch.timestamp_type is TimestampType.CREATE_TIME and (
        config.timestamp_before_max_ms < LONG_MAX or config.timestamp_after_max_ms < LONG_MAX
    )
    errors: list[tuple[int, str | None]] = []
    code = ErrorCode.INVALID_RECORD
    try:
        for index, record in enumerate(batch.records()):
            if config.compacted and record.key is None:
                errors.append((index, "Compacted topic cannot accept message without key in "
                               "topic partition"))
                code = ErrorCode.INVALID_RECORD
            elif check_ts and (
                now_ms - record.timestamp > config.timestamp_before_max_ms
                or record.timestamp - now_ms > config.timestamp_after_max_ms
            ):
                errors.append((index, f"Timestamp {record.timestamp} of message with offset "
                               f"{record.offset} is out of range."))
                code = ErrorCode.INVALID_TIMESTAMP
    except CorruptRecordError as exc:
        raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if errors:
        raise RecordValidationError(code, errors[0][1] or "invalid record", errors)

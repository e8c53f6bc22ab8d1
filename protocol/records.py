"""Record batches (magic v2) as zero-copy views over bytes.

Layout of one batch (Kafka's ``DefaultRecordBatch``; big-endian; offsets in bytes)::

    @0   baseOffset            int64
    @8   batchLength           int32   bytes after this field (batch size - 12)
    @12  partitionLeaderEpoch  int32
    @16  magic                 int8    2 (0 and 1 are the legacy message formats)
    @17  crc                   uint32  CRC32C of bytes 21..end (attributes to the end)
    @21  attributes            int16   bits 0-2 compression, bit 3 timestampType
                                       (0 CreateTime, 1 LogAppendTime), bit 4 isTransactional,
                                       bit 5 isControl, bit 6 hasDeleteHorizonMs
    @23  lastOffsetDelta       int32
    @27  baseTimestamp         int64
    @35  maxTimestamp          int64
    @43  producerId            int64
    @51  producerEpoch         int16
    @53  baseSequence          int32
    @57  recordsCount          int32
    @61  records               (compressed as a whole when compression != NONE)

baseOffset and partitionLeaderEpoch lie outside the CRC: the broker assigns them by
patching the header in place (``set_base_offset``, ``set_partition_leader_epoch``).

The header's ``struct`` layouts, ``BatchHeader`` and ``read_header`` (one ``struct`` call per
header, for the storage hot paths) live in ``protocol.batch_header``; re-exported here.

The records themselves (layout, control records) are decoded and encoded by
``protocol.record_codec``; this module re-exports its types.

The legacy message formats share the first 17 bytes (offset int64, size int32, crc int32,
magic int8): they are recognised and refused with ``UnsupportedMagicError``
(UNSUPPORTED_FOR_MESSAGE_FORMAT).

Thread-safety: a ``RecordBatch`` is a view; it is as safe as the buffer under it.
A view of an mmap keeps the map exported until ``release()`` (or garbage collection).
"""

from __future__ import annotations

import enum
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from protocol import checksum
from protocol.batch_header import (
    CRC_START,
    HEADER_SIZE_BYTES,
    LOG_OVERHEAD_BYTES,
    BatchHeader,
    read_header,
)
from protocol.batch_header import HEADER as _HEADER
from protocol.batch_header import UP_TO_MAGIC as _UP_TO_MAGIC
from protocol.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    CompressionType,
    CorruptRecordError,
    DecompressionBombError,
    UnsupportedCompressionError,
    compress,
    decompress,
)
from protocol.errors import ErrorCode, ProtocolError
from protocol.record_codec import (
    MIN_RECORD_SIZE_BYTES,
    ControlRecordKey,
    ControlType,
    NewRecord,
    Record,
    decode_control_key,
    decode_record,
    encode_control_key,
    encode_control_value,
    encode_record,
)

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "HEADER_SIZE_BYTES",
    "LOG_OVERHEAD_BYTES",
    "MAGIC",
    "BatchHeader",
    "CompressionType",
    "ControlRecordKey",
    "ControlType",
    "CorruptRecordError",
    "CrcMismatchError",
    "DecompressionBombError",
    "NewRecord",
    "Record",
    "RecordBatch",
    "ScanResult",
    "StopReason",
    "TimestampType",
    "TruncatedBatchError",
    "UnsupportedCompressionError",
    "UnsupportedMagicError",
    "batch_crc",
    "build_batch",
    "build_control_batch",
    "compression_of",
    "decode_control_key",
    "iter_batches",
    "read_header",
    "read_single_batch",
    "scan_batches",
]

MAGIC = 2
_new_tuple = tuple.__new__  # a NamedTuple's own __new__ is Python code; this is C
_HEADER_UP_TO_MAGIC_BYTES = _UP_TO_MAGIC.size  # 17
_LEGACY_MIN_SIZE_BYTES = 14  # smallest legacy v0 message after the 12-byte log overhead
_CRC_START = CRC_START

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40
_CODECS: dict[int, CompressionType] = {c.value: c for c in CompressionType}

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

_INT32_MAX = 2**31 - 1


class TimestampType(enum.IntEnum):
    """Bit 3 of the attributes."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class UnsupportedMagicError(ProtocolError):
    """A legacy message set (magic 0 or 1): refused, Kafka answers UNSUPPORTED_FOR_MESSAGE_FORMAT."""

    error_code: ClassVar[ErrorCode] = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class TruncatedBatchError(CorruptRecordError):
    """A batch cut short: its header or body runs past the end of the buffer."""


class CrcMismatchError(CorruptRecordError):
    """The stored CRC32C does not match bytes 21..end of the batch."""


class StopReason(enum.Enum):
    """Why ``scan_batches`` stopped before the end of the buffer."""

    TRUNCATED = "truncated"
    CORRUPT = "corrupt"
    BAD_MAGIC = "bad_magic"
    UNSUPPORTED_MAGIC = "unsupported_magic"
    CRC_MISMATCH = "crc_mismatch"
    TOO_LARGE = "too_large"


def _as_bytes_view(buf: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class RecordBatch:
    """A view over exactly one magic-2 batch; no copying. See the module docstring."""

    __slots__ = ("_buf",)

    def __init__(self, buf: bytes | bytearray | memoryview, checked: bool = False) -> None:
        """Wrap ``buf``, which must hold exactly one batch (header checked, CRC not).

        ``checked``: ``buf`` is a byte view whose header ``_check_at`` has already checked
        (no ``cls.__new__`` shortcut: mypyc's compiled classes have none).
        """
        if checked and isinstance(buf, memoryview):
            self._buf = buf
            return
        view = _as_bytes_view(buf)
        size = len(view)
        if size < _HEADER_UP_TO_MAGIC_BYTES:
            raise TruncatedBatchError(f"batch of {size} bytes is shorter than its header")
        magic = view[16]
        if magic in (0, 1):
            raise UnsupportedMagicError(f"magic {magic} message set at byte 16; only magic 2")
        if magic != MAGIC:
            raise CorruptRecordError(f"invalid magic {magic} at byte 16")
        if size < HEADER_SIZE_BYTES:
            raise TruncatedBatchError(f"batch of {size} bytes is shorter than its 61-byte header")
        (batch_length,) = _INT32.unpack_from(view, 8)
        if batch_length + LOG_OVERHEAD_BYTES != size:
            raise CorruptRecordError(
                f"batchLength {batch_length} at byte 8 says {batch_length + 12} bytes, "
                f"the buffer holds {size}"
            )
        self._buf = view

    @property
    def buffer(self) -> memoryview:
        """The batch's bytes (a view; writable if the underlying buffer is)."""
        return self._buf

    def release(self) -> None:
        """Release the memoryview (lets an mmap under it be closed or resized)."""
        self._buf.release()

    # header fields
    @property
    def base_offset(self) -> int:
        return int(_INT64.unpack_from(self._buf, 0)[0])

    @property
    def batch_length(self) -> int:
        return int(_INT32.unpack_from(self._buf, 8)[0])

    @property
    def partition_leader_epoch(self) -> int:
        return int(_INT32.unpack_from(self._buf, 12)[0])

    @property
    def magic(self) -> int:
        return int(self._buf[16])

    @property
    def crc(self) -> int:
        return int(_UINT32.unpack_from(self._buf, 17)[0])

    @property
    def attributes(self) -> int:
        return int(_INT16.unpack_from(self._buf, 21)[0])

    @property
    def last_offset_delta(self) -> int:
        return int(_INT32.unpack_from(self._buf, 23)[0])

    @property
    def base_timestamp(self) -> int:
        return int(_INT64.unpack_from(self._buf, 27)[0])

    @property
    def max_timestamp(self) -> int:
        return int(_INT64.unpack_from(self._buf, 35)[0])

    @property
    def producer_id(self) -> int:
        return int(_INT64.unpack_from(self._buf, 43)[0])

    @property
    def producer_epoch(self) -> int:
        return int(_INT16.unpack_from(self._buf, 51)[0])

    @property
    def base_sequence(self) -> int:
        return int(_INT32.unpack_from(self._buf, 53)[0])

    @property
    def records_count(self) -> int:
        return int(_INT32.unpack_from(self._buf, 57)[0])

    # derived
    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD_BYTES

    @property
    def compression(self) -> CompressionType:
        """The codec; raises ``UnsupportedCompressionError`` for ids 5-7."""
        return compression_of(self.attributes)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    # CRC and patching
    def compute_crc(self) -> int:
        """CRC32C of bytes 21..end, computed in C."""
        return batch_crc(self._buf)

    def verify_crc(self) -> bool:
        return self.compute_crc() == self.crc

    def set_base_offset(self, offset: int) -> None:
        """Patch baseOffset in place (outside the CRC). The buffer must be writable."""
        self._check_writable()
        _INT64.pack_into(self._buf, 0, offset)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """Patch partitionLeaderEpoch in place (outside the CRC). The buffer must be writable."""
        self._check_writable()
        _INT32.pack_into(self._buf, 12, epoch)

    def _check_writable(self) -> None:
        if self._buf.readonly:
            raise TypeError("RecordBatch is over a read-only buffer; wrap a bytearray or writable mmap")

    # records
    def records(self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> Iterator[Record]:
        """Decode every record (decompressing first). Raises ``CorruptRecordError`` on bad data.

        Decompressed data is bounded by ``max_decompressed_bytes``; the record count must
        fit the bytes present and every byte must belong to a record, as Kafka checks.
        """
        count = self.records_count
        body = self._buf[HEADER_SIZE_BYTES:]
        codec = self.compression
        data = bytes(body) if codec is CompressionType.NONE else decompress(
            codec, body, max_decompressed_bytes
        )
        if count < 0 or count * MIN_RECORD_SIZE_BYTES > len(data):
            raise CorruptRecordError(
                f"recordsCount {count} at byte 57 does not fit {len(data)} bytes of records"
            )
        base_offset = self.base_offset
        base_timestamp = self.base_timestamp
        log_append = (
            self.max_timestamp if self.timestamp_type is TimestampType.LOG_APPEND_TIME else None
        )
        pos = 0
        for index in range(count):
            record, pos = decode_record(data, pos, base_offset, base_timestamp, index)
            if log_append is not None:
                record = Record(record.offset, log_append, record.key, record.value, record.headers)
            yield record
        if pos != len(data):
            raise CorruptRecordError(
                f"{len(data) - pos} bytes left after the {count} records the batch declares"
            )

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, size_bytes={len(self._buf)}, "
            f"compression={self.compression.name})"
        )


# ---------------------------------------------------------------- walking buffers


def compression_of(attributes: int) -> CompressionType:
    """The codec of a batch with these attributes; ``UnsupportedCompressionError`` for 5-7."""
    codec = attributes & ATTR_COMPRESSION_MASK
    known = _CODECS.get(codec)  # not CompressionType(codec): an Enum call runs Python code
    if known is None:
        raise UnsupportedCompressionError(f"unknown compression type {codec} at byte 21")
    return known


def batch_crc(batch: memoryview) -> int:
    """CRC32C of bytes 21..end of the one batch ``batch`` holds (computed in C)."""
    crc: int = checksum.crc32c(batch[_CRC_START:])  # an int already: no int() call
    return crc


class _Stop(NamedTuple):
    reason: StopReason
    message: str


def _check_at(view: memoryview, pos: int, max_batch_bytes: int | None) -> int | _Stop:
    """Check the batch header at ``pos``: the batch's size if it is whole, else why not."""
    remaining = len(view) - pos
    if remaining < _HEADER_UP_TO_MAGIC_BYTES:
        return _Stop(
            StopReason.TRUNCATED, f"{remaining} bytes at byte {pos} are less than a batch header"
        )
    _, batch_length, _, magic = _UP_TO_MAGIC.unpack_from(view, pos)
    if magic == MAGIC and HEADER_SIZE_BYTES <= batch_length + LOG_OVERHEAD_BYTES <= remaining:
        size: int = batch_length + LOG_OVERHEAD_BYTES  # the common case: a whole v2 batch
        if max_batch_bytes is None or size <= max_batch_bytes:
            return size
    if batch_length < _LEGACY_MIN_SIZE_BYTES:
        return _Stop(
            StopReason.CORRUPT, f"batchLength {batch_length} at byte {pos + 8} is below the minimum"
        )
    size = batch_length + LOG_OVERHEAD_BYTES
    if max_batch_bytes is not None and size > max_batch_bytes:
        return _Stop(
            StopReason.TOO_LARGE,
            f"batch at byte {pos} is {size} bytes, above the {max_batch_bytes}-byte limit",
        )
    if magic in (0, 1):
        return _Stop(StopReason.UNSUPPORTED_MAGIC, f"magic {magic} message set at byte {pos + 16}")
    if magic != MAGIC:
        return _Stop(StopReason.BAD_MAGIC, f"invalid magic {magic} at byte {pos + 16}")
    if size < HEADER_SIZE_BYTES:
        return _Stop(
            StopReason.CORRUPT,
            f"batchLength {batch_length} at byte {pos + 8} is shorter than the batch header",
        )
    if size > remaining:
        return _Stop(StopReason.TRUNCATED, f"batch at byte {pos} needs {size} bytes, {remaining} remain")
    return size


def _error_for(reason: StopReason, message: str) -> CorruptRecordError | UnsupportedMagicError:
    if reason is StopReason.TRUNCATED:
        return TruncatedBatchError(message)
    if reason is StopReason.UNSUPPORTED_MAGIC:
        return UnsupportedMagicError(message)
    if reason is StopReason.CRC_MISMATCH:
        return CrcMismatchError(message)
    return CorruptRecordError(message)


def iter_batches(
    buf: bytes | bytearray | memoryview, *, max_batch_bytes: int | None = None
) -> Iterator[RecordBatch]:
    """Walk concatenated batches (no CRC check). Bad or cut data raises a ``ProtocolError``.

    A cut trailing batch raises ``TruncatedBatchError`` after the whole batches before it.
    """
    view = _as_bytes_view(buf)
    pos = 0
    end = len(view)
    while pos < end:  # every turn advances pos by >= 61 bytes
        size = _check_at(view, pos, max_batch_bytes)
        if isinstance(size, _Stop):
            raise _error_for(size.reason, size.message)
        yield RecordBatch(view[pos : pos + size], True)
        pos += size


def read_single_batch(buf: bytes | bytearray | memoryview) -> tuple[memoryview, BatchHeader] | None:
    """``buf`` as a byte view and its header when it holds exactly one whole magic-2 batch
    (its CRC not checked): one header check and one ``struct`` call. None for anything else
    (no batch, a bad one, more than one): ``scan_batches`` then tells what is there."""
    view = _as_bytes_view(buf)
    n = len(view)
    if n >= HEADER_SIZE_BYTES:
        # The common case in one struct call: the header read whole, then what _check_at
        # checks of it (magic 2, a batchLength that spans exactly the buffer, >= 61 bytes).
        fields = _HEADER.unpack_from(view, 0)
        if fields[3] == MAGIC and fields[1] + LOG_OVERHEAD_BYTES == n:
            return view, _new_tuple(BatchHeader, (0, *fields))
    size = _check_at(view, 0, None)
    if isinstance(size, _Stop) or size != n:
        return None
    return view, read_header(view, 0)


@dataclass(slots=True)
class ScanResult:
    """What ``scan_batches`` found: the whole valid batches, and why it stopped.

    ``valid_bytes`` is the length of the prefix made of whole valid batches, ``count`` how
    many batches it holds (``batches`` lists them unless ``keep_batches=False``);
    ``stop_reason`` is None when that prefix is the whole buffer. Not frozen (nothing
    changes it after the scan): a produce request builds two, and a frozen dataclass's
    ``__init__`` pays an ``object.__setattr__`` call per field.
    """

    batches: list[RecordBatch]
    valid_bytes: int
    stop_reason: StopReason | None
    message: str = ""
    count: int = 0

    @property
    def error(self) -> CorruptRecordError | UnsupportedMagicError | None:
        """The error matching ``stop_reason`` (None when the whole buffer was valid)."""
        if self.stop_reason is None:
            return None
        return _error_for(self.stop_reason, self.message)


def scan_batches(
    buf: bytes | bytearray | memoryview,
    verify_crc: bool = True,
    *,
    max_batch_bytes: int | None = None,
    keep_batches: bool = True,
) -> ScanResult:
    """Find the prefix of ``buf`` made of whole, valid batches (recovery, produce checks).

    Never raises on bad data: stops at the first batch that is cut (TRUNCATED), has a
    batchLength below the header or the legacy minimum (CORRUPT), is larger than
    ``max_batch_bytes`` (TOO_LARGE), has magic 0/1 (UNSUPPORTED_MAGIC) or another magic
    (BAD_MAGIC), or a CRC that does not match (CRC_MISMATCH).
    ``keep_batches=False`` keeps no views (a recovery scan of a large segment needs only
    ``valid_bytes`` and ``count``).
    """
    view = _as_bytes_view(buf)
    batches: list[RecordBatch] = []
    count = 0
    pos = 0
    end = len(view)
    while pos < end:  # every turn advances pos by >= 61 bytes
        size = _check_at(view, pos, max_batch_bytes)
        if isinstance(size, _Stop):
            return ScanResult(batches, pos, size.reason, size.message, count)
        batch = RecordBatch(view[pos : pos + size], True)
        if verify_crc:
            actual = batch.compute_crc()
            if actual != batch.crc:
                return ScanResult(
                    batches,
                    pos,
                    StopReason.CRC_MISMATCH,
                    f"batch at byte {pos}: stored CRC {batch.crc:#010x}, computed {actual:#010x}",
                    count,
                )
        if keep_batches:
            batches.append(batch)
        count += 1
        pos += size
    return ScanResult(batches, pos, None, "", count)


# ---------------------------------------------------------------- building


def build_batch(
    records: Iterable[NewRecord],
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    timestamp_type: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    base_timestamp_ms: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Encode one magic-2 batch (for tests, tools and the broker's internal topics).

    ``records``: ``NewRecord(key, value, headers=(), timestamp_ms=None, offset_delta=None)``;
    a timestamp of None is the current time. ``base_timestamp_ms`` defaults to the first
    record's timestamp; ``last_offset_delta`` to the largest offset delta.
    At least one record is required.
    """
    recs = list(records)
    if not recs:
        raise ValueError("build_batch needs at least one record")
    now_ms = int(time.time() * 1000)
    timestamps = [now_ms if r.timestamp_ms is None else r.timestamp_ms for r in recs]
    base_ts = timestamps[0] if base_timestamp_ms is None else base_timestamp_ms
    deltas = [i if r.offset_delta is None else r.offset_delta for i, r in enumerate(recs)]
    if any(d < 0 or d > _INT32_MAX for d in deltas):
        raise ValueError("offset deltas must be in 0..2**31-1")
    last_delta = max(deltas) if last_offset_delta is None else last_offset_delta
    body = bytearray()
    for rec, ts, delta in zip(recs, timestamps, deltas, strict=True):
        encode_record(body, rec, ts - base_ts, delta)
    payload = bytes(body) if compression == CompressionType.NONE else compress(compression, body)
    attributes = (
        int(compression)
        | (ATTR_TIMESTAMP_TYPE if timestamp_type else 0)
        | (ATTR_TRANSACTIONAL if is_transactional else 0)
        | (ATTR_CONTROL if is_control else 0)
    )
    size = HEADER_SIZE_BYTES + len(payload)
    out = bytearray(size)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        size - LOG_OVERHEAD_BYTES,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_delta,
        base_ts,
        max(timestamps),
        producer_id,
        producer_epoch,
        base_sequence,
        len(recs),
    )
    out[HEADER_SIZE_BYTES:] = payload
    _UINT32.pack_into(out, 17, checksum.crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)


def build_control_batch(
    control_type: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    timestamp_ms: int | None = None,
) -> bytes:
    """A transaction marker: a control batch with one record (key: version 0, type)."""
    key = encode_control_key(control_type)
    value = encode_control_value(coordinator_epoch)
    return build_batch(
        [NewRecord(key, value, (), timestamp_ms)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )

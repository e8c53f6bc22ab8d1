"""The magic-2 record batch header as precompiled ``struct`` layouts: the one place they live.

``protocol.records`` documents every field and its byte offset and re-exports all of this;
the storage hot paths (produce-path checks, segment walks, recovery) read headers with
these same ``Struct`` objects, one C call per header, no per-field Python work::

    HEADER (61 bytes)            >q i i b I h i q q q h i i
      baseOffset int64 @0, batchLength int32 @8, partitionLeaderEpoch int32 @12,
      magic int8 @16, crc uint32 @17, attributes int16 @21, lastOffsetDelta int32 @23,
      baseTimestamp int64 @27, maxTimestamp int64 @35, producerId int64 @43,
      producerEpoch int16 @51, baseSequence int32 @53, recordsCount int32 @57
    HEAD_TO_MAX_TIMESTAMP        the first 9 fields (43 bytes: baseOffset .. maxTimestamp)
    UP_TO_MAGIC                  the first 4 fields (17 bytes, shared with the legacy formats)
    BATCH_LENGTH                 batchLength alone, at ``BATCH_LENGTH_OFFSET`` (8)

Thread-safety: ``struct.Struct`` objects and these functions hold no state.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, TypeAlias

LOG_OVERHEAD_BYTES = 12  # baseOffset + batchLength
HEADER_SIZE_BYTES = 61

HEADER = struct.Struct(">qiibIhiqqqhii")
HEAD_TO_MAX_TIMESTAMP = struct.Struct(HEADER.format[:10])
UP_TO_MAGIC = struct.Struct(HEADER.format[:5])
BATCH_LENGTH_OFFSET = 8
CRC_START = 21  # a batch's CRC32C covers its bytes from here (attributes) to its end
BATCH_LENGTH = struct.Struct(">i")

assert HEADER.size == HEADER_SIZE_BYTES

# A header's fields as ``HEADER.unpack_from`` returns them (baseOffset, batchLength,
# partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp, maxTimestamp,
# producerId, producerEpoch, baseSequence, recordsCount), read by index: a ``BatchHeader``
# (the same fields after ``position``) costs ~2,600 instructions more to make, and each of
# its fields is read by a descriptor call where an index into a tuple is a direct access.
HeaderFields: TypeAlias = "tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]"
assert HEAD_TO_MAX_TIMESTAMP.size == 43
assert UP_TO_MAGIC.size == 17


class BatchHeader(NamedTuple):
    """A batch header read in one ``struct`` call, with the batch's position in the buffer."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD_BYTES


# A NamedTuple's own __new__ is Python code; tuple.__new__ builds the same object in C
# (about 1,800 fewer instructions per header: every produced batch and every scanned one).
_new_tuple = tuple.__new__


def read_header(buf: bytes | bytearray | memoryview, position: int) -> BatchHeader:
    """The header of the batch at ``position`` (one ``struct`` call; no checks: the caller
    has checked that 61 bytes are there, e.g. with ``scan_batches``)."""
    return _new_tuple(BatchHeader, (position, *HEADER.unpack_from(buf, position)))

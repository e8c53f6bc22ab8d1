"""Record-batch compression codecs: none, gzip, snappy, lz4, zstd (Kafka's ``compression.type``).

The codec id lives in bits 0-2 of a magic-2 batch's ``attributes``
(``CompressionType``: NONE=0, GZIP=1, SNAPPY=2, LZ4=3, ZSTD=4). What is compressed is
the whole records section of the batch (everything after the 61-byte header).

Wire formats, as the clients write them:

- gzip: a gzip stream (RFC 1952; Java's ``GZIPOutputStream``). Several concatenated
  members are accepted on read, as Java's ``GZIPInputStream`` does.
- snappy: two framings exist and both are read.
  * xerial (Java client, kafka-python, aiokafka write this; librdkafka reads it)::

        magic    8 bytes  b"\\x82SNAPPY\\x00"
        version  int32 BE (1)
        compat   int32 BE (1)
        blocks   repeated: length int32 BE, then that many bytes of raw snappy

  * raw snappy, one block (librdkafka writes this; every client reads it).
  We write xerial with 32 KiB input blocks, like the Java client.
- lz4: the LZ4 frame format (``lz4.frame``), written with independent 64 KiB blocks
  and no content size, which Java's ``KafkaLZ4BlockInputStream`` requires.
- zstd: zstd frames (``zstandard``); several frames are read back to back.

``decompress`` is bounded: output above ``max_size_bytes`` raises
``DecompressionBombError``; any undecodable input raises ``CorruptRecordError``
(Kafka answers CORRUPT_MESSAGE). Both are ``ProtocolError`` subclasses.

The snappy, lz4 and zstd libraries are imported the first time a batch of theirs is
compressed or decompressed: a broker whose clients do not compress never loads them.

This module also defines the record-layer errors; ``protocol.records`` re-exports them.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib
from typing import Any, ClassVar

from protocol.errors import ErrorCode, ProtocolError

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "XERIAL_BLOCK_SIZE_BYTES",
    "XERIAL_MAGIC",
    "CompressionType",
    "CorruptRecordError",
    "DecompressionBombError",
    "UnsupportedCompressionError",
    "compress",
    "decompress",
]

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version
_XERIAL_HEADER_SIZE_BYTES = _XERIAL_HEADER.size  # 16
_INT32 = struct.Struct(">i")
XERIAL_BLOCK_SIZE_BYTES = 32 * 1024
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
_ZSTD_MAX_RATIO = 32 * 1024
_ZSTD_MIN_STEP_BYTES = 64


class CompressionType(enum.IntEnum):
    """Bits 0-2 of a batch's attributes (Kafka's ``CompressionType`` ids)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class CorruptRecordError(ProtocolError):
    """Record data that does not decode (Kafka's CorruptRecordException)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.CORRUPT_MESSAGE


class DecompressionBombError(CorruptRecordError):
    """Compressed data that inflates past the allowed bound."""


class UnsupportedCompressionError(ProtocolError):
    """A codec id outside 0-4 (Kafka: UNSUPPORTED_COMPRESSION_TYPE)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def _cramjam() -> Any:
    import cramjam

    return cramjam


def _lz4_frame() -> Any:
    import lz4.frame

    return lz4.frame


def _zstandard() -> Any:
    import zstandard

    return zstandard


def _codec(codec: int) -> CompressionType:
    try:
        return CompressionType(codec)
    except ValueError:
        raise UnsupportedCompressionError(f"unknown compression type {codec}") from None


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress ``data`` the way the Java client does for ``codec``."""
    kind = _codec(codec)
    if kind is CompressionType.NONE:
        return bytes(data)
    if kind is CompressionType.GZIP:
        return gzip.compress(bytes(data), compresslevel=6)
    if kind is CompressionType.SNAPPY:
        return _xerial_encode(memoryview(data).cast("B"))
    if kind is CompressionType.LZ4:
        lz4_frame = _lz4_frame()
        return bytes(
            lz4_frame.compress(
                bytes(data),
                block_size=lz4_frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                store_size=False,
            )
        )
    return bytes(_zstandard().ZstdCompressor(level=3).compress(bytes(data)))


def decompress(
    codec: int,
    data: bytes | bytearray | memoryview,
    max_size_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> bytes:
    """Decompress ``data``; raise ``DecompressionBombError`` past ``max_size_bytes``."""
    kind = _codec(codec)
    if max_size_bytes < 0:
        raise ValueError(f"max_size_bytes must be >= 0, got {max_size_bytes}")
    try:
        if kind is CompressionType.NONE:
            out = bytes(data)
        elif kind is CompressionType.GZIP:
            out = _gzip_decode(data, max_size_bytes)
        elif kind is CompressionType.SNAPPY:
            out = _snappy_decode(memoryview(data).cast("B"), max_size_bytes)
        elif kind is CompressionType.LZ4:
            out = _lz4_decode(data, max_size_bytes)
        else:
            out = _zstd_decode(data, max_size_bytes)
    except ProtocolError:
        raise
    except (zlib.error, RuntimeError, ValueError, OSError, EOFError) as exc:
        # lz4 raises RuntimeError; cramjam's and zstandard's own errors are turned into
        # CorruptRecordError where those libraries are called.
        raise CorruptRecordError(f"{kind.name} data does not decompress: {exc}") from exc
    if len(out) > max_size_bytes:
        raise DecompressionBombError(
            f"{kind.name} data inflates to {len(out)} bytes, above the {max_size_bytes}-byte bound"
        )
    return out


def _bomb(kind: str, max_size_bytes: int) -> DecompressionBombError:
    return DecompressionBombError(
        f"{kind} data inflates past the {max_size_bytes}-byte bound"
    )


def _gzip_decode(data: bytes | bytearray | memoryview, max_size_bytes: int) -> bytes:
    out = bytearray()
    pending = bytes(data)
    if not pending:
        raise CorruptRecordError("GZIP data is empty")
    # Each member is bounded by max_size; each loop turn consumes input or grows `out`.
    while pending:
        d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        chunk = pending
        while True:
            budget = max_size_bytes + 1 - len(out)
            out += d.decompress(chunk, max(budget, 1))
            if len(out) > max_size_bytes:
                raise _bomb("GZIP", max_size_bytes)
            if d.eof:
                break
            chunk = d.unconsumed_tail
            if not chunk:
                raise CorruptRecordError("GZIP data ends before the end of its stream")
        pending = d.unused_data
    return bytes(out)


def _xerial_encode(data: memoryview) -> bytes:
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    snappy = _cramjam().snappy
    for start in range(0, len(data), XERIAL_BLOCK_SIZE_BYTES):
        block = bytes(snappy.compress_raw(data[start : start + XERIAL_BLOCK_SIZE_BYTES]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _raw_snappy_decode(block: memoryview, budget_bytes: int, max_size_bytes: int) -> bytes:
    # The raw format starts with the uncompressed length: check it before allocating.
    cramjam = _cramjam()
    try:
        size = int(cramjam.snappy.decompress_raw_len(block))
        if size > budget_bytes:
            raise _bomb("SNAPPY", max_size_bytes)
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"SNAPPY data does not decompress: {exc}") from exc


def _snappy_decode(data: memoryview, max_size_bytes: int) -> bytes:
    if len(data) >= _XERIAL_HEADER_SIZE_BYTES and data[:8] == XERIAL_MAGIC:
        out = bytearray()
        pos = _XERIAL_HEADER_SIZE_BYTES
        end = len(data)
        while pos < end:  # every turn advances pos by >= 4
            if end - pos < 4:
                raise CorruptRecordError(f"SNAPPY xerial block length cut at byte {pos}")
            (length,) = _INT32.unpack_from(data, pos)
            pos += 4
            if length < 0 or length > end - pos:
                raise CorruptRecordError(
                    f"SNAPPY xerial block at byte {pos - 4} claims {length} bytes, "
                    f"{end - pos} remain"
                )
            out += _raw_snappy_decode(
                data[pos : pos + length], max_size_bytes - len(out), max_size_bytes
            )
            pos += length
        return bytes(out)
    return _raw_snappy_decode(data, max_size_bytes, max_size_bytes)


def _lz4_decode(data: bytes | bytearray | memoryview, max_size_bytes: int) -> bytes:
    out = bytearray()
    pending = bytes(data)
    if not pending:
        raise CorruptRecordError("LZ4 data is empty")
    lz4_frame = _lz4_frame()
    while pending:  # one frame per outer turn; each consumes input
        d = lz4_frame.LZ4FrameDecompressor()
        chunk = pending
        while True:
            budget = max_size_bytes + 1 - len(out)
            out += d.decompress(chunk, max_length=max(budget, 1))
            if len(out) > max_size_bytes:
                raise _bomb("LZ4", max_size_bytes)
            if d.eof:
                break
            if d.needs_input:
                raise CorruptRecordError("LZ4 data ends before the end of its frame")
            chunk = b""
        pending = d.unused_data
    return bytes(out)


def _zstd_decode(data: bytes | bytearray | memoryview, max_size_bytes: int) -> bytes:
    # python-zstandard's readers return a cut frame's partial output without an error, and
    # its decompressobj has no output limit. So feed a decompressobj small input steps,
    # sized so that even zstd's best ratio (~1:32768) cannot overshoot the budget by much.
    view = memoryview(bytes(data))
    if not view:
        raise CorruptRecordError("ZSTD data is empty")
    out = bytearray()
    pos = 0
    zstd = _zstandard()
    try:
        while pos < len(view):  # one frame per turn; each turn consumes input
            dobj = zstd.ZstdDecompressor().decompressobj()
            while not dobj.eof:  # each turn consumes >= 1 input byte
                if pos >= len(view):
                    raise CorruptRecordError(f"ZSTD data ends inside a frame at byte {pos}")
                step = max(_ZSTD_MIN_STEP_BYTES,
                           (max_size_bytes + 1 - len(out)) // _ZSTD_MAX_RATIO)
                chunk = view[pos : pos + step]
                pos += len(chunk)
                out += dobj.decompress(chunk)
                if len(out) > max_size_bytes:
                    raise _bomb("ZSTD", max_size_bytes)
            pos -= len(dobj.unused_data)
    except zstd.ZstdError as exc:
        raise CorruptRecordError(f"ZSTD data does not decompress: {exc}") from exc
    return bytes(out)

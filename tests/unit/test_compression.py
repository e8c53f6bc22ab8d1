"""protocol.compression: round trips, both snappy framings, bounds, corrupt input."""

from __future__ import annotations

import gzip
import os
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from kafka.codec import snappy_decode as kp_snappy_decode
from kafka.codec import snappy_encode as kp_snappy_encode

from protocol.compression import (
    XERIAL_MAGIC,
    CompressionType,
    CorruptRecordError,
    DecompressionBombError,
    UnsupportedCompressionError,
    compress,
    decompress,
)
from protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(30)

CODECS = list(CompressionType)
COMPRESSED = [c for c in CODECS if c is not CompressionType.NONE]
PAYLOADS = {
    "empty": b"",
    "one": b"x",
    "text": b"the quick brown fox " * 500,
    "random": os.urandom(200_000),  # spans several xerial (32 KiB) and lz4 (64 KiB) blocks
}


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@pytest.mark.parametrize("name", list(PAYLOADS))
def test_round_trip(codec: CompressionType, name: str) -> None:
    data = PAYLOADS[name]
    packed = compress(codec, data)
    assert decompress(codec, packed, len(data)) == data
    if codec is not CompressionType.NONE and name == "text":
        assert len(packed) < len(data) // 10


def test_snappy_writes_xerial_and_reads_both_framings() -> None:
    data = PAYLOADS["random"] + PAYLOADS["text"]
    ours = compress(CompressionType.SNAPPY, data)
    assert ours.startswith(XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01")
    assert kp_snappy_decode(ours) == data  # kafka-python's xerial reader
    raw = bytes(cramjam.snappy.compress_raw(data))  # librdkafka's framing
    assert decompress(CompressionType.SNAPPY, raw) == data
    assert decompress(CompressionType.SNAPPY, kp_snappy_encode(data)) == data


def test_gzip_concatenated_members_and_stdlib_output() -> None:
    a, b = b"first member " * 10, b"second member " * 10
    assert decompress(CompressionType.GZIP, gzip.compress(a) + gzip.compress(b)) == a + b
    assert gzip.decompress(compress(CompressionType.GZIP, a)) == a


def test_lz4_default_frames_and_zstd_multiple_frames() -> None:
    data = PAYLOADS["text"]
    assert decompress(CompressionType.LZ4, lz4.frame.compress(data)) == data  # linked blocks, size
    two = zstandard.ZstdCompressor().compress(data) + zstandard.ZstdCompressor().compress(b"tail")
    assert decompress(CompressionType.ZSTD, two) == data + b"tail"
    # our lz4 frames: independent blocks, no content size (what Java's reader needs)
    info = lz4.frame.get_frame_info(compress(CompressionType.LZ4, data))
    assert info["block_linked"] is False and info["content_size"] == 0


@pytest.mark.parametrize("codec", COMPRESSED, ids=[c.name for c in COMPRESSED])
def test_decompression_bomb_is_refused(codec: CompressionType) -> None:
    bomb = compress(codec, bytes(8 << 20))
    assert len(bomb) < 1 << 20
    with pytest.raises(DecompressionBombError) as info:
        decompress(codec, bomb, max_size_bytes=1 << 20)
    assert info.value.error_code is ErrorCode.CORRUPT_MESSAGE
    assert decompress(codec, compress(codec, bytes(1 << 20)), max_size_bytes=1 << 20) == bytes(1 << 20)


def test_snappy_bomb_is_refused_before_allocating() -> None:
    # A raw snappy block whose length prefix claims 2 GiB.
    with pytest.raises(DecompressionBombError):
        decompress(CompressionType.SNAPPY, b"\x80\x80\x80\x80\x08" + b"\x00" * 10, 1 << 20)


@pytest.mark.parametrize("codec", COMPRESSED, ids=[c.name for c in COMPRESSED])
def test_garbage_and_cut_input_raise_corrupt_record_error(codec: CompressionType) -> None:
    packed = compress(codec, PAYLOADS["random"])
    garbage = (b"", b"\xff" * 64, b"plain text, not compressed at all " * 3)
    for bad in (*garbage, packed[: len(packed) // 2], packed[:-1]):
        with pytest.raises(CorruptRecordError):
            decompress(codec, bad)


def test_raw_snappy_of_nothing_is_empty() -> None:
    assert decompress(CompressionType.SNAPPY, b"\x00") == b""


def test_cut_xerial_block_is_corrupt() -> None:
    packed = compress(CompressionType.SNAPPY, PAYLOADS["text"])
    with pytest.raises(CorruptRecordError, match="byte 16"):
        decompress(CompressionType.SNAPPY, packed[:18])


def test_unknown_codec_is_refused() -> None:
    for codec in (5, 7, -1):
        with pytest.raises(UnsupportedCompressionError) as info:
            decompress(codec, b"abc")
        assert info.value.error_code is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        with pytest.raises(UnsupportedCompressionError):
            compress(codec, b"abc")


def test_zlib_stream_without_gzip_header_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.GZIP, zlib.compress(b"not gzip"))

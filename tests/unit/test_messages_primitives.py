"""The hand-written primitives: varints, strings, bytes, arrays, uuids, tagged fields."""

from __future__ import annotations

import struct
import tempfile
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import primitives as p
from protocol.errors import ProtocolError
from protocol.fileslice import FileSlice

pytestmark = pytest.mark.timeout(30)
FAST = settings(max_examples=200, deadline=None, database=None)


def mv(data: bytes) -> memoryview:
    return memoryview(data)


@FAST
@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(value: int) -> None:
    data = p.uvarint(value)
    assert len(data) <= 5
    assert p.read_uvarint(mv(data + b"tail"), 0) == (value, len(data))


@FAST
@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    data = p.varint(value)
    assert p.read_varint(mv(data), 0) == (value, len(data))


@FAST
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    data = p.varlong(value)
    assert p.read_varlong(mv(data), 0) == (value, len(data))


def test_varint_known_encodings() -> None:
    # Protocol Buffers / Kafka ByteUtils: zig-zag then LEB128.
    assert p.varint(0) == b"\x00" and p.varint(-1) == b"\x01" and p.varint(1) == b"\x02"
    assert p.varint(-64) == b"\x7f" and p.varint(64) == b"\x80\x01"
    assert p.uvarint(300) == b"\xac\x02"
    assert p.varlong(-(2**63)) == b"\xff" * 9 + b"\x01"


def test_varint_errors() -> None:
    with pytest.raises(ProtocolError, match="truncated"):
        p.read_uvarint(mv(b"\x80\x80"), 0)
    with pytest.raises(ProtocolError, match="longer than 5"):
        p.read_uvarint(mv(b"\x80" * 6 + b"\x00"), 0)
    with pytest.raises(ProtocolError, match="longer than 10"):
        p.read_varlong(mv(b"\x80" * 11 + b"\x00"), 0)
    for bad in (-1, 2**32):
        with pytest.raises(ProtocolError):
            p.uvarint(bad)
    with pytest.raises(ProtocolError):
        p.varint(2**31)


@FAST
@given(st.text(max_size=200), st.booleans())
def test_strings_round_trip(text: str, compact: bool) -> None:
    b = bytearray()
    (p.write_compact_string if compact else p.write_string)(b, text)
    read = p.read_compact_string if compact else p.read_string
    assert read(mv(bytes(b)), 0) == (text, len(b))


def test_nullable_strings() -> None:
    for compact in (False, True):
        b = bytearray()
        (p.write_compact_nullable_string if compact else p.write_nullable_string)(b, None)
        assert bytes(b) == (b"\x00" if compact else b"\xff\xff")
        read = p.read_compact_nullable_string if compact else p.read_nullable_string
        assert read(mv(bytes(b)), 0) == (None, len(b))
        with pytest.raises(ProtocolError, match="non-nullable"):
            (p.read_compact_string if compact else p.read_string)(mv(bytes(b)), 0)
        with pytest.raises(ProtocolError, match="non-nullable"):
            (p.write_compact_string if compact else p.write_string)(bytearray(), None)


def test_string_errors() -> None:
    with pytest.raises(ProtocolError, match="UTF-8"):
        p.read_string(mv(struct.pack(">h", 2) + b"\xff\xfe"), 0)
    with pytest.raises(ProtocolError, match="exceeds"):
        p.read_string(mv(struct.pack(">h", 10) + b"abc"), 0)
    with pytest.raises(ProtocolError, match="exceeds"):
        p.read_compact_string(mv(b"\x0babc"), 0)
    with pytest.raises(ProtocolError, match="longer than"):
        p.write_string(bytearray(), "x" * 40000)
    with pytest.raises(ProtocolError, match="longer than"):
        p.write_compact_string(bytearray(), "x" * 40000)
    over = p.uvarint(0x8001 + 1) + b"x" * 0x8001  # Kafka rejects strings over 0x7fff bytes
    with pytest.raises(ProtocolError, match="invalid string length 32769"):
        p.read_compact_string(mv(over), 0)
    long_text = "é" * 100  # 200 bytes: a two-byte compact length
    b = bytearray()
    p.write_compact_string(b, long_text)
    assert b[:2] == p.uvarint(201)
    assert p.read_compact_string(mv(bytes(b)), 0) == (long_text, len(b))


def test_bytes_and_views() -> None:
    for compact in (False, True):
        b = bytearray()
        p.write_bytes(b, b"abc", compact)
        p.write_nullable_bytes(b, None, compact)
        data = mv(bytes(b))
        value, pos = p.read_bytes(data, 0, compact)
        assert value == b"abc" and isinstance(value, bytes)
        assert p.read_nullable_bytes(data, pos, compact) == (None, len(b))
        view, _ = p.read_view(data, 0, compact)
        assert isinstance(view, memoryview) and view.obj is data.obj and bytes(view) == b"abc"
        with pytest.raises(ProtocolError, match="non-nullable"):
            p.read_bytes(data, pos, compact)
    with pytest.raises(ProtocolError, match="invalid bytes length -2"):
        p.read_bytes(mv(struct.pack(">i", -2)), 0, False)
    with pytest.raises(ProtocolError, match="exceeds"):
        p.read_nullable_view(mv(struct.pack(">i", 2**31 - 1) + b"x"), 0, False)


def test_array_lengths() -> None:
    assert p.read_array_len(mv(struct.pack(">i", -1)), 0, True) == (-1, 4)
    assert p.read_compact_array_len(mv(b"\x00"), 0, True) == (-1, 1)
    assert p.read_compact_array_len(mv(b"\x03xx"), 0, False) == (2, 1)
    with pytest.raises(ProtocolError, match="invalid array length -1"):
        p.read_array_len(mv(struct.pack(">i", -1)), 0, False)
    with pytest.raises(ProtocolError, match="non-nullable"):
        p.read_compact_array_len(mv(b"\x00"), 0, False)
    with pytest.raises(ProtocolError, match="remain"):
        p.read_array_len(mv(struct.pack(">i", 5) + b"abcd"), 0, False)
    with pytest.raises(ProtocolError, match="exceeds"):
        p.read_int32_array(mv(b"\x00" * 7), 0, 2)


@FAST
@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=300))
def test_int32_arrays(values: list[int]) -> None:
    data = p.pack_int32_array(values)
    assert p.read_int32_array(mv(data), 0, len(values)) == (values, len(data))


@FAST
@given(st.uuids())
def test_uuid(value: uuid.UUID) -> None:
    got, pos = p.read_uuid(mv(value.bytes), 0)
    assert got == value and pos == 16 and hash(got) == hash(value)
    assert got.bytes == value.bytes and str(got) == str(value) and got.int == value.int


def test_zero_uuid_and_truncation() -> None:
    assert p.read_uuid(mv(bytes(16)), 0)[0] is p.ZERO_UUID
    with pytest.raises(ProtocolError, match="truncated uuid"):
        p.read_uuid(mv(bytes(15)), 0)


def test_tagged_fields() -> None:
    b = bytearray(b"\x02")
    p.write_tagged(b, 1, b"ab")
    p.write_tagged(b, 300, b"")
    data = mv(bytes(b) + b"rest")
    assert p.skip_tagged_fields(data, 0) == len(b)
    n, pos = p.read_tag_count(data, 0)
    assert n == 2
    tag, end, pos = p.read_tag_header(data, pos)
    assert (tag, bytes(data[pos:end])) == (1, b"ab")
    tag, end, pos = p.read_tag_header(data, end)
    assert (tag, end) == (300, pos)
    with pytest.raises(ProtocolError):
        p.skip_tagged_fields(mv(b"\x01\x01\x05ab"), 0)  # size past the end
    with pytest.raises(ProtocolError, match="remain"):
        p.read_tag_count(mv(b"\x7f"), 0)


def test_write_records_parts() -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"x" * 50)
        f.flush()
        fs = FileSlice(f, 10, 20)
        b = bytearray(b"head")
        parts: list[p.Part] = []
        p.write_records(b, parts, fs, True, True)
        assert parts == [b"head" + p.uvarint(21), fs] and b == b""
        big = memoryview(bytes(p.RECORDS_INLINE_MAX_BYTES))
        p.write_records(b, parts, big, False, True)
        assert parts[-1] is big and parts[-2] == struct.pack(">i", len(big))
        small = b"abc"
        p.write_records(b, parts, small, False, True)
        assert bytes(b) == struct.pack(">i", 3) + b"abc"  # small records are copied inline
        with pytest.raises(ProtocolError, match="non-nullable"):
            p.write_records(b, parts, None, False, False)

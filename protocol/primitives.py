"""Hand-written readers and writers that the generated codecs in ``protocol/messages`` call.

Wire types (all integers big-endian, as in Kafka's ``ByteBufferAccessor``):

- ``int8/int16/int32/int64``, ``uint16/uint32``, ``float64``: fixed width; the generated code
  packs runs of them with precompiled ``struct.Struct`` objects, not through this module.
- ``uvarint``: unsigned LEB128, at most 5 bytes for 32-bit values (``readUnsignedVarint``).
- ``varint``: zig-zag encoded signed LEB128 (``readVarint``), at most 5 bytes.
- ``string``: int16 length + UTF-8 bytes; length -1 is null (nullable versions only).
- ``compact string``: uvarint (length + 1) + UTF-8 bytes; 0 is null.
- ``bytes`` / ``records``: int32 length + bytes (-1 null); compact: uvarint (length + 1).
- ``array``: int32 count (-1 null); compact: uvarint (count + 1), 0 null.
- ``uuid``: 16 raw bytes.
- ``tagged fields`` (flexible versions only): uvarint count, then per field uvarint tag,
  uvarint size, ``size`` bytes. Unknown tags are skipped on read.

Every read is bounds-checked and raises ``ProtocolError`` (never ``IndexError``,
``struct.error`` or ``UnicodeDecodeError``): a length or count larger than the bytes that
remain fails before anything is allocated, and a negative length other than -1 fails.
``decode_message`` converts whatever slips through from ``struct`` or slicing into
``ProtocolError`` as a last line of defence.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import TypeAlias, TypeVar

from protocol.errors import ProtocolError
from protocol.fileslice import FileSlice, ResponseParts

__all__ = [
    "ZERO_UUID",
    "ProtocolError",
    "Records",
    "UnsupportedVersionError",
]

T = TypeVar("T")
M = TypeVar("M")

# What a ``records`` field holds: a view over the request bytes after decoding, or what the
# encoder should send: bytes in memory or a region of a segment file (sent with sendfile).
Records: TypeAlias = "bytes | bytearray | memoryview | FileSlice"
Part: TypeAlias = "bytes | bytearray | memoryview | FileSlice"

ZERO_UUID = uuid.UUID(int=0)

# Records at least this long go into their own part in ``encode_parts`` instead of being
# copied into the surrounding bytes.
RECORDS_INLINE_MAX_BYTES = 1024

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U64X2 = struct.Struct(">QQ")
_NULL_I16 = b"\xff\xff"
_NULL_I32 = b"\xff\xff\xff\xff"
_I32_FORMATS = tuple(f">{n}i" for n in range(256))
_I64_FORMATS = tuple(f">{n}q" for n in range(256))


class UnsupportedVersionError(ProtocolError):
    """A version the message does not have, or a value that version cannot carry.

    Raised like Kafka's ``UnsupportedVersionException`` when encoding a non-default,
    non-ignorable field at a version that lacks it.
    """


# ---------------------------------------------------------------------------------------
# varints


def read_uvarint(b: memoryview, p: int) -> tuple[int, int]:
    """Unsigned varint at ``p``: (value, position after it). At most 5 bytes (32 bits)."""
    n = len(b)
    value = 0
    shift = 0
    while shift <= 28:
        if p >= n:
            raise ProtocolError("truncated varint")
        byte = b[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > 0xFFFFFFFF:
                raise ProtocolError("varint does not fit in 32 bits")
            return value, p
        shift += 7
    raise ProtocolError("varint is longer than 5 bytes")


def read_varint(b: memoryview, p: int) -> tuple[int, int]:
    """Zig-zag signed varint (32 bits)."""
    raw, p = read_uvarint(b, p)
    return (raw >> 1) ^ -(raw & 1), p


def read_varlong(b: memoryview, p: int) -> tuple[int, int]:
    """Zig-zag signed varint of up to 64 bits (10 bytes)."""
    n = len(b)
    raw = 0
    shift = 0
    while shift <= 63:
        if p >= n:
            raise ProtocolError("truncated varlong")
        byte = b[p]
        p += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), p
        shift += 7
    raise ProtocolError("varlong is longer than 10 bytes")


_UVARINT_CACHE: tuple[bytes, ...] = tuple(bytes([i]) for i in range(128))


def uvarint(value: int) -> bytes:
    """Encode an unsigned varint (0 <= value < 2**32)."""
    if 0 <= value < 128:
        return _UVARINT_CACHE[value]
    if value < 0 or value > 0xFFFFFFFF:
        raise ProtocolError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value: int) -> bytes:
    """Encode a zig-zag signed 32-bit varint."""
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise ProtocolError(f"varint out of range: {value}")
    return uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong(value: int) -> bytes:
    """Encode a zig-zag signed 64-bit varint."""
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise ProtocolError(f"varlong out of range: {value}")
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


# ---------------------------------------------------------------------------------------
# lengths and counts


def _check_span(b: memoryview, p: int, n: int) -> int:
    end = p + n
    if end > len(b):
        raise ProtocolError(f"length {n} exceeds the {len(b) - p} bytes that remain")
    return end


def read_array_len(b: memoryview, p: int, nullable: bool) -> tuple[int, int]:
    """Classic int32 array count: (count or -1 for null, position). Count <= bytes left."""
    if p + 4 > len(b):
        raise ProtocolError("truncated array length")
    (n,) = _I32.unpack_from(b, p)
    p += 4
    if n < 0:
        if n == -1 and nullable:
            return -1, p
        raise ProtocolError(f"invalid array length {n}")
    if n > len(b) - p:
        raise ProtocolError(f"array of {n} elements but only {len(b) - p} bytes remain")
    return n, p


def read_compact_array_len(b: memoryview, p: int, nullable: bool) -> tuple[int, int]:
    """Compact array count (uvarint count + 1): (count or -1 for null, position)."""
    raw, p = read_uvarint(b, p)
    if raw == 0:
        if nullable:
            return -1, p
        raise ProtocolError("null array in a non-nullable field")
    n = raw - 1
    if n > len(b) - p:
        raise ProtocolError(f"array of {n} elements but only {len(b) - p} bytes remain")
    return n, p


def read_int32_array(b: memoryview, p: int, n: int) -> tuple[list[int], int]:
    end = _check_span(b, p, 4 * n)
    return list(struct.unpack_from(_I32_FORMATS[n] if n < 256 else f">{n}i", b, p)), end


def read_int64_array(b: memoryview, p: int, n: int) -> tuple[list[int], int]:
    end = _check_span(b, p, 8 * n)
    return list(struct.unpack_from(_I64_FORMATS[n] if n < 256 else f">{n}q", b, p)), end


def read_int8_array(b: memoryview, p: int, n: int) -> tuple[list[int], int]:
    end = _check_span(b, p, n)
    return list(struct.unpack_from(f">{n}b", b, p)), end


def pack_int32_array(v: list[int]) -> bytes:
    n = len(v)
    return struct.pack(_I32_FORMATS[n] if n < 256 else f">{n}i", *v)


def pack_int64_array(v: list[int]) -> bytes:
    n = len(v)
    return struct.pack(_I64_FORMATS[n] if n < 256 else f">{n}q", *v)


def pack_int8_array(v: list[int]) -> bytes:
    return struct.pack(f">{len(v)}b", *v)


# ---------------------------------------------------------------------------------------
# strings


def _utf8(b: memoryview, p: int, end: int) -> str:
    try:
        return str(b[p:end], "utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError(f"invalid UTF-8 in string: {e}") from None


def read_string(b: memoryview, p: int) -> tuple[str, int]:
    """Classic non-nullable string: int16 length + UTF-8."""
    if p + 2 > len(b):
        raise ProtocolError("truncated string length")
    (n,) = _I16.unpack_from(b, p)
    p += 2
    if n < 0:
        raise ProtocolError(f"invalid string length {n} in a non-nullable field")
    end = _check_span(b, p, n)
    return _utf8(b, p, end), end


def read_nullable_string(b: memoryview, p: int) -> tuple[str | None, int]:
    if p + 2 > len(b):
        raise ProtocolError("truncated string length")
    (n,) = _I16.unpack_from(b, p)
    p += 2
    if n < 0:
        if n == -1:
            return None, p
        raise ProtocolError(f"invalid string length {n}")
    end = _check_span(b, p, n)
    return _utf8(b, p, end), end


def read_compact_string(b: memoryview, p: int) -> tuple[str, int]:
    raw = b[p]
    if raw < 0x80:
        p += 1
    else:
        raw, p = read_uvarint(b, p)
    if raw == 0:
        raise ProtocolError("null string in a non-nullable field")
    if raw > 0x8000:
        raise ProtocolError(f"invalid string length {raw - 1}")  # as Kafka: at most 0x7fff
    end = p + raw - 1
    if end > len(b):
        raise ProtocolError(f"length {raw - 1} exceeds the {len(b) - p} bytes that remain")
    try:
        return str(b[p:end], "utf-8"), end
    except UnicodeDecodeError as e:
        raise ProtocolError(f"invalid UTF-8 in string: {e}") from None


def read_compact_nullable_string(b: memoryview, p: int) -> tuple[str | None, int]:
    raw = b[p]
    if raw < 0x80:
        p += 1
    else:
        raw, p = read_uvarint(b, p)
    if raw == 0:
        return None, p
    if raw > 0x8000:
        raise ProtocolError(f"invalid string length {raw - 1}")  # as Kafka: at most 0x7fff
    end = p + raw - 1
    if end > len(b):
        raise ProtocolError(f"length {raw - 1} exceeds the {len(b) - p} bytes that remain")
    try:
        return str(b[p:end], "utf-8"), end
    except UnicodeDecodeError as e:
        raise ProtocolError(f"invalid UTF-8 in string: {e}") from None


def _encode_str(s: str | None, max_len: int) -> bytes:
    if s is None:
        raise ProtocolError("null string in a non-nullable field")
    data = s.encode("utf-8")
    if len(data) > max_len:
        raise ProtocolError(f"string of {len(data)} bytes is longer than {max_len}")
    return data


def write_string(b: bytearray, s: str | None) -> None:
    data = _encode_str(s, 0x7FFF)
    b += _I16.pack(len(data))
    b += data


def write_nullable_string(b: bytearray, s: str | None) -> None:
    if s is None:
        b += _NULL_I16
    else:
        write_string(b, s)


def write_compact_string(b: bytearray, s: str | None) -> None:
    if s is None:
        raise ProtocolError("null string in a non-nullable field")
    data = s.encode("utf-8")
    n = len(data)
    if n < 127:
        b.append(n + 1)
    elif n > 0x7FFF:
        raise ProtocolError(f"string of {n} bytes is longer than {0x7FFF}")
    else:
        b += uvarint(n + 1)
    b += data


def write_compact_nullable_string(b: bytearray, s: str | None) -> None:
    if s is None:
        b.append(0)
    else:
        write_compact_string(b, s)


# ---------------------------------------------------------------------------------------
# bytes and records


def _read_bytes_len(b: memoryview, p: int, compact: bool) -> tuple[int, int]:
    """Length of a bytes field: (length or -1 for null, position of the data)."""
    if compact:
        raw, p = read_uvarint(b, p)
        return raw - 1, p
    if p + 4 > len(b):
        raise ProtocolError("truncated bytes length")
    (n,) = _I32.unpack_from(b, p)
    p += 4
    if n < -1:
        raise ProtocolError(f"invalid bytes length {n}")
    return n, p


def read_bytes(b: memoryview, p: int, compact: bool) -> tuple[bytes, int]:
    n, p = _read_bytes_len(b, p, compact)
    if n < 0:
        raise ProtocolError("null bytes in a non-nullable field")
    end = _check_span(b, p, n)
    return bytes(b[p:end]), end


def read_nullable_bytes(b: memoryview, p: int, compact: bool) -> tuple[bytes | None, int]:
    n, p = _read_bytes_len(b, p, compact)
    if n < 0:
        return None, p
    end = _check_span(b, p, n)
    return bytes(b[p:end]), end


def read_view(b: memoryview, p: int, compact: bool) -> tuple[memoryview, int]:
    """A bytes field as a view over the input (zeroCopy fields): no copy."""
    n, p = _read_bytes_len(b, p, compact)
    if n < 0:
        raise ProtocolError("null bytes in a non-nullable field")
    end = _check_span(b, p, n)
    return b[p:end], end


def read_nullable_view(b: memoryview, p: int, compact: bool) -> tuple[memoryview | None, int]:
    """A ``records`` or nullable zeroCopy field as a view over the input, or None."""
    n, p = _read_bytes_len(b, p, compact)
    if n < 0:
        return None, p
    end = _check_span(b, p, n)
    return b[p:end], end


def _bytes_len_prefix(n: int, compact: bool) -> bytes:
    return uvarint(n + 1) if compact else _I32.pack(n)


def write_bytes(b: bytearray, v: bytes | bytearray | memoryview | None, compact: bool) -> None:
    if v is None:
        raise ProtocolError("null bytes in a non-nullable field")
    b += _bytes_len_prefix(len(v), compact)
    b += v


def write_nullable_bytes(
    b: bytearray, v: bytes | bytearray | memoryview | None, compact: bool
) -> None:
    if v is None:
        b += b"\x00" if compact else _NULL_I32
    else:
        b += _bytes_len_prefix(len(v), compact)
        b += v


def write_records(
    b: bytearray, parts: list[Part], v: Records | None, compact: bool, nullable: bool
) -> None:
    """Write a ``records`` field; large views and FileSlices become parts of their own.

    ``b`` is the bytes being built; when a part is split off, what ``b`` holds so far is
    moved into ``parts`` first and ``b`` is cleared, so parts stay in wire order.
    """
    if v is None:
        if not nullable:
            raise ProtocolError("null records in a non-nullable field")
        b += b"\x00" if compact else _NULL_I32
        return
    if isinstance(v, FileSlice):
        b += _bytes_len_prefix(v.length, compact)
        if v.length:
            parts.append(bytes(b))
            b.clear()
            parts.append(v)
        return
    b += _bytes_len_prefix(len(v), compact)
    if len(v) < RECORDS_INLINE_MAX_BYTES:
        b += v
    else:
        parts.append(bytes(b))
        b.clear()
        parts.append(v)


# ---------------------------------------------------------------------------------------
# uuid and tagged fields


_new_object = object.__new__
_set_attr = object.__setattr__
_UUID = uuid.UUID
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


def read_uuid(b: memoryview, p: int) -> tuple[uuid.UUID, int]:
    """16 raw bytes as a UUID; the zero UUID (Kafka's ``Uuid.ZERO_UUID``) is shared."""
    if p + 16 > len(b):
        raise ProtocolError("truncated uuid")
    hi, lo = _U64X2.unpack_from(b, p)
    if not hi and not lo:
        return ZERO_UUID, p + 16
    # What uuid.UUID(int=...) does, without its argument parsing (2-3x faster).
    u = _new_object(_UUID)
    _set_attr(u, "int", (hi << 64) | lo)
    _set_attr(u, "is_safe", _SAFE_UNKNOWN)
    return u, p + 16


def read_uuid_array(b: memoryview, p: int, n: int) -> tuple[list[uuid.UUID], int]:
    out: list[uuid.UUID] = []
    for _ in range(n):
        u, p = read_uuid(b, p)
        out.append(u)
    return out, p


def read_tag_header(b: memoryview, p: int) -> tuple[int, int, int]:
    """One tagged field's header: (tag, end of its data, position of its data)."""
    tag, p = read_uvarint(b, p)
    size, p = read_uvarint(b, p)
    return tag, _check_span(b, p, size), p


def read_tag_count(b: memoryview, p: int) -> tuple[int, int]:
    n, p = read_uvarint(b, p)
    if n > len(b) - p:
        raise ProtocolError(f"{n} tagged fields but only {len(b) - p} bytes remain")
    return n, p


def skip_tagged_fields(b: memoryview, p: int) -> int:
    """Skip a tagged-fields section whose tags are all unknown to this version."""
    if p < len(b) and b[p] == 0:
        return p + 1
    n, p = read_tag_count(b, p)
    for _ in range(n):
        _tag, end, p = read_tag_header(b, p)
        p = end
    return p


def write_tagged(b: bytearray, tag: int, data: bytes | bytearray) -> None:
    b += uvarint(tag)
    b += uvarint(len(data))
    b += data


# ---------------------------------------------------------------------------------------
# whole messages

_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError, TypeError)


def as_view(buf: bytes | bytearray | memoryview) -> memoryview:
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def decode_message(
    table: Mapping[int, Callable[[memoryview, int], tuple[T, int]]],
    name: str,
    buf: bytes | bytearray | memoryview,
    version: int,
    offset: int = 0,
) -> tuple[T, int]:
    """Decode with the table's function for ``version``: (message, end position).

    Anything wrong with the bytes raises ``ProtocolError``; a version the table lacks raises
    ``UnsupportedVersionError``. Bytes after the message are left alone, as Kafka does.
    """
    fn = table.get(version)
    if fn is None:
        raise UnsupportedVersionError(f"{name} has no version {version}")
    # One name per except clause: mypyc types a name reused by several clauses as the
    # first clause's exception, and fails on the others (protocol.native).
    try:
        return fn(as_view(buf), offset)
    except ProtocolError as error:
        raise ProtocolError(f"{name} v{version}: {error}") from None
    except _DECODE_ERRORS as malformed:
        raise ProtocolError(f"{name} v{version}: malformed: {malformed}") from None
    except RecursionError:
        raise ProtocolError(f"{name} v{version}: nested too deeply") from None


_ENCODE_ERRORS = (struct.error, OverflowError, UnicodeEncodeError)


def encode_message_parts(
    table: Mapping[int, Callable[[M, bytearray, list[Part]], None]],
    name: str,
    obj: M,
    version: int,
) -> ResponseParts:
    """Encode ``obj`` at ``version`` as parts: bytes, views and FileSlices in wire order."""
    fn = table.get(version)
    if fn is None:
        raise UnsupportedVersionError(f"{name} has no version {version}")
    b = bytearray()
    parts: list[Part] = []
    try:
        fn(obj, b, parts)
    except UnsupportedVersionError as unsupported:  # one name per clause, as in decode_message
        raise UnsupportedVersionError(f"{name} v{version}: {unsupported}") from None
    except ProtocolError as error:
        raise ProtocolError(f"{name} v{version}: {error}") from None
    except _ENCODE_ERRORS as bad_value:
        raise ProtocolError(f"{name} v{version}: cannot encode: {bad_value}") from None
    if not parts:
        return [b]
    if b:
        parts.append(b)
    return parts


def encode_message(
    table: Mapping[int, Callable[[M, bytearray, list[Part]], None]],
    name: str,
    obj: M,
    version: int,
) -> bytes:
    """Encode ``obj`` into one bytes object (FileSlices are read from their files)."""
    parts = encode_message_parts(table, name, obj, version)
    if len(parts) == 1 and not isinstance(parts[0], FileSlice):
        return bytes(parts[0])
    return b"".join(p.read_bytes() if isinstance(p, FileSlice) else p for p in parts)

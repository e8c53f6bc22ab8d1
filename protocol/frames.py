"""Size-prefixed frames and the request/response headers of the Kafka protocol.

Frame layout (both directions)::

    int32 size        number of bytes that follow (not counting these 4)
    header            request header v0-v2 or response header v0-v1
    body              the generated message for (api key, api version)

Request header (``RequestHeader.json``)::

    v0: int16 api_key, int16 api_version, int32 correlation_id
    v1: v0 + client_id: nullable string (int16 length, -1 null)
    v2: v1 + tagged fields (uvarint count, ...); client_id stays a *classic* string

Response header (``ResponseHeader.json``)::

    v0: int32 correlation_id
    v1: v0 + tagged fields

Header versions follow the API's flexible versions (flexible: request v2 / response v1,
else request v1 / response v0), with Kafka's two exceptions: ApiVersions responses always
use response header v0 (a client must read the answer before it knows the broker's
versions), and ControlledShutdown v0 uses request header v0. An unknown api key is decoded
as header v1 (key, version, correlation id, client id) so the broker can still answer.
A null client id decodes as "", as in Kafka's ``RequestHeader.parse``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from protocol import primitives as _p
from protocol.errors import ProtocolError
from protocol.fileslice import FileSlice, ResponseParts, parts_length
from protocol.messages import (
    REQUEST_FLEXIBLE_VERSIONS,
    REQUESTS,
    RESPONSE_FLEXIBLE_VERSIONS,
    RESPONSES,
)

if TYPE_CHECKING:
    from protocol.messages import AnyRequest, AnyResponse

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_BYTES = 104857600

_SIZE = struct.Struct(">i")
_HDR0 = struct.Struct(">hhi")
_HDR1 = struct.Struct(">hhih")  # header v1/v2: ..., client id length
_CORR = struct.Struct(">i")
_CORR_SIZE = struct.Struct(">ii")

# api key -> first flexible version (None: never flexible), for requests and responses
# (tables, so that framing imports no message module).
_FLEX_REQ = REQUEST_FLEXIBLE_VERSIONS
_FLEX_RESP = RESPONSE_FLEXIBLE_VERSIONS


class Encodable(Protocol):
    """A generated message: what ``encode_response`` and ``encode_request`` accept."""

    def encode_parts(self, version: int) -> ResponseParts: ...


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = ""


# ---------------------------------------------------------------------------------------
# header versions


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version Kafka uses for (api key, version); 1 for unknown keys."""
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    start = _FLEX_REQ.get(api_key)
    return 2 if start is not None and api_version >= start else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version for (api key, version); ApiVersions always uses v0."""
    if api_key == API_VERSIONS_KEY:
        return 0
    start = _FLEX_RESP.get(api_key)
    return 1 if start is not None and api_version >= start else 0


# ---------------------------------------------------------------------------------------
# frames


def decode_frame_size(prefix: bytes | bytearray | memoryview,
                      max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> int:
    """The size in a 4-byte frame prefix; ProtocolError if negative or over the limit."""
    if len(prefix) < 4:
        raise ProtocolError("truncated frame size")
    size: int = _SIZE.unpack_from(prefix, 0)[0]
    if size < 0:
        raise ProtocolError(f"negative frame size {size}")
    if size > max_frame_bytes:
        raise ProtocolError(f"frame of {size} bytes is larger than the {max_frame_bytes} allowed")
    return size


def size_prefix(length: int) -> bytes:
    return _SIZE.pack(length)


# ---------------------------------------------------------------------------------------
# requests


def decode_request_header(frame: memoryview | bytes | bytearray) -> tuple[RequestHeader, int]:
    """Decode the request header at the start of ``frame`` (the bytes after the size).

    Returns the header and the offset where the body starts. Works for unknown api keys and
    unsupported versions (the header version comes from the flexible range alone).
    """
    size = len(frame)
    if type(frame) is bytes and size >= 10:
        # Fast path (the broker's frames are bytes): header v1 or v2 with a client id and,
        # for v2, no tagged fields, read with one struct call; anything else (header v0
        # included) takes the general path below.
        api_key, api_version, correlation_id, n = _HDR1.unpack_from(frame, 0)
        if api_key != CONTROLLED_SHUTDOWN_KEY or api_version != 0:
            start = _FLEX_REQ.get(api_key)
            flexible = start is not None and api_version >= start
            end = 10 + n
            if n >= 0 and end <= size and (not flexible or (end < size and frame[end] == 0)):
                try:
                    fast_client_id = frame[10:end].decode()
                except UnicodeDecodeError:
                    pass  # the general path reports it
                else:
                    return (RequestHeader(api_key, api_version, correlation_id, fast_client_id),
                            end + 1 if flexible else end)
    if size < 8:
        raise ProtocolError(f"request header needs 8 bytes, frame has {size}")
    api_key, api_version, correlation_id = _HDR0.unpack_from(frame, 0)
    # request_header_version, inline (once per request)
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        hv = 0
    else:
        start = _FLEX_REQ.get(api_key)
        hv = 2 if start is not None and api_version >= start else 1
    if hv == 0:
        return RequestHeader(api_key, api_version, correlation_id, ""), 8
    b = _p.as_view(frame)
    try:
        client_id, p = _p.read_nullable_string(b, 8)
        if hv == 2:
            p = _p.skip_tagged_fields(b, p)
    except ProtocolError as error:  # one name per clause (protocol.primitives.decode_message)
        raise ProtocolError(f"request header: {error}") from None
    except (IndexError, ValueError) as malformed:
        raise ProtocolError(f"request header: malformed: {malformed}") from None
    return RequestHeader(api_key, api_version, correlation_id,
                         "" if client_id is None else client_id), p


def encode_request_header(header: RequestHeader) -> bytes:
    hv = request_header_version(header.api_key, header.api_version)
    b = bytearray(_HDR0.pack(header.api_key, header.api_version, header.correlation_id))
    if hv >= 1:
        _p.write_nullable_string(b, header.client_id)
    if hv == 2:
        b.append(0)
    return bytes(b)


def encode_request(header: RequestHeader, body: Encodable | bytes) -> bytes:
    """A whole request frame: size prefix, header, body (for clients, tools and tests)."""
    head = encode_request_header(header)
    if isinstance(body, bytes | bytearray | memoryview):
        data = bytes(body)
    else:
        data = b"".join(p.read_bytes() if isinstance(p, FileSlice) else bytes(p)
                        for p in body.encode_parts(header.api_version))
    return _SIZE.pack(len(head) + len(data)) + head + data


# ---------------------------------------------------------------------------------------
# responses


def encode_response_header(correlation_id: int, api_key: int, api_version: int) -> bytes:
    if response_header_version(api_key, api_version) == 1:
        return _CORR.pack(correlation_id) + b"\x00"
    return _CORR.pack(correlation_id)


def encode_response(correlation_id: int, api_key: int, api_version: int,
                    body: Encodable | bytes | bytearray | memoryview | ResponseParts
                    ) -> ResponseParts:
    """A whole response frame as parts: size prefix + header first, then the body parts.

    ``body`` is a generated message (encoded at ``api_version``), encoded bytes, or parts
    already encoded. The size counts FileSlice lengths, so the frame is exact.
    """
    if isinstance(body, bytes | bytearray | memoryview):
        parts: ResponseParts = [body]
    elif isinstance(body, list):
        parts = body
    else:
        parts = body.encode_parts(api_version)
    flexible = response_header_version(api_key, api_version) == 1
    if len(parts) == 1 and type(parts[0]) is bytearray and len(parts[0]) < 65536:
        # The common case (a small response encoded into one buffer): one bytes object.
        only = parts[0]
        if flexible:
            return [_CORR_SIZE.pack(len(only) + 5, correlation_id) + b"\x00" + only]
        return [_CORR_SIZE.pack(len(only) + 4, correlation_id) + only]
    size = parts_length(parts) + (5 if flexible else 4)
    head = _CORR_SIZE.pack(size, correlation_id) + (b"\x00" if flexible else b"")
    first = parts[0] if parts else b""
    if isinstance(first, bytes | bytearray) and len(first) < 65536:
        # Merge the head into the first bytes part: one fewer write for small responses.
        return [head + first, *parts[1:]]
    return [head, *parts]


def decode_response_header(frame: memoryview | bytes | bytearray, api_key: int,
                           api_version: int) -> tuple[int, int]:
    """(correlation id, offset where the body starts) of a response frame (size stripped)."""
    b = _p.as_view(frame)
    if len(b) < 4:
        raise ProtocolError("truncated response header")
    (correlation_id,) = _CORR.unpack_from(b, 0)
    p = 4
    if response_header_version(api_key, api_version) == 1:
        try:
            p = _p.skip_tagged_fields(b, p)
        except (IndexError, ValueError) as e:
            raise ProtocolError(f"response header: {e}") from None
    return correlation_id, p


def decode_response(frame: memoryview | bytes | bytearray, api_key: int,
                    api_version: int) -> tuple[int, AnyResponse]:
    """(correlation id, decoded body) of a response frame (size prefix already stripped)."""
    correlation_id, p = decode_response_header(frame, api_key, api_version)
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise _p.UnsupportedVersionError(f"unknown api key {api_key}")
    body: AnyResponse = cls.decode_at(frame, api_version, p)[0]
    return correlation_id, body


def decode_request(frame: memoryview | bytes | bytearray) -> tuple[RequestHeader, AnyRequest]:
    """Header and decoded body of a request frame (size prefix already stripped)."""
    header, p = decode_request_header(frame)
    cls = REQUESTS.get(header.api_key)
    if cls is None:
        raise _p.UnsupportedVersionError(f"unknown api key {header.api_key}")
    body: AnyRequest = cls.decode_at(frame, header.api_version, p)[0]
    return header, body

"""The request header's fast path (``bytes`` frames, as the broker reads them) gives the same
answer as the general path (any other buffer type) for every header shape: client ids of
each kind, tagged fields, truncation and bad UTF-8; and the one-buffer response encoding
is byte-identical to the general parts encoding."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import ProtocolError
from protocol.frames import RequestHeader, decode_request_header, encode_response
from protocol.messages.produce import ProduceResponse

pytestmark = pytest.mark.timeout(60)


def both(frame: bytes) -> tuple[object, object]:
    def run(buf: bytes | bytearray) -> object:
        try:
            header, offset = decode_request_header(buf)
        except ProtocolError as exc:
            return ("error", type(exc))
        return (header, offset)

    return run(frame), run(bytearray(frame))  # bytearray: the general path


@pytest.mark.parametrize("api_key,api_version", [(0, 9), (0, 8), (18, 3), (3, 12), (1, 4)])
@pytest.mark.parametrize("client", [b"\x00\x00", b"\x00\x01x", b"\xff\xff", b"\x00\x02\xff\xfe",
                                    b"\x00\x05ab", b"\x00", b"\xff\xfe", b"\x00\x07rdkafka"])
@pytest.mark.parametrize("tail", [b"", b"\x00", b"\x01\x00\x01z", b"\x00body"])
def test_fast_and_general_paths_agree(api_key: int, api_version: int, client: bytes,
                                      tail: bytes) -> None:
    frame = struct.pack(">hhi", api_key, api_version, 77) + client + tail
    fast, general = both(frame)
    assert fast == general


@given(st.binary(min_size=8, max_size=40))
def test_fast_and_general_paths_agree_on_any_bytes(frame: bytes) -> None:
    fast, general = both(frame)
    assert fast == general


def test_fast_path_reads_a_flexible_header() -> None:
    frame = struct.pack(">hhih", 0, 9, 5, 7) + b"rdkafka" + b"\x00" + b"body"
    assert decode_request_header(frame) == (RequestHeader(0, 9, 5, "rdkafka"), 18)


@pytest.mark.parametrize("version", [3, 8, 9, 10])
def test_one_buffer_response_matches_general_encoding(version: int) -> None:
    body = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[ProduceResponse.PartitionProduceResponse(
            index=0, error_code=0, base_offset=5, log_append_time_ms=-1, log_start_offset=0)])],
        throttle_time_ms=0)
    (fast,) = encode_response(9, 0, version, body)
    assert isinstance(fast, bytes)
    encoded = b"".join(bytes(p) for p in body.encode_parts(version))  # type: ignore[arg-type]
    general = encode_response(9, 0, version, [memoryview(encoded)])  # a view: general path
    assert bytes(fast) == b"".join(bytes(p) for p in general)  # type: ignore[arg-type]
    flexible = version >= 9
    assert struct.unpack_from(">ii", fast) == (len(fast) - 4, 9)
    if flexible:
        assert fast[8:9] == b"\x00"  # the response header's empty tagged fields

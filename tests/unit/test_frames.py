"""Framing and headers: header versions per API (with Kafka's two exceptions), request and
response frames byte-for-byte against kafka-python, and FileSlice parts in responses."""

from __future__ import annotations

import os
import struct
import tempfile
import uuid
from collections.abc import Iterator
from typing import BinaryIO

import pytest
from kafka.protocol.metadata import ApiVersionsRequest as KpApiVersionsRequest
from kafka.protocol.metadata import MetadataRequest as KpMetadataRequest
from kafka.protocol.metadata import MetadataResponse as KpMetadataResponse

from protocol.errors import ProtocolError
from protocol.fileslice import FileSlice, ResponseParts, parts_length
from protocol.frames import (
    RequestHeader,
    decode_frame_size,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from protocol.messages import (
    REQUESTS,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ControlledShutdownRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)

pytestmark = pytest.mark.timeout(30)


def test_header_versions_follow_flexible_versions() -> None:
    assert request_header_version(0, 8) == 1  # Produce v8: classic
    assert request_header_version(0, 9) == 2  # Produce v9: flexible
    assert response_header_version(0, 8) == 0
    assert response_header_version(0, 9) == 1
    assert request_header_version(3, 9) == 2 and response_header_version(3, 9) == 1
    for key, cls in REQUESTS.items():
        start = cls.FLEXIBLE_VERSIONS_START
        for v in range(cls.LOWEST_VERSION, cls.HIGHEST_VERSION + 1):
            flexible = start is not None and v >= start
            if key != 7 or v != 0:
                assert request_header_version(key, v) == (2 if flexible else 1), (key, v)
            if key != 18:
                assert response_header_version(key, v) == (1 if flexible else 0), (key, v)


def test_header_version_exceptions() -> None:
    # ApiVersions responses always use response header v0, even when the body is flexible.
    for v in range(ApiVersionsResponse.LOWEST_VERSION, ApiVersionsResponse.HIGHEST_VERSION + 1):
        assert response_header_version(18, v) == 0
    assert request_header_version(18, 3) == 2
    # ControlledShutdown v0 uses request header v0 (no client id).
    assert request_header_version(7, 0) == 0
    assert request_header_version(7, 1) == 1
    assert request_header_version(7, 3) == 2
    frame = struct.pack(">hhi", 7, 0, 42) + struct.pack(">i", 5)  # body: broker id 5
    header, offset = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, offset) == (7, 0, 42, 8)
    _, body = decode_request(frame)
    assert body == ControlledShutdownRequest(broker_id=5)


def test_unknown_api_key_and_unsupported_version_headers() -> None:
    # Unknown key: header v1 (key, version, correlation id, client id).
    frame = struct.pack(">hhih", 999, 3, 7, 3) + b"abc" + b"body"
    header, offset = decode_request_header(frame)
    assert header == RequestHeader(999, 3, 7, "abc") and offset == 13
    # ApiVersions v99 (newer client): the flexible range decides header v2.
    frame = struct.pack(">hhih", 18, 99, 8, 1) + b"c" + b"\x00" + b"rest"
    header, offset = decode_request_header(frame)
    assert header == RequestHeader(18, 99, 8, "c") and frame[offset:] == b"rest"


def test_request_header_null_client_id_and_truncation() -> None:
    header, offset = decode_request_header(struct.pack(">hhih", 3, 1, 1, -1))
    assert header.client_id == "" and offset == 10
    for bad in (b"", b"\x00\x03\x00\x01\x00\x00\x00", struct.pack(">hhih", 3, 1, 1, 10) + b"x"):
        with pytest.raises(ProtocolError):
            decode_request_header(bad)
    # Header v2 whose tagged-field section runs past the frame.
    with pytest.raises(ProtocolError):
        decode_request_header(struct.pack(">hhih", 3, 12, 1, 0) + b"\x01\x00\x05")


def test_frame_size_limits() -> None:
    assert decode_frame_size(struct.pack(">i", 100)) == 100
    with pytest.raises(ProtocolError, match="negative"):
        decode_frame_size(struct.pack(">i", -1))
    with pytest.raises(ProtocolError, match="larger"):
        decode_frame_size(struct.pack(">i", 1 << 30), max_frame_bytes=1 << 20)
    with pytest.raises(ProtocolError):
        decode_frame_size(b"\x00\x00")


def test_requests_match_kafka_python_bytes() -> None:
    ours = encode_request(RequestHeader(18, 3, 11, "kafka-python"),
                          ApiVersionsRequest(client_software_name="kafka-python",
                                             client_software_version="3.0.12"))
    kp = KpApiVersionsRequest(client_software_name="kafka-python",
                              client_software_version="3.0.12", version=3)
    kp.with_header(correlation_id=11, client_id="kafka-python")
    assert ours == kp.encode(header=True, framed=True)

    for version in (4, 9, 12):
        topic = MetadataRequest.MetadataRequestTopic(name="t")
        req = MetadataRequest(topics=[topic], allow_auto_topic_creation=True)
        ours = encode_request(RequestHeader(3, version, 5, "c"), req)
        kp_req = KpMetadataRequest(topics=[KpMetadataRequest.MetadataRequestTopic(
            name="t", version=version)], allow_auto_topic_creation=True, version=version)
        kp_req.with_header(correlation_id=5, client_id="c")
        assert ours == kp_req.encode(header=True, framed=True), version
        header, body = decode_request(ours[4:])
        assert header == RequestHeader(3, version, 5, "c") and body == req


def test_responses_match_kafka_python_bytes() -> None:
    for version in (8, 9, 12):
        resp = MetadataResponse(
            brokers=[MetadataResponse.MetadataResponseBroker(1, "h", 9092, None)],
            cluster_id="cid", controller_id=1,
            topics=[MetadataResponse.MetadataResponseTopic(
                name="t", topic_id=uuid.uuid4() if version >= 10 else uuid.UUID(int=0))],
        )
        parts = encode_response(77, 3, version, resp)
        wire = b"".join(bytes(p) for p in parts if not isinstance(p, FileSlice))
        kp = KpMetadataResponse.decode(wire, version=version, header=True, framed=True)
        assert kp.header.correlation_id == 77
        assert kp.cluster_id == "cid" and kp.topics[0].name == "t"
        correlation_id, body = decode_response(wire[4:], 3, version)
        assert correlation_id == 77 and body == resp
        assert struct.unpack(">i", wire[:4])[0] == len(wire) - 4


def test_api_versions_response_uses_header_v0() -> None:
    resp = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(18, 0, 4)])
    wire = b"".join(bytes(p) for p in encode_response(3, 18, 3, resp)
                    if not isinstance(p, FileSlice))
    # size, correlation id, then the body at once: no tagged-fields byte in the header.
    assert wire[8:] == resp.encode(3)
    assert decode_response(wire[4:], 18, 3) == (3, resp)


# -- FileSlice parts ------------------------------------------------------------------------


@pytest.fixture
def segment() -> Iterator[BinaryIO]:
    with tempfile.TemporaryFile() as f:
        f.write(os.urandom(100 * 300))
        f.flush()
        yield f


def _fetch_response(file: BinaryIO, version: int, n: int = 100) -> FetchResponse:
    parts = [FetchResponse.PartitionData(partition_index=i, high_watermark=1000 + i,
                                         records=FileSlice(file, i * 300, 300 - i))
             for i in range(n)]
    topic = FetchResponse.FetchableTopicResponse(
        topic="t" if version < 13 else "", topic_id=uuid.UUID(int=5) if version >= 13
        else uuid.UUID(int=0), partitions=parts)
    return FetchResponse(responses=[topic])


def _materialize(parts: ResponseParts) -> bytes:
    return b"".join(p.read_bytes() if isinstance(p, FileSlice) else bytes(p) for p in parts)


@pytest.mark.parametrize("version", [4, 11, 12, 16])  # classic int32 and compact uvarint lengths
def test_fetch_response_file_slices(segment: BinaryIO, version: int) -> None:
    resp = _fetch_response(segment, version)
    parts = encode_response(9, 1, version, resp)
    slices = [p for p in parts if isinstance(p, FileSlice)]
    # Every record slice is passed through by identity: no record bytes were copied.
    assert [id(s) for s in slices] == [id(p.records) for p in resp.responses[0].partitions]
    kinds = [isinstance(p, FileSlice) for p in parts]
    # Classic versions end with the last slice; flexible ones with tagged-field bytes.
    assert kinds == [False, True] * 100 + ([False] if version >= 12 else [])
    byte_parts = sum(len(p) for p in parts if not isinstance(p, FileSlice))
    assert byte_parts < 100 * 80  # headers only
    # The frame size counts the FileSlice lengths exactly.
    wire = _materialize(parts)
    assert struct.unpack(">i", wire[:4])[0] == parts_length(parts) - 4 == len(wire) - 4
    # Reading the file regions and decoding with the normal decoder gives the same data.
    correlation_id, body = decode_response(wire[4:], 1, version)
    assert correlation_id == 9
    assert isinstance(body, FetchResponse)
    segment.seek(0)
    data = segment.read()
    for i, p in enumerate(body.responses[0].partitions):
        assert p.records == data[i * 300: i * 300 + 300 - i]
        assert p.high_watermark == 1000 + i
    # Same bytes as encoding the same response with the records in memory.
    in_memory = _fetch_response(segment, version)
    for i, p in enumerate(in_memory.responses[0].partitions):
        p.records = data[i * 300: i * 300 + 300 - i]
    assert wire[8:].endswith(in_memory.encode(version))


def test_empty_and_null_records(segment: BinaryIO) -> None:
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[FetchResponse.PartitionData(records=FileSlice(segment, 0, 0)),
                               FetchResponse.PartitionData(records=None)])])
    for version in (4, 12):
        parts = resp.encode_parts(version)
        assert not any(isinstance(p, FileSlice) for p in parts)
        back = FetchResponse.decode(_materialize(parts), version)
        assert back.responses[0].partitions[0].records == b""
        assert back.responses[0].partitions[1].records is None


def test_produce_request_decode_does_not_copy_records() -> None:
    batch = os.urandom(1 << 20)
    req = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
        "t", [ProduceRequest.PartitionProduceData(0, batch)])])
    frame = bytearray(encode_request(RequestHeader(0, 9, 1, "p"), req))
    view = memoryview(frame)[4:]
    _header, body = decode_request(view)
    assert isinstance(body, ProduceRequest)
    records = body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert records.obj is frame  # a view over the frame, not a copy
    assert records == batch
    at = frame.find(batch[:64])
    frame[at] ^= 0xFF  # writes to the frame show through the view
    assert records[0] == batch[0] ^ 0xFF

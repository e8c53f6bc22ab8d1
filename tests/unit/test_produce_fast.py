"""protocol.produce_fast against the generated Produce codec, for every version it serves:
what it reads equals what the generated decoder reads, and it reads nothing the generated
decoder would refuse; the frames it writes equal the generated encoding byte for byte."""

from __future__ import annotations

import random

import pytest

from protocol import produce_fast
from protocol.errors import ErrorCode, ProtocolError
from protocol.frames import RequestHeader, decode_request_header, encode_request, encode_response
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.produce_fast import (
    decode_single,
    encode_single_response,
    single_response_template,
)
from protocol.records import NewRecord, build_batch

VERSIONS = range(3, 12)
Req = ProduceRequest
Resp = ProduceResponse


def _request(version: int, *, topic: str = "topic", index: int = 0, acks: int = 1,
             records: bytes | None = b"", transactional_id: str | None = None,
             topics: list[ProduceRequest.TopicProduceData] | None = None) -> bytes:
    """A whole request frame (size prefix stripped), as a client encodes it."""
    body = Req(transactional_id=transactional_id, acks=acks, timeout_ms=30_000, topic_data=(
        topics if topics is not None
        else [Req.TopicProduceData(topic, [Req.PartitionProduceData(index, records)])]))
    return encode_request(RequestHeader(0, version, 7, "client-1"), body)[4:]


def _generated(frame: bytes) -> tuple[int, int, str, int, bytes] | None:
    """What the generated decoder reads, in decode_single's terms; None: it refuses the
    frame or reads another shape (several partitions, a transactional id, null records)."""
    header, offset = decode_request_header(frame)
    try:
        body, _ = Req.decode_at(frame, header.api_version, offset)
    except ProtocolError:
        return None
    if body.transactional_id is not None or len(body.topic_data) != 1:
        return None
    parts = body.topic_data[0].partition_data
    if len(parts) != 1 or parts[0].records is None:
        return None
    return (body.acks, body.timeout_ms, body.topic_data[0].name, parts[0].index,
            bytes(parts[0].records))


def _fast(frame: bytes) -> tuple[int, int, str, int, bytes] | None:
    header, offset = decode_request_header(frame)
    got = decode_single(frame, offset, header.api_version)
    if got is None:
        return None
    acks, timeout_ms, topic, index, records = got
    return acks, timeout_ms, topic, index, bytes(records)


def _batch(value_bytes: int) -> bytes:
    return build_batch([NewRecord(None, b"v" * value_bytes, (), None)])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("value_bytes", [0, 10, 100, 300, 20_000])  # 1-, 2- and 3-byte lengths
@pytest.mark.parametrize("topic", ["t", "topic-1", "ünïcode-töpic", "x" * 126])
def test_reads_what_the_generated_decoder_reads(version: int, value_bytes: int,
                                                topic: str) -> None:
    for acks, index in [(1, 0), (-1, 7), (0, 2**31 - 1)]:
        frame = _request(version, topic=topic, index=index, acks=acks,
                         records=_batch(value_bytes))
        expected = _generated(frame)
        assert expected is not None
        if len(topic.encode()) >= 0x7F and version >= 9:
            assert _fast(frame) is None  # a two-byte name length: the generated decoder's
        else:
            assert _fast(frame) == expected
        # Bytes after the body are ignored by both.
        assert _fast(frame + b"\x00\x01") == _fast(frame)


@pytest.mark.parametrize("version", VERSIONS)
def test_other_shapes_are_left_to_the_generated_decoder(version: int) -> None:
    records = _batch(10)
    two_parts = [Req.TopicProduceData("a", [Req.PartitionProduceData(0, records),
                                            Req.PartitionProduceData(1, records)])]
    two_topics = [Req.TopicProduceData("a", [Req.PartitionProduceData(0, records)]),
                  Req.TopicProduceData("b", [Req.PartitionProduceData(0, records)])]
    for frame in [
        _request(version, transactional_id="tx", records=records),
        _request(version, records=None),
        _request(version, topics=[]),
        _request(version, topics=two_parts),
        _request(version, topics=two_topics),
        _request(version, topics=[Req.TopicProduceData("a", [])]),
    ]:
        assert _fast(frame) is None
        _header, offset = decode_request_header(frame)
        Req.decode_at(frame, version, offset)  # the generated decoder serves them


@pytest.mark.parametrize("version", range(9, 12))
def test_tagged_fields_are_left_to_the_generated_decoder(version: int) -> None:
    frame = _request(version, records=_batch(10))
    # The three tag counts at the end: partition, topic, request. An unknown tag (tag 5,
    # 1 byte) in any of them is skipped by the generated decoder, not served here.
    for back in (3, 2, 1):
        at = len(frame) - back
        tagged = frame[:at] + b"\x01\x05\x01\xaa" + frame[at + 1:]
        assert _generated(tagged) == _generated(frame)
        assert _fast(tagged) is None


def test_versions_outside_3_to_11_are_not_served() -> None:
    frame = _request(3, records=_batch(10))
    _header, offset = decode_request_header(frame)
    for version in (0, 1, 2, 12):
        assert decode_single(frame, offset, version) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_never_reads_what_the_generated_decoder_refuses(version: int) -> None:
    """Every truncation and random corruption of a request: the fast read is None or equal
    to the generated decoder's (which then accepts it); it never raises."""
    frame = _request(version, topic="orders", index=3, records=_batch(200))
    _header, offset = decode_request_header(frame)
    for cut in range(offset, len(frame)):
        got = _fast(frame[:cut])
        assert got is None or got == _generated(frame[:cut])
    rng = random.Random(version)
    for _ in range(3000):
        mutated = bytearray(frame)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(offset, offset + 40)] = rng.randrange(256)
        got = _fast(bytes(mutated))
        if got is not None:
            assert got == _generated(bytes(mutated))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("topic", ["t", "ünïcode-töpic", "x" * 126])
def test_response_frame_is_the_generated_encoding(version: int, topic: str) -> None:
    cases = [
        (0, ErrorCode.NO_ERROR, 0, -1, 0, 0),
        (5, ErrorCode.NO_ERROR, 123_456_789_012, 1_700_000_000_000, 42, 0),
        (2**31 - 1, ErrorCode.NO_ERROR, 2**63 - 1, -1, -1, 2**31 - 1),
        (1, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, 1500),
    ]
    for correlation_id, (index, error, base, append_time, start, throttle) in enumerate(cases):
        expected = encode_response(correlation_id, 0, version, Resp(
            responses=[Resp.TopicProduceResponse(topic, [Resp.PartitionProduceResponse(
                index=index, error_code=error, base_offset=base,
                log_append_time_ms=append_time, log_start_offset=start)])],
            throttle_time_ms=throttle))
        got = encode_single_response(correlation_id, version, topic, index, error, base,
                                     append_time, start, throttle)
        assert got == b"".join(bytes(p) for p in expected)  # type: ignore[arg-type]


def test_response_long_names_and_other_versions_are_left_to_the_generated_encoder() -> None:
    assert encode_single_response(1, 11, "x" * 127, 0, 0, 0, -1, 0, 0) is None
    assert encode_single_response(1, 11, "é" * 64, 0, 0, 0, -1, 0, 0) is None  # 128 bytes
    for version in (0, 1, 2, 12):
        assert encode_single_response(1, version, "t", 0, 0, 0, -1, 0, 0) is None


def _generated_response(correlation_id: int, version: int, topic: str, index: int,
                        base: int, start: int) -> bytes:
    expected = encode_response(correlation_id, 0, version, Resp(
        responses=[Resp.TopicProduceResponse(topic, [Resp.PartitionProduceResponse(
            index=index, error_code=0, base_offset=base, log_append_time_ms=-1,
            log_start_offset=start)])], throttle_time_ms=0))
    return b"".join(bytes(p) for p in expected)  # type: ignore[arg-type]


@pytest.mark.parametrize("version", VERSIONS)
def test_response_frames_made_again_from_what_is_kept_per_partition(version: int) -> None:
    """The second answer for a partition and version comes from what the first kept (its
    fixed bytes and layout), and so do answers after the kept entries were emptied (more
    partitions answered than ``FRAMES_MAX``)."""
    for correlation_id, base in enumerate((0, 7, 2**40, 3)):
        for index in (0, 1):
            got = encode_single_response(correlation_id, version, "kept", index, 0, base, -1,
                                         base // 2, 0)
            assert got == _generated_response(correlation_id, version, "kept", index, base,
                                              base // 2)
    for index in range(produce_fast.FRAMES_MAX + 5):
        encode_single_response(1, version, "many", index, 0, 0, -1, 0, 0)
    assert len(produce_fast._FRAMES) <= produce_fast.FRAMES_MAX
    for index in (0, produce_fast.FRAMES_MAX + 4, 5):
        got = encode_single_response(9, version, "many", index, 0, 11, -1, 2, 0)
        assert got == _generated_response(9, version, "many", index, 11, 2)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("topic", ["t", "ünïcode-töpic", "x" * 126])
def test_response_template_frames_are_the_generated_encoding(version: int, topic: str) -> None:
    """A group's answers from its template (correlation id and base offset set in it) are
    the generated encoding byte for byte, as encode_single_response's."""
    for index, append_time, start in ((0, -1, 0), (7, 1_700_000_000_000, 42), (2**31 - 1, -1, -1)):
        template = single_response_template(version, topic, index, 0, append_time, start, 0)
        assert template is not None
        layout, head, middle, tail = template
        for correlation_id, base in ((0, 0), (1, 5), (2**31 - 1, 2**63 - 1), (-1, 123_456)):
            got = layout.pack(head, correlation_id, middle, base, tail)
            expected = encode_response(correlation_id, 0, version, Resp(
                responses=[Resp.TopicProduceResponse(topic, [Resp.PartitionProduceResponse(
                    index=index, error_code=0, base_offset=base,
                    log_append_time_ms=append_time, log_start_offset=start)])],
                throttle_time_ms=0))
            assert got == b"".join(bytes(p) for p in expected)  # type: ignore[arg-type]
            assert got == encode_single_response(correlation_id, version, topic, index, 0,
                                                 base, append_time, start, 0)


def test_response_template_is_none_where_the_single_encoding_is() -> None:
    assert single_response_template(11, "x" * 127, 0, 0, -1, 0, 0) is None
    for version in (0, 1, 2, 12):
        assert single_response_template(version, "t", 0, 0, -1, 0, 0) is None

"""protocol.fetch_fast against the generated Fetch codec, for every version it serves: what
it reads equals what the generated decoder reads, and it reads nothing the generated decoder
would refuse or read as another shape; the frames it writes equal the generated encoding
byte for byte."""

from __future__ import annotations

import random
import tempfile
import uuid

import pytest

from protocol.errors import ProtocolError
from protocol.fetch_fast import (
    FLEXIBLE_TAIL,
    SingleFetch,
    decode_single,
    encode_single_response_head,
)
from protocol.fileslice import FileSlice
from protocol.frames import RequestHeader, decode_request_header, encode_request, encode_response
from protocol.messages.fetch import FetchRequest, FetchResponse

VERSIONS = range(4, 18)
Req = FetchRequest
Resp = FetchResponse
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def _request(version: int, *, topic: str = "topic", partition: int = 0, replica_id: int = -1,
             max_wait_ms: int = 500, min_bytes: int = 1, max_bytes: int = 52_428_800,
             isolation_level: int = 1, session_id: int = 0, session_epoch: int = -1,
             fetch_offset: int = 42, partition_max_bytes: int = 1_048_576,
             current_leader_epoch: int = -1, two_partitions: bool = False,
             two_topics: bool = False, forgotten: bool = False, rack_id: str = "",
             cluster_id: str | None = None) -> bytes:
    """A whole request frame (size prefix stripped), as a client encodes it."""
    def part(index: int) -> Req.FetchPartition:
        return Req.FetchPartition(partition=index, fetch_offset=fetch_offset,
                                  partition_max_bytes=partition_max_bytes,
                                  current_leader_epoch=current_leader_epoch if version >= 9
                                  else -1, log_start_offset=-1 if version < 5 else 7,
                                  last_fetched_epoch=3 if version >= 12 else -1)

    parts = [part(partition)] + ([part(partition + 1)] if two_partitions else [])
    topics = [Req.FetchTopic(topic=topic, topic_id=TOPIC_ID, partitions=parts)]
    if two_topics:
        topics.append(Req.FetchTopic(topic=topic + "2", topic_id=uuid.uuid4(),
                                     partitions=[part(0)]))
    body = Req(
        replica_id=replica_id if version < 15 else -1,
        replica_state=Req.ReplicaState(replica_id=replica_id if version >= 15 else -1),
        max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=session_id if version >= 7 else 0,
        session_epoch=session_epoch if version >= 7 else -1, topics=topics,
        forgotten_topics_data=[Req.ForgottenTopic(topic="gone", topic_id=TOPIC_ID,
                                                  partitions=[1])] if forgotten else [],
        rack_id=rack_id if version >= 11 else "",
        cluster_id=cluster_id if version >= 12 else None)
    return encode_request(RequestHeader(1, version, 7, "client-1"), body)[4:]


def _generated(frame: bytes) -> SingleFetch | None:
    """What the generated decoder reads, in decode_single's terms; None: it refuses the
    frame or reads another shape."""
    header, offset = decode_request_header(frame)
    version = header.api_version
    try:
        body, _ = Req.decode_at(frame, version, offset)
    except ProtocolError:
        return None
    replica_id = body.replica_state.replica_id if version >= 15 else body.replica_id
    if (replica_id != -1 or body.session_id != 0 or body.session_epoch != -1
            or len(body.topics) != 1 or len(body.topics[0].partitions) != 1
            or body.forgotten_topics_data or body.rack_id or body.cluster_id is not None
            or body.replica_state != Req.ReplicaState()):
        return None
    topic = body.topics[0]
    p = topic.partitions[0]
    if p.replica_directory_id != uuid.UUID(int=0):
        return None
    return SingleFetch(body.max_wait_ms, body.min_bytes, body.max_bytes, body.isolation_level,
                       topic.topic if version < 13 else "",
                       topic.topic_id if version >= 13 else uuid.UUID(int=0),
                       p.partition, p.current_leader_epoch, p.fetch_offset,
                       p.partition_max_bytes)


def _fast(frame: bytes) -> SingleFetch | None:
    header, offset = decode_request_header(frame)
    return decode_single(frame, offset, header.api_version)


@pytest.mark.parametrize("version", VERSIONS)
def test_reads_the_single_partition_shape_as_the_generated_decoder(version: int) -> None:
    for kwargs in ({}, {"topic": "t" * 126, "partition": 2**31 - 1},
                   {"max_wait_ms": -5, "min_bytes": -1, "max_bytes": 0, "isolation_level": 0},
                   {"fetch_offset": 2**63 - 1, "partition_max_bytes": -1,
                    "current_leader_epoch": 9},
                   {"isolation_level": 7}, {"topic": "é" * 20}):
        frame = _request(version, **kwargs)  # type: ignore[arg-type]
        got = _fast(frame)
        assert got is not None, kwargs
        assert got == _generated(frame), kwargs


@pytest.mark.parametrize("version", VERSIONS)
def test_leaves_every_other_shape_to_the_generated_decoder(version: int) -> None:
    others: list[dict[str, object]] = [
        {"two_partitions": True}, {"two_topics": True}, {"replica_id": 1},
        {"replica_id": -2}]
    if version >= 7:
        others += [{"session_epoch": 0}, {"session_epoch": 3, "session_id": 12},
                   {"session_id": 12}, {"forgotten": True}]
    if version >= 11:
        others.append({"rack_id": "rack-a"})
    if version >= 12:
        others.append({"cluster_id": "c"})
        if version < 13:
            others.append({"topic": "t" * 127})  # a two-byte length
    for kwargs in others:
        frame = _request(version, **kwargs)  # type: ignore[arg-type]
        assert _generated(frame) is None or kwargs.get("topic"), kwargs
        assert _fast(frame) is None, kwargs


@pytest.mark.parametrize("version", VERSIONS)
def test_truncated_and_corrupted_frames_are_never_read_differently(version: int) -> None:
    frame = _request(version)
    _, offset = decode_request_header(frame)
    for end in range(offset, len(frame)):
        cut = frame[:end]
        got = _fast(cut)
        assert got is None or got == _generated(cut), end
    rng = random.Random(version)
    for _ in range(3_000):
        bad = bytearray(frame)
        for _ in range(rng.randint(1, 3)):
            bad[rng.randrange(offset, len(bad))] = rng.randrange(256)
        got = _fast(bytes(bad))
        if got is not None:
            assert got == _generated(bytes(bad))


def _joined(parts: list[object]) -> bytes:
    return b"".join(p.read_bytes() if isinstance(p, FileSlice) else bytes(p)  # type: ignore[arg-type]
                    for p in parts)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("records", [b"", b"r" * 300, b"s" * 70_000])
@pytest.mark.parametrize("aborted_empty", [False, True])
def test_response_frame_equals_the_generated_encoding(version: int, records: bytes,
                                                      aborted_empty: bool) -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"xx" + records)
        f.flush()
        _check_response(version, records, aborted_empty, FileSlice(f, 2, len(records)))


def _check_response(version: int, records: bytes, aborted_empty: bool,
                    records_slice: FileSlice) -> None:
    for topic, error, hw, lso, start, preferred in (
            ("topic", 0, 43, 43, 0, -1), ("t" * 126, 6, -1, -1, -1, -1),
            ("é", 1, 2**63 - 1, 5, 3, 2)):
        if version < 11 and preferred != -1:
            preferred = -1
        data = Resp.PartitionData(
            partition_index=3, error_code=error, high_watermark=hw, last_stable_offset=lso,
            log_start_offset=start, aborted_transactions=[] if aborted_empty else None,
            preferred_read_replica=preferred,
            records=records_slice if records else b"")
        body = Resp(throttle_time_ms=0, error_code=0, session_id=0, responses=[
            Resp.FetchableTopicResponse(topic=topic, topic_id=TOPIC_ID, partitions=[data])])
        expected = _joined(encode_response(77, 1, version, body))  # type: ignore[arg-type]
        head = encode_single_response_head(77, version, topic, TOPIC_ID, 3, error, hw, lso,
                                           start, aborted_empty, preferred, len(records))
        assert head is not None
        got = head + records + (FLEXIBLE_TAIL if version >= 12 else b"")
        assert got == expected, (version, topic)


def test_response_head_declines_what_it_does_not_encode() -> None:
    assert encode_single_response_head(1, 12, "t" * 127, TOPIC_ID, 0, 0, 0, 0, 0, False, -1,
                                       0) is None
    assert encode_single_response_head(1, 18, "t", TOPIC_ID, 0, 0, 0, 0, 0, False, -1,
                                       0) is None
    assert encode_single_response_head(1, 3, "t", TOPIC_ID, 0, 0, 0, 0, 0, False, -1,
                                       0) is None


def test_the_fast_path_copies_what_the_network_layer_would_copy() -> None:
    from broker.handlers.fetch import SMALL_ANSWER_BYTES
    from broker.network.sendfile import SMALL_COPY_BYTES

    assert SMALL_ANSWER_BYTES == SMALL_COPY_BYTES

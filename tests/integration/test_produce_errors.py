"""Produce against a real broker: Kafka's error codes for bad input, and the good path's fields.

Each bad request gets its error in the partition response and the broker keeps serving:
after every refusal a good batch on the same connection still gets appended.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from client.sync import SyncClient
from protocol import frames
from protocol.errors import ErrorCode
from protocol.messages.produce import ProduceRequest
from protocol.records import NewRecord, build_batch
from tests.integration.data_path_client import (
    LATEST,
    batch,
    create_topic,
    fetch,
    list_offset,
    produce,
    records_of,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def topic(module_broker: Any) -> str:
    create_topic(module_broker.bootstrap, "errs", configs={"max.message.bytes": "2000"})
    return "errs"


def still_serves(client: SyncClient, topic: str) -> None:
    before = list_offset(client, topic, 0, LATEST)[2]
    r = produce(client, topic, 0, batch([b"ok"]))
    assert (r.error_code, r.base_offset) == (ErrorCode.NO_ERROR, before)


def test_good_produce_fields(module_broker: Any, topic: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        start = list_offset(c, topic, 0, LATEST)[2]
        r = produce(c, topic, 0, batch([b"a", b"b", None]))
        assert r.error_code == ErrorCode.NO_ERROR
        assert r.base_offset == start
        assert r.log_append_time_ms == -1  # CreateTime topic
        assert r.log_start_offset == 0
        assert list_offset(c, topic, 0, LATEST)[2] == start + 3
        f = fetch(c, topic, 0, start)
        got = records_of(f.responses[0].partitions[0].records)
        assert [(x.offset, x.value) for x in got] == [(start, b"a"), (start + 1, b"b"),
                                                       (start + 2, None)]


def test_bad_crc_is_corrupt_message(module_broker: Any, topic: str) -> None:
    data = bytearray(batch([b"hello", b"world"]))
    data[-2] ^= 0xFF
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        end = list_offset(c, topic, 0, LATEST)[2]
        r = produce(c, topic, 0, bytes(data))
        assert r.error_code == ErrorCode.CORRUPT_MESSAGE
        assert r.base_offset == -1
        assert list_offset(c, topic, 0, LATEST)[2] == end  # nothing stored
        still_serves(c, topic)


def test_oversized_record_is_message_too_large(module_broker: Any, topic: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        r = produce(c, topic, 0, batch([b"x" * 5000]))
        assert r.error_code == ErrorCode.MESSAGE_TOO_LARGE
        still_serves(c, topic)


def test_unknown_topic_and_partition(module_broker: Any, topic: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        assert produce(c, "no-such-topic", 0, batch([b"a"])).error_code == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        assert produce(c, topic, 7, batch([b"a"])).error_code == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        still_serves(c, topic)


def test_compacted_topic_record_errors(module_broker: Any) -> None:
    create_topic(module_broker.bootstrap, "compacted", configs={"cleanup.policy": "compact"})
    keyed_and_not = build_batch([NewRecord(b"k", b"a"), NewRecord(None, b"b"),
                                 NewRecord(b"k", b"c")])
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        r = produce(c, "compacted", 0, keyed_and_not)
        assert r.error_code == ErrorCode.INVALID_RECORD
        assert [i for i, _ in r.record_errors] == [1]
        assert r.error_message is not None and "key" in r.error_message
        assert list_offset(c, "compacted", 0, LATEST)[2] == 0  # the whole batch dropped
        assert produce(c, "compacted", 0, batch([b"x", b"y"])).error_code == 0


def test_clients_cannot_write_internal_topics(module_broker: Any, topic: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        r = produce(c, "__consumer_offsets", 0, batch([b"a"]))
        assert r.error_code == ErrorCode.INVALID_TOPIC
        still_serves(c, topic)


def test_invalid_required_acks(module_broker: Any, topic: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        assert produce(c, topic, 0, batch([b"a"]), acks=2).error_code == (
            ErrorCode.INVALID_REQUIRED_ACKS)
        still_serves(c, topic)


def test_garbled_records_and_legacy_magic(module_broker: Any, topic: str) -> None:
    legacy = bytearray(batch([b"a"]))
    legacy[16] = 1
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        assert produce(c, topic, 0, b"\x00" * 30).error_code == ErrorCode.CORRUPT_MESSAGE
        assert produce(c, topic, 0, bytes(legacy)).error_code == ErrorCode.INVALID_RECORD
        assert produce(c, topic, 0, batch([b"a"]) + batch([b"b"])).error_code == (
            ErrorCode.INVALID_RECORD)
        assert produce(c, topic, 0, None).error_code == ErrorCode.INVALID_RECORD
        still_serves(c, topic)


def test_zstd_needs_produce_v7(module_broker: Any, topic: str) -> None:
    from protocol.records import CompressionType

    data = build_batch([NewRecord(b"k", b"v")], compression=CompressionType.ZSTD)
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        assert produce(c, topic, 0, data, version=6).error_code == (
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        assert produce(c, topic, 0, data, version=7).error_code == ErrorCode.NO_ERROR


def test_log_append_time_topic(module_broker: Any) -> None:
    create_topic(module_broker.bootstrap, "lat", configs={"message.timestamp.type": "LogAppendTime"})
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        before_ms = int(time.time() * 1000)
        r = produce(c, "lat", 0, batch([b"a", b"b"], timestamp_ms=1000))
        after_ms = int(time.time() * 1000)
        assert r.error_code == ErrorCode.NO_ERROR
        assert before_ms <= r.log_append_time_ms <= after_ms
        got = records_of(fetch(c, "lat", 0, 0).responses[0].partitions[0].records)
        assert [x.timestamp for x in got] == [r.log_append_time_ms] * 2


def _raw_produce(sock: socket.socket, topic: str, data: bytes, acks: int, corr: int) -> None:
    req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(topic, [ProduceRequest.PartitionProduceData(0, data)])])
    sock.sendall(frames.encode_request(frames.RequestHeader(0, 9, corr, "raw"), req))


def test_acks_zero_no_response_and_close_on_error(module_broker: Any, topic: str) -> None:
    host, port = module_broker.bootstrap.rsplit(":", 1)
    with (socket.create_connection((host, int(port)), timeout=10) as sock,
          SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c):
        end = list_offset(c, topic, 0, LATEST)[2]
        _raw_produce(sock, topic, batch([b"fire", b"forget"]), 0, 1)
        wait_for(lambda: list_offset(c, topic, 0, LATEST)[2] >= end + 2, 30, "acks=0 records appended")
        # nothing came back for the acks=0 request; a bad acks=0 one closes the socket
        bad = bytearray(batch([b"x"]))
        bad[-1] ^= 1
        _raw_produce(sock, topic, bytes(bad), 0, 2)
        sock.settimeout(5)
        assert sock.recv(4) == b""  # closed by the broker, no response bytes
        still_serves(c, topic)


def test_client_sees_error_but_connection_survives(module_broker: Any, topic: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        for _ in range(3):
            bad = bytearray(batch([b"x"]))
            bad[30] ^= 1
            assert produce(c, topic, 0, bytes(bad)).error_code == ErrorCode.CORRUPT_MESSAGE
        still_serves(c, topic)

"""Responses the connection answers at once (the produce fast path) are written at the end of
the event loop's turn, together, once every request read in that turn has been served
(broker/network/write_batch.py), and answers still come in request order on each connection.
The produce requests read after the first one of a turn are appended together at its end,
before the held answers are written (broker/produce_appends.py).

On an in-process broker: its loop is paused (``InProcessBroker.pause``) while the clients
send, so that the requests are all waiting when it resumes and are read in one turn."""

from __future__ import annotations

import os
import signal
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from broker.network.uring_send import ENV_VAR as IO_URING_ENV_VAR
from broker.network.write_batch import WriteBatch
from protocol.frames import RequestHeader, decode_response, encode_request
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.topic_partition import TopicPartition
from pytest_minikafka import BrokerHandle
from pytest_minikafka.inprocess import InProcessBroker
from tests.integration.conftest import BrokerFactory
from tests.integration.data_path_client import batch, create_topic
from tests.waiting import wait_for

pytestmark = [pytest.mark.timeout(60), pytest.mark.minikafka(subprocess=False)]

PRODUCE_V = 9
CONNECTIONS = 12


def _produce(correlation_id: int, topic: str, value: bytes) -> bytes:
    body = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5_000, topic_data=[
        ProduceRequest.TopicProduceData(topic, [
            ProduceRequest.PartitionProduceData(0, batch([value]))])])
    return encode_request(RequestHeader(0, PRODUCE_V, correlation_id, "batch-test"), body)


def _recv_frame(sock: socket.socket) -> bytes:
    def read(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "connection closed"
            data += chunk
        return data

    return read(struct.unpack(">i", read(4))[0])


def _produced(frame: bytes) -> tuple[int, int, int]:
    """(correlation id, error code, base offset) of a one-partition ProduceResponse."""
    cid, body = decode_response(frame, 0, PRODUCE_V)
    assert isinstance(body, ProduceResponse)
    (part,) = body.responses[0].partition_responses
    return cid, part.error_code, part.base_offset


@pytest.fixture
def flushes(kafka_broker: BrokerHandle) -> Iterator[list[tuple[int, int, int]]]:
    """Each end-of-turn write of the broker's WriteBatch, as (responses held, the topic's
    log end offset at that moment, and once the turn's responses are written)."""
    assert isinstance(kafka_broker, InProcessBroker)
    server = kafka_broker._server
    assert server is not None
    write_batch = server.network._write_batch
    assert isinstance(write_batch, WriteBatch)
    seen: list[tuple[int, int, int]] = []
    write_all = write_batch._write_all
    partitions = server.broker.replica_manager.partitions  # type: ignore[union-attr]

    def end() -> int:
        p = partitions.get(TopicPartition("batched", 0))
        return -1 if p is None else p.log_end_offset

    def recording() -> None:
        held, before = len(write_batch._waiting), end()
        write_all()
        seen.append((held, before, end()))

    write_batch._write_all = recording  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        del write_batch._write_all


def test_responses_of_one_turn_are_written_together_after_it(
        kafka_broker: BrokerHandle, flushes: list[tuple[int, int, int]]) -> None:
    assert isinstance(kafka_broker, InProcessBroker)
    create_topic(kafka_broker.bootstrap, "batched")
    host, port = kafka_broker.bootstrap.rsplit(":", 1)
    socks = [socket.create_connection((host, int(port)), timeout=10) for _ in range(CONNECTIONS)]
    try:
        # Each connection answered once first: accepted and reading before the pause (a
        # connection still being set up would be read in a later turn).
        for i, sock in enumerate(socks):
            sock.sendall(encode_request(RequestHeader(18, 3, i, "batch-test"),
                                        ApiVersionsRequest("batch-test", "1")))
        for sock in socks:
            _recv_frame(sock)
        assert flushes == []  # ApiVersions: not a fast path, written at once
        kafka_broker.pause()
        try:
            for i, sock in enumerate(socks):
                sock.sendall(_produce(100 + i, "batched", b"v%d" % i))
        finally:
            kafka_broker.resume()
        answers = [_produced(_recv_frame(sock)) for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    assert [(cid, error) for cid, error, _ in answers] == [(100 + i, 0) for i in range(CONNECTIONS)]
    assert sorted(offset for _, _, offset in answers) == list(range(CONNECTIONS))
    # Read in one turn: the first appended at once and its answer held, the others appended
    # together at the end of the turn, then all written at once. (The record of that write
    # is made on the broker's loop once the write returns: the answers can be here first.)
    wait_for(lambda: bool(flushes), 10, "the end of the turn's write recorded")
    assert flushes == [(1, 1, CONNECTIONS)]


def test_pipelined_requests_are_answered_in_order(
        kafka_broker: BrokerHandle, flushes: list[tuple[int, int, int]]) -> None:
    """Held fast-path answers and the general path's answers (ApiVersions, Metadata) of one
    connection's pipelined requests come back in request order."""
    assert isinstance(kafka_broker, InProcessBroker)
    create_topic(kafka_broker.bootstrap, "batched")
    frames: list[tuple[int, Any]] = []  # (api key, version) by correlation id order
    data = b""
    for cid, kind in enumerate(["p", "p", "a", "p", "m", "p", "p", "a", "p"]):
        if kind == "p":
            data += _produce(cid, "batched", b"x%d" % cid)
            frames.append((0, PRODUCE_V))
        elif kind == "a":
            data += encode_request(RequestHeader(18, 3, cid, "batch-test"),
                                   ApiVersionsRequest("batch-test", "1"))
            frames.append((18, 3))
        else:
            data += encode_request(RequestHeader(3, 12, cid, "batch-test"),
                                   MetadataRequest(topics=None))
            frames.append((3, 12))
    host, port = kafka_broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        kafka_broker.pause()
        try:
            sock.sendall(data)
        finally:
            kafka_broker.resume()
        answers = []
        for api_key, version in frames:
            cid, body = decode_response(_recv_frame(sock), api_key, version)
            answers.append(cid)
            if api_key == 0:
                assert isinstance(body, ProduceResponse)
                assert body.responses[0].partition_responses[0].error_code == 0
            else:
                assert isinstance(body, ApiVersionsResponse | MetadataResponse)
    assert answers == list(range(len(frames)))
    # Each turn's answers held for its end: the first turn read them all and served the two
    # produce requests before the first ApiVersions together (the first appended at once,
    # the second, buffered behind it, at the end of the turn: broker/network/connection.py),
    # the rest in later turns.
    # (The record of a write is made on the broker's loop once it returns: the answers can
    # be here first.)
    wait_for(lambda: bool(flushes), 10, "the turns' writes recorded")
    assert flushes[0] == (1, 1, 2)
    assert all(n >= 1 for n, _, _ in flushes)


def test_the_answers_of_one_turn_go_out_in_one_system_call(kafka_broker: BrokerHandle) -> None:
    """On a plain TCP listener the turn's held answers are sent together, in one io_uring
    call (broker/network/uring_send.py), each to its own connection."""
    assert isinstance(kafka_broker, InProcessBroker)
    server = kafka_broker._server
    assert server is not None
    write_batch = server.network._write_batch
    assert isinstance(write_batch, WriteBatch)
    create_topic(kafka_broker.bootstrap, "together")
    host, port = kafka_broker.bootstrap.rsplit(":", 1)
    socks = [socket.create_connection((host, int(port)), timeout=10) for _ in range(CONNECTIONS)]
    calls: list[int] = []  # the sends of each io_uring call
    try:
        for _round in range(2):  # the first opens the ring (if not open yet)
            kafka_broker.pause()
            try:
                for i, sock in enumerate(socks):
                    sock.sendall(_produce(100 * _round + i, "together", b"v%d" % i))
            finally:
                kafka_broker.resume()
            answers = [_produced(_recv_frame(sock)) for sock in socks]
            assert [(cid, error) for cid, error, _ in answers] == [
                (100 * _round + i, 0) for i in range(CONNECTIONS)]
            if _round == 0:
                sender = write_batch._sender
                assert sender is not None, "io_uring not opened (does this kernel refuse it?)"
                send = sender.send

                def counting(items: Any, send: Any = send) -> list[int]:
                    calls.append(len(items))
                    return list(send(items))

                sender.send = counting  # type: ignore[method-assign]
    finally:
        for sock in socks:
            sock.close()
    wait_for(lambda: bool(calls), 10, "the io_uring call recorded")
    assert calls == [CONNECTIONS]


def test_without_io_uring_each_answer_is_written_by_its_connection_in_order(
        broker_factory: BrokerFactory) -> None:
    """``MINIKAFKA_IO_URING=0``: the path of a kernel that refuses io_uring (the turn's held
    answers written one call each, by each connection). A broker process is stopped
    (SIGSTOP) while every connection sends produce requests pipelined with ApiVersions, so
    that one turn reads them all and holds several answers; each connection gets its answers
    in request order, the produce offsets are each given once, and the broker says why it
    wrote them one by one (it decides so at the first turn holding two answers)."""
    proc = broker_factory(env={IO_URING_ENV_VAR: "0"})
    create_topic(proc.bootstrap, "one-by-one")
    socks = [socket.create_connection((proc.host, proc.port), timeout=10)
             for _ in range(CONNECTIONS)]
    offsets: list[int] = []
    try:
        for i, sock in enumerate(socks):  # each connection accepted and reading
            sock.sendall(encode_request(RequestHeader(18, 3, i, "batch-test"),
                                        ApiVersionsRequest("batch-test", "1")))
        for sock in socks:
            _recv_frame(sock)
        for round_ in range(3):
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                for i, sock in enumerate(socks):
                    cid = 1000 * round_ + 10 * i
                    sock.sendall(_produce(cid, "one-by-one", b"a%d" % cid)
                                 + _produce(cid + 1, "one-by-one", b"b%d" % cid)
                                 + encode_request(RequestHeader(18, 3, cid + 2, "batch-test"),
                                                  ApiVersionsRequest("batch-test", "1"))
                                 + _produce(cid + 3, "one-by-one", b"c%d" % cid))
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            for i, sock in enumerate(socks):
                cid = 1000 * round_ + 10 * i
                got = []
                for n in range(4):
                    frame = _recv_frame(sock)
                    if n == 2:
                        answer_cid, body = decode_response(frame, 18, 3)
                        assert isinstance(body, ApiVersionsResponse) and body.error_code == 0
                        got.append(answer_cid)
                    else:
                        answer_cid, error, offset = _produced(frame)
                        assert error == 0
                        got.append(answer_cid)
                        offsets.append(offset)
                assert got == [cid, cid + 1, cid + 2, cid + 3]
    finally:
        for sock in socks:
            sock.close()
    assert sorted(offsets) == list(range(3 * 3 * CONNECTIONS))
    wait_for(lambda: f"one system call each ({IO_URING_ENV_VAR}=0)" in proc.stderr_text(), 10,
             "the broker's log saying it writes the answers one by one")

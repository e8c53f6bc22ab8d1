"""The fetch fast path (broker.handlers.fetch.fetch_fast) answers byte for byte as the general
path does: the same requests, at every version 4-17, sent on raw sockets to one in-process
broker, first against a topic with the fast path on, then against a twin topic with it off
(the same records produced in the same order); the response frames are equal (topic names
and ids aside), and the fast path served exactly the requests of its shape, parking those
that wait for data. Its long polls keep their semantics: a fetch at the log end waits for
max_wait_ms, is answered by the append that brings min_bytes, and answers what there is when
min_bytes never comes. A parked fetch completed by an append reads the log once."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from broker.handlers.base import LOADED_SPECS, Parked, find_spec
from client.sync import SyncClient
from protocol.messages.fetch import FetchRequest
from pytest_minikafka import BrokerHandle
from pytest_minikafka.inprocess import InProcessBroker
from storage.segment import LogSegment
from tests.integration.data_path_client import (
    batch,
    broker_read_what_was_sent,
    create_topic,
    produce,
)
from tests.integration.netclient import RawClient

pytestmark = [pytest.mark.timeout(120), pytest.mark.minikafka(subprocess=False)]

Req = FetchRequest
TIMESTAMP_MS = 1_700_000_000_000
VERSIONS = range(4, 18)
FETCH_KEY = 1


def _request(topic: str, topic_id: uuid.UUID, version: int, offset: int, *,
             partition: int = 0, max_wait_ms: int = 0, min_bytes: int = 1,
             max_bytes: int = 50 << 20, partition_max_bytes: int = 1 << 20,
             isolation_level: int = 1, current_leader_epoch: int = -1, session_id: int = 0,
             two_partitions: bool = False, rack_id: str = "") -> Req:
    parts = [Req.FetchPartition(partition=partition, fetch_offset=offset,
                                partition_max_bytes=partition_max_bytes,
                                current_leader_epoch=current_leader_epoch)]
    if two_partitions:
        parts.append(Req.FetchPartition(partition=partition + 1, fetch_offset=0,
                                        partition_max_bytes=partition_max_bytes))
    return Req(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
               max_bytes=max_bytes, isolation_level=isolation_level, session_id=session_id,
               session_epoch=-1, topics=[Req.FetchTopic(topic=topic, topic_id=topic_id,
                                                        partitions=parts)],
               rack_id=rack_id)


class RawConnection(RawClient):
    """A raw connection sending requests of one API (FETCH_KEY) by version."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap, timeout_s=20)

    def send_request(self, request: Req, version: int) -> None:
        self.send(self.frame(FETCH_KEY, version, request, client_id="fast-fetch-test")[1])


@pytest.fixture
def fast_calls() -> Iterator[Callable[[bool], list[str]]]:
    """``use(on)``: the Fetch spec with its fast path on (wrapped, recording what it did with
    each request it was offered: "none" not served, "parked", "answered") or off; the spec
    is restored after the test."""
    spec = find_spec(FETCH_KEY)
    assert spec is not None and spec.fast is not None
    fast = spec.fast
    served: list[str] = []

    def recording(*args: Any) -> Any:
        result = fast(*args)
        served.append("none" if result is None else
                      "parked" if isinstance(result, Parked) else "answered")
        return result

    def use(on: bool) -> list[str]:
        served.clear()
        LOADED_SPECS[FETCH_KEY] = dataclasses.replace(spec, fast=recording if on else None)
        return served

    try:
        yield use
    finally:
        LOADED_SPECS[FETCH_KEY] = spec


def _records(n: int) -> bytes:
    return batch([b"v%d" % i for i in range(n)], timestamp_ms=TIMESTAMP_MS)


def _run(bootstrap: str, topic: str, topic_id: uuid.UUID,
         parked: Callable[[int], bool]) -> tuple[list[bytes], list[str]]:
    """Every case at every version on one connection, appends on another: the response
    frames in order, and per request what the fast path should do with it. ``parked(i)``:
    the i-th request (from 0) is waiting in the purgatory."""
    conn = RawConnection(bootstrap)
    producer = SyncClient(bootstrap, timeout_ms=10_000)
    frames: list[bytes] = []
    shapes: list[str] = []
    end = 0

    def append(n: int, value_bytes: int = 0) -> None:
        nonlocal end
        records = (_records(n) if not value_bytes else
                   batch([b"b" * value_bytes] * n, timestamp_ms=TIMESTAMP_MS))
        result = produce(producer, topic, 0, records, acks=1)
        assert result.error_code == 0 and result.base_offset == end
        end += n

    def ask(shape: str, version: int, offset: int, **kwargs: Any) -> None:
        conn.send_request(_request(topic, topic_id, version, offset, **kwargs), version)
        shapes.append(shape)
        frames.append(conn.recv_frame())

    def woken(version: int, value_bytes: int = 0) -> None:
        """A fetch at the log end, parked, then woken by the append that brings min_bytes."""
        conn.send_request(_request(topic, topic_id, version, end, max_wait_ms=20_000), version)
        shapes.append("parked")
        deadline = time.monotonic() + 10
        while not parked(len(shapes) - 1) and time.monotonic() < deadline:
            time.sleep(0.005)
        append(2, value_bytes)
        frames.append(conn.recv_frame())

    try:
        append(1, value_bytes=20_000)  # above what is copied into one write: sendfile
        for n in (3, 1, 2):
            append(n)
        for v in VERSIONS:
            ask("answered", v, 0)  # every batch (sent with sendfile)
            ask("answered", v, 1)  # the small ones (copied into one write)
            ask("answered", v, end - 1)  # the newest batch: a consumer at the tail
            ask("answered", v, end)  # nothing new, no wait
            ask("answered", v, 1, isolation_level=0)  # read_uncommitted
            ask("answered", v, 0, partition_max_bytes=10)  # one batch all the same
            ask("answered", v, 1, partition_max_bytes=10)
            ask("answered", v, 0, max_bytes=0, partition_max_bytes=0)
            ask("answered", v, 2, max_bytes=100)  # the limit of the request
            ask("answered", v, end + 100)  # OFFSET_OUT_OF_RANGE
            ask("answered", v, -1)  # OFFSET_OUT_OF_RANGE
            ask("answered", v, 0, isolation_level=5)  # an unknown level reads uncommitted
            if v >= 9:
                ask("answered", v, 0, current_leader_epoch=100)  # UNKNOWN_LEADER_EPOCH
                ask("answered", v, 0, current_leader_epoch=0)  # the leader's epoch
            ask("answered", v, end, max_wait_ms=-3)  # a negative wait: none
            ask("parked", v, end, max_wait_ms=30)  # waits it out: empty
            woken(v)  # answered with the records copied into one write
            woken(v, value_bytes=20_000)  # too big for one write: sent with sendfile
            # min_bytes never reached: what there is after max_wait_ms
            conn.send_request(_request(topic, topic_id, v, end, max_wait_ms=60, min_bytes=1 << 20),
                      v)
            shapes.append("parked")
            time.sleep(0.01)
            append(1)
            frames.append(conn.recv_frame())
            # the general path's shapes
            ask("none", v, 0, partition=7)  # unknown partition
            ask("none", v, 0, two_partitions=True)
            if v >= 7:
                ask("none", v, 0, session_id=99)  # closes a session (none here)
            if v >= 11:
                ask("none", v, 0, rack_id="rack-a")
    finally:
        conn.close()
        producer.close()
    return frames, shapes


def test_fast_path_answers_as_the_general_path(kafka_broker: BrokerHandle,
                                               fast_calls: Callable[[bool], list[str]]) -> None:
    assert isinstance(kafka_broker, InProcessBroker)  # its handler table is this process's
    bootstrap = kafka_broker.bootstrap
    fast_id = create_topic(bootstrap, "fast-t", partitions=1)
    slow_id = create_topic(bootstrap, "slow-t", partitions=1)
    served = fast_calls(True)
    fast_frames, shapes = _run(bootstrap, "fast-t", fast_id,
                               lambda i: len(served) > i and served[i] == "parked")
    assert served == shapes  # offered every request; served exactly those of its shape
    assert fast_calls(False) == []
    slow_frames, _ = _run(bootstrap, "slow-t", slow_id, lambda _i: True)
    assert len(fast_frames) == len(slow_frames) == len(shapes)
    for i, (fast, slow) in enumerate(zip(fast_frames, slow_frames, strict=True)):
        fast = fast.replace(b"fast-t", b"slow-t").replace(fast_id.bytes, slow_id.bytes)
        assert fast == slow, (i, shapes[i])


def test_parked_fetch_woken_by_an_append_reads_the_log_once(
        kafka_broker: BrokerHandle, fast_calls: Callable[[bool], list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once parked, the fast path's fetch completed by an append reads the log once (the read
    that found min_bytes is the answer; test_fetch_parked_read: the general path's)."""
    bootstrap = kafka_broker.bootstrap
    reads: list[int] = []
    # Each read of the log that finds data reads one segment. LogSegment stays pure Python in
    # the compiled build (scripts/build-request-path), so a compiled Log calls this patch too
    # (a native class such as the compiled Log cannot be patched).
    real_read = LogSegment.read

    def counting_read(self: LogSegment, *args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real_read(self, *args, **kwargs)

    idle = "once-idle"
    create_topic(bootstrap, idle, partitions=1)
    monkeypatch.setattr(LogSegment, "read", counting_read)
    topic = "once"
    topic_id = create_topic(bootstrap, topic, partitions=1)
    served = fast_calls(True)
    conn = RawConnection(bootstrap)
    try:
        with SyncClient(bootstrap, timeout_ms=10_000) as producer:
            assert produce(producer, topic, 0, _records(2), acks=1).error_code == 0
            conn.send_request(_request(topic, topic_id, 12, 2, max_wait_ms=20_000), 12)
            broker_read_what_was_sent(bootstrap, idle)  # the fetch is parked
            assert served[:1] == ["parked"]  # then the witness's
            reads.clear()
            assert produce(producer, topic, 0, _records(3), acks=1).error_code == 0
            frame = conn.recv_frame()
        assert len(reads) == 1
        assert _records(3)[17:] in frame  # the new batch (from its CRC on)
    finally:
        conn.close()


def test_librdkafka_consumer_at_the_tail_is_served_by_the_fast_path(
        kafka_broker: BrokerHandle, fast_calls: Callable[[bool], list[str]]) -> None:
    """confluent-kafka (librdkafka) consuming as P4 does: assigned at the log end, long
    polls (its fetch.wait.max.ms) answered by the appends of a producer, every record
    received in order; its fetches are the fast path's, parked while they wait."""
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    bootstrap = kafka_broker.bootstrap
    topic = "fast-tail"
    create_topic(bootstrap, topic, partitions=1)
    served = fast_calls(True)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fast-tail-unused",
                         "enable.auto.commit": False, "enable.partition.eof": False,
                         "fetch.wait.max.ms": 500})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                         "message.timeout.ms": 20_000})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        deadline = time.monotonic() + 30
        while "parked" not in served and time.monotonic() < deadline:
            consumer.poll(0.05)  # fetching at the end: its fetch waits in the purgatory
        assert "parked" in served
        got: list[bytes] = []
        for i in range(50):
            producer.produce(topic, value=b"r%d" % i, partition=0)
            producer.flush(10)
            while len(got) <= i and time.monotonic() < deadline:
                msg = consumer.poll(0.1)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    got.append(msg.value())
        assert got == [b"r%d" % i for i in range(50)]
        assert served.count("none") == 0  # every fetch it sent was the fast path's shape
    finally:
        consumer.close()


def test_a_client_gone_while_its_fetch_waits_leaves_the_broker_serving(
        kafka_broker: BrokerHandle, fast_calls: Callable[[bool], list[str]]) -> None:
    """A fast-path fetch parked, its connection closed, then the append that completes it:
    the answer is dropped, and the broker serves the next consumer as before."""
    bootstrap = kafka_broker.bootstrap
    topic = "fast-gone"
    topic_id = create_topic(bootstrap, topic, partitions=1)
    create_topic(bootstrap, "fast-gone-idle", partitions=1)
    served = fast_calls(True)
    gone = RawConnection(bootstrap)
    gone.send_request(_request(topic, topic_id, 12, 0, max_wait_ms=20_000), 12)
    broker_read_what_was_sent(bootstrap, "fast-gone-idle")
    assert served[:1] == ["parked"]
    gone.close()
    with SyncClient(bootstrap, timeout_ms=10_000) as producer:
        assert produce(producer, topic, 0, _records(2), acks=1).error_code == 0
    conn = RawConnection(bootstrap)
    try:
        conn.send_request(_request(topic, topic_id, 12, 0), 12)
        assert _records(2)[17:] in conn.recv_frame()
    finally:
        conn.close()

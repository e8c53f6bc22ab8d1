"""The produce fast path (broker.handlers.produce.produce_fast) answers byte for byte as the
general path does: the same requests, at every version 3-11, sent on raw sockets to one
in-process broker, first to a topic with the fast path on, then to a twin topic with it
off; the response frames are equal (topic names aside), and the fast path served exactly
the requests of its shape. Its fallbacks (acks 0 and -1, a transactional id, two
partitions) are answered by the general path."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from broker.handlers.base import LOADED_SPECS, find_spec
from client.sync import SyncClient
from protocol.messages.produce import ProduceRequest
from pytest_minikafka import BrokerHandle
from pytest_minikafka.inprocess import InProcessBroker
from tests.integration.data_path_client import batch, create_topic, init_producer_id
from tests.integration.netclient import RawClient

pytestmark = [pytest.mark.timeout(60), pytest.mark.minikafka(subprocess=False)]

Req = ProduceRequest
TIMESTAMP_MS = 1_700_000_000_000
PRODUCE_KEY = 0


def _request(topic: str, *, partition: int = 0, acks: int = 1, records: bytes | None,
             transactional_id: str | None = None, two_partitions: bool = False) -> Req:
    parts = [Req.PartitionProduceData(partition, records)]
    if two_partitions:
        parts.append(Req.PartitionProduceData(partition + 1, records))
    return Req(transactional_id=transactional_id, acks=acks, timeout_ms=5_000,
               topic_data=[Req.TopicProduceData(topic, parts)])


def _cases(topic: str, producer_id: int, producer_epoch: int) -> list[tuple[str, Req, bool]]:
    """(what, request, served by the fast path) for one version, in order."""
    good = batch([b"v"], timestamp_ms=TIMESTAMP_MS)
    corrupt = bytearray(batch([b"x", b"y"], timestamp_ms=TIMESTAMP_MS))
    corrupt[-2] ^= 0xFF
    idempotent = batch([b"i"], producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=0, timestamp_ms=TIMESTAMP_MS)
    return [
        ("success", _request(topic, records=good), True),
        ("unknown partition", _request(topic, partition=5, records=good), True),
        ("corrupt batch", _request(topic, records=bytes(corrupt)), True),
        ("internal topic", _request("__consumer_offsets", records=good), True),
        ("idempotent", _request(topic, records=idempotent), True),
        ("idempotent duplicate", _request(topic, records=idempotent), True),
        ("null records", _request(topic, records=None), False),
        ("acks=-1", _request(topic, acks=-1, records=good), False),
        ("acks=0", _request(topic, acks=0, records=good), False),
        ("two partitions", _request(topic, records=good, two_partitions=True), False),
        ("transactional id", _request(topic, records=good, transactional_id="tx"), False),
    ]


class RawConnection(RawClient):
    """A raw connection sending requests of one API (PRODUCE_KEY) by version."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap, timeout_s=10)

    def send_request(self, request: Req, version: int) -> None:
        self.send(self.frame(PRODUCE_KEY, version, request, client_id="fast-path-test")[1])


@pytest.fixture
def fast_calls() -> Iterator[Callable[[bool], list[bool]]]:
    """``use(on)``: the Produce spec with its fast path on (wrapped, recording whether it
    served each request it was offered) or off; the spec is restored after the test."""
    spec = find_spec(PRODUCE_KEY)
    assert spec is not None and spec.fast is not None
    fast = spec.fast
    served: list[bool] = []

    def recording(*args: Any) -> Any:
        result = fast(*args)
        served.append(result is not None)
        return result

    def use(on: bool) -> list[bool]:
        served.clear()
        LOADED_SPECS[PRODUCE_KEY] = dataclasses.replace(spec, fast=recording if on else None)
        return served

    try:
        yield use
    finally:
        LOADED_SPECS[PRODUCE_KEY] = spec


def _run(bootstrap: str, topic: str) -> tuple[list[bytes], list[bool]]:
    """Every case at every version on one connection: the response frames in order (acks=0
    gets none), and per request whether it was of the fast path's shape."""
    with SyncClient(bootstrap, timeout_ms=10_000) as client:
        _, producer_id, producer_epoch = init_producer_id(client)
    conn = RawConnection(bootstrap)
    frames: list[bytes] = []
    shapes: list[bool] = []
    try:
        for version in range(3, 12):
            for _what, request, fast in _cases(topic, producer_id, producer_epoch):
                conn.send_request(request, version)
                shapes.append(fast)
                if request.acks != 0:
                    frames.append(conn.recv_frame())
    finally:
        conn.close()
    return frames, shapes


def test_fast_path_answers_as_the_general_path(kafka_broker: BrokerHandle,
                                               fast_calls: Callable[[bool], list[bool]]) -> None:
    assert isinstance(kafka_broker, InProcessBroker)  # its handler table is this process's
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "fast-t", partitions=1)
    create_topic(bootstrap, "slow-t", partitions=1)
    served = fast_calls(True)
    fast_frames, shapes = _run(bootstrap, "fast-t")
    assert served == shapes  # offered every request; served exactly those of its shape
    assert sum(served) == 9 * 6
    assert fast_calls(False) == []
    slow_frames, _ = _run(bootstrap, "slow-t")
    assert len(fast_frames) == len(slow_frames) == 9 * 10
    for fast, slow in zip(fast_frames, slow_frames, strict=True):
        assert fast.replace(b"fast-t", b"slow-t") == slow

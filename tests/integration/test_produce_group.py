"""Produce requests read in one turn of the broker's loop are appended together
(broker.produce_appends) and each answered as if alone: 16 connections, one request in
flight each (P5's shape), all sent before any answer is read, among them a corrupt batch,
an unknown partition and an idempotent producer's resend, for 5 rounds. Each good request's
answer names the offset where its own record is in the log, the offsets follow each other
without a gap, the bad ones get their own errors, the resend its first offset, and the
broker did group them (one ``append_group`` call for several requests). A client over its
producer_byte_rate gets each grouped request appended and answered with its throttle time."""

from __future__ import annotations

import pytest

from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.frames import decode_response, encode_response
from protocol.messages.produce import ProduceResponse
from pytest_minikafka import BrokerHandle
from pytest_minikafka.inprocess import InProcessBroker
from tests.integration.data_path_client import (
    batch,
    create_topic,
    fetch,
    init_producer_id,
    produce_request,
    records_of,
    set_producer_byte_rate,
)
from tests.integration.netclient import RawClient

pytestmark = [pytest.mark.timeout(60), pytest.mark.minikafka(subprocess=False)]

CONNECTIONS = 16
ROUNDS = 5
VERSION = 10  # what librdkafka sends


def test_requests_of_one_turn_appended_together_each_answered_alone(
        kafka_broker: BrokerHandle, group_sizes: list[int]) -> None:
    assert isinstance(kafka_broker, InProcessBroker)  # group_sizes records its calls
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "grouped", partitions=1)
    with SyncClient(bootstrap, timeout_ms=10_000) as client:
        _, producer_id, producer_epoch = init_producer_id(client)
    conns = [RawClient(bootstrap) for _ in range(CONNECTIONS)]
    at: dict[int, bytes] = {}  # offset -> the value its answer said is there
    idempotent = batch([b"idempotent"], producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=0)
    first_idempotent = -1
    try:
        for r in range(ROUNDS):
            values = [f"r{r}-c{c}".encode() for c in range(CONNECTIONS)]
            requests = [produce_request("grouped", batch([v])) for v in values]
            corrupt = bytearray(batch([values[3]]))
            corrupt[-1] ^= 0xFF
            requests[3] = produce_request("grouped", bytes(corrupt))
            requests[7] = produce_request("grouped", batch([values[7]]), partition=9)
            requests[11] = produce_request("grouped", idempotent)  # a resend after round 1
            for conn, request in zip(conns, requests, strict=True):
                conn.send(conn.frame(0, VERSION, request)[1])
            answers = []
            for conn in conns:
                frame = conn.recv_frame()
                correlation_id, body = decode_response(frame, 0, VERSION)
                assert isinstance(body, ProduceResponse)
                # Byte for byte the generated encoding of what it says (the group's answer
                # template included: broker.handlers.produce_answer.answer_group).
                assert frame == b"".join(bytes(p) for p in  # type: ignore[arg-type]
                                         encode_response(correlation_id, 0, VERSION, body))[4:]
                answers.append(body.responses[0].partition_responses[0])
            assert answers[3].error_code == ErrorCode.CORRUPT_MESSAGE
            assert answers[7].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert answers[11].error_code == 0
            if r == 0:
                first_idempotent = answers[11].base_offset
                at[first_idempotent] = b"idempotent"
            assert answers[11].base_offset == first_idempotent
            for c in range(CONNECTIONS):
                if c not in (3, 7, 11):
                    assert answers[c].error_code == 0
                    assert answers[c].base_offset not in at  # no offset given twice
                    at[answers[c].base_offset] = values[c]
    finally:
        for conn in conns:
            conn.close()
    assert max(group_sizes) > 1, group_sizes  # some requests were appended together
    with SyncClient(bootstrap, timeout_ms=10_000) as client:
        stored: dict[int, bytes | None] = {}
        while len(stored) < len(at):
            part = fetch(client, "grouped", 0, len(stored)).responses[0].partitions[0]
            assert part.error_code == 0
            for record in records_of(part.records):
                stored[record.offset] = record.value
    # Every answer named its own record's offset, and the offsets follow each other.
    assert stored == at and sorted(at) == list(range(ROUNDS * (CONNECTIONS - 3) + 1))


@pytest.mark.minikafka(subprocess=False, properties={  # a short quota window: short throttles
    "quota.window.num": "2", "quota.window.size.seconds": "1"})
def test_grouped_requests_over_a_produce_quota_are_answered_with_their_throttle(
        kafka_broker: BrokerHandle, group_sizes: list[int]) -> None:
    """A client over its producer_byte_rate: requests appended together still each get
    their append and their own throttle time (the general answer, not the fast frame)."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "grouped-quota", partitions=1)
    set_producer_byte_rate(bootstrap, "slow", 1000.0)
    assert isinstance(kafka_broker, InProcessBroker)  # paused below
    conns = [RawClient(bootstrap) for _ in range(CONNECTIONS)]
    try:
        # Every request waits in the kernel while the broker's loop is paused, so its next
        # turn finds them all: appended together whatever the machine's load (the sends of
        # a loaded test process can otherwise reach the broker one turn each).
        kafka_broker.pause()
        try:
            for c, conn in enumerate(conns):
                request = produce_request("grouped-quota", batch([b"q%d" % c]))
                conn.send(conn.frame(0, VERSION, request, client_id="slow")[1])
        finally:
            kafka_broker.resume()
        bodies = []
        for conn in conns:
            _, body = decode_response(conn.recv_frame(), 0, VERSION)
            assert isinstance(body, ProduceResponse)
            bodies.append(body)
    finally:
        for conn in conns:
            conn.close()
    answers = [b.responses[0].partition_responses[0] for b in bodies]
    assert [a.error_code for a in answers] == [0] * CONNECTIONS
    assert sorted(a.base_offset for a in answers) == list(range(CONNECTIONS))
    assert max(b.throttle_time_ms for b in bodies) > 0
    assert max(group_sizes) > 1, group_sizes

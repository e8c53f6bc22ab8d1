"""A producer's backlog: several Produce requests arriving together on one connection (a
client pipelining, or requests queued while the broker was held up) are started in the
same turn, appended in the turn's group append (broker/network/connection.py,
broker/produce_appends.py) and answered in request order, across partitions and API kinds.

On an in-process broker whose loop is paused (``InProcessBroker.pause``) while the client
writes all its requests at once, so that the broker reads them in one turn. Each test reads
every answer on the socket, checks its correlation id, error and offset, and fetches the
records back: each is where its answer says, in the order it was sent."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from broker.network.connection import GROUP_MAX_BEHIND
from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.frames import (
    RequestHeader,
    decode_response,
    encode_request,
    encode_request_header,
)
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
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

PRODUCE_V = 10  # what librdkafka sends
PRODUCE_KEY, METADATA_KEY, API_VERSIONS_KEY = 0, 3, 18


class Backlog:
    """Requests written on one connection in one write while the broker is paused, their
    answers read in order (an acks=0 produce expects none)."""

    def __init__(self, broker: BrokerHandle, client_id: str = "backlog-test") -> None:
        assert isinstance(broker, InProcessBroker)
        self.broker = broker
        self.client_id = client_id
        self.frames: list[bytes] = []
        self.expected: list[tuple[int, int, int]] = []  # (correlation id, api key, version)

    def add(self, api_key: int, version: int, body: Any, *, answered: bool = True) -> int:
        cid = len(self.frames)
        self.frames.append(encode_request(RequestHeader(api_key, version, cid, self.client_id),
                                          body))
        if answered:
            self.expected.append((cid, api_key, version))
        return cid

    def produce(self, topic: str, records: bytes, *, partition: int = 0, acks: int = 1) -> int:
        return self.add(PRODUCE_KEY, PRODUCE_V,
                        produce_request(topic, records, partition=partition, acks=acks),
                        answered=acks != 0)

    def send(self, conn: RawClient, tail: bytes = b"") -> None:
        self.broker.pause()
        try:
            conn.send(b"".join(self.frames) + tail)
        finally:
            self.broker.resume()

    def answers(self, conn: RawClient) -> dict[int, Any]:
        """Every expected answer, in order: correlation id -> decoded body."""
        got: dict[int, Any] = {}
        for cid, api_key, version in self.expected:
            answered, body = decode_response(conn.recv_frame(), api_key, version)
            assert answered == cid, f"answer {answered} came where {cid} was due"
            got[cid] = body
        return got


def _produced(body: Any) -> tuple[int, int]:
    """(error code, base offset) of a one-partition ProduceResponse."""
    assert isinstance(body, ProduceResponse)
    (part,) = body.responses[0].partition_responses
    return part.error_code, part.base_offset


def _stored(bootstrap: str, topic: str, partition: int) -> dict[int, bytes | None]:
    """offset -> value of every record of the partition."""
    stored: dict[int, bytes | None] = {}
    with SyncClient(bootstrap, timeout_ms=10_000) as client:
        while True:
            part = fetch(client, topic, partition, len(stored)).responses[0].partitions[0]
            assert part.error_code == 0
            records = records_of(part.records)
            if not records:
                return stored
            for record in records:
                stored[record.offset] = record.value


def test_a_backlog_is_appended_in_one_group_per_partition_and_answered_in_order(
        kafka_broker: BrokerHandle, group_sizes: list[int]) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "backlog", partitions=2)
    backlog = Backlog(kafka_broker)
    order = [0, 0, 1, 0, 1, 1, 1, 0]  # partitions, interleaved
    sent = []  # (correlation id, partition, value)
    for i in range(24):
        value = b"v%d" % i
        sent.append((backlog.produce("backlog", batch([value]), partition=order[i % 8]),
                     order[i % 8], value))
    with RawClient(bootstrap) as conn:
        backlog.send(conn)
        answers = backlog.answers(conn)
    for p in (0, 1):
        mine = [(cid, value) for cid, partition, value in sent if partition == p]
        offsets = [_produced(answers[cid]) for cid, _ in mine]
        assert offsets == [(0, n) for n in range(len(mine))]  # in the order sent
        assert _stored(bootstrap, "backlog", p) == {n: v for n, (_, v) in enumerate(mine)}
    # Read in one turn: the first appended at once, the 23 after it together at the end of
    # the turn, one group append per partition.
    assert sorted(group_sizes) == sorted([sum(1 for _, p, _ in sent[1:] if p == q)
                                          for q in (0, 1)])


def test_a_backlog_keeps_its_order_across_api_kinds_acks_and_errors(
        kafka_broker: BrokerHandle) -> None:
    """Other requests, acks=0 (no answer), acks=-1, a refused and a corrupt batch among the
    produce requests: each answered in its place with its own result, every accepted
    record in the log in the order it was sent."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "mixed", partitions=1)
    corrupt = bytearray(batch([b"bad"]))
    corrupt[-1] ^= 0xFF
    backlog = Backlog(kafka_broker)
    kept: list[tuple[int, bytes]] = []  # (correlation id or -1 for acks=0, value)

    def good(value: bytes, acks: int = 1) -> None:
        cid = backlog.produce("mixed", batch([value]), acks=acks)
        kept.append((cid if acks != 0 else -1, value))

    good(b"a")
    good(b"b")
    api_versions = backlog.add(API_VERSIONS_KEY, 3, ApiVersionsRequest("backlog-test", "1"))
    good(b"c")
    good(b"d", acks=0)
    good(b"e")
    good(b"f", acks=-1)
    good(b"f2")  # answered at once, held: the error answers after it are written after it
    unknown = backlog.produce("mixed", batch([b"nowhere"]), partition=7)
    broken = backlog.produce("mixed", bytes(corrupt))
    good(b"g")
    metadata = backlog.add(METADATA_KEY, 12, MetadataRequest(topics=None))
    good(b"h")
    good(b"i", acks=0)
    good(b"j")
    with RawClient(bootstrap) as conn:
        backlog.send(conn)
        answers = backlog.answers(conn)  # (in order; none for acks=0)
    assert isinstance(answers.pop(api_versions), ApiVersionsResponse)
    assert isinstance(answers.pop(metadata), MetadataResponse)
    assert _produced(answers.pop(unknown))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _produced(answers.pop(broken))[0] == ErrorCode.CORRUPT_MESSAGE
    offsets = {cid: n for n, (cid, _) in enumerate(kept) if cid >= 0}
    assert {cid: _produced(body) for cid, body in answers.items()} == {
        cid: (0, n) for cid, n in offsets.items()}
    assert _stored(bootstrap, "mixed", 0) == {n: v for n, (_, v) in enumerate(kept)}


def test_an_idempotent_producers_backlog_is_appended_in_sequence(
        kafka_broker: BrokerHandle, group_sizes: list[int]) -> None:
    """Five batches in flight (librdkafka's bound with idempotence), then a resend of the
    third: appended together in sequence order, the resend answered with its first offset."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "idempotent", partitions=1)
    with SyncClient(bootstrap, timeout_ms=10_000) as client:
        _, producer_id, epoch = init_producer_id(client)
    batches = [batch([b"s%d" % s], producer_id=producer_id, producer_epoch=epoch,
                     base_sequence=s) for s in range(5)]
    backlog = Backlog(kafka_broker)
    cids = [backlog.produce("idempotent", b) for b in batches]
    resend = backlog.produce("idempotent", batches[2])
    with RawClient(bootstrap) as conn:
        backlog.send(conn)
        answers = backlog.answers(conn)
    assert [_produced(answers[cid]) for cid in cids] == [(0, n) for n in range(5)]
    assert _produced(answers[resend]) == (0, 2)
    assert _stored(bootstrap, "idempotent", 0) == {n: b"s%d" % n for n in range(5)}
    assert group_sizes == [5]  # the four after the first and the resend, together


def test_a_broken_frame_in_a_backlog_closes_the_connection_after_the_answers_before_it(
        kafka_broker: BrokerHandle, caplog: pytest.LogCaptureFixture) -> None:
    """A Produce frame of an unsupported version behind three good ones: those three are
    appended and answered, then the connection closes with a log line, as when requests
    come one by one; the broker serves the next connection."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "broken", partitions=1)
    backlog = Backlog(kafka_broker)
    cids = [backlog.produce("broken", batch([b"ok%d" % i])) for i in range(3)]
    bad_header = encode_request_header(RequestHeader(PRODUCE_KEY, 2, 99, "backlog-test"))
    bad = len(bad_header).to_bytes(4, "big") + bad_header
    with caplog.at_level(logging.WARNING, logger="broker.network.connection"), \
            RawClient(bootstrap) as conn:
        backlog.send(conn, tail=bad)
        answers = backlog.answers(conn)
        assert conn.is_closed_by_peer(timeout_s=10), "the broker did not close the connection"
    assert [_produced(answers[cid]) for cid in cids] == [(0, 0), (0, 1), (0, 2)]
    assert any("unsupported version 2 of api key 0" in r.getMessage() for r in caplog.records)
    assert _stored(bootstrap, "broken", 0) == {0: b"ok0", 1: b"ok1", 2: b"ok2"}


def test_a_backlog_longer_than_the_bound_is_started_in_runs(
        kafka_broker: BrokerHandle, group_sizes: list[int]) -> None:
    """More buffered requests than GROUP_MAX_BEHIND: at most that many are started behind
    the one in flight; the rest wait for their turn, all answered in order."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "long", partitions=1)
    backlog = Backlog(kafka_broker)
    total = 2 * GROUP_MAX_BEHIND + 30
    cids = [backlog.produce("long", batch([b"n%d" % i])) for i in range(total)]
    with RawClient(bootstrap) as conn:
        backlog.send(conn)
        answers = backlog.answers(conn)
    assert [_produced(answers[cid]) for cid in cids] == [(0, n) for n in range(total)]
    assert _stored(bootstrap, "long", 0) == {n: b"n%d" % n for n in range(total)}
    assert max(group_sizes) == GROUP_MAX_BEHIND + 1, group_sizes  # the one in flight, and its run
    assert len(group_sizes) >= 2


@pytest.mark.minikafka(subprocess=False, properties={  # a short quota window: short throttles
    "quota.window.num": "2", "quota.window.size.seconds": "1"})
def test_a_backlog_over_a_produce_quota_is_served_one_request_at_a_time(
        kafka_broker: BrokerHandle, group_sizes: list[int]) -> None:
    """With a producer_byte_rate quota configured, a connection's requests are started one
    at a time, as before (each throttled answer mutes the connection before its next
    request is read): none appended together, each answered with its throttle time."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, "quota", partitions=1)
    set_producer_byte_rate(bootstrap, "slow", 1000.0)
    backlog = Backlog(kafka_broker, client_id="slow")
    values = [b"q%d" % i + bytes(1000) for i in range(6)]  # 6 KB: over 1,000 B/s at once
    cids = [backlog.produce("quota", batch([value])) for value in values]
    with RawClient(bootstrap, timeout_s=30) as conn:
        backlog.send(conn)
        answers = backlog.answers(conn)
    assert [_produced(answers[cid]) for cid in cids] == [(0, n) for n in range(6)]
    assert max(answers[cid].throttle_time_ms for cid in cids) > 0
    assert all(n == 1 for n in group_sizes), group_sizes
    assert _stored(bootstrap, "quota", 0) == dict(enumerate(values))

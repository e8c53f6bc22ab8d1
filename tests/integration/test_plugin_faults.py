"""Fault hooks of the pytest plugin against stock clients: kafka-python (and librdkafka)
retrying refused, delayed and dropped requests, a consumer group riding out a coordinator
still loading and a rebalance; faults off unless the fixture turns them on."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer as RdProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from pytest_minikafka import BrokerError, BrokerHandle

pytestmark = [pytest.mark.timeout(120), pytest.mark.minikafka(faults=True, topics=["t"])]


def consume(bootstrap: str, topic: str, n: int, **kwargs: Any) -> list[bytes]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             **kwargs)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
    finally:
        consumer.close()
    return got


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def test_refused_produce_is_retried_and_appended_once(kafka_broker: BrokerHandle) -> None:
    faults = kafka_broker.faults
    faults.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER", count=3)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, retry_backoff_ms=20)
    try:
        metadata = producer.send("t", b"v").get(timeout=30)
    finally:
        producer.close()
    assert faults.count("Produce") == 4 and faults.pending() == 0
    # A NOT_LEADER_OR_FOLLOWER answer makes a client refresh its metadata first.
    assert faults.count("Metadata") >= 2
    assert metadata.offset == 0 and end_offset(kafka_broker.bootstrap, "t") == 1


def test_librdkafka_retries_a_timed_out_produce(kafka_broker: BrokerHandle) -> None:
    kafka_broker.faults.fail_next("Produce", "REQUEST_TIMED_OUT")
    reports: list[Any] = []
    producer = RdProducer({"bootstrap.servers": kafka_broker.bootstrap, "retry.backoff.ms": 20})
    producer.produce("t", b"rd", on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(30) == 0
    assert reports == [(None, 0)]
    assert kafka_broker.faults.count("Produce") == 2


def test_delayed_response_times_out_and_idempotence_keeps_one_copy(
        kafka_broker: BrokerHandle) -> None:
    """The second produce is appended but answered after the client gave up on it; the retry
    carries the same producer id and sequence, so the broker answers it as a duplicate. (The
    client's timeout covers every request: 3 s, not less, so that on a loaded machine only
    the delayed one times out.)"""
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, request_timeout_ms=3000,
                             retry_backoff_ms=20)
    try:
        producer.send("t", b"first").get(timeout=60)  # producer id assigned, connected
        before = kafka_broker.faults.count("Produce")
        kafka_broker.faults.delay_next("Produce", delay_ms=5000)
        metadata = producer.send("t", b"slow").get(timeout=60)
    finally:
        producer.close()
    assert kafka_broker.faults.count("Produce") - before >= 2
    assert metadata.offset == 1
    assert consume(kafka_broker.bootstrap, "t", 2) == [b"first", b"slow"]
    assert end_offset(kafka_broker.bootstrap, "t") == 2


def test_dropped_connections_are_reconnected(kafka_broker: BrokerHandle) -> None:
    faults = kafka_broker.faults
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, retry_backoff_ms=20)
    try:
        producer.send("t", b"a").get(timeout=30)
        faults.drop_next("Produce")
        producer.send("t", b"b").get(timeout=30)
        assert faults.count("Produce") == 3
        assert faults.drop_connections() >= 1
        producer.send("t", b"c").get(timeout=30)
    finally:
        producer.close()
    assert consume(kafka_broker.bootstrap, "t", 3) == [b"a", b"b", b"c"]


def test_when_picks_the_requests_a_rule_applies_to(kafka_broker: BrokerHandle) -> None:
    kafka_broker.create_topics(["other"])
    faults = kafka_broker.faults
    faults.fail_next("Produce", "NOT_ENOUGH_REPLICAS", count=2,
                     when=lambda request: request.topic_data[0].name == "other")
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, retry_backoff_ms=20,
                             linger_ms=0)
    try:
        producer.send("t", b"plain").get(timeout=30)
        assert faults.pending() == 2
        producer.send("other", b"refused twice").get(timeout=30)
    finally:
        producer.close()
    assert faults.pending() == 0 and faults.count("Produce") == 4


def test_consumer_group_rides_out_a_loading_coordinator_and_a_rebalance(
        kafka_broker: BrokerHandle) -> None:
    faults = kafka_broker.faults
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    for i in range(5):
        producer.send("t", b"m%d" % i)
    producer.flush()
    faults.fail_next("FindCoordinator", "COORDINATOR_LOAD_IN_PROGRESS", count=3)
    faults.fail_next("Heartbeat", "REBALANCE_IN_PROGRESS")
    consumer = KafkaConsumer("t", bootstrap_servers=kafka_broker.bootstrap, group_id="g",
                             auto_offset_reset="earliest", heartbeat_interval_ms=100)
    got: list[bytes] = []
    sent_after = False
    deadline = time.monotonic() + 30
    try:
        # Until the refused heartbeat sent the member back to JoinGroup, then one more
        # record produced after the rebalance.
        while time.monotonic() < deadline and (len(got) < 6 or faults.pending()):
            if (not sent_after and len(got) == 5 and not faults.pending()
                    and faults.count("JoinGroup") >= 2):
                producer.send("t", b"after").get(timeout=10)
                sent_after = True
            # Long enough for a whole rebalance (kafka-python 3.0.12 loses a join that
            # completes after poll() gave up waiting on it).
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend(r.value for r in records)
    finally:
        consumer.close()
        producer.close()
    assert got == [b"m%d" % i for i in range(5)] + [b"after"]
    assert faults.count("FindCoordinator") >= 4 and faults.pending() == 0
    # REBALANCE_IN_PROGRESS sent the member back to JoinGroup.
    assert faults.count("JoinGroup") >= 2 and faults.count("Heartbeat") >= 1


@pytest.mark.minikafka(faults=False)
def test_faults_are_off_unless_the_fixture_turns_them_on(kafka_broker: BrokerHandle) -> None:
    with pytest.raises(BrokerError, match="faults=True"):
        kafka_broker.faults.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER")


def test_faults_refuse_what_they_cannot_do(kafka_broker: BrokerHandle) -> None:
    faults = kafka_broker.faults
    with pytest.raises(ValueError, match="unknown API"):
        faults.fail_next("Produse", "NOT_LEADER_OR_FOLLOWER")
    with pytest.raises(ValueError, match="unknown error"):
        faults.fail_next("Produce", "NOT_THE_LEADER")
    with pytest.raises(ValueError, match="delay_ms"):
        faults.delay_next("Fetch", delay_ms=10**9)
    assert faults.pending() == 0

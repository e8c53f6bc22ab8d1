"""kafka-python 3 (defaults: idempotence on, acks=all) against a real broker subprocess.

Round trip per codec: keys, headers and null values go in; a consumer with assign + seek
(no group) reads every record back, in order, exactly once. The same after a SIGTERM
restart and after kill -9: every acknowledged record is still there.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.data_path_client import create_topic

pytestmark = pytest.mark.timeout(120)

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
N_RECORDS = 300


def expected(i: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]:
    value = None if i % 7 == 0 else b"value-%d-" % i + b"x" * (i % 50)
    key = None if i % 11 == 0 and value is not None else b"key-%d" % i  # never both null
    headers = [("h", b"%d" % i), ("empty", b"")] if i % 3 == 0 else []
    return key, value, headers


def produce_all(bootstrap: str, topic: str, codec: str | None, n: int = N_RECORDS) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec,
                             linger_ms=5, request_timeout_ms=10_000, max_block_ms=10_000)
    try:
        futures = []
        for i in range(n):
            key, value, headers = expected(i)
            futures.append(producer.send(topic, key=key, value=value, headers=headers,
                                         partition=0))
        producer.flush(timeout=20)
        return [f.get(timeout=10).offset for f in futures]
    finally:
        producer.close(timeout=5)


def consume_all(bootstrap: str, topic: str, n: int, timeout_s: float = 20.0) -> list[Any]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             request_timeout_ms=10_000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
        # a little longer: nothing more than n may arrive (exactly once)
        for records in consumer.poll(timeout_ms=300).values():
            got.extend(records)
        return got
    finally:
        consumer.close()


def check(got: list[Any], n: int) -> None:
    assert [r.offset for r in got] == list(range(n))
    for i, r in enumerate(got):
        key, value, headers = expected(i)
        assert (r.key, r.value) == (key, value), i
        assert [(k, bytes(v)) for k, v in r.headers] == headers, i


@pytest.mark.parametrize("codec", CODECS, ids=[c or "none" for c in CODECS])
def test_round_trip_each_codec(module_broker: Any, codec: str | None) -> None:
    topic = f"kp-{codec or 'none'}"
    create_topic(module_broker.bootstrap, topic)
    offsets = produce_all(module_broker.bootstrap, topic, codec)
    assert offsets == list(range(N_RECORDS))
    check(consume_all(module_broker.bootstrap, topic, N_RECORDS), N_RECORDS)


def test_acknowledged_records_survive_sigterm_and_kill9(module_broker: Any) -> None:
    topic = "kp-restart"
    create_topic(module_broker.bootstrap, topic)
    produce_all(module_broker.bootstrap, topic, "lz4", 100)
    module_broker.restart()  # last in the module: restarts the shared broker
    check(consume_all(module_broker.bootstrap, topic, 100), 100)
    offsets = produce_all(module_broker.bootstrap, topic, None, 100)
    assert offsets == list(range(100, 200))
    module_broker.kill9_and_restart()
    got = consume_all(module_broker.bootstrap, topic, 200)
    assert [r.offset for r in got] == list(range(200))
    check(got[:100], 100)
    check([_shift(r, -100) for r in got[100:]], 100)


def _shift(record: Any, delta: int) -> Any:
    return record._replace(offset=record.offset + delta)

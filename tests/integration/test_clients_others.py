"""Round trips with the other stock clients: confluent-kafka (librdkafka), aiokafka, kcat and
Kafka's own console producer / consumer (Java). Consumers use assign / partition flags (no
consumer groups yet). Every record produced comes back once, in order.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.data_path_client import create_topic

pytestmark = pytest.mark.timeout(120)
REPO = Path(__file__).resolve().parents[2]
JARS = REPO / "tools" / "kafka-jars" / "libs"
N = 200


def kv(i: int) -> tuple[bytes, bytes]:
    return b"k%d" % i, b"v%d-" % i + b"y" * (i % 40)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_round_trip(module_broker: Any, codec: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    topic = f"ck-{codec}"
    create_topic(module_broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": module_broker.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "compression.type": codec, "message.timeout.ms": 20000})
    acked: list[int] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append(msg.offset())

    for i in range(N):
        key, value = kv(i)
        producer.produce(topic, key=key, value=value if i % 9 else None, partition=0,
                         headers=[("i", str(i).encode())], on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert errors == [] and sorted(acked) == list(range(N))

    consumer = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "ck-unused",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < N and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append(msg)
        assert [m.offset() for m in got] == list(range(N))
        for i, m in enumerate(got):
            key, value = kv(i)
            assert (m.key(), m.value()) == (key, value if i % 9 else None)
            assert m.headers() == [("i", str(i).encode())]
    finally:
        consumer.close()


def test_aiokafka_round_trip(module_broker: Any) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = "aio"
    create_topic(module_broker.bootstrap, topic)

    async def run() -> list[Any]:
        producer = AIOKafkaProducer(bootstrap_servers=module_broker.bootstrap,
                                    enable_idempotence=True, compression_type="gzip",
                                    linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=kv(i)[0], value=kv(i)[1], partition=0,
                                           headers=[("h", b"%d" % i)]) for i in range(N)]
            offsets = [(await f).offset for f in futures]
            assert offsets == list(range(N))
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=module_broker.bootstrap, group_id=None,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < N and time.monotonic() < deadline:
                batches = await consumer.getmany(tp, timeout_ms=500)
                got.extend(batches.get(tp, []))
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(asyncio.wait_for(run(), 60))
    assert [m.offset for m in got] == list(range(N))
    assert [(m.key, m.value) for m in got] == [kv(i) for i in range(N)]
    assert all(list(m.headers) == [("h", b"%d" % i)] for i, m in enumerate(got))


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (scripts/setup installs it)")
def test_kcat_round_trip(module_broker: Any) -> None:
    topic = "kcat"
    create_topic(module_broker.bootstrap, topic)
    lines = [f"key{i}:value{i}" for i in range(N)]
    subprocess.run(["kcat", "-b", module_broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K:",
                    "-X", "enable.idempotence=true", "-z", "lz4"],
                   input="\n".join(lines) + "\n", text=True, check=True, timeout=30)
    out = subprocess.run(["kcat", "-b", module_broker.bootstrap, "-C", "-t", topic, "-p", "0",
                          "-o", "beginning", "-e", "-f", "%o %k:%s\n"],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    assert out.splitlines() == [f"{i} {line}" for i, line in enumerate(lines)]


def _java(main: str, args: list[str], stdin: str | None = None, timeout_s: float = 60) -> str:
    java = shutil.which("java")
    assert java is not None
    cmd = [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           "-cp", str(JARS / "*"), main, *args]
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"}
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout_s,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.java
@pytest.mark.skipif(not JARS.is_dir(), reason="run tools/fetch-kafka-jars first")
def test_java_console_producer_and_consumer(module_broker: Any) -> None:
    topic = "java-console"
    create_topic(module_broker.bootstrap, topic)
    lines = [f"key{i}\tvalue {i}" for i in range(N)]
    _java("kafka.tools.ConsoleProducer",
          ["--bootstrap-server", module_broker.bootstrap, "--topic", topic,
           "--property", "parse.key=true", "--compression-codec", "zstd",
           "--producer-property", "enable.idempotence=true", "--producer-property", "acks=all"],
          stdin="\n".join(lines) + "\n")
    out = _java("org.apache.kafka.tools.consumer.ConsoleConsumer",
                ["--bootstrap-server", module_broker.bootstrap, "--topic", topic,
                 "--partition", "0", "--offset", "earliest", "--max-messages", str(N),
                 "--timeout-ms", "30000", "--property", "print.key=true",
                 "--property", "print.offset=true"])
    got = [line for line in out.splitlines() if line.startswith("Offset:")]
    assert got == [f"Offset:{i}\tkey{i}\tvalue {i}" for i in range(N)]

"""Produce-then-consume round trips with the stock clients, configured for a secured listener
the way each client's users configure it (its own property names): kafka-python,
confluent-kafka (librdkafka), aiokafka and Kafka's Java console producer / consumer.

``ClientSecurity`` holds what a client needs (protocol, CA, client certificate, SASL
mechanism and credentials); each ``*_round_trip`` produces ``n`` records to partition 0 of a
topic and reads them back with assign-from-beginning, and returns the values read.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.broker_process import REPO_ROOT

JARS = REPO_ROOT / "tools" / "kafka-jars" / "libs"
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    keystore: Path | None = None  # key + certificate in one PEM file (Java)
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    def kafka_python(self) -> dict[str, Any]:
        out: dict[str, Any] = {"security_protocol": self.protocol}
        if self.ca is not None:
            out["ssl_cafile"] = str(self.ca)
        if self.cert is not None:
            out.update(ssl_certfile=str(self.cert), ssl_keyfile=str(self.key))
        if self.mechanism is not None:
            out.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                       sasl_plain_password=self.password)
        return out

    def confluent(self) -> dict[str, Any]:
        out: dict[str, Any] = {"security.protocol": self.protocol}
        if self.ca is not None:
            out["ssl.ca.location"] = str(self.ca)
        if self.cert is not None:
            out.update({"ssl.certificate.location": str(self.cert), "ssl.key.location": str(self.key)})
        if self.mechanism is not None:
            out.update({"sasl.mechanisms": self.mechanism, "sasl.username": self.username,
                        "sasl.password": self.password})
        return out

    def aiokafka(self) -> dict[str, Any]:
        from aiokafka.helpers import create_ssl_context

        out: dict[str, Any] = {"security_protocol": self.protocol}
        if self.ca is not None:
            out["ssl_context"] = create_ssl_context(
                cafile=str(self.ca), certfile=str(self.cert) if self.cert else None,
                keyfile=str(self.key) if self.key else None)
        if self.mechanism is not None:
            out.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                       sasl_plain_password=self.password)
        return out

    def java(self) -> dict[str, str]:
        out = {"security.protocol": self.protocol}
        if self.ca is not None:
            out.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)})
        if self.keystore is not None:
            out.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.keystore)})
        if self.mechanism is not None:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule"
                      if self.mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            out["sasl.mechanism"] = self.mechanism
            out["sasl.jaas.config"] = (f'{module} required username="{self.username}" '
                                       f'password="{self.password}";')
        return out


def values(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def kafka_python_round_trip(bootstrap: str, topic: str, sec: ClientSecurity, n: int = 50) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10_000,
                             **sec.kafka_python())
    try:
        futures = [producer.send(topic, v, partition=0) for v in values(n, "kp")]
        producer.flush(TIMEOUT_S)
        assert [f.get(TIMEOUT_S).offset for f in futures] == sorted(f.get().offset for f in futures)
    finally:
        producer.close(5)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             request_timeout_ms=10_000, **sec.kafka_python())
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        return got
    finally:
        consumer.close()


def confluent_round_trip(bootstrap: str, topic: str, sec: ClientSecurity, n: int = 50) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20_000,
                         **sec.confluent()})
    errors: list[Any] = []
    for v in values(n, "ck"):
        producer.produce(topic, value=v, partition=0,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(TIMEOUT_S) == 0 and errors == []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, **sec.confluent()})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < n and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append(msg.value())
        return got
    finally:
        consumer.close()


def aiokafka_round_trip(bootstrap: str, topic: str, sec: ClientSecurity, n: int = 50) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **sec.aiokafka())
        await producer.start()
        try:
            for v in values(n, "aio"):
                await producer.send(topic, v, partition=0)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False, **sec.aiokafka())
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < n and time.monotonic() < deadline:
                batches = await consumer.getmany(tp, timeout_ms=500)
                got.extend(m.value for m in batches.get(tp, []))
            return got
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(run(), 2 * TIMEOUT_S))


def java(main: str, args: list[str], stdin: str | None = None,
         timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    java_bin = shutil.which("java")
    assert java_bin is not None
    cmd = [java_bin, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           "-cp", str(JARS / "*"), main, *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"}, check=False)


def java_client_config(tmp: Path, sec: ClientSecurity) -> Path:
    path = tmp / f"client-{sec.protocol}-{sec.mechanism}-{sec.username}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in sec.java().items()))
    return path


def java_console_round_trip(bootstrap: str, topic: str, sec: ClientSecurity, tmp: Path,
                            n: int = 50) -> list[bytes]:
    config = java_client_config(tmp, sec)
    produced = java("kafka.tools.ConsoleProducer",
                    ["--bootstrap-server", bootstrap, "--topic", topic,
                     "--producer.config", str(config)],
                    stdin="\n".join(v.decode() for v in values(n, "java")) + "\n")
    assert produced.returncode == 0, produced.stderr[-3000:]
    consumed = java("org.apache.kafka.tools.consumer.ConsoleConsumer",
                    ["--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0",
                     "--offset", "earliest", "--max-messages", str(n), "--timeout-ms", "30000",
                     "--consumer.config", str(config)])
    assert consumed.returncode == 0, consumed.stderr[-3000:]
    return [line.encode() for line in consumed.stdout.splitlines() if line]

"""Replication benchmarks (P3): minikafka and Apache Kafka 3.9.1 (ZooKeeper mode) side by side,
three brokers and a ZooKeeper each, on the same machine in the same run.

    python -m bench.replication_bench [--records 100000] [--record-bytes 1000]

- Throughput: librdkafka (confluent-kafka) producing ``--records`` records of
  ``--record-bytes`` with acks=all (idempotent, linger.ms=5, batch.size=1 MiB) to a topic of
  three partitions, replication factor 3 (each broker leads one), min.insync.replicas=2;
  records/s and MB/s from the first send to the last acknowledgement.
- Follower catch-up: one follower killed (SIGKILL), ``--catchup-mb`` MB produced (acks=all,
  two in sync), the follower started again; MB/s = the bytes it lacked over the time from
  its restart (process start) to its return to every ISR.
- End-to-end latency: ``--rate`` records/s for ``--seconds`` with acks=all, a consumer
  reading them; per record the time from before ``produce()`` to its arrival at the
  consumer (both in this process, monotonic clock); p50 and p99.

The load average is printed before and after each side: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition

from bench.cluster_bench import KafkaSide, MiniKafkaSide, Side, loadavg
from client.sync import SyncClient

ASSIGNMENT: Final = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
STEP_TIMEOUT_S: Final = 300.0


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5, "batch.size": 1 << 20, "compression.type": "none",
                     "queue.buffering.max.kbytes": 1 << 20, "message.timeout.ms": 300000})


def _produce(producer: Producer, topic: str, count: int, size: int,
             partitions: Sequence[int] | None = None) -> float:
    """Send ``count`` records; seconds until the last acknowledgement. Fails on any error."""
    payload = os.urandom(size)
    errors: list[str] = []

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    parts = list(partitions or ASSIGNMENT)
    started = time.monotonic()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, partition=parts[i % len(parts)],
                                 on_delivery=done)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(STEP_TIMEOUT_S) != 0 or errors:
        raise RuntimeError(f"produce failed: {errors[:3]}")
    return time.monotonic() - started


def _create(side: Side, topic: str) -> None:
    admin = side.admin()
    try:
        from kafka.admin import NewTopic
        admin.create_topics([NewTopic(topic, replica_assignments=ASSIGNMENT,
                                      topic_configs={"min.insync.replicas": "2"})],
                            timeout_ms=120000)
    finally:
        admin.close()
    side.wait_leaders(topic, {p: r[0] for p, r in ASSIGNMENT.items()})


def _isrs(side: Side, topic: str) -> dict[int, list[int]]:
    with SyncClient(side.bootstrap, timeout_ms=30000) as client:
        (info,) = client.describe_topics([topic])
    return {p: sorted(i.isr) for p, i in info.partitions.items()}


def _wait_isr_full(side: Side, topic: str) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while True:
        try:
            if all(len(isr) == 3 for isr in _isrs(side, topic).values()):
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{side.name}: ISR of {topic} never full")
        time.sleep(0.05)


def throughput(side: Side, records: int, size: int) -> dict[str, float]:
    _create(side, "p3")
    producer = _producer(side.bootstrap)
    _produce(producer, "p3", 2000, size)  # warm-up: connections, producer ids
    elapsed = _produce(producer, "p3", records, size)
    return {"records_per_s": records / elapsed, "mb_per_s": records * size / elapsed / 1e6,
            "seconds": elapsed}


def catch_up(side: Side, megabytes: int, size: int) -> dict[str, float]:
    _create(side, "catchup")
    _wait_isr_full(side, "catchup")
    victim = 3
    os.kill(side.pids[victim], signal.SIGKILL)
    count = megabytes * 1_000_000 // size
    _produce(_producer(side.bootstrap), "catchup", count, size, partitions=[0, 1])
    # Kafka refuses to register again while the old session lives: wait it out on both sides.
    time.sleep(side.session_timeout_ms / 1000 + 2)
    started = time.monotonic()
    side.start_broker(victim)
    _wait_isr_full(side, "catchup")
    elapsed = time.monotonic() - started
    return {"mb": count * size / 1e6, "seconds_from_restart": elapsed,
            "mb_per_s": count * size / 1e6 / elapsed}


def latency(side: Side, rate: int, seconds: float, size: int) -> dict[str, float]:
    _create(side, "latency")
    consumer = Consumer({"bootstrap.servers": side.bootstrap, "group.id": "latency",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "auto.offset.reset": "latest"})
    consumer.assign([CTopicPartition("latency", p, -1) for p in ASSIGNMENT])
    for _ in range(20):
        consumer.poll(0.1)
    producer = _producer(side.bootstrap)
    producer.produce("latency", b"warm", partition=0)
    producer.flush(60)
    latencies: list[float] = []
    total = int(rate * seconds)
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set() and len(latencies) < total:
            msg = consumer.poll(0.1)
            value = None if msg is None or msg.error() is not None else msg.value()
            if value is None or len(value) < 8:
                continue
            (sent,) = struct.unpack_from(">d", value)
            latencies.append((time.monotonic() - sent) * 1000)

    reader = threading.Thread(target=consume)
    reader.start()
    pad = b"x" * max(0, size - 8)
    started = time.monotonic()
    for i in range(total):
        due = started + i / rate
        while (now := time.monotonic()) < due:
            producer.poll(min(0.001, due - now))
        producer.produce("latency", struct.pack(">d", time.monotonic()) + pad,
                         partition=i % len(ASSIGNMENT))
        producer.poll(0)
    producer.flush(60)
    deadline = time.monotonic() + 30
    while len(latencies) < total and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    reader.join(10)
    consumer.close()
    ordered = sorted(latencies)
    return {"count": len(ordered), "p50_ms": statistics.median(ordered),
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]}


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="replication-bench-") as tmp:
        order = (KafkaSide, MiniKafkaSide) if args.kafka_first else (MiniKafkaSide, KafkaSide)
        for cls in order:
            side = cls(Path(tmp) / cls.__name__, args.session_timeout_ms)
            before = loadavg()
            side.start()
            try:
                row = {"load_before": before,
                       "throughput": throughput(side, args.records, args.record_bytes),
                       "latency": latency(side, args.rate, args.seconds, args.record_bytes),
                       "catch_up": catch_up(side, args.catchup_mb, args.record_bytes)}
            finally:
                side.stop()
            row["load_after"] = loadavg()
            results[side.name] = row
            print(json.dumps({side.name: row}, indent=2), flush=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replication_bench")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--catchup-mb", type=int, default=100)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--kafka-first", action="store_true",
                        help="run Apache Kafka's side first (alternate runs on a busy machine)")
    args = parser.parse_args(argv)
    results = run(args)
    if len(results) == 2:
        ours = results[MiniKafkaSide.name]["throughput"]["mb_per_s"]
        theirs = results[KafkaSide.name]["throughput"]["mb_per_s"]
        print(f"P3 acks=all RF3: minikafka {ours:.1f} MB/s, Kafka {theirs:.1f} MB/s "
              f"({ours / theirs:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Spark: rows/s from a broker to Parquet, our Python source vs Spark's built-in Kafka source.

    python -m bench.spark_bench [--records 1000000] [--record-bytes 100] [--partitions 4]
                                [--brokers minikafka,kafka] [--repeats 2] [--json FILE]

For each broker (minikafka, and Apache Kafka 3.9.1 started by ``bench.kafka_broker`` when
its jars are there): create a topic, load ``--records`` records of ``--record-bytes``-byte
values (confluent-kafka, uncompressed), then time ``spark.read.format(F)...load()
.write.parquet(dir)`` for F = ``minikafka`` (spark_ingest.source) and ``kafka`` (Spark's
connector) in one local[2] session. A small warm-up read of each format runs first (the
first Spark job of a JVM pays class loading and JIT); each figure is the median of
``--repeats`` timed runs; the row count of the Parquet written is checked every time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.admin import create_topic
from bench.brokers import BrokerUnderTest
from bench.kafka_broker import ApacheKafka
from bench.minikafka_broker import MiniKafka
from bench.procs import BenchError

FORMATS = ("minikafka", "kafka")


def load(bootstrap: str, topic: str, records: int, record_bytes: int) -> float:
    """Produce ``records`` values of ``record_bytes`` bytes (acks=1); seconds taken."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
                         "batch.size": 1 << 20, "queue.buffering.max.messages": 500_000,
                         "enable.idempotence": False, "log_level": 0})
    value = b"x" * record_bytes
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=str(i).encode())
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left:
        raise BenchError(f"{left} records not acknowledged by {bootstrap}")
    return time.monotonic() - started


def timed_read(spark: Any, fmt: str, bootstrap: str, topic: str, out: Path, expect: int,
               ending: str | None = None) -> float:
    shutil.rmtree(out, ignore_errors=True)
    reader = (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    if ending is not None:
        reader = reader.option("endingOffsets", ending)
    started = time.monotonic()
    reader.load().write.parquet(str(out))
    elapsed = time.monotonic() - started
    written = spark.read.parquet(str(out)).count()
    if written != expect:
        raise BenchError(f"{fmt}: wrote {written} rows, expected {expect}")
    return elapsed


def bench_broker(broker: BrokerUnderTest, spark: Any, args: argparse.Namespace,
                 work: Path) -> dict[str, Any]:
    broker.start()
    try:
        topic = "spark-bench"
        create_topic(broker.bootstrap, topic, args.partitions)
        load_s = load(broker.bootstrap, topic, args.records, args.record_bytes)
        print(f"[{broker.name}] loaded {args.records} x {args.record_bytes} B in {load_s:.1f} s",
              flush=True)
        warm = json.dumps({topic: {str(p): 100 for p in range(args.partitions)}})
        result: dict[str, Any] = {"broker": broker.version(), "load_s": round(load_s, 2)}
        for fmt in FORMATS:
            timed_read(spark, fmt, broker.bootstrap, topic, work / "warm", 100 * args.partitions, warm)
            runs = [timed_read(spark, fmt, broker.bootstrap, topic, work / fmt, args.records)
                    for _ in range(args.repeats)]
            seconds = statistics.median(runs)
            result[fmt] = {"runs_s": [round(r, 2) for r in runs], "median_s": round(seconds, 2),
                           "rows_per_s": round(args.records / seconds),
                           "mb_per_s": round(args.records * args.record_bytes / seconds / 1e6, 2)}
            print(f"[{broker.name}] format({fmt!r}): {args.records / seconds:,.0f} rows/s "
                  f"(median of {[round(r, 1) for r in runs]} s)", flush=True)
        return result
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--brokers", default="minikafka,kafka")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)

    from spark_ingest.session import local_session

    work = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    spark = local_session("spark-bench")
    results: dict[str, Any] = {"records": args.records, "record_bytes": args.record_bytes,
                               "partitions": args.partitions, "spark": spark.version}
    try:
        for name in args.brokers.split(","):
            broker: BrokerUnderTest
            if name == "minikafka":
                broker = MiniKafka(work / "minikafka")
            elif name == "kafka":
                try:
                    broker = ApacheKafka(work / "kafka")
                except BenchError as exc:
                    print(f"[kafka] skipped: {exc}", flush=True)
                    continue
            else:
                parser.error(f"--brokers: unknown broker {name!r}")
            results[name] = bench_broker(broker, spark, args, work / name / "out")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

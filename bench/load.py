"""librdkafka load generators (confluent-kafka), each run as its own process.

``python -m bench.load '<json spec>'`` runs one workload and prints one JSON line with the
result on stdout (``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``). Workloads:

- ``produce``: ``records`` records of ``record_bytes`` (no key) to ``topic`` with acks=1,
  ``linger.ms``, ``batch.size`` as given; result: records, bytes, elapsed_s, cpu_s. With
  ``topics`` (a list) and ``partitions`` (per topic) instead, record i goes to partition
  ``i % partitions`` of topic ``(i // partitions) % len(topics)``: spread evenly over every
  partition, round-robin (P7).
- ``consume``: a cold consumer (new process, ``assign()`` of every partition at offset 0, no
  subscribe) reads ``records`` records; result as produce.
- ``latency_consume`` / ``latency_produce``: end-to-end latency. The producer writes
  ``rate`` records/s for ``duration_s``, each value starting with ``time.monotonic_ns()``
  (CLOCK_MONOTONIC, shared by all processes on the host) as 8 bytes big-endian; the
  consumer prints ``ready`` once assigned, then reports percentiles of (receive time -
  value timestamp) after dropping the first ``warmup_records``. The producer sends ``rate / 1000``
  records per millisecond tick (at least one) and reports ``send_s`` (to its last send) and
  ``max_behind_ms`` (the most it fell behind its schedule before a send). With
  ``outliers_ms``, the consumer also returns ``outliers``: [receive time (CLOCK_MONOTONIC
  seconds), latency ms] of each sample above it (at most ``max_outliers``, default 100,000).
- ``small``: ``producers`` producers in threads, each sending one record per request
  (linger 0, ``batch.num.messages`` 1, one request in flight, wait for the ack before the
  next) for ``duration_s``; result: requests and latency percentiles.
- ``fetch_drain``: partition 0 of ``topic`` read with bare Fetch requests, the records
  discarded (``bench.fetch_drain``); result as ``consume``.
- ``kcat``: partition 0 of ``topic`` read by kcat, librdkafka's C client
  (``bench.kcat_consume``); result as ``consume``.
- ``probe``: print ``ready`` once the producer exists, then produce one record, retrying
  until acknowledged or ``timeout_s`` passes; result: ``acked_monotonic_s``, the CLOCK_MONOTONIC time of the acknowledgement.

CPU (``cpu_s``) is this process's utime+stime (all threads, librdkafka's included) from
/proc/self/stat over the measured interval.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import threading
import time
import uuid
from array import array
from collections.abc import Callable
from typing import Any, Final

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from bench.fetch_drain import DrainError, run_fetch_drain
from bench.kcat_consume import KcatError, run_kcat
from bench.load_specs import Spec
from bench.procs import self_cpu_s
from bench.stats import percentiles

Result = dict[str, Any]

PERCENTILES: Final[tuple[float, ...]] = (50.0, 90.0, 99.0, 99.9, 99.99, 100.0)
MAX_SAMPLES: Final[int] = 5_000_000  # latency samples kept per process (memory bound)
MAX_OUTLIERS: Final[int] = 100_000  # slow samples kept with their times (``outliers_ms``)
_TS: Final[struct.Struct] = struct.Struct(">q")


class LoadError(Exception):
    """The workload could not complete (delivery errors, timeouts)."""


def _quiet(_err: Any) -> None:
    """error_cb: connection errors are retried by librdkafka; the workload's timeout decides."""


def _producer(spec: Spec, **overrides: Any) -> Producer:
    conf: dict[str, Any] = {
        "bootstrap.servers": spec["bootstrap"],
        "client.id": "bench-producer",
        "acks": 1,
        "enable.idempotence": False,
        "compression.type": "none",
        "linger.ms": spec.get("linger_ms", 5),
        "batch.size": spec.get("batch_bytes", 1 << 20),
        "batch.num.messages": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1 << 20,
        "message.timeout.ms": int(spec.get("timeout_s", 120) * 1000),
        "log_level": 3,
        "error_cb": _quiet,
    }
    conf.update(overrides)
    return Producer(conf)


def _consumer(spec: Spec) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "client.id": "bench-consumer",
            # librdkafka requires a group.id; assign() never joins the group.
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            # librdkafka stops fetching once queued.min.messages (100,000) wait locally and
            # rechecks only after fetch.queue.backoff.ms (default 1000): a Python consumer
            # then stalls for up to 1 s at a time, on either broker. 10 ms keeps it fed.
            "fetch.queue.backoff.ms": 10,
            "log_level": 3,
            "error_cb": _quiet,
        }
    )


def _deadline(spec: Spec) -> float:
    return time.monotonic() + float(spec.get("timeout_s", 120))


def _targets(spec: Spec) -> list[tuple[str, int]]:
    """(topic, partition) in the order records go to them; partition -1: the client's
    partitioner picks (a single ``topic``)."""
    if "topics" not in spec:
        return [(spec["topic"], -1)]
    topics, partitions = list(spec["topics"]), int(spec["partitions"])
    if not topics or partitions < 1:
        raise LoadError(f"bad targets: topics={topics!r}, partitions={partitions}")
    return [(topic, p) for topic in topics for p in range(partitions)]


def run_produce(spec: Spec) -> Result:
    records = int(spec["records"])
    value = os.urandom(int(spec["record_bytes"]))
    errors: list[str] = []

    def on_error(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    producer = _producer(spec, **{"delivery.report.only.error": True, "on_delivery": on_error})
    targets = _targets(spec)
    deadline = _deadline(spec)
    cpu0, t0 = self_cpu_s(), time.monotonic()
    produce = producer.produce
    for i in range(records):
        topic, partition = targets[i % len(targets)]
        while True:
            try:
                if partition < 0:
                    produce(topic, value)
                else:
                    produce(topic, value, partition=partition)
                break
            except BufferError:
                producer.poll(0.005)
                if time.monotonic() > deadline:
                    raise LoadError(f"produce queue full until timeout after {i} records") from None
        if i & 0x3FFF == 0:
            producer.poll(0)
    remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    elapsed_s, cpu_s = time.monotonic() - t0, self_cpu_s() - cpu0
    if remaining or errors:
        raise LoadError(f"{remaining} records unacknowledged, errors: {errors}")
    return {
        "records": records,
        "bytes": records * len(value),
        "elapsed_s": elapsed_s,
        "cpu_s": cpu_s,
    }


def _assign_all(consumer: Consumer, topic: str, deadline: float) -> int:
    while True:
        meta = consumer.list_topics(topic=topic, timeout=5.0).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions:
            parts = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(meta.partitions)]
            consumer.assign(parts)
            return len(parts)
        if time.monotonic() > deadline:
            raise LoadError(f"no metadata for {topic}")
        time.sleep(0.05)


def run_consume(spec: Spec) -> Result:
    records = int(spec["records"])
    topic = spec["topic"]
    deadline = _deadline(spec)
    cpu0, t0 = self_cpu_s(), time.monotonic()
    consumer = _consumer(spec)
    _assign_all(consumer, topic, deadline)
    count = nbytes = 0
    try:
        while count < records:
            if time.monotonic() > deadline:
                raise LoadError(f"consumed {count} of {records} records before the timeout")
            for msg in consumer.consume(num_messages=min(10_000, records - count), timeout=1.0):
                err = msg.error()
                if err is not None:
                    raise LoadError(f"consume error: {err}")
                count += 1
                value = msg.value()
                nbytes += len(value) if value is not None else 0
        elapsed_s, cpu_s = time.monotonic() - t0, self_cpu_s() - cpu0
    finally:
        consumer.close()
    return {"records": count, "bytes": nbytes, "elapsed_s": elapsed_s, "cpu_s": cpu_s}


def run_latency_consume(spec: Spec) -> Result:
    records = int(spec["records"])
    warmup = int(spec.get("warmup_records", 0))
    topic = spec["topic"]
    deadline = _deadline(spec)
    consumer = _consumer(spec)
    _assign_all(consumer, topic, deadline)
    consumer.poll(0.5)  # connect and start fetching before the producer begins
    print("ready", flush=True)
    samples_ns: list[int] = []
    # Optional: (receive time, latency) of each sample over ``outliers_ms``, for matching
    # slow records with what the broker did then (bench.loop_lag).
    outlier_ns = int(float(spec.get("outliers_ms", 0)) * 1e6) or None
    # Kept in arrays, not as a tuple per sample: bench.p4_trace asks for every record
    # (130,000+), and a list of tuples made the garbage collector's full passes over them
    # pause this loop for 3-4 ms at a time.
    outlier_times = array("d")
    outlier_ms = array("d")
    max_outliers = int(spec.get("max_outliers", MAX_OUTLIERS))
    count = 0
    cpu0, t0 = self_cpu_s(), time.monotonic()
    try:
        while count < records:
            if time.monotonic() > deadline:
                raise LoadError(f"received {count} of {records} records before the timeout")
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            now_ns = time.monotonic_ns()
            if msg.error() is not None:
                raise LoadError(f"consume error: {msg.error()}")
            count += 1
            if count > warmup and len(samples_ns) < MAX_SAMPLES:
                latency_ns = now_ns - _TS.unpack_from(msg.value() or bytes(8))[0]
                samples_ns.append(latency_ns)
                if (outlier_ns is not None and latency_ns > outlier_ns
                        and len(outlier_ms) < max_outliers):
                    outlier_times.append(now_ns / 1e9)
                    outlier_ms.append(latency_ns / 1e6)
        elapsed_s, cpu_s = time.monotonic() - t0, self_cpu_s() - cpu0
    finally:
        consumer.close()
    result: Result = {
        "records": count,
        "elapsed_s": elapsed_s,
        "cpu_s": cpu_s,
        "latency_ms": _percentiles_ms(samples_ns),
    }
    if outlier_ns is not None:
        result["outliers"] = list(zip(outlier_times, outlier_ms, strict=True))
    return result


def run_latency_produce(spec: Spec) -> Result:
    rate = int(spec["rate"])
    records = int(spec["records"])
    pad = b"\0" * (int(spec["record_bytes"]) - _TS.size)
    producer = _producer(spec, **{"linger.ms": spec.get("linger_ms", 0)})
    topic = spec["topic"]
    tick_s = 0.001
    per_tick = max(1, rate // 1000)
    cpu0, t0 = self_cpu_s(), time.monotonic()
    sent = 0
    max_behind_s = 0.0
    while sent < records:
        target = t0 + (sent / rate)
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(min(delay, tick_s))
            continue
        max_behind_s = max(max_behind_s, -delay)
        for _ in range(min(per_tick, records - sent)):
            producer.produce(topic, _TS.pack(time.monotonic_ns()) + pad)
            sent += 1
        producer.poll(0)
    send_s = time.monotonic() - t0
    remaining = producer.flush(float(spec.get("timeout_s", 120)))
    if remaining:
        raise LoadError(f"{remaining} records unacknowledged")
    return {"records": sent, "elapsed_s": time.monotonic() - t0, "cpu_s": self_cpu_s() - cpu0,
            "send_s": send_s, "max_behind_ms": max_behind_s * 1000.0}


def run_small(spec: Spec) -> Result:
    producers = int(spec["producers"])
    duration_s = float(spec["duration_s"])
    value = os.urandom(int(spec["record_bytes"]))
    topic = spec["topic"]
    latencies: list[list[int]] = [[] for _ in range(producers)]
    failures: list[str] = []
    start = threading.Barrier(producers + 1)

    def worker(index: int) -> None:
        producer = _producer(
            spec,
            **{"linger.ms": 0, "batch.num.messages": 1, "max.in.flight.requests.per.connection": 1},
        )
        # Warm the connection and metadata before the clock starts.
        producer.produce(topic, value)
        if producer.flush(30.0):
            failures.append(f"producer {index}: warm-up record not acknowledged")
        mine = latencies[index]
        try:
            start.wait(timeout=60.0)
        except threading.BrokenBarrierError:
            return
        stop_at = time.monotonic() + duration_s
        while time.monotonic() < stop_at and len(mine) < MAX_SAMPLES:
            sent = time.monotonic_ns()
            producer.produce(topic, value)
            if producer.flush(30.0):
                failures.append(f"producer {index}: record not acknowledged in 30 s")
                return
            mine.append(time.monotonic_ns() - sent)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(producers)]
    for thread in threads:
        thread.start()
    start.wait(timeout=90.0)
    cpu0, t0 = self_cpu_s(), time.monotonic()
    for thread in threads:
        thread.join(timeout=duration_s + 60.0)
    elapsed_s, cpu_s = time.monotonic() - t0, self_cpu_s() - cpu0
    if failures:
        raise LoadError("; ".join(failures[:5]))
    samples = [x for mine in latencies for x in mine]
    return {
        "requests": len(samples),
        "elapsed_s": elapsed_s,
        "cpu_s": cpu_s,
        "latency_ms": _percentiles_ms(samples),
    }


def run_probe(spec: Spec) -> Result:
    """Produce one record until acknowledged (the broker may still be starting)."""
    producer = _producer(
        spec,
        **{
            "linger.ms": 0,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 50,
            "topic.metadata.refresh.fast.interval.ms": 50,
            "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 50,
        },
    )
    acked: list[float] = []
    errors: list[str] = []
    print("ready", flush=True)

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is None:
            acked.append(time.monotonic())
        else:
            errors.append(str(err))

    deadline = _deadline(spec)
    while time.monotonic() < deadline:
        errors.clear()
        producer.produce(spec["topic"], b"probe", on_delivery=on_delivery)
        while not acked and not errors and time.monotonic() < deadline:
            producer.poll(0.01)
        if acked:
            return {"acked_monotonic_s": acked[0]}
    raise LoadError(f"no produce acknowledged before the timeout: {errors[:3]}")


def _percentiles_ms(samples_ns: list[int]) -> dict[str, float]:
    values = percentiles([x / 1e6 for x in samples_ns], PERCENTILES)
    out = {f"p{p:g}": v for p, v in zip(PERCENTILES, values, strict=True)}
    out["samples"] = float(len(samples_ns))
    return out


WORKLOADS: Final[dict[str, Callable[[Spec], Result]]] = {
    "produce": run_produce,
    "consume": run_consume,
    "latency_consume": run_latency_consume,
    "latency_produce": run_latency_produce,
    "small": run_small,
    "probe": run_probe,
    "fetch_drain": run_fetch_drain,
    "kcat": run_kcat,
}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bench.load '<json spec>'", file=sys.stderr)
        return 2
    spec: Spec = json.loads(argv[0])
    try:
        result = WORKLOADS[spec["workload"]](spec)
        result["ok"] = True
    except (LoadError, DrainError, KcatError, KafkaException, BufferError, KeyError,
            ValueError, OSError) as exc:
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

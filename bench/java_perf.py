"""Kafka's own perf tools as a second opinion: ProducerPerformance and ConsumerPerformance.

These are ``kafka-producer-perf-test.sh`` / ``kafka-consumer-perf-test.sh`` (kafka-tools
3.9.1), run with ``java -cp 'tools/kafka-jars/libs/*'``. Their summary lines are parsed:

- ProducerPerformance, last line::

    1000000 records sent, 345423.2 records/sec (32.94 MB/sec), 512.23 ms avg latency,
    900.00 ms max latency, 500 ms 50th, 800 ms 95th, 880 ms 99th, 899 ms 99.9th.

- ConsumerPerformance, a CSV header then one line::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

  ConsumerPerformance subscribes with a consumer group (it has no assign mode), so the
  broker needs the group APIs; ``fetch.*`` figures exclude the group join (rebalance) time.

MB in both tools is 2**20 bytes.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bench.kafka_broker import java_classpath
from bench.procs import BenchError, spawn, stop

_PRODUCER_LINE: Final[re.Pattern[str]] = re.compile(
    r"(?P<records>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mbps>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th"
)
_TOOLS_LOG4J: Final[str] = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


@dataclass(frozen=True, slots=True)
class JavaPerfResult:
    records_per_s: float
    mib_per_s: float
    cpu_s: float  # the tool's JVM (utime+stime of the process tree)
    elapsed_s: float  # wall time of the JVM, start-up included
    p99_ms: float | None = None


def _children_cpu_s() -> float:
    times = os.times()
    return times.children_user + times.children_system


def _run_tool(argv: list[str], *, work_dir: Path, timeout_s: float) -> tuple[str, float, float]:
    """Run a Java tool in its own process group; return stdout, CPU seconds and wall seconds.

    The tool's CPU is the growth of this process's reaped-children times (``os.times``) across
    its run: the JVM is the only child reaped meanwhile, so the delta is exactly its rusage.
    """
    log4j = work_dir / "tools-log4j.properties"
    log4j.write_text(_TOOLS_LOG4J)
    full = ["java", "-Xmx512m", f"-Dlog4j.configuration=file:{log4j}", "-cp", java_classpath()]
    cpu0, t0 = _children_cpu_s(), time.monotonic()
    proc = spawn([*full, *argv], log_path=work_dir / "java-tools.log", stdout_pipe=True)
    try:
        stdout, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{argv[0]} did not finish in {timeout_s:.0f} s") from exc
    finally:
        stop(proc, grace_s=5.0)
    elapsed_s, cpu_s = time.monotonic() - t0, _children_cpu_s() - cpu0
    text = stdout.decode(errors="replace")
    if proc.returncode != 0:
        raise BenchError(f"{argv[0]} exited {proc.returncode}: {text[-500:]}")
    return text, cpu_s, elapsed_s


def producer_perf(
    bootstrap: str,
    topic: str,
    *,
    records: int,
    record_bytes: int,
    work_dir: Path,
    timeout_s: float = 600.0,
    client_config: Path | None = None,
) -> JavaPerfResult:
    """ProducerPerformance with the P1 settings: acks=1, linger.ms=5, batch.size=1 MiB
    (``client_config``: a properties file for the producer, e.g. security settings)."""
    config = ["--producer.config", str(client_config)] if client_config is not None else []
    text, cpu_s, elapsed_s = _run_tool(
        [
            "org.apache.kafka.tools.ProducerPerformance",
            *config,
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--record-size",
            str(record_bytes),
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={bootstrap}",
            "acks=1",
            "linger.ms=5",
            f"batch.size={1 << 20}",
            "enable.idempotence=false",
            "compression.type=none",
        ],
        work_dir=work_dir,
        timeout_s=timeout_s,
    )
    matches = list(_PRODUCER_LINE.finditer(text))
    if not matches:
        raise BenchError(f"ProducerPerformance printed no summary: {text[-500:]}")
    last = matches[-1]
    if int(last["records"]) != records:
        raise BenchError(f"ProducerPerformance sent {last['records']} of {records} records")
    return JavaPerfResult(
        records_per_s=float(last["rps"]),
        mib_per_s=float(last["mbps"]),
        cpu_s=cpu_s,
        elapsed_s=elapsed_s,
        p99_ms=float(last["p99"]),
    )


def consumer_perf(
    bootstrap: str, topic: str, *, records: int, work_dir: Path, timeout_s: float = 600.0,
    client_config: Path | None = None,
) -> JavaPerfResult:
    """ConsumerPerformance from the earliest offset with a fresh group, ``records`` records."""
    config = ["--consumer.config", str(client_config)] if client_config is not None else []
    text, cpu_s, elapsed_s = _run_tool(
        [
            "org.apache.kafka.tools.ConsumerPerformance",
            *config,
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--messages",
            str(records),
            "--timeout",
            "30000",
            "--group",
            f"bench-perf-{os.getpid()}-{time.monotonic_ns()}",
        ],
        work_dir=work_dir,
        timeout_s=timeout_s,
    )
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        header = [h.strip() for h in lines[-2].split(",")]
        values = [v.strip() for v in lines[-1].split(",")]
        row = dict(zip(header, values, strict=True))
        consumed = int(row["data.consumed.in.nMsg"])
        result = JavaPerfResult(
            records_per_s=float(row["fetch.nMsg.sec"]),
            mib_per_s=float(row["fetch.MB.sec"]),
            cpu_s=cpu_s,
            elapsed_s=elapsed_s,
        )
    except (IndexError, KeyError, ValueError) as exc:
        raise BenchError(f"ConsumerPerformance output not understood: {text[-500:]}") from exc
    if consumed < records:
        raise BenchError(f"ConsumerPerformance consumed {consumed} of {records} records")
    return result

"""The bulk consumer job (``minikafka spark-ingest``) against a real broker.

A run (``minikafka spark-ingest``, a subprocess) is SIGKILLed (the whole process group:
Python driver and its JVM) after its first micro-batch; more records arrive; the rerun
from the same checkpoint must leave Parquet
holding every record exactly once (read back file by file with pyarrow, not through
Spark's metadata, so a stray file would show).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds  # type: ignore[import-untyped]
import pytest
from kafka import KafkaProducer

from client.sync import SyncClient
from spark_ingest import bulk_consume
from tests.integration.broker_process import REPO_ROOT, BrokerProcess

pytestmark = pytest.mark.timeout(600)

RUN_TIMEOUT_S = 240.0


def produce(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=64 * 1024,
                             compression_type="lz4", request_timeout_ms=10_000, max_block_ms=10_000)
    try:
        for i in range(start, start + count):
            producer.send(topic, key=f"{topic}-{i}".encode(), value=b"v" * 40 + str(i).encode(),
                          partition=i % partitions)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


def job(bootstrap: str, out: Path, *extra: str) -> subprocess.Popen[str]:
    """The job as a subprocess in its own process group; stderr (Spark's log) to a file."""
    out.parent.mkdir(parents=True, exist_ok=True)
    stderr = open(out.parent / "job-stderr.log", "a")  # noqa: SIM115 - the child keeps it
    cmd = [sys.executable, "-m", "cli", "spark-ingest", "--bootstrap-server", bootstrap,
           "--topics", "bulk-a,bulk-b", "--output", str(out), "--max-records-per-batch", "3000",
           "--timeout-s", str(RUN_TIMEOUT_S), *extra]
    try:
        return subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=stderr,
                                text=True, start_new_session=True)
    finally:
        stderr.close()


def wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout_s: float) -> list[str]:
    """Lines of stdout up to and including the first that starts with ``prefix``."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=1.0):
                continue
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip())
            if line.startswith(prefix):
                return lines
    raise AssertionError(f"no line starting with {prefix!r}; got {lines}")


def compose_spark_command(bootstrap: str, out: Path) -> list[str]:
    from tests.integration.test_server_packaging import compose_config, dockerfile_stage

    service = compose_config({"TOPICS": "bulk-a,bulk-b"})["services"]["spark-ingest"]
    assert dockerfile_stage("spark")[1] == ["minikafka", "spark-ingest"]
    cluster = "broker-1:29092,broker-2:29092,broker-3:29092"  # the compose cluster's INTERNAL
    assert cluster in service["command"]
    return [bootstrap if a == cluster else str(out) if a == "/output" else a for a in service["command"]]


def landed(out: Path) -> list[tuple[str, int, int, bytes]]:
    table = ds.dataset(str(out), format="parquet", partitioning="hive").to_table(
        columns=["topic", "partition", "offset", "key"])
    return sorted(zip(*(table.column(c).to_pylist() for c in ("topic", "partition", "offset", "key")),
                      strict=True))


def test_killed_bulk_job_rerun_lands_every_record_exactly_once(
        broker: BrokerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap = broker.bootstrap
    with SyncClient(bootstrap, timeout_ms=10_000) as admin:
        admin.create_topic("bulk-a", 3, 1, {})
        admin.create_topic("bulk-b", 1, 1, {})
    produce(bootstrap, "bulk-a", 0, 6_000, 3)
    produce(bootstrap, "bulk-b", 0, 2_000, 1)
    out = tmp_path / "out"

    first = job(bootstrap, out)
    try:
        progress = wait_for_line(first, "batch ", RUN_TIMEOUT_S)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # driver and JVM, mid-run
        first.wait(timeout=30)
    assert first.returncode == -signal.SIGKILL
    assert "records" in progress[-1] and "MB" in progress[-1]

    landed_before = len(landed(out))
    assert landed_before > 0
    produce(bootstrap, "bulk-a", 6_000, 1_500, 3)
    produce(bootstrap, "bulk-b", 2_000, 500, 1)
    # The rerun is the compose file's spark-ingest service (the image's entry point is
    # ``minikafka spark-ingest``) with TOPICS given, the broker's internal address and the
    # output volume swapped for local ones. It runs in this process (``bulk_consume.main``,
    # the CLI's entry point), reusing the JVM an earlier Spark test started (~20 s saved).
    assert compose_spark_command(bootstrap, out) == [
        "--bootstrap-server", bootstrap, "--topics", "bulk-a,bulk-b", "--output", str(out)]
    assert bulk_consume.main(compose_spark_command(bootstrap, out)) == 0
    second = capsys.readouterr().out
    # the summary counts what this run landed: each record once, a batch the killed run had
    # landed already counted apart
    (summary,) = [line for line in second.splitlines() if line.startswith("summary:")]
    assert f" {10_000 - landed_before} records" in summary, summary

    rows = landed(out)
    expected_keys = sorted([f"bulk-a-{i}".encode() for i in range(7_500)]
                           + [f"bulk-b-{i}".encode() for i in range(2_500)])
    assert len(rows) == 10_000
    assert len({(t, p, o) for t, p, o, _ in rows}) == 10_000  # no record twice
    assert sorted(r[3] for r in rows) == expected_keys  # no record missing
    dates = {p.name for p in out.glob("topic=*/date=*")}
    assert dates and all(d.startswith("date=20") for d in dates)
    assert not list(out.glob("_staging/**/*.parquet"))
    # the rerun was incremental: it read what the killed run had not committed plus the new
    # records (a re-read from the start would have shown up above as records twice)
    batch_lines = [line for line in second.splitlines() if line.startswith("batch ")]
    assert batch_lines and all("records" in line and "MB" in line for line in batch_lines)

    # nothing new since: the job says so without starting Spark
    assert bulk_consume.main(["--bootstrap-server", bootstrap, "--topics", "bulk-a,bulk-b",
                              "--output", str(out)]) == 0
    third = capsys.readouterr().out
    assert "summary: nothing new since the last run" in third and "Spark not started" in third
    assert len(landed(out)) == 10_000


def test_bad_option_is_one_clear_line_before_spark_starts(tmp_path: Path) -> None:
    proc = job("127.0.0.1:1", tmp_path / "out", "--max-records-per-batch", "0")
    out, _ = proc.communicate(timeout=60)
    err = (tmp_path / "job-stderr.log").read_text()
    assert proc.returncode == 1, (out, err)
    assert err.strip() == "minikafka spark-ingest: error: --max-records-per-batch: must be at least 1"


def test_options_and_topics_are_checked_before_spark_starts(module_broker: BrokerProcess, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Each mistake: exit 1 with one line naming it, before Spark starts, and nothing on disk."""
    bootstrap = module_broker.bootstrap
    with SyncClient(bootstrap, timeout_ms=10_000) as admin:
        admin.create_topic("pre", 1, 1, {})
    produce(bootstrap, "pre", 0, 3, 1)
    out = tmp_path / "out"
    # Before Spark starts, shown by order rather than by a clock: this Spark cannot start (its
    # SPARK_HOME does not exist), so the answer below can only come from the checks before it.
    env = {**os.environ, "SPARK_HOME": str(tmp_path / "no-spark-here")}
    proc = subprocess.run([sys.executable, "-m", "cli", "spark-ingest", "--bootstrap-server", bootstrap,
                           "--topics", "pre,nope", "--output", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert proc.returncode == 1
    assert proc.stderr == "minikafka spark-ingest: error: subscribe: unknown topic 'nope' (UNKNOWN_TOPIC_OR_PARTITION)\n"
    assert not out.exists()
    for extra, message in [
        (["--bootstrap-server", "127.0.0.1:1"], "kafka.bootstrap.servers: cannot reach any broker of '127.0.0.1:1'"),
        (["--starting-offsets", "bogus"], "startingOffsets: expected earliest, latest or a JSON object"),
        (["--starting-offsets", '{"pre": {"0": 9}}'],
         "--starting-offsets: start offset 9 of pre-0 is greater than its end offset 3"),
    ]:
        args = ["--bootstrap-server", bootstrap, "--topics", "pre", "--output", str(out), *extra]
        assert bulk_consume.main(args) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"minikafka spark-ingest: error: {message}") and err.count("\n") == 1, err
        assert not out.exists()


def test_query_starts_again_when_sparks_python_worker_connects_back_late(
        module_broker: BrokerProcess, tmp_path: Path) -> None:
    """Spark gives the streaming reader's Python worker a fixed 10 s to connect back. Here the
    first such worker starts 12 s late (the workers' Python is a wrapper that sleeps once
    before running the real one): the job says so, starts the query again from its checkpoint
    and lands every record exactly once."""
    bootstrap = module_broker.bootstrap
    with SyncClient(bootstrap, timeout_ms=10_000) as admin:
        admin.create_topic("slow-start", 2, 1, {})
    produce(bootstrap, "slow-start", 0, 1_000, 2)
    marker = tmp_path / "slowed-once"
    wrapper = tmp_path / "python"
    wrapper.write_text("#!/bin/sh\n"
                       'case "$*" in *python_streaming_source_runner*)\n'
                       f'  if mkdir "{marker}" 2>/dev/null; then sleep 12; fi;;\n'
                       "esac\n"
                       f'exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "cli", "spark-ingest", "--bootstrap-server", bootstrap,
                           "--topics", "slow-start", "--output", str(out), "--timeout-s", str(RUN_TIMEOUT_S)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S + 60,
                          check=False, env={**os.environ, "PYSPARK_PYTHON": str(wrapper)})
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-3000:])
    assert marker.is_dir()  # the wrapper did delay a streaming reader's worker
    restarts = [line for line in proc.stdout.splitlines() if line.startswith("restart: ")]
    assert restarts == ["restart: Spark's Python worker did not connect back within Spark's fixed 10 s "
                        "(an overloaded machine?); starting the query again from its checkpoint "
                        "(attempt 2 of 3)"], proc.stdout
    assert "summary: " in proc.stdout and " 1000 records" in proc.stdout, proc.stdout
    rows = landed(out)
    assert len(rows) == 1_000 and len({(t, p, o) for t, p, o, _ in rows}) == 1_000
    assert sorted(r[3] for r in rows) == sorted(f"slow-start-{i}".encode() for i in range(1_000))

"""``bench.load`` processes as the bench and its tools run them.

``start_load`` starts one (librdkafka in its own process, ``bench.procs.spawn``) and returns a
``LoadProc``: its lines are read with a deadline, and ``LoadProc.result`` waits for its JSON
result line, charging the process tree of ``cpu_pid`` (the broker's) with the CPU it used
over the load's lifetime. ``start_latency_pair`` is the one place P4's pair is started: the
bench's P4 (``bench.scenarios``), ``bench.p4_trace`` and ``bench.loop_lag`` all go through
it.

Kept apart from ``bench.load`` (which imports confluent-kafka) so that the bench's runner and
the tools import nothing of librdkafka's.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.load_specs import Spec
from bench.procs import BenchError, spawn, stop, tree_cpu_s

REPO_ROOT: Final[Path] = Path(__file__).resolve().parent.parent
# A result line's bound: bench.p4_trace's consumer returns every record's latency (~40 bytes
# each, 750,000 records at 50,000/s for 15 s).
MAX_LINE_BYTES: Final[int] = 256 << 20
READY_TIMEOUT_S: Final[float] = 60.0


@dataclass(frozen=True, slots=True)
class LoadOutcome:
    result: dict[str, Any]
    wall_s: float  # the load process's lifetime as seen by the harness
    broker_cpu_s: float  # the broker tree's CPU over that lifetime (0 without a cpu_pid)


class LoadProc:
    """A running ``bench.load`` process; read its lines, then its JSON result."""

    def __init__(self, proc: subprocess.Popen[bytes], name: str, *, cpu_pid: int = 0,
                 broker_name: str = "") -> None:
        self.proc = proc
        self.name = name
        self.cpu_pid = cpu_pid
        self.broker_name = broker_name
        self.t0 = time.monotonic()
        self.cpu0 = tree_cpu_s(cpu_pid) if cpu_pid else 0.0
        self._buffer = bytearray()

    def _readline(self, deadline: float) -> str:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while (end := self._buffer.find(b"\n")) < 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BenchError(f"load {self.name}: no output before the timeout")
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise BenchError(f"load {self.name}: exited without a result")
            self._buffer += chunk
            if len(self._buffer) > MAX_LINE_BYTES:
                raise BenchError(f"load {self.name}: output line over {MAX_LINE_BYTES} bytes")
        line = bytes(self._buffer[:end])
        del self._buffer[:end + 1]
        return line.decode(errors="replace")

    def wait_line(self, expected: str, timeout_s: float) -> None:
        line = self._readline(time.monotonic() + timeout_s)
        if line.strip() != expected:
            raise BenchError(f"load {self.name}: expected {expected!r}, got {line[:300]!r}")

    def result(self, timeout_s: float) -> LoadOutcome:
        """Its result line (and the broker's CPU until then), once it has printed it; the
        process is stopped in any case. Raises ``BenchError`` if the load did not succeed."""
        try:
            line = self._readline(time.monotonic() + timeout_s)
            wall_s = time.monotonic() - self.t0
            broker_cpu_s = (tree_cpu_s(self.cpu_pid) - self.cpu0) if self.cpu_pid else 0.0
            self.proc.wait(timeout=30)
        finally:
            stop(self.proc, grace_s=5.0)
        try:
            result: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchError(f"load {self.name}: not JSON: {line[:300]!r}") from exc
        if not result.get("ok"):
            where = f" on {self.broker_name}" if self.broker_name else ""
            raise BenchError(f"load {self.name}{where}: {result.get('error')}")
        return LoadOutcome(result=result, wall_s=wall_s, broker_cpu_s=broker_cpu_s)

    def kill(self) -> None:
        stop(self.proc, grace_s=2.0)


def start_load(spec: Spec, *, name: str, log_path: Path, cpu_pid: int = 0,
               broker_name: str = "") -> LoadProc:
    """``python -m bench.load SPEC`` in its own process group (stdout piped: its lines;
    stderr appended to ``log_path``), its broker CPU counted from now on ``cpu_pid``'s
    process tree (none if 0)."""
    proc = spawn([sys.executable, "-m", "bench.load", json.dumps(spec)], log_path=log_path,
                 cwd=REPO_ROOT, stdout_pipe=True)
    return LoadProc(proc, name, cpu_pid=cpu_pid, broker_name=broker_name)


@dataclass(frozen=True, slots=True)
class LatencyPair:
    """P4's pair running (``start_latency_pair``): the consumer, started first (its broker CPU
    spans the producer's lifetime), and the producer."""

    consumer: LoadProc
    producer: LoadProc

    def results(self, produce_timeout_s: float, consume_timeout_s: float = 120.0
                ) -> tuple[LoadOutcome, LoadOutcome]:
        """(produced, consumed): the producer's outcome within ``produce_timeout_s``, then the
        consumer's within ``consume_timeout_s`` more. Both processes are stopped once read;
        ``BenchError`` if either did not succeed."""
        return (self.producer.result(produce_timeout_s),
                self.consumer.result(consume_timeout_s))


@contextmanager
def start_latency_pair(consume: Spec, produce: Spec, *, name: str, log_dir: Path,
                       cpu_pid: int = 0, broker_name: str = "",
                       ready_timeout_s: float = READY_TIMEOUT_S) -> Iterator[LatencyPair]:
    """P4's pair (``bench.load_specs.latency_specs``) running for the block: the consumer
    first, the producer once the consumer has printed ``ready`` (assigned and fetching,
    within ``ready_timeout_s``), each logging to ``log_dir`` (``consumer.log``,
    ``producer.log``); the broker's CPU counted on ``cpu_pid`` from the consumer's start.
    Both are stopped when the block ends, whatever happens in it or in starting them."""
    consumer = start_load(consume, name=f"{name} consumer", log_path=log_dir / "consumer.log",
                          cpu_pid=cpu_pid, broker_name=broker_name)
    producer: LoadProc | None = None
    try:
        consumer.wait_line("ready", timeout_s=ready_timeout_s)
        producer = start_load(produce, name=f"{name} producer",
                              log_path=log_dir / "producer.log", broker_name=broker_name)
        yield LatencyPair(consumer, producer)
    finally:
        if producer is not None:
            producer.kill()
        consumer.kill()

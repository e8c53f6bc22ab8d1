"""Specs for ``bench.load``'s workloads built in one place where more than one tool runs the
same workload: the bench's P4, ``bench.p4_trace`` and ``bench.loop_lag`` all run P4's pair
(the two tools start it with ``spawn_latency_pair``; the bench through ``RunContext.load``).

Kept apart from ``bench.load`` (which imports confluent-kafka) so that the bench's runner and
the tools import nothing of librdkafka's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.procs import spawn, spawn_ready, stop

Spec = dict[str, Any]


def latency_specs(topic: str, rate: int, records: int, warmup_records: int, record_bytes: int,
                  bootstrap: str | None = None, **consumer_extra: Any) -> tuple[Spec, Spec]:
    """P4's two specs, (``latency_consume``, ``latency_produce``): ``records`` records of
    ``record_bytes`` at ``rate``/s, the first ``warmup_records`` not measured. ``bootstrap``
    goes into both when given (``RunContext.load`` adds its own); ``consumer_extra`` into the
    consumer's only (``outliers_ms``, ``max_outliers``, ``timeout_s``)."""
    common: Spec = {"topic": topic, "records": records}
    if bootstrap is not None:
        common["bootstrap"] = bootstrap
    return ({**common, "workload": "latency_consume", "warmup_records": warmup_records,
             **consumer_extra},
            {**common, "workload": "latency_produce", "rate": rate, "record_bytes": record_bytes})


@dataclass(frozen=True, slots=True)
class LatencyPair:
    """P4's pair running as ``bench.load`` processes (``spawn_latency_pair``)."""

    consumer: subprocess.Popen[bytes]
    producer: subprocess.Popen[bytes]

    def results(self) -> tuple[Spec, Spec]:
        """(produced, consumed): each process's JSON result line, once it has printed it
        (``{}`` for one that exited without)."""
        return _result_line(self.producer), _result_line(self.consumer)

    def stop(self) -> None:
        """Stop both (``procs.stop``), the producer first."""
        stop(self.producer)
        stop(self.consumer)


def _result_line(proc: subprocess.Popen[bytes]) -> Spec:
    assert proc.stdout is not None
    result: Spec = json.loads(proc.stdout.readline() or b"{}")
    return result


def spawn_latency_pair(consume: Spec, produce: Spec, log_dir: Path) -> LatencyPair:
    """P4's pair (``latency_specs``) started as ``bench.load`` processes, each with its
    stdout piped (its result line) and its log in ``log_dir`` (``consumer.log``,
    ``producer.log``): the consumer first, the producer once the consumer has printed
    ``ready`` (assigned and fetching). The caller stops them (``LatencyPair.stop``); the
    consumer is stopped here if the producer fails to start."""
    consumer = spawn_ready([sys.executable, "-m", "bench.load", json.dumps(consume)],
                           log_path=log_dir / "consumer.log", what="the consumer")
    try:
        producer = spawn([sys.executable, "-m", "bench.load", json.dumps(produce)],
                         log_path=log_dir / "producer.log", stdout_pipe=True)
    except BaseException:
        stop(consumer)
        raise
    return LatencyPair(consumer, producer)

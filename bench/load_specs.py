"""Specs for ``bench.load``'s workloads built in one place where more than one tool runs the
same workload: the bench's P4, ``bench.p4_trace`` and ``bench.loop_lag`` all run P4's pair,
started by ``bench.load_procs.start_latency_pair``.

Kept apart from ``bench.load`` (which imports confluent-kafka) so that the bench's runner and
the tools import nothing of librdkafka's.
"""

from __future__ import annotations

from typing import Any

Spec = dict[str, Any]


def latency_specs(topic: str, rate: int, records: int, warmup_records: int, record_bytes: int,
                  bootstrap: str, *, timeout_s: float = 300.0,
                  **consumer_extra: Any) -> tuple[Spec, Spec]:
    """P4's two specs, (``latency_consume``, ``latency_produce``): ``records`` records of
    ``record_bytes`` at ``rate``/s, the first ``warmup_records`` not measured, each process
    giving up after ``timeout_s``; ``consumer_extra`` goes into the consumer's only
    (``outliers_ms``, ``max_outliers``)."""
    common: Spec = {"bootstrap": bootstrap, "topic": topic, "records": records,
                    "timeout_s": timeout_s}
    return ({**common, "workload": "latency_consume", "warmup_records": warmup_records,
             **consumer_extra},
            {**common, "workload": "latency_produce", "rate": rate, "record_bytes": record_bytes})

"""``bench.load_specs.spawn_latency_pair``: P4's consumer and producer (``bench.load``
processes, librdkafka) as ``bench.p4_trace`` and ``bench.loop_lag`` start them, against a
real minikafka broker."""

from __future__ import annotations

from pathlib import Path

from bench.admin import create_topic
from bench.load_specs import latency_specs, spawn_latency_pair
from tests.integration.broker_process import BrokerProcess


def test_the_pair_runs_p4s_load_and_each_side_reports_its_result(
        broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "pair", 1)
    consume, produce = latency_specs("pair", 1_000, 500, 100, 100, broker.bootstrap,
                                     timeout_s=60)
    pair = spawn_latency_pair(consume, produce, tmp_path)
    try:
        produced, consumed = pair.results()
    finally:
        pair.stop()
    assert produced["ok"] and produced["records"] == 500, produced
    assert consumed["ok"] and consumed["records"] == 500, consumed
    assert consumed["latency_ms"]["samples"] == 400  # the first 100 not measured
    assert pair.consumer.poll() is not None and pair.producer.poll() is not None
    assert (tmp_path / "consumer.log").exists() and (tmp_path / "producer.log").exists()

"""``bench.load_procs.start_latency_pair``: P4's consumer and producer (``bench.load``
processes, librdkafka) as the bench's P4, ``bench.p4_trace`` and ``bench.loop_lag`` all start
them, against a real minikafka broker."""

from __future__ import annotations

from pathlib import Path

from bench.admin import create_topic
from bench.load_procs import start_latency_pair
from bench.load_specs import latency_specs
from tests.integration.broker_process import BrokerProcess


def test_the_pair_runs_p4s_load_and_each_side_reports_its_result(
        broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "pair", 1)
    consume, produce = latency_specs("pair", 1_000, 500, 100, 100, broker.bootstrap,
                                     timeout_s=60)
    with start_latency_pair(consume, produce, name="pair", log_dir=tmp_path,
                            cpu_pid=broker.pid, broker_name="minikafka") as pair:
        produced, consumed = pair.results(produce_timeout_s=60)
    assert produced.result["ok"] and produced.result["records"] == 500, produced
    assert consumed.result["ok"] and consumed.result["records"] == 500, consumed
    assert consumed.result["latency_ms"]["samples"] == 400  # the first 100 not measured
    # The broker's CPU is counted over the consumer's lifetime, which spans the producer's.
    assert consumed.broker_cpu_s > 0 and consumed.wall_s > produced.wall_s
    assert produced.broker_cpu_s == 0  # counted once, on the consumer's side
    assert pair.consumer.proc.poll() is not None and pair.producer.proc.poll() is not None
    assert (tmp_path / "consumer.log").exists() and (tmp_path / "producer.log").exists()


def test_the_pair_is_stopped_when_the_block_raises(broker: BrokerProcess,
                                                   tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "stopped", 1)
    consume, produce = latency_specs("stopped", 1_000, 100_000, 0, 100, broker.bootstrap,
                                     timeout_s=60)
    started = None
    try:
        with start_latency_pair(consume, produce, name="pair", log_dir=tmp_path) as pair:
            started = pair
            assert pair.producer.proc.poll() is None  # 100 s of records: still sending
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert started is not None
    assert started.consumer.proc.poll() is not None and started.producer.proc.poll() is not None

"""``bench.p4_trace.warm_up``: the traced broker is warmed up as the bench's P4 warms each
broker (``bench.scenarios.P4Latency.prepare``: P4's load at the bench's rates in turn until
``bench.warming``'s rule says it is steady), against a real minikafka broker and P4's
librdkafka pair (``bench.load_procs.start_latency_pair``)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from bench.context import FULL
from bench.p4_trace import warm_up
from bench.warming import WarmUp
from tests.integration.broker_process import BrokerProcess

_NUMBER = r"-?[\d,]+(?:\.\d+)?(?:e[+-]?\d+)?"  # bench.warming's: 1,234 or 61.3 or 1.2e-05


@pytest.mark.timeout(240)
def test_the_trace_warms_the_broker_by_the_benchs_rule(broker: BrokerProcess,
                                                       tmp_path: Path) -> None:
    # Runs of 1 s (0.5 s at each rate), at least 2 s of them, at most 3 s: the rule asks for
    # three runs before it compares them, and the third reaches the maximum.
    sizes = replace(FULL, p4_rates=(1_000, 2_000),
                    p4_warm_up=WarmUp(min_s=2.0, max_s=3.0, run_s=1.0))
    note = warm_up(broker, tmp_path / "warm-up", sizes)
    head, figures = note.split(": ", 1)
    assert head == (f"P4 warm-up on {broker.name} (unmeasured, 3 runs of 1 s of P4's load, "
                    "0.5 s at each of 1,000, 2,000 records/s)")
    values = dict(_figure(figure) for figure in figures.split("; "))
    assert list(values) == ["broker CPU us/record", "broker CPU us/record @ 1000",
                            "p99 ms @ 1000", "broker CPU us/record @ 2000", "p99 ms @ 2000"]
    for name, runs in values.items():
        assert len(runs) == 3 and all(v >= 0 for v in runs), (name, runs)
    assert all(v > 0 for v in values["p99 ms @ 1000"] + values["p99 ms @ 2000"])
    logs = tmp_path / "warm-up" / "p4-load"
    assert (logs / "consumer.log").exists() and (logs / "producer.log").exists()


def _figure(text: str) -> tuple[str, list[float]]:
    """("p99 ms @ 1000", [8.87, 2.1, 3.0]) from "p99 ms @ 1000 8.87, 2.1, 3"
    (``bench.warming.describe``: a figure's name, then its value in each run)."""
    m = re.fullmatch(rf"(.*?) ({_NUMBER}(?:, {_NUMBER})*)", text)
    assert m is not None, text
    return m.group(1), [float(v.replace(",", "")) for v in m.group(2).split(", ")]

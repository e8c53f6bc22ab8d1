"""CI's short fault-injection run against minikafka (``modes.ci_config``): a handful of
faults of each kind the broker can take here, under the full load; the build fails on any
acknowledged record lost, duplicated or reordered, on replicas that differ below the high
watermark and on committed offsets that move backwards (the findings are printed with the
broker logs around them). ``MINIKAFKA_CHAOS_SEED`` replays another schedule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos import modes, report
from tests.chaos.campaign import run

SEED = int(os.environ.get("MINIKAFKA_CHAOS_SEED", "2026"))


@pytest.mark.timeout(modes.CI_BUDGET_S + 60)
def test_short_fault_campaign_loses_no_acknowledged_record(tmp_path: Path) -> None:
    config = modes.ci_config(tmp_path, SEED)
    result = run(config)
    path = report.write_run(result)
    print(f"chaos report: {path}")
    assert not result.result.failed, report.failure_text(result)
    kinds = config.kinds_to_run()
    injected = {f.kind for f in result.history.faults}
    assert injected == set(kinds), f"kinds never injected: {set(kinds) - injected}"
    assert all(f.t_recovered is not None for f in result.history.faults), \
        [f"#{f.index} {f.kind}" for f in result.history.faults if f.t_recovered is None]
    for name, writer in result.result.writers.items():
        assert writer.acked > 0, f"{name} had nothing acknowledged"
    assert any(c.source == "consumer" for c in result.history.commits)
    assert any(c.source == "observer" for c in result.history.commits)

"""Smoke test of the benchmark harness: ``python -m bench --quick`` against minikafka.

Runs the real command (a real minikafka broker process, librdkafka load processes) with
tiny sizes, in a temporary results dir, and checks that it completes without failures and
that the report holds a number for every quick scenario (P1, P2, P4, P5, P6), and the
PNG plots.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
QUICK_ROWS = {
    "P1 produce 1p (librdkafka)": "records/s",
    "P1 produce 8p (librdkafka)": "records/s",
    "P2 consume 1p (librdkafka)": "records/s",
    "P2 consume 8p (librdkafka)": "records/s",
    "P4 e2e latency @ 10000 rec/s": "p99 ms",
    "P5 16 producers, 1 record/request": "requests/s",
    "P6 restart: launch to first produce ack": "s",
}
NUMBER = re.compile(r"^\d[\d,]*(\.\d+)?(e[+-]?\d+)?( \[.*\])?$")


@pytest.mark.timeout(240)
def test_quick_bench_reports_every_quick_scenario(tmp_path: Path) -> None:
    results_dir = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--results-dir", str(results_dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    report = (results_dir / "latest.md").read_text()
    dated = list(results_dir.glob("20*.md"))
    assert len(dated) == 1 and dated[0].read_text() == report
    cells: dict[tuple[str, str], str] = {}
    for line in report.splitlines():
        parts = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(parts) >= 3:
            cells[(parts[0], parts[1])] = parts[2]
    for row, metric in QUICK_ROWS.items():
        value = cells.get((row, metric))
        assert value is not None, f"no {row!r} / {metric!r} row in the report:\n{report}"
        assert NUMBER.match(value), f"{row} {metric}: {value!r} is not a figure"
        assert float(value.split()[0].replace(",", "")) > 0
    assert (results_dir / "latest-throughput.png").stat().st_size > 1000
    assert (results_dir / "latest-latency.png").stat().st_size > 1000

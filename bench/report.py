"""The comparison table: terminal text and bench/results/latest.md (+ a dated copy).

Each row is one (scenario row, metric): the median and [min-max] over the runs for each
side, the ratio of medians, the target where the benchmark sets one, and the CPU use (% of one
core, medians) of broker and client beside each figure. The ratio is oriented so that
> 1 always means minikafka is better: minikafka/Kafka for throughputs, Kafka/minikafka
for latencies and durations. Rows that compare something else (ZC: minikafka with sendfile
vs minikafka-copy; the loopback limit) say so in their side names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bench.figures import Results
from bench.stats import Summary

# Targets: minikafka at least this fraction of Kafka (ratio as above).
TARGETS: Final[dict[str, float]] = {"P1": 0.5, "P2": 0.8, "P2L": 1.0, "P5": 0.3}
TARGET_METRICS: Final[dict[str, str]] = {
    "P1": "records/s", "P2": "records/s", "P2L": "MiB/s", "P5": "requests/s"
}


@dataclass(frozen=True, slots=True)
class Row:
    scenario: str
    row: str
    metric: str
    sides: tuple[str, ...]
    summaries: tuple[Summary, ...]
    broker_cpu: tuple[Summary, ...]
    client_cpu: tuple[Summary, ...]
    ratio: float | None
    target: float | None


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _fmt_summary(s: Summary) -> str:
    if s.runs == 0:
        return "-"
    if s.runs == 1:
        return _fmt(s.median)
    return f"{_fmt(s.median)} [{_fmt(s.low)}-{_fmt(s.high)}]"


def _fmt_cpu(s: Summary) -> str:
    return "-" if s.runs == 0 else f"{s.median:.0f}%"


def build_rows(results: Results) -> list[Row]:
    rows: list[Row] = []
    for row_name, metric in results.rows():
        present = results.brokers_of(row_name, metric)
        # Column 1: minikafka (or the one other side: loopback, a single-broker run);
        # column 2: Kafka, or for ZC minikafka-copy.
        others = [b for b in present if b != "Kafka"]
        sides = tuple(others[:1]) + (("Kafka",) if "Kafka" in present else tuple(others[1:2]))
        figs = [f for f in results.figures if f.row == row_name and f.metric == metric]
        scenario = figs[0].scenario
        higher = figs[0].higher_is_better
        summaries = tuple(results.summary(row_name, metric, b) for b in sides)
        if len(sides) == 1 and sides[0] == "Kafka":  # a Kafka-only run: second column
            sides, summaries = ("", "Kafka"), (Summary.of([]), summaries[0])
        cpus = [results.cpu(row_name, metric, b) for b in sides]
        ratio: float | None = None
        if len(sides) == 2 and summaries[0].runs and summaries[1].runs:
            a, b = summaries[0].median, summaries[1].median
            num, den = (a, b) if higher else (b, a)
            ratio = num / den if den > 0 else None
        target = TARGETS.get(scenario) if TARGET_METRICS.get(scenario) == metric else None
        rows.append(
            Row(
                scenario=scenario,
                row=row_name,
                metric=metric,
                sides=sides,
                summaries=summaries,
                broker_cpu=tuple(c[0] for c in cpus),
                client_cpu=tuple(c[1] for c in cpus),
                ratio=ratio,
                target=target,
            )
        )
    return rows


def _cells(row: Row) -> list[str]:
    def side(i: int) -> tuple[str, str]:
        if i >= len(row.sides) or row.summaries[i].runs == 0:
            return "-", "-"
        name = row.sides[i]
        label = "" if name in ("minikafka", "Kafka") else f"{name}: "
        cpu = f"{_fmt_cpu(row.broker_cpu[i])} / {_fmt_cpu(row.client_cpu[i])}"
        return label + _fmt_summary(row.summaries[i]), cpu

    a, a_cpu = side(0)
    b, b_cpu = side(1)
    ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x"
    if row.target is not None and row.ratio is not None:
        verdict = "met" if row.ratio >= row.target else "MISSED"
        target = f">= {row.target}x {verdict}"
    else:
        target = ""
    return [row.row, row.metric, a, b, ratio, target, a_cpu, b_cpu]


HEADERS: Final[list[str]] = [
    "scenario",
    "metric",
    "minikafka median [min-max]",
    "Kafka median [min-max]",
    "ratio",
    "target",
    "CPU broker/client (mk)",
    "CPU broker/client (Kafka)",
]


def text_table(rows: Sequence[Row]) -> str:
    cells = [HEADERS, *(_cells(r) for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADERS))]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(len(HEADERS))) for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(
    rows: Sequence[Row],
    results: Results,
    header: dict[str, str],
    plots: Sequence[Path],
    profiles: dict[str, list[str]],
) -> str:
    out = ["# minikafka vs Apache Kafka: benchmark results", ""]
    out += [f"- **{k}**: {v}" for k, v in header.items()]
    out += [
        "",
        "Ratio: > 1 means minikafka is better (throughput minikafka/Kafka; latency and time "
        "Kafka/minikafka). CPU: % of one core over the run, broker process tree / client "
        "process (from /proc/<pid>/stat utime+stime deltas). MiB = 2^20 bytes.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    out += ["| " + " | ".join(c.replace("|", "/") for c in _cells(r)) + " |" for r in rows]
    if results.notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in results.notes]
    if results.failures:
        out += ["", "## Failures", ""]
        out += [
            f"- {f.scenario} on {f.broker}, run {f.run}: {f.message.splitlines()[0][:400]}"
            for f in results.failures
        ]
    if profiles:
        out += ["", "## Profiles (py-spy, minikafka broker): top frames by own time", ""]
        for label, lines in profiles.items():
            out += [f"### {label} ({label}.svg)", "", "```", *lines, "```", ""]
    if plots:
        out += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(out) + "\n"

"""PNG plots of the results (matplotlib's Figure, no pyplot state): throughput and latency side by side.

- ``<stem>-throughput.png``: records/s and requests/s rows (P1, P2, P5, ZC), one bar per side
  at the median with min-max error bars.
- ``<stem>-latency.png``: latency rows (P4 percentiles, P5 p99) in ms, same layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure as MplFigure

from bench.report import Row

COLOURS = {"minikafka": "#1f77b4", "Kafka": "#d62728"}


def _bar_chart(rows: Sequence[Row], path: Path, title: str, ylabel: str) -> Path | None:
    if not rows:
        return None
    fig = MplFigure(figsize=(max(6.0, 1.6 * len(rows)), 4.5))
    ax = fig.subplots()
    width = 0.38
    for i, row in enumerate(rows):
        for j, (side, summary) in enumerate(zip(row.sides[:2], row.summaries[:2], strict=True)):
            if summary.runs == 0:
                continue
            x = i + (j - 0.5) * width
            err = [[summary.median - summary.low], [summary.high - summary.median]]
            ax.bar(
                x,
                summary.median,
                width,
                yerr=err,
                capsize=3,
                color=COLOURS.get(side, "#7f7f7f"),
                label=side,
            )
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys())
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r.row}\n{r.metric}" for r in rows], fontsize=7, rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def write_plots(rows: Sequence[Row], results_dir: Path, stem: str) -> list[Path]:
    throughput = [r for r in rows if r.metric in ("records/s", "requests/s")]
    latency = [r for r in rows if r.metric.endswith(" ms")]
    written = [
        _bar_chart(
            throughput,
            results_dir / f"{stem}-throughput.png",
            "Throughput (median, min-max)",
            "per second",
        ),
        _bar_chart(latency, results_dir / f"{stem}-latency.png", "Latency (median, min-max)", "ms"),
    ]
    return [p for p in written if p is not None]

"""PNG plots of the results (matplotlib's Figure, no pyplot state): one bar per side at the
median, with min-max error bars.

- ``<stem>-throughput.png``: records/s rows (P1, P2, ZC) and, in a second panel,
  requests/s (P5).
- ``<stem>-latency.png``: latency rows (P4 percentiles, P5 p99) in ms, log scale (the two
  brokers can differ by orders of magnitude).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure

from bench.report import Row

COLOURS = {"minikafka": "#1f77b4", "Kafka": "#d62728"}
BAR_WIDTH = 0.38


def _bars(ax: Axes, rows: Sequence[Row], title: str, ylabel: str, *, log: bool) -> None:
    for i, row in enumerate(rows):
        for j, (side, summary) in enumerate(zip(row.sides[:2], row.summaries[:2], strict=True)):
            if summary.runs == 0:
                continue
            err = [[summary.median - summary.low], [summary.high - summary.median]]
            ax.bar(
                i + (j - 0.5) * BAR_WIDTH,
                summary.median,
                BAR_WIDTH,
                yerr=err,
                capsize=3,
                color=COLOURS.get(side, "#7f7f7f"),
                label=side,
            )
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), fontsize=8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r.row}\n{r.metric}" for r in rows], fontsize=7, rotation=20, ha="right")
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def _chart(panels: Sequence[tuple[Sequence[Row], str, str, bool]], path: Path) -> Path | None:
    panels = [p for p in panels if p[0]]
    if not panels:
        return None
    widths = [max(2, len(p[0])) for p in panels]
    fig = MplFigure(figsize=(max(6.0, 1.5 * sum(widths)), 5.0))
    axes = fig.subplots(1, len(panels), gridspec_kw={"width_ratios": widths}, squeeze=False)[0]
    for ax, (rows, title, ylabel, log) in zip(axes, panels, strict=True):
        _bars(ax, rows, title, ylabel, log=log)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def write_plots(rows: Sequence[Row], results_dir: Path, stem: str) -> list[Path]:
    records = [r for r in rows if r.metric == "records/s"]
    requests = [r for r in rows if r.metric == "requests/s"]
    latency = [r for r in rows if r.metric.endswith(" ms")]
    written = [
        _chart(
            [
                (records, "Throughput (median, min-max)", "records/s", False),
                (requests, "Small requests", "requests/s", False),
            ],
            results_dir / f"{stem}-throughput.png",
        ),
        _chart(
            [(latency, "Latency (median, min-max; log scale)", "ms", True)],
            results_dir / f"{stem}-latency.png",
        ),
    ]
    return [p for p in written if p is not None]

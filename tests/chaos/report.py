"""A run's figures as Markdown (``report.md``, and the dated reports in ``tests/chaos/results``)
and JSON, plus broker log excerpts around every failing finding.

Figures per run: faults by kind; per writer records sent, acknowledged, failed, unknown,
acknowledged but lost, duplicates, order violations; per fault kind the median and worst
unavailability (longest window without an acknowledged acks=all produce on some partition,
from the injection to the next fault) and how many times the cluster was whole again within
the bound. ``side_by_side`` puts several runs (minikafka, Apache Kafka) in one table.

Log excerpts: both brokers' lines start ``[yyyy-mm-dd hh:mm:ss,mmm]`` (local time); for a
finding at history time ``t`` the excerpt is every broker's lines from ``t - 3 s`` to the
end of the next fault's heal plus 5 s (at most ``EXCERPT_WINDOW_S``), keeping those about
the partition, leadership, the ISR, truncation, ZooKeeper sessions, or at WARN/ERROR, at
most ``EXCERPT_LINES`` per broker.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from tests.chaos.campaign import RunResult
from tests.chaos.checker import Finding, median

EXCERPT_WINDOW_S: Final = 60.0
EXCERPT_LINES: Final = 40
MAX_FINDINGS_SHOWN: Final = 50
MAX_EXCERPTS: Final = 5
MAX_FAILURES_PRINTED: Final = 20
_STAMP = re.compile(rb"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")
_SEVERE = re.compile(r"\] (WARN|ERROR|FATAL) ")
_TOPICAL = re.compile(r"(?i)leader|\bisr\b|truncat|expired|election|controller|shutdown|"
                      r"fenc|offline|storage|shrink|expand")
_NOISE = re.compile(r"(?i)(client|server) environment:")


def _line_time(line: bytes) -> float | None:
    match = _STAMP.match(line)
    if match is None:
        return None
    stamp = time.mktime(time.strptime(match.group(1).decode(), "%Y-%m-%d %H:%M:%S"))
    return stamp + int(match.group(2)) / 1000


def log_excerpt(path: Path, start_wall: float, end_wall: float, partition: str | None) -> list[str]:
    """Lines of one broker log between two wall-clock times that matter to a finding: those
    naming the partition or at WARN and above first, then those about leadership, the ISR,
    truncation, sessions and the disk; in log order, at most ``EXCERPT_LINES``."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    first: list[tuple[int, str]] = []
    second: list[tuple[int, str]] = []
    current: float | None = None
    for index, raw in enumerate(data.splitlines()):
        stamp = _line_time(raw)
        if stamp is None:
            continue  # a traceback's continuation: the line above carries the news
        current = stamp
        if current < start_wall:
            continue
        if current > end_wall:
            break
        text = raw.decode("utf-8", "replace")
        if _NOISE.search(text):
            continue
        if (partition and partition in text) or _SEVERE.search(text):
            first.append((index, text[:400]))
        elif _TOPICAL.search(text):
            second.append((index, text[:400]))
    chosen = first[:EXCERPT_LINES]
    chosen += second[:EXCERPT_LINES - len(chosen)]
    lines = [text for _, text in sorted(chosen)]
    if len(first) + len(second) > len(chosen):
        lines.append(f"... {len(first) + len(second) - len(chosen)} more matching lines")
    return lines


def _excerpts(run: RunResult, finding: Finding) -> list[str]:
    assert finding.t is not None
    history = run.history
    after = [f for f in history.faults if f.t_start >= finding.t - 1.0]
    end = finding.t + 10.0
    if after:
        healed = after[0].t_healed if after[0].t_healed is not None else after[0].t_start
        end = healed + 5.0
    end = min(end, finding.t + EXCERPT_WINDOW_S)
    start_wall, end_wall = history.wall(finding.t - 3.0), history.wall(end)
    partition = (f"{finding.topic}-{finding.partition}"
                 if finding.topic is not None and finding.partition is not None else None)
    out = [f"broker logs {finding.t - 3.0:.1f}-{end:.1f} s "
           f"({datetime.fromtimestamp(start_wall):%H:%M:%S}-"
           f"{datetime.fromtimestamp(end_wall):%H:%M:%S}):"]
    for broker_id, path in sorted(run.broker_logs.items()):
        lines = log_excerpt(path, start_wall, end_wall, partition)
        out.append(f"  broker {broker_id} ({path}): {len(lines)} line(s)")
        out += [f"    {line}" for line in lines]
    return out


def figures(run: RunResult) -> dict[str, Any]:
    result = run.result
    kinds: dict[str, Any] = {}
    for kind, items in sorted(result.by_kind().items()):
        gaps = [f.unavailable_s for f in items]
        kinds[kind] = {"count": len(items), "recovered": sum(f.recovered for f in items),
                       "median_unavailable_s": round(median(gaps), 3),
                       "worst_unavailable_s": round(max(gaps), 3)}
    strict = [w for w in result.writers.values() if w.spec.strict]
    return {
        "label": run.config.label or run.config.target,
        "target": run.config.target,
        "brokers": run.config.brokers,
        "zookeeper_nodes": run.config.zookeeper_nodes,
        "seed": run.config.seed,
        "faults_scheduled": len(run.schedule),
        "faults_injected": run.faults_done,
        "stopped_early": run.stopped_early,
        "duration_s": round(run.duration_s, 1),
        "passed": not result.failed,
        "acked_all": sum(w.acked for w in strict),
        "acked_lost_all": sum(w.lost for w in strict),
        "duplicates_idempotent": sum(w.duplicates for w in strict),
        "order_violations": sum(w.order_violations for w in strict),
        "divergences": result.count("divergence"),
        "offsets_backwards": result.count("offsets_backwards"),
        "offsets_stale_reads": result.count("offsets_stale_read", strict_only=False),
        "faults_not_recovered": sum(k["count"] - k["recovered"] for k in kinds.values()),
        "baseline_gap_s": round(result.baseline_gap_s, 3),
        "writers": {name: {k: v for k, v in asdict(w).items() if k != "spec"}
                    | {"acks": w.spec.acks, "idempotent": w.spec.idempotent}
                    for name, w in result.writers.items()},
        "kinds": kinds,
        "commits_observed": len(run.history.commits),
        "uptime_before": run.uptime_before,
        "uptime_after": run.uptime_after,
        "broker_exit_codes": {str(k): v for k, v in run.exit_codes.items()},
        "settings": {"session_timeout_ms": run.config.session_timeout_ms,
                     "replica_lag_time_max_ms": run.config.replica_lag_time_max_ms,
                     "rate_per_writer": run.config.rate, "partitions": run.config.partitions,
                     "topic_configs": dict(run.config.topic_configs),
                     "broker_env": dict(run.config.broker_env)},
    }


def _writer_table(run: RunResult) -> list[str]:
    rows = ["| writer | acks | idempotent | sent | acknowledged | failed | unknown | "
            "acknowledged lost | duplicates | order violations | offset mismatches | "
            "failed but written | producer instances |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for w in run.result.writers.values():
        rows.append(f"| {w.spec.name} | {'all' if w.spec.acks == -1 else w.spec.acks} | "
                    f"{'yes' if w.spec.idempotent else 'no'} | {w.sent} | {w.acked} | "
                    f"{w.failed} | {w.unknown} | {w.lost} | {w.duplicates} | "
                    f"{w.order_violations} | {w.offset_mismatches} | {w.failed_present} | "
                    f"{w.instances} |")
    return rows


def _kind_table(figs: Sequence[dict[str, Any]]) -> list[str]:
    labels = [f["label"] for f in figs]
    header = "| fault kind | " + " | ".join(
        f"{label}: n (whole again) | {label}: median / worst unavailable s" for label in labels)
    rows = [header + " |", "|---|" + "---:|---:|" * len(figs)]
    kinds = sorted({k for f in figs for k in f["kinds"]})
    for kind in kinds:
        cells = []
        for f in figs:
            k = f["kinds"].get(kind)
            if k is None:
                cells += ["-", "-"]
            else:
                cells += [f"{k['count']} ({k['recovered']})",
                          f"{k['median_unavailable_s']:.2f} / {k['worst_unavailable_s']:.2f}"]
        rows.append(f"| {kind} | " + " | ".join(cells) + " |")
    return rows


def _summary_table(figs: Sequence[dict[str, Any]]) -> list[str]:
    rows = ["| | " + " | ".join(f["label"] for f in figs) + " |",
            "|---|" + "---:|" * len(figs)]

    def row(name: str, key: str) -> None:
        rows.append(f"| {name} | " + " | ".join(str(f.get(key, "-")) for f in figs) + " |")

    row("faults injected", "faults_injected")
    row("records acknowledged (acks=all, idempotent)", "acked_all")
    row("acknowledged lost (goal 0)", "acked_lost_all")
    row("duplicates with idempotence (goal 0)", "duplicates_idempotent")
    row("order violations (goal 0)", "order_violations")
    row("replicas differing below the HW (goal 0)", "divergences")
    row("committed offsets moving backwards (goal 0)", "offsets_backwards")
    row("stale committed-offset reads (reported)", "offsets_stale_reads")
    row("faults after which the cluster was not whole within the bound", "faults_not_recovered")
    rows.append("| acks=1 writer: acknowledged / lost | " + " | ".join(
        f"{f['writers']['ck-acks1']['acked']} / {f['writers']['ck-acks1']['lost']}"
        for f in figs) + " |")
    row("longest produce gap before any fault, s", "baseline_gap_s")
    row("run time, s", "duration_s")
    return rows


def render(run: RunResult) -> str:
    figs = figures(run)
    result = run.result
    lines = [
        f"# Fault-injection run: {figs['label']} — "
        f"{datetime.fromtimestamp(run.started_wall):%Y-%m-%d %H:%M}",
        "",
        f"`python -m tests.chaos --target {run.config.target} --brokers {run.config.brokers} "
        f"--zookeeper-nodes {run.config.zookeeper_nodes} --faults {len(run.schedule)} "
        + (f"--kinds {','.join(run.config.kinds)} " if run.config.kinds is not None else "")
        + f"--seed {run.config.seed}`; {run.faults_done} faults injected"
        + (f" ({run.stopped_early})" if run.stopped_early else "") + f", {run.duration_s:.0f} s.",
        f"Settings: {json.dumps(figs['settings'])}.",
        f"Machine: before `{run.uptime_before}`; after `{run.uptime_after}`.",
        "",
        f"**Result: {'FAIL' if result.failed else 'PASS'}** "
        f"({sum(1 for f in result.findings if f.fails)} failing finding(s), "
        f"{sum(1 for f in result.findings if not f.fails)} reported only)",
        "",
        *_summary_table([figs]),
        "",
        "## Writers",
        "",
        *_writer_table(run),
        "",
        "## Faults by kind",
        "",
        *_kind_table([figs]),
        "",
        f"Baseline: the longest gap between acknowledgements of one partition before the "
        f"first fault was {result.baseline_gap_s:.2f} s (the measure's resolution).",
        "",
    ]
    if result.findings:
        lines += ["## Findings", ""]
        for finding in result.findings[:MAX_FINDINGS_SHOWN]:
            lines.append(f"- [{'FAIL' if finding.fails else 'info'}] {finding.kind}: "
                         f"{finding.message}")
        if len(result.findings) > MAX_FINDINGS_SHOWN:
            lines.append(f"- ... {len(result.findings) - MAX_FINDINGS_SHOWN} more")
        lines.append("")
        shown = 0
        for finding in result.findings:
            if finding.fails and finding.t is not None and shown < MAX_EXCERPTS:
                shown += 1
                lines += ["```", f"{finding.kind}: {finding.message}", *_excerpts(run, finding),
                          "```", ""]
    if result.replica_notes:
        lines += ["## Replica notes", "", *[f"- {n}" for n in result.replica_notes], ""]
    lines += ["## Faults", "", "| # | kind | target | at s | unavailable s | details |",
              "|---:|---|---|---:|---:|---|"]
    by_index = {f.index: f for f in result.faults}
    for event in run.history.faults:
        fig = by_index.get(event.index)
        gap = f"{fig.unavailable_s:.2f}" if fig else "-"
        whole = ("" if event.t_recovered is not None else
                 f"; **not whole within the bound**: {'; '.join(event.not_whole[:6])}"
                 + (" ..." if len(event.not_whole) > 6 else ""))
        lines.append(f"| {event.index} | {event.kind} | {event.target} | {event.t_start:.1f} | "
                     f"{gap} | {'; '.join(event.details)}{whole} |")
    if run.history.notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {t:.1f} s: {text}" for t, text in run.history.notes[:100]]
    return "\n".join(lines) + "\n"


def verdict(run: RunResult) -> str:
    """PASS, or FAIL with the failing findings by kind, naming the faults not recovered."""
    failing = [f for f in run.result.findings if f.fails]
    if not failing:
        return "PASS"
    counts: dict[str, int] = {}
    for finding in failing:
        counts[finding.kind] = counts.get(finding.kind, 0) + 1
    text = "FAIL (" + ", ".join(f"{n} {kind}" for kind, n in counts.items()) + ")"
    not_whole = [f"#{e.index} {e.kind}" for e in run.history.faults if e.t_recovered is None]
    if not_whole:
        text += ("; the cluster was not whole within the recovery bound after fault(s) "
                 + ", ".join(not_whole))
    if run.history.final_not_whole:
        text += "; nor after the final heal"
    return text


def failure_text(run: RunResult) -> str:
    """What a failing check prints: the failing findings by kind, the first ones in full,
    with broker log excerpts for the first of each kind."""
    failing = [f for f in run.result.findings if f.fails]
    counts: dict[str, int] = {}
    for finding in failing:
        counts[finding.kind] = counts.get(finding.kind, 0) + 1
    out = ["failing findings: " + ", ".join(f"{n} {kind}" for kind, n in counts.items())]
    excerpted: set[str] = set()
    for finding in failing[:MAX_FAILURES_PRINTED]:
        out.append(f"{finding.kind}: {finding.message}")
        if finding.t is not None and finding.kind not in excerpted:
            excerpted.add(finding.kind)
            out += _excerpts(run, finding)
    if len(failing) > MAX_FAILURES_PRINTED:
        out.append(f"... {len(failing) - MAX_FAILURES_PRINTED} more in {run.run_dir}/report.md")
    return "\n".join(out)


def side_by_side(figs: Sequence[dict[str, Any]], title: str) -> str:
    lines = [f"# {title}", "", *_summary_table(figs), "", "## Unavailability by fault kind",
             "", *_kind_table(figs), ""]
    for f in figs:
        lines += [f"## {f['label']}", "", f"Machine: before `{f['uptime_before']}`; after "
                  f"`{f['uptime_after']}`.", f"Settings: {json.dumps(f['settings'])}.", ""]
    return "\n".join(lines) + "\n"


def write_run(run: RunResult) -> Path:
    path = run.run_dir / "report.md"
    path.write_text(render(run))
    (run.run_dir / "figures.json").write_text(json.dumps(figures(run), indent=1))
    return path

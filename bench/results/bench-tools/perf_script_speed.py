"""Lines a second of the bench's ``perf script`` parsers on one recording, before and after
``bench.perf_script`` (the commit before it, ``--before``, read from git): each parser on
the lines of its own format, rounds interleaved, and their results compared; then the
seconds of each tool's whole read of the recording (perf's runs included), before and after.

``.venv/bin/python bench/results/bench-tools/perf_script_speed.py SCHED_DATA [--before REV]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from dataclasses import astuple
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from bench import perf_script  # noqa: E402


def _old_module(rev: str, path: str) -> types.ModuleType:
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{path}"], check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(f"before_{Path(path).stem}")
    sys.modules[module.__name__] = module  # (dataclasses look their module up)
    exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)
    return module


def _script(data: Path, fields: str) -> tuple[str, float]:
    t0 = time.perf_counter()
    text = subprocess.run(["perf", "script", "-i", str(data), "-F", fields], check=True,
                          capture_output=True, text=True, timeout=600).stdout
    return text, time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("data", type=Path)
    parser.add_argument("--before", default="823712c")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--read-rounds", type=int, default=3)
    args = parser.parse_args()
    p4_before = _old_module(args.before, "bench/p4_sched.py")
    p5_before = _old_module(args.before, "bench/p5_sched.py")
    p4_text, p4_s = _script(args.data, "tid,time,event,trace")
    p5_text, p5_s = _script(args.data, "comm,tid,pid,cpu,time,event,trace")
    new_text, new_s = _script(args.data, perf_script.FIELDS)
    lines = new_text.count("\n")
    print(f"{lines:,} lines; perf script {p4_s:.2f} s (p4_sched's fields before), "
          f"{p5_s:.2f} s (p5_sched's), {new_s:.2f} s ({perf_script.FIELDS})")
    parsers: dict[str, tuple[Callable[[str], Any], str]] = {
        "runtimes before (p4_sched.parse_runtimes)":
            (lambda t: p4_before.parse_runtimes(t.splitlines()), p4_text),
        "runtimes after (perf_script.parse_runtimes)": (perf_script.parse_runtimes, new_text),
        "events before (p5_sched.parse_perf_script)": (p5_before.parse_perf_script, p5_text),
        "events after (perf_script.parse_events)": (perf_script.parse_events, new_text),
    }
    times: dict[str, list[float]] = {name: [] for name in parsers}
    results: dict[str, Any] = {}
    for _ in range(args.rounds):
        for name, (parse, text) in parsers.items():
            t0 = time.perf_counter()
            results[name] = parse(text)
            times[name].append(time.perf_counter() - t0)
    names = list(parsers)
    runtimes_same = results[names[0]] == results[names[1]]
    before_events, after_events = results[names[2]], results[names[3]]
    events_same = [(e.time_s, e.cpu, e.tgid, e.tid, e.name, e.fields) for e in before_events] \
        == [(e.time_s, e.cpu, e.tgid, e.tid, e.name, e.fields) for e in after_events]
    print(f"same runtimes: {runtimes_same} ({sum(map(len, results[names[1]].values())):,}); "
          f"same events: {events_same} ({len(after_events):,})")
    for name, spent in times.items():
        rates = sorted(lines / s for s in spent)
        print(f"{name}: {statistics.median(rates):,.0f} lines/s "
              f"[{rates[0]:,.0f}-{rates[-1]:,.0f}] over {args.rounds} rounds")
    # The tools' whole reads of the recording, perf's runs included.
    from bench import p4_sched, p5_sched
    reads: dict[str, Callable[[], Any]] = {
        "p4_sched.read_slices before": lambda: p4_before.read_slices(args.data),
        "p4_sched.read_slices after": lambda: p4_sched.read_slices(args.data),
        "p5_sched.read_trace before": lambda: p5_before.read_trace(args.data),
        "p5_sched.read_trace after": lambda: p5_sched.read_trace(args.data),
    }
    read_times: dict[str, list[float]] = {name: [] for name in reads}
    read: dict[str, list[Any]] = {}
    for _ in range(args.read_rounds):
        for name, read_it in reads.items():
            t0 = time.perf_counter()
            read[name] = read_it()
            read_times[name].append(time.perf_counter() - t0)
    read = {name: [astuple(x) for x in values] for name, values in read.items()}
    slices_same = read["p4_sched.read_slices before"] == read["p4_sched.read_slices after"]
    trace_same = read["p5_sched.read_trace before"] == read["p5_sched.read_trace after"]
    print(f"same slices: {slices_same}; same trace: {trace_same}")
    for name, spent in read_times.items():
        print(f"{name}: {statistics.median(spent):.2f} s [{min(spent):.2f}-{max(spent):.2f}] "
              f"over {args.read_rounds} rounds")
    return 0 if runtimes_same and events_same and slices_same and trace_same else 1


if __name__ == "__main__":
    raise SystemExit(main())

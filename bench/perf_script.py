"""The scheduler's events of a ``perf sched record`` recording, as ``perf script`` prints
them: one line format for the bench's tools that read them (``bench.p4_sched``,
``bench.p5_sched``).

``script`` runs ``perf script -F pid,tid,cpu,time,event,trace`` (``FIELDS``) on a recording:
one line an event, the task it ran on (process/thread), its CPU, the time in seconds, the
event and its fields (``LINE_EXAMPLE``). ``parse_events`` turns every such line into a
``SchedEvent``; ``parse_runtimes`` is the fast path for one event, ``sched_stat_runtime``
(the scheduler charging a running thread its CPU time), for ``bench.p4_sched``'s 10-s
recordings of every CPU: only the lines holding that event's name are matched, with the
same line pattern, and no event objects are made.

The task's name (``comm``) is not among the fields: the events that name tasks carry their
names in their own fields, and without it a line is shorter and matched with no search for
where a name (which may hold spaces) ends. The parsers' speed on a real trace, before and
after this module: ``bench/results/bench-tools/2026-11-28-perf-script.md``.

Lines not in that format are passed over: perf's warnings, and the events perf printed with
a thread id of -1 (a thread's last switch and runtime as it exits, its thread no longer
known to perf: 53 of 341,718 lines in a 10-s trace of P4 at 10,000 records/s), as both
tools' own parsers did.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

FIELDS: Final[str] = "pid,tid,cpu,time,event,trace"
LINE_EXAMPLE: Final[str] = (
    "  8300/26736 [001] 35791.507550: sched:sched_stat_runtime: comm=rdk:broker0 "
    "pid=26736 runtime=54923 [ns]")
# A line's head: "process/thread [CPU] time: sched:", its numbers by ``number`` (a
# capturing group, or not where a parser needs only the time).
_HEAD: Final[str] = r"^\s*{number}/{number}\s+\[{number}\]\s+([\d.]+):\s+sched:"
_EVENT: Final[re.Pattern[str]] = re.compile(
    _HEAD.format(number=r"(\d+)") + r"(\w+):\s+(.*)$")
# time, thread charged, ns run
_RUNTIME: Final[re.Pattern[str]] = re.compile(
    _HEAD.format(number=r"\d+") + r"sched_stat_runtime:\s+.*\spid=(\d+) runtime=(\d+)")
_FIELD: Final[re.Pattern[str]] = re.compile(r"(\w+)=(\S+)")
# a waking's or runtime's comm, which may hold spaces, taken whole
_COMM: Final[re.Pattern[str]] = re.compile(r"(?:^|\s)comm=(.*?) pid=")


def script(data: Path, *, check: bool = True) -> str:
    """``perf script``'s lines of the recording ``data``, in ``FIELDS`` (``check``: raise
    if perf fails; else whatever it printed)."""
    return subprocess.run(["perf", "script", "-i", str(data), "-F", FIELDS],
                          check=check, capture_output=True, text=True, timeout=600).stdout


@dataclass(frozen=True, slots=True)
class SchedEvent:
    time_s: float
    cpu: int
    tgid: int  # of the task the event ran on
    tid: int
    name: str  # sched_switch, sched_waking, sched_stat_runtime, ...
    fields: dict[str, str]


def parse_events(text: str) -> list[SchedEvent]:
    """Every event of ``script``'s ``text``, in time order."""
    events: list[SchedEvent] = []
    for line in text.splitlines():
        m = _EVENT.match(line)
        if m is None:
            continue
        tgid, tid, cpu, when, name, rest = m.groups()
        # prev_* and next_* of a switch, pid/comm/target_cpu/runtime of the others
        fields = dict(_FIELD.findall(rest.replace("==>", " ")))
        comm = _COMM.search(rest)
        if comm is not None:
            fields["comm"] = comm.group(1)
        events.append(SchedEvent(float(when), int(cpu), int(tgid), int(tid), name, fields))
    events.sort(key=lambda e: e.time_s)
    return events


def parse_runtimes(text: str) -> dict[int, list[tuple[int, int]]]:
    """tid -> [(time ns, ns run since its previous such event)], in the order of ``text``,
    from ``script``'s ``sched_stat_runtime`` lines alone (the scheduler charging a running
    thread its CPU time: at each tick, switch and wake-up on its CPU)."""
    runtimes: dict[int, list[tuple[int, int]]] = {}
    for line in text.splitlines():
        if "sched_stat_runtime" not in line:
            continue
        m = _RUNTIME.match(line)
        if m is not None:
            when, tid, ran = m.groups()
            runtimes.setdefault(int(tid), []).append((round(float(when) * 1e9), int(ran)))
    return runtimes

"""What the CPUs did while P4's slow records waited: ``bench.p4_trace --sched``.

``perf sched record -k CLOCK_MONOTONIC`` runs beside the capture (the scheduler's switch and
wake-up events, on the clock of the records' stamps and the capture's segments), and
``perf sched timehist --state`` turns them into one line per time a thread left a CPU: when,
how long it had run, how long before that it had waited for a CPU once woken ("sch delay"),
and whether it left the CPU still runnable (preempted: it waited for a CPU from then on).
From those lines each thread's time is cut into running and runnable-but-waiting intervals,
and the threads are grouped by role: the broker (every thread of its process tree), the
producer and the consumer (``bench.load`` processes, librdkafka's threads with the Python
one), the capture, and everything else on the machine.

For each record at or above a latency percentile, each part of its latency
(``bench.p4_trace``: producer, broker append, no fetch out, broker answer, consumer) is
looked at over its interval: how long the role the part waits on (the producer's threads
for ``producer``, the broker's for the two broker parts, the consumer's for the other two)
ran and how long it waited for a CPU, in thread-milliseconds, and which roles held the two
CPUs meanwhile (CPU-milliseconds each). So a slow part is told apart as work (its role ran),
a wait for a CPU (its role runnable, the CPUs held by others: who), or a wait for an event
(its role asleep: the other side, a timer).

A thread the guest's scheduler has on a CPU is not always running: this machine is a
2-vCPU microVM, and when the hypervisor does not run a virtual CPU, whatever the guest had
on it seems to run on, for milliseconds (both vCPUs at once, at times). The scheduler
charges a thread only the CPU time it got (``sched_stat_runtime`` events, which perf sched
records too: the host's steal is left out of them, and so is interrupt time); the rest of
a slice is counted as "stolen", not as running.

Time is counted in bins of ``BIN_NS`` (50 us): figures are for parts of a millisecond and
up.
"""

from __future__ import annotations

import bisect
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bench.perf_script import parse_runtimes, script

BIN_NS: Final[int] = 50_000
ROLES: Final[tuple[str, ...]] = ("broker", "producer", "consumer", "capture", "other")
# "stolen": on a CPU by the guest's scheduler, not charged CPU time: the virtual CPU was
# not running (the hypervisor's steal: this machine is a 2-vCPU microVM) or served interrupts
STATES: Final[tuple[str, ...]] = ("running", "waiting for a CPU", "stolen")
# the role a part of the latency waits on
PART_ROLES: Final[dict[str, str]] = {
    "producer": "producer",
    "broker append": "broker",
    "no fetch out": "consumer",
    "broker answer": "broker",
    "consumer": "consumer",
}
# "  34989.572056 [0001]  rdk:broker-1[8300/26736]   12.034   0.000   3.982   S"
# (time it left the CPU, CPU, thread, wait time, sch delay, run time, its state then)
_LINE: Final[re.Pattern[str]] = re.compile(
    r"^\s*(\d+\.\d+)\s+\[(\d+)\]\s+(.*)\[(\d+)(?:/(\d+))?\]\s+([\d.]+)\s+([\d.]+)"
    r"\s+([\d.]+)\s+(\S+)\s*$")


@dataclass(frozen=True, slots=True)
class Slice:
    """One stretch of a thread on a CPU: it waited for a CPU from ``ready`` (woken) to
    ``start``, then ran until ``end`` (ns, CLOCK_MONOTONIC)."""

    pid: int
    tid: int
    ready: int
    start: int
    end: int
    # (until, ns run) pieces of [start, end], in order (``add_runtimes``): the CPU time the
    # scheduler charged it up to each moment; the rest of the wall time it was "on" the
    # CPU, the virtual CPU itself did not run (the hypervisor's steal) or served interrupts
    runtimes: tuple[tuple[int, int], ...] = ()


def record_argv(out: Path) -> list[str]:
    """perf's command line recording the scheduler's events into ``out`` until SIGINT."""
    return ["perf", "sched", "record", "-k", "CLOCK_MONOTONIC", "-o", str(out)]


def read_slices(data: Path) -> list[Slice]:
    """The slices of every thread in perf's recording ``data`` (``perf sched timehist``),
    with the CPU time charged within each (``sched_stat_runtime`` events,
    ``bench.perf_script.parse_runtimes``)."""
    text = subprocess.run(["perf", "sched", "timehist", "--state", "-i", str(data)],
                          check=True, capture_output=True, text=True, timeout=600).stdout
    return add_runtimes(parse_timehist(text.splitlines()), parse_runtimes(script(data)))


def add_runtimes(slices: list[Slice], runtimes: Mapping[int, list[tuple[int, int]]]
                 ) -> list[Slice]:
    """Each slice with the CPU time charged to its thread within it."""
    out = []
    for s in slices:
        events = runtimes.get(s.tid, [])
        i = bisect.bisect_right(events, (s.start, 1 << 62))
        j = bisect.bisect_right(events, (s.end, 1 << 62))
        out.append(Slice(s.pid, s.tid, s.ready, s.start, s.end, tuple(events[i:j])))
    return out


def parse_timehist(lines: Iterable[str]) -> list[Slice]:
    """Slices from ``perf sched timehist --state``'s lines. A thread woken waited for a CPU
    from its wake-up ("sch delay"); one that left its CPU still runnable (state R: preempted)
    waited from then on (perf counts that in its "wait time")."""
    slices = []
    preempted_at: dict[int, int] = {}  # tid -> when it left its CPU runnable
    for line in lines:
        m = _LINE.match(line)
        if m is None:
            continue
        tid = int(m.group(4))
        pid = int(m.group(5)) if m.group(5) else tid
        if pid == 0:
            continue  # the idle task
        end = round(float(m.group(1)) * 1e9)
        start = end - round(float(m.group(8)) * 1e6)
        ready = preempted_at.pop(tid, start - round(float(m.group(7)) * 1e6))
        slices.append(Slice(pid, tid, min(ready, start), start, end))
        if m.group(9).startswith("R"):
            preempted_at[tid] = end
    return slices


class Occupancy:
    """Thread time by role and state over the recording, in bins with prefix sums: the
    thread-ns of a role in a state within any interval, to a bin's precision."""

    def __init__(self, slices: list[Slice], roles: Mapping[int, str]) -> None:
        self.t0 = min((s.ready for s in slices), default=0)
        t1 = max((s.end for s in slices), default=0)
        bins = (t1 - self.t0) // BIN_NS + 2
        counts = {(role, state): [0] * bins for role in ROLES for state in STATES}
        for s in slices:
            role = roles.get(s.pid, "other")
            self._add(counts[(role, "waiting for a CPU")], s.ready, s.start)
            if not s.runtimes:  # nothing charged: all of it counted as run
                self._add(counts[(role, "running")], s.start, s.end)
                continue
            # Between two charges, what was not charged is the virtual CPU's own absence
            # (or interrupts), spread over that stretch.
            lo = s.start
            for until, run_ns in (*s.runtimes, (s.end, 0)):
                hi = min(max(until, lo), s.end)
                if hi > lo:
                    share = min(1.0, run_ns / (hi - lo))
                    self._add(counts[(role, "running")], lo, hi, share)
                    self._add(counts[(role, "stolen")], lo, hi, 1.0 - share)
                lo = hi
        self._prefix: dict[tuple[str, str], list[int]] = {}
        for key, values in counts.items():
            total = 0
            prefix = [0]
            for v in values:
                total += v
                prefix.append(total)
            self._prefix[key] = prefix

    def _add(self, bins: list[int], lo: int, hi: int, share: float = 1.0) -> None:
        if share <= 0:
            return
        t = lo
        while t < hi:
            i = (t - self.t0) // BIN_NS
            edge = self.t0 + (i + 1) * BIN_NS
            step = min(hi, edge) - t
            bins[i] += round(step * share)
            t += step

    def ns(self, role: str, state: str, lo: int, hi: int) -> int:
        """Thread-ns of ``role`` in ``state`` within [lo, hi) (whole bins)."""
        prefix = self._prefix[(role, state)]
        last = len(prefix) - 1
        i = min(last, max(0, (lo - self.t0) // BIN_NS))
        j = min(last, max(0, (hi - self.t0 + BIN_NS - 1) // BIN_NS))
        return prefix[j] - prefix[i] if j > i else 0


def part_intervals(row: Mapping[str, float]) -> dict[str, tuple[int, int]]:
    """Each part's interval (ns) of a record row of ``bench.p4_trace.analyse`` (which keeps
    the times it cut them at)."""
    times = [int(row[k]) for k in ("sent", "produce in", "appended", "fetch in", "answer out",
                                   "received")]
    sent, p_in, appended, f_in, a_out, received = times
    return {
        "producer": (sent, p_in),
        "broker append": (p_in, appended),
        "no fetch out": (appended, max(appended, f_in)),
        "broker answer": (max(appended, f_in), a_out),
        "consumer": (a_out, received),
    }


def tail_sched(rows: list[dict[str, float]], occupancy: Occupancy) -> dict[str, dict[str, float]]:
    """Over ``rows`` (a tail's records): per part, its mean length, the mean thread-ms its
    role ran and waited for a CPU in it, and the mean CPU-ms each role held meanwhile."""
    out: dict[str, dict[str, float]] = {}
    n = max(1, len(rows))
    for part, role in PART_ROLES.items():
        sums: dict[str, float] = {}
        for row in rows:
            lo, hi = part_intervals(row)[part]
            if hi <= lo:
                continue
            sums["ms"] = sums.get("ms", 0.0) + (hi - lo) / 1e6
            for state in STATES:
                key = f"{role} {state}"
                sums[key] = sums.get(key, 0.0) + occupancy.ns(role, state, lo, hi) / 1e6
            for other in ROLES:
                key = f"CPU held by {other}"
                sums[key] = sums.get(key, 0.0) + occupancy.ns(other, "running", lo, hi) / 1e6
                sums["stolen"] = (sums.get("stolen", 0.0)
                                  + occupancy.ns(other, "stolen", lo, hi) / 1e6)
        out[part] = {key: value / n for key, value in sums.items()}
    return out


def format_tail(name: str, sched: Mapping[str, Mapping[str, float]]) -> list[str]:
    lines = [f"  {name}: per record, mean over the tail (ms; thread-ms and CPU-ms within each "
             "part's interval, 2 CPUs):"]
    for part, figures in sched.items():
        if not figures:
            continue
        role = PART_ROLES[part]
        lines.append(
            f"    {part:>14} {figures['ms']:.3f}: {role} running "
            f"{figures[f'{role} running']:.3f}, waiting for a CPU "
            f"{figures[f'{role} waiting for a CPU']:.3f}, stolen {figures[f'{role} stolen']:.3f}"
            "; CPUs held by "
            + ", ".join(f"{other} {figures[f'CPU held by {other}']:.3f}" for other in ROLES)
            + f"; stolen {figures['stolen']:.3f}")
    return lines

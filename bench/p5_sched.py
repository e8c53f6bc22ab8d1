"""Where P5's time goes on the scheduler's side: ``python -m bench.p5_sched``.

P5 (16 librdkafka producers in threads of one process, one request in flight each) against
brokers started here (``--variants``; the bench's settings), each warmed as P5 warms it
(``bench.scenarios.P5SmallRequests.prepare``), the others paused (SIGSTOP) while one is
measured. Rounds of windows, the variants interleaved; in each window (``--window-s``,
after ``--settle-s`` of load):

- requests/s (the topic's end offset before and after), the CPU of the broker's and the
  client's threads per request (``/proc/<pid>/task/<tid>/schedstat``, ``status``,
  ``sched``);
- the broker's busiest thread (minikafka's event loop) split in wall time: **running**,
  **runnable but waiting** for a core (the scheduler's run delay), **sleeping** (the rest:
  waiting in ``epoll`` for something to do); its voluntary and involuntary switches,
  timeslices and migrations per request; the same summed over all the broker's threads;
- the broker's system calls per request (``perf stat`` on its pid: tracepoint counts);
- then ``--trace-s`` of ``perf sched record`` (every CPU): how the machine's idle time
  splits by what the broker's busiest thread was doing meanwhile, who ran on its core
  while it waited (the client's librdkafka threads, its Python threads, anything else),
  how long the other core was idle while it waited, and where the broker's wake-ups of
  the client's threads put them (its own core or the other); and through the loop's
  turns (``idle_through_turns``: a turn's answers go out in one burst of wake-ups, a
  cycle runs from one burst to the next) how idle the other core was while the loop ran
  the first half of its cycle and the second, and during the bursts (the sends).

Variants: ``minikafka``, ``kafka``, ``minikafka@/path/to/tree`` (that checkout's broker,
with its ``.venv``), ``minikafka+NAME=VALUE`` (environment for that broker), and suffixes
``:pN`` (N producers instead of 16), ``:nN`` (the load process's threads at nice N, for
both brokers alike), ``:bN`` (every thread of the broker at nice N during the window,
then back to 0: Kafka's threads and minikafka's alike) and ``:sN`` (every thread of the
broker asks the scheduler for N-microsecond slices, ``sched_setattr``'s ``sched_runtime``
for SCHED_OTHER since Linux 6.12, during the window, then the default again). Variants that differ only in suffixes share one broker.

Only counts are meaningful on a loaded machine (switches, system calls per request,
placement); the split of wall time and requests/s are read in a quiet slot.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import ctypes
import errno
import itertools
import json
import os
import platform
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from bench.admin import create_topic
from bench.brokers import BrokerUnderTest
from bench.context import FULL, RunContext
from bench.kafka_broker import ApacheKafka
from bench.minikafka_broker import MiniKafka
from bench.perf_script import SchedEvent, parse_events, script
from bench.procs import paused, spawn, stop_all
from bench.scenarios import P5SmallRequests
from bench.warming import WarmUp
from client.sync import SyncClient
from protocol.topic_partition import TopicPartition

TOPIC: Final = "p5-sched"
HZ: Final[int] = os.sysconf("SC_CLK_TCK")
SYSCALLS: Final[tuple[str, ...]] = (
    "epoll_pwait", "epoll_wait", "io_uring_enter", "read", "write", "writev", "recvfrom",
    "sendto", "sendmsg", "recvmsg", "futex", "epoll_ctl", "pwrite64")
SCHED_EVENTS: Final[tuple[str, ...]] = ("sched:sched_switch", "sched:sched_wakeup")


# -- per-thread counters ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ThreadCounters:
    comm: str
    run_s: float  # on a CPU
    wait_s: float  # runnable, waiting for a CPU (schedstat's run delay)
    slices: int  # times it was given a CPU
    voluntary: int
    involuntary: int
    migrations: int

    def minus(self, before: ThreadCounters | None) -> ThreadCounters:
        if before is None:
            return self
        return ThreadCounters(self.comm, self.run_s - before.run_s, self.wait_s - before.wait_s,
                              self.slices - before.slices, self.voluntary - before.voluntary,
                              self.involuntary - before.involuntary,
                              self.migrations - before.migrations)


_SWITCHES = re.compile(r"^(voluntary|nonvoluntary)_ctxt_switches:\s+(\d+)", re.M)
_MIGRATIONS = re.compile(r"^se\.nr_migrations\s+:\s+(\d+)", re.M)


def thread_counters(pid: int) -> dict[int, ThreadCounters]:
    """Every thread of ``pid`` now (threads that end meanwhile are left out)."""
    out: dict[int, ThreadCounters] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return out
    for name in tids:
        base = f"/proc/{pid}/task/{name}"
        try:
            with open(f"{base}/stat") as f:
                stat = f.read()
            with open(f"{base}/status") as f:
                status = f.read()
            with open(f"{base}/schedstat") as f:
                run_ns, wait_ns, slices = (int(x) for x in f.read().split()[:3])
            with open(f"{base}/sched") as f:
                sched = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        switches = dict(_SWITCHES.findall(status))
        migrations = _MIGRATIONS.search(sched)
        out[int(name)] = ThreadCounters(
            comm=stat[stat.index("(") + 1:stat.rindex(")")], run_s=run_ns / 1e9,
            wait_s=wait_ns / 1e9, slices=slices, voluntary=int(switches.get("voluntary", 0)),
            involuntary=int(switches.get("nonvoluntary", 0)),
            migrations=int(migrations.group(1)) if migrations else 0)
    return out


def deltas(before: dict[int, ThreadCounters],
           after: dict[int, ThreadCounters]) -> dict[int, ThreadCounters]:
    return {tid: now.minus(before.get(tid)) for tid, now in after.items()}


def system_cpu_s(pid: int) -> float:
    """The process's system CPU so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[12]) / HZ


# -- perf ------------------------------------------------------------------------------------

def perf_stat(pid: int, seconds: float) -> subprocess.Popen[str] | None:
    """Count the syscalls and scheduler events of ``pid`` for ``seconds`` (None: no perf)."""
    events = [f"syscalls:sys_enter_{name}" for name in SYSCALLS] + list(SCHED_EVENTS)
    try:
        return subprocess.Popen(
            ["perf", "stat", "-x", ",", "-e", ",".join(events), "-p", str(pid), "--",
             "sleep", f"{seconds:g}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        return None


def parse_perf_stat(text: str) -> dict[str, int]:
    """``perf stat -x ,`` output: {event name without its group: count}."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[0].strip().isdigit():
            counts[parts[2].split(":")[-1].removeprefix("sys_enter_")] = int(parts[0])
    return counts


@dataclass(slots=True)
class SchedSplit:
    """What one ``perf sched record`` window says about the broker's busiest thread."""

    window_s: float
    broker_tid: int
    state_s: defaultdict[str, float]  # running / runnable / sleeping
    preempted_by: Counter[str]  # kind of task that took its core when it was preempted
    ran_while_waiting_s: defaultdict[str, float]  # on its core while it was runnable, by kind
    other_cpu_idle_while_waiting_s: float
    idle_s_by_broker_state: defaultdict[str, float]  # CPU-seconds idle (all CPUs)
    cpu_s_by_kind: defaultdict[str, float]
    wakeups_by_broker: Counter[str]  # of client threads: "same core" / "other core"
    waits_us: list[float]
    # A CPU idle while a client thread or the loop waited on the other's queue, by which
    # waited ("broker-loop" when it was among them, else "client").
    idle_while_queued_elsewhere_s: defaultdict[str, float] = field(
        default_factory=lambda: defaultdict(float))

    def summary(self) -> dict[str, float]:
        total = sum(self.state_s.values()) or 1.0
        w = self.window_s or 1.0
        waits = sorted(self.waits_us)
        woken = sum(self.wakeups_by_broker.values()) or 1
        out = {f"trace_{k}_pct": 100 * self.state_s[k] / total
               for k in ("running", "runnable", "sleeping")}
        out.update({
            "trace_idle_pct": 100 * sum(self.idle_s_by_broker_state.values()) / (2 * w),
            "trace_idle_while_running_pct": 100 * self.idle_s_by_broker_state["running"] / (2 * w),
            "trace_idle_while_runnable_pct":
                100 * self.idle_s_by_broker_state["runnable"] / (2 * w),
            "trace_idle_while_sleeping_pct":
                100 * self.idle_s_by_broker_state["sleeping"] / (2 * w),
            "trace_other_core_idle_while_waiting_pct":
                100 * self.other_cpu_idle_while_waiting_s / w,
            "trace_client_on_broker_core_while_waiting_pct":
                100 * (self.ran_while_waiting_s["client-rdk"]
                       + self.ran_while_waiting_s["client-py"]) / w,
            "trace_wait_median_us": waits[len(waits) // 2] if waits else 0.0,
            "trace_woken_on_broker_core_pct": 100 * self.wakeups_by_broker["same core"] / woken,
            # CPU of anything but the broker and the client (on a busy machine, others' work)
            "trace_others_cpu_pct": 100 * self.cpu_s_by_kind["other"] / w,
            "trace_idle_while_client_queued_elsewhere_pct":
                100 * self.idle_while_queued_elsewhere_s["client"] / (2 * w),
            "trace_idle_while_loop_queued_elsewhere_pct":
                100 * self.idle_while_queued_elsewhere_s["broker-loop"] / (2 * w),
        })
        return out


def split_broker_time(events: list[SchedEvent], broker_pid: int,
                      client_pid: int) -> SchedSplit:
    """Follow the broker's busiest thread through the scheduler's events: its running,
    runnable and sleeping time, what ran on its core while it waited, the idle time of
    every CPU by what it was doing, and where its wake-ups of client threads went."""
    tgid_of: dict[int, int] = {0: 0}
    comm_of: dict[int, str] = {}
    runtime: Counter[int] = Counter()
    for e in events:
        tgid_of[e.tid] = e.tgid
        if e.name == "sched_stat_runtime":
            tid = int(e.fields.get("pid", "0"))
            runtime[tid] += int(e.fields.get("runtime", "0"))
            comm_of[tid] = e.fields.get("comm", "?")
    broker_tids = [t for t in runtime if tgid_of.get(t) == broker_pid]
    broker = max(broker_tids, key=lambda t: runtime[t]) if broker_tids else -1

    def kind(tid: int) -> str:
        if tid == 0:
            return "idle"
        if tid == broker:
            return "broker-loop"
        group = tgid_of.get(tid)
        if group == broker_pid:
            return "broker-other"
        if group == client_pid:
            return "client-rdk" if comm_of.get(tid, "").startswith("rdk:") else "client-py"
        return "other"

    split = SchedSplit(window_s=(events[-1].time_s - events[0].time_s) if events else 0.0,
                       broker_tid=broker, state_s=defaultdict(float), preempted_by=Counter(),
                       ran_while_waiting_s=defaultdict(float), other_cpu_idle_while_waiting_s=0.0,
                       idle_s_by_broker_state=defaultdict(float), cpu_s_by_kind=defaultdict(float),
                       wakeups_by_broker=Counter(), waits_us=[])
    for tid, ns in runtime.items():
        split.cpu_s_by_kind[kind(tid)] += ns / 1e9
    if not events:
        return split
    current: dict[int, tuple[int, float]] = {}  # cpu -> (tid running, since)
    state, since, broker_cpu = "unknown", events[0].time_s, -1
    queued: dict[int, int] = {}  # the loop's or a client's thread, runnable: its CPU

    def followed(tid: int) -> bool:
        return tid == broker or tgid_of.get(tid) == client_pid

    def close_intervals(now: float) -> None:
        for cpu, (tid, start) in current.items():
            spent = now - start
            if spent <= 0:
                continue
            if tid == 0 and state != "unknown":
                split.idle_s_by_broker_state[state] += spent
            if tid == 0:
                elsewhere = [t for t, c in queued.items() if c != cpu]
                if elsewhere:
                    split.idle_while_queued_elsewhere_s[
                        "broker-loop" if broker in elsewhere else "client"] += spent
            if state == "runnable":
                if cpu == broker_cpu:
                    split.ran_while_waiting_s[kind(tid)] += spent
                elif tid == 0:
                    split.other_cpu_idle_while_waiting_s += spent
            current[cpu] = (tid, now)

    def become(new_state: str, now: float) -> None:
        nonlocal state, since
        if state != "unknown":
            split.state_s[state] += now - since
            if state == "runnable":
                split.waits_us.append(1e6 * (now - since))
        state, since = new_state, now

    for e in events:
        if e.name == "sched_switch":
            close_intervals(e.time_s)
            prev, nxt = int(e.fields.get("prev_pid", "-1")), int(e.fields.get("next_pid", "-1"))
            current[e.cpu] = (nxt, e.time_s)
            queued.pop(nxt, None)
            queued.pop(prev, None)
            if followed(prev) and e.fields.get("prev_state", "").startswith("R"):
                queued[prev] = e.cpu
            if prev == broker:
                if e.fields.get("prev_state", "").startswith("R"):
                    split.preempted_by[kind(nxt)] += 1
                    become("runnable", e.time_s)
                else:
                    become("sleeping", e.time_s)
            if nxt == broker:
                broker_cpu = e.cpu
                become("running", e.time_s)
        elif e.name == "sched_migrate_task":
            moved = int(e.fields.get("pid", "-1"))
            if moved in queued:
                close_intervals(e.time_s)
                queued[moved] = int(e.fields.get("dest_cpu", "-1"))
        elif e.name == "sched_waking":
            woken = int(e.fields.get("pid", "-1"))
            if followed(woken):
                close_intervals(e.time_s)
                queued[woken] = int(e.fields.get("target_cpu", "-1"))
            if woken == broker and state == "sleeping":
                close_intervals(e.time_s)
                become("runnable", e.time_s)
            elif e.tid == broker and kind(woken).startswith("client"):
                target = int(e.fields.get("target_cpu", "-1"))
                split.wakeups_by_broker["same core" if target == e.cpu else "other core"] += 1
    close_intervals(events[-1].time_s)
    become("unknown", events[-1].time_s)
    return split


def perf_sched_trace(seconds: float, out: Path) -> bool:
    """``perf sched record`` of every CPU for ``seconds`` into ``out`` (False: no perf)."""
    try:
        subprocess.run(["perf", "sched", "record", "-o", str(out), "--", "sleep", f"{seconds:g}"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                       timeout=seconds + 60)
    except (FileNotFoundError, subprocess.CalledProcessError):
        return False
    return True


def read_trace(path: Path) -> list[SchedEvent]:
    return parse_events(script(path, check=False))


# -- variants --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Variant:
    label: str
    broker: str  # the broker's key: kind, tree and environment
    kind: str  # minikafka | kafka
    tree: Path | None
    env: tuple[tuple[str, str], ...]
    producers: int
    client_nice: int
    broker_nice: int
    broker_slice_us: int  # 0: the kernel's default slice


def parse_variant(spec: str) -> Variant:
    """``kind[@tree][+NAME=VALUE...][:pN][:nN][:bN][:sN]``."""
    head, *suffixes = spec.split(":")
    if "@" in head.split("+")[0]:
        head_kind, rest = head.split("@", 1)
        tree_text, *envs = rest.split("+")
        tree: Path | None = Path(tree_text)
    else:
        head_kind, *envs = head.split("+")
        tree = None
    if head_kind not in ("minikafka", "kafka"):
        raise ValueError(f"{spec}: the broker is minikafka or kafka")
    if head_kind == "kafka" and (tree is not None or envs):
        raise ValueError(f"{spec}: a tree or environment is for minikafka only")
    env = tuple(tuple(item.split("=", 1)) for item in envs)
    if any(len(item) != 2 for item in env):
        raise ValueError(f"{spec}: environment items are NAME=VALUE")
    producers, nice, broker_nice, slice_us = FULL.p5_producers, 0, 0, 0
    for suffix in suffixes:
        if suffix[:1] == "p" and suffix[1:].isdigit():
            producers = int(suffix[1:])
        elif suffix[:1] == "n" and suffix[1:].lstrip("-").isdigit():
            nice = int(suffix[1:])
        elif suffix[:1] == "b" and suffix[1:].lstrip("-").isdigit():
            broker_nice = int(suffix[1:])
        elif suffix[:1] == "s" and suffix[1:].isdigit() and int(suffix[1:]) > 0:
            slice_us = int(suffix[1:])
        else:
            raise ValueError(f"{spec}: unknown suffix :{suffix}")
    return Variant(label=spec, broker=head, kind=head_kind, tree=tree, env=env,  # type: ignore[arg-type]
                   producers=producers, client_nice=nice, broker_nice=broker_nice,
                   broker_slice_us=slice_us)


class _TreeMiniKafka(MiniKafka):
    """minikafka from another checkout (its own .venv and sources)."""

    def __init__(self, work_dir: Path, *, tree: Path, name: str,
                 env: dict[str, str] | None) -> None:
        super().__init__(work_dir, name=name, env=env)
        self.tree = tree

    def argv(self) -> list[str]:
        return [str(self.tree / ".venv/bin/python"), *super().argv()[1:]]

    def launch(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(self.extra_env)
        self._proc = spawn(self.argv(), log_path=self.work_dir / "broker.log", env=env,
                           cwd=self.tree)


def _broker_for(variant: Variant, work: Path, index: int) -> BrokerUnderTest:
    if variant.kind == "kafka":
        return ApacheKafka(work / f"b{index}")
    env = dict(variant.env) or None
    if variant.tree is not None:
        return _TreeMiniKafka(work / f"b{index}", tree=variant.tree, name=f"minikafka{index}",
                              env=env)
    return MiniKafka(work / f"b{index}", name=f"minikafka{index}", env=env)


_SYS_SCHED_SETATTR: Final[int] = 314  # x86-64
_SCHED_ATTR: Final = struct.Struct("<IIQiIQQQII")  # struct sched_attr (size 56)


def _set_slice(pid: int, slice_us: int) -> None:
    """Ask for ``slice_us`` slices for every thread of ``pid`` (0: the default again)."""
    if platform.machine() != "x86_64":
        raise OSError(errno.ENOSYS, "sched_setattr's number is known here for x86-64 only")
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    for name in os.listdir(f"/proc/{pid}/task"):
        tid = int(name)
        nice = os.getpriority(os.PRIO_PROCESS, tid)
        attr = ctypes.create_string_buffer(_SCHED_ATTR.pack(
            _SCHED_ATTR.size, os.SCHED_OTHER, 0, nice, 0, slice_us * 1000, 0, 0, 0, 0))
        if syscall(_SYS_SCHED_SETATTR, tid, attr, 0) != 0 and ctypes.get_errno() != errno.ESRCH:
            raise OSError(ctypes.get_errno(), f"sched_setattr of thread {tid}")


def _renice(pid: int, nice: int) -> None:
    for name in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.setpriority(os.PRIO_PROCESS, int(name), nice)


# -- a window --------------------------------------------------------------------------------

def _window(variant: Variant, broker: BrokerUnderTest, ctx: RunContext, args: argparse.Namespace,
            trace_dir: Path) -> dict[str, Any]:
    duration = args.settle_s + args.window_s + args.trace_s + 2.0
    load = ctx.load(broker, {"workload": "small", "topic": TOPIC, "producers": variant.producers,
                             "duration_s": duration, "record_bytes": ctx.sizes.record_bytes},
                    name=f"p5-sched {variant.label}")
    client = SyncClient(broker.bootstrap, timeout_ms=60_000)
    tp = TopicPartition(TOPIC, 0)
    try:
        time.sleep(args.settle_s)
        if variant.client_nice:
            _renice(load.proc.pid, variant.client_nice)
        if variant.broker_nice:
            _renice(broker.pid, variant.broker_nice)
        if variant.broker_slice_us:
            _set_slice(broker.pid, variant.broker_slice_us)
        end0 = int(client.list_offsets({tp: -1})[tp].offset)
        t0 = time.monotonic()
        broker0, client0 = thread_counters(broker.pid), thread_counters(load.proc.pid)
        sys0 = system_cpu_s(broker.pid)
        stat = perf_stat(broker.pid, args.window_s)
        time.sleep(args.window_s)
        broker1, client1 = thread_counters(broker.pid), thread_counters(load.proc.pid)
        sys1 = system_cpu_s(broker.pid)
        end1 = int(client.list_offsets({tp: -1})[tp].offset)
        wall = time.monotonic() - t0
        counts = parse_perf_stat(stat.communicate()[1]) if stat is not None else {}
        traced = args.trace_s > 0 and perf_sched_trace(args.trace_s, trace_dir / "perf.data")
    finally:
        client.close()
        if variant.broker_nice:
            _renice(broker.pid, 0)
        if variant.broker_slice_us:
            _set_slice(broker.pid, 0)
    outcome = load.result(120.0)
    del outcome
    requests = max(1, end1 - end0)
    b, c = deltas(broker0, broker1), deltas(client0, client1)
    loop = max(b.values(), key=lambda t: t.run_s)
    row: dict[str, Any] = {
        "requests_per_s": requests / wall,
        "broker_cpu_us": 1e6 * sum(t.run_s for t in b.values()) / requests,
        "broker_system_us": 1e6 * (sys1 - sys0) / requests,
        "broker_cpu_pct": 100 * sum(t.run_s for t in b.values()) / wall,
        "broker_wait_us": 1e6 * sum(t.wait_s for t in b.values()) / requests,
        "broker_voluntary": sum(t.voluntary for t in b.values()) / requests,
        "broker_involuntary": sum(t.involuntary for t in b.values()) / requests,
        "broker_threads_busy": sum(1 for t in b.values() if t.run_s > 0.01 * wall),
        "loop_thread": loop.comm,
        "loop_running_pct": 100 * loop.run_s / wall,
        "loop_runnable_pct": 100 * loop.wait_s / wall,
        "loop_sleeping_pct": 100 * max(0.0, wall - loop.run_s - loop.wait_s) / wall,
        "loop_slices": loop.slices / requests,
        "loop_voluntary": loop.voluntary / requests,
        "loop_involuntary": loop.involuntary / requests,
        "loop_migrations": loop.migrations / requests,
        "client_cpu_us": 1e6 * sum(t.run_s for t in c.values()) / requests,
        "client_cpu_pct": 100 * sum(t.run_s for t in c.values()) / wall,
        "client_wait_us": 1e6 * sum(t.wait_s for t in c.values()) / requests,
        "client_voluntary": sum(t.voluntary for t in c.values()) / requests,
        "client_involuntary": sum(t.involuntary for t in c.values()) / requests,
        "load_average": os.getloadavg()[0],
    }
    row.update({f"syscall_{name}": n / requests for name, n in counts.items()})
    if traced:
        (trace_dir / "pids.json").write_text(json.dumps({"broker": broker.pid,
                                                         "client": load.proc.pid}))
        row["trace_dir"] = str(trace_dir)
        if not args.analyse_later:
            row.update(analyse_trace(trace_dir, keep=args.keep_traces))
    return row


TURN_GAP_S: Final = 30e-6  # the loop's wake-ups of client threads closer than this: one burst
TURN_MIN_WAKEUPS: Final = 3  # a burst of at least this many: the answers of a turn sent


def idle_through_turns(events: list[SchedEvent], loop_tid: int,
                       client_pid: int) -> dict[str, float]:
    """How the other CPUs' idle time falls in the loop's turns. A turn's answers go out in
    one burst of the loop's wake-ups of client threads (at least ``TURN_MIN_WAKEUPS``, less
    than ``TURN_GAP_S`` apart); a cycle runs from the end of one burst to the start of the
    next, and the loop's running time in it is cut in two halves: the other CPUs' idle
    time while the loop ran the first half and while it ran the second, in % of that
    running time (100: every other CPU idle throughout), and the idle time of all CPUs
    during the bursts themselves."""
    clients = {ev.tid for ev in events if ev.tgid == client_pid}
    segments: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    current: dict[int, tuple[int, float]] = {}
    wakes: list[float] = []
    for ev in events:
        if ev.name == "sched_switch":
            if ev.cpu in current:
                tid, since = current[ev.cpu]
                segments[ev.cpu].append((since, ev.time_s, tid))
            current[ev.cpu] = (int(ev.fields.get("next_pid", "-1")), ev.time_s)
        elif (ev.name == "sched_waking" and ev.tid == loop_tid
              and int(ev.fields.get("pid", "-1")) in clients):
            wakes.append(ev.time_s)
    bursts: list[list[float]] = []  # [first, last, wake-ups]
    for t in wakes:
        if bursts and t - bursts[-1][1] < TURN_GAP_S:
            bursts[-1][1] = t
            bursts[-1][2] += 1
        else:
            bursts.append([t, t, 1])
    bursts = [b for b in bursts if b[2] >= TURN_MIN_WAKEUPS]
    idle = {cpu: [(s, e) for s, e, tid in segs if tid == 0] for cpu, segs in segments.items()}
    idle_starts = {cpu: [s for s, _ in spans] for cpu, spans in idle.items()}
    runs = sorted((s, e, cpu) for cpu, segs in segments.items() for s, e, tid in segs
                  if tid == loop_tid)

    def idle_during(start: float, end: float, cpus: list[int]) -> float:
        total = 0.0
        for cpu in cpus:
            spans = idle.get(cpu, [])
            i = max(0, bisect.bisect_right(idle_starts.get(cpu, []), start) - 1)
            while i < len(spans) and spans[i][0] < end:
                total += max(0.0, min(end, spans[i][1]) - max(start, spans[i][0]))
                i += 1
        return total

    cpus = sorted(segments)
    run_s = [0.0, 0.0]
    idle_s = [0.0, 0.0]
    sends_s = sends_idle_s = 0.0
    cycles = 0
    for before, after in itertools.pairwise(bursts):
        begin, end = before[1], after[0]
        pieces = [(max(s, begin), min(e, end), cpu) for s, e, cpu in runs
                  if e > begin and s < end]
        total = sum(e - s for s, e, _ in pieces)
        if total <= 0:
            continue
        cycles += 1
        done = 0.0
        for s, e, cpu in pieces:
            others = [c for c in cpus if c != cpu]
            cut = min(e, max(s, s + total / 2 - done))  # the cycle's half-way point in it
            for half, (a, b) in enumerate(((s, cut), (cut, e))):
                if b > a:
                    run_s[half] += b - a
                    idle_s[half] += idle_during(a, b, others)
            done += e - s
        sends_s += after[1] - after[0]
        sends_idle_s += idle_during(after[0], after[1], cpus)
    window = (events[-1].time_s - events[0].time_s) if events else 0.0
    return {
        "trace_cycles_per_s": cycles / window if window else 0.0,
        "trace_loop_run_per_cycle_us": 1e6 * sum(run_s) / cycles if cycles else 0.0,
        "trace_other_idle_first_half_pct": 100 * idle_s[0] / run_s[0] if run_s[0] else 0.0,
        "trace_other_idle_second_half_pct": 100 * idle_s[1] / run_s[1] if run_s[1] else 0.0,
        "trace_sends_us_per_cycle": 1e6 * sends_s / cycles if cycles else 0.0,
        "trace_idle_in_sends_us_per_cycle": 1e6 * sends_idle_s / cycles if cycles else 0.0,
    }


def analyse_trace(trace_dir: Path, *, keep: bool) -> dict[str, float]:
    """The summary of a window's ``perf sched`` trace (``perf.data`` and ``pids.json``)."""
    pids = json.loads((trace_dir / "pids.json").read_text())
    events = read_trace(trace_dir / "perf.data")
    split = split_broker_time(events, int(pids["broker"]), int(pids["client"]))
    if not keep:
        (trace_dir / "perf.data").unlink(missing_ok=True)  # large; the summary is kept
    return split.summary() | idle_through_turns(events, split.broker_tid, int(pids["client"]))


REPORTED: Final[tuple[str, ...]] = (
    "requests_per_s", "broker_cpu_us", "broker_system_us", "broker_cpu_pct", "broker_wait_us",
    "broker_voluntary", "broker_involuntary", "loop_running_pct", "loop_runnable_pct",
    "loop_sleeping_pct", "loop_involuntary", "loop_migrations", "client_cpu_us",
    "client_cpu_pct", "client_voluntary", "client_involuntary", "syscall_epoll_pwait",
    "syscall_io_uring_enter", "syscall_read", "trace_idle_pct", "trace_idle_while_running_pct",
    "trace_idle_while_runnable_pct", "trace_idle_while_sleeping_pct",
    "trace_other_core_idle_while_waiting_pct", "trace_client_on_broker_core_while_waiting_pct",
    "trace_wait_median_us", "trace_woken_on_broker_core_pct",
    "trace_idle_while_client_queued_elsewhere_pct", "trace_idle_while_loop_queued_elsewhere_pct",
    "trace_others_cpu_pct", "trace_cycles_per_s", "trace_loop_run_per_cycle_us",
    "trace_other_idle_first_half_pct", "trace_other_idle_second_half_pct",
    "trace_sends_us_per_cycle", "trace_idle_in_sends_us_per_cycle", "load_average")


def report(rows: dict[str, list[dict[str, Any]]]) -> str:
    """Markdown: one column per variant, medians [min-max] of its windows."""
    labels = list(rows)
    lines = ["| per window | " + " | ".join(labels) + " |",
             "|---|" + "---|" * len(labels)]
    for key in REPORTED:
        cells = []
        for label in labels:
            values = [float(r[key]) for r in rows[label] if key in r]
            cells.append(f"{statistics.median(values):.4g} [{min(values):.3g}-{max(values):.3g}]"
                         if values else "-")
        if any(cell != "-" for cell in cells):
            lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@contextlib.contextmanager
def _brokers(variants: list[Variant], work: Path) -> Iterator[dict[str, BrokerUnderTest]]:
    started: dict[str, BrokerUnderTest] = {}
    try:
        for variant in variants:
            if variant.broker not in started:
                broker = _broker_for(variant, work, len(started))
                broker.start()
                started[variant.broker] = broker
        yield started
    finally:
        for broker in started.values():
            broker.stop()
        stop_all()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--variants", default="minikafka,kafka",
                        help="comma-separated (see the module's docstring)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle-s", type=float, default=2.5)
    parser.add_argument("--window-s", type=float, default=3.0)
    parser.add_argument("--trace-s", type=float, default=1.0, help="0: no perf sched trace")
    parser.add_argument("--warmup-s", type=float, default=None,
                        help="minikafka's P5 warm-up (default: the bench's); Kafka always "
                             "gets the bench's")
    parser.add_argument("--out-dir", type=Path, default=None)
    parser.add_argument("--keep-traces", action="store_true",
                        help="keep each window's perf.data (tens of MB each)")
    parser.add_argument("--analyse-later", action="store_true",
                        help="keep the traces unread (no CPU spent between windows); read "
                             "them afterwards with --analyse DIR")
    parser.add_argument("--analyse", type=Path, default=None, metavar="DIR",
                        help="read the traces a run with --analyse-later left in DIR and "
                             "rewrite its rows.json and report")
    args = parser.parse_args(argv)
    if args.analyse is not None:
        return _analyse_run(args.analyse, keep=args.keep_traces)
    variants = [parse_variant(spec) for spec in args.variants.split(",") if spec]
    work = args.out_dir or Path(tempfile.mkdtemp(prefix="p5-sched-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict[str, Any]]] = {v.label: [] for v in variants}
    with _brokers(variants, work) as brokers:
        pids = [b.pid for b in brokers.values()]
        for key, broker in brokers.items():
            sizes = FULL
            if not key.startswith("kafka") and args.warmup_s is not None:
                sizes = replace(FULL, p5_warm_up=WarmUp(min_s=args.warmup_s,
                                                        max_s=args.warmup_s,
                                                        run_s=FULL.p5_warm_up.run_s))
            ctx = RunContext(work_dir=work, results_dir=work, sizes=sizes)
            with paused([p for p in pids if p != broker.pid]):
                P5SmallRequests().prepare(broker, ctx)
                create_topic(broker.bootstrap, TOPIC, 1)
            print(f"{key}: {'; '.join(ctx.notes)}", flush=True)
        for round_index in range(args.rounds):
            for n, variant in enumerate(variants):
                broker = brokers[variant.broker]
                ctx = RunContext(work_dir=work, results_dir=work, sizes=FULL)
                trace_dir = work / f"trace-{round_index}-{n}"
                trace_dir.mkdir(exist_ok=True)
                with paused([p for p in pids if p != broker.pid]):
                    row = _window(variant, broker, ctx, args, trace_dir)
                rows[variant.label].append(row)
                (work / "rows.json").write_text(json.dumps(rows, indent=1))  # (so far)
                print(f"{variant.label} round {round_index}: " + " ".join(
                    f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in row.items()), flush=True)
    (work / "rows.json").write_text(json.dumps(rows, indent=1))
    print(report(rows))
    print(f"rows: {work / 'rows.json'}")
    return 0


def _analyse_run(work: Path, *, keep: bool) -> int:
    rows: dict[str, list[dict[str, Any]]] = json.loads((work / "rows.json").read_text())
    for windows in rows.values():
        for row in windows:
            trace_dir = Path(row.get("trace_dir", ""))
            if "trace_dir" in row and (trace_dir / "perf.data").exists():
                row.update(analyse_trace(trace_dir, keep=keep))
    (work / "rows.json").write_text(json.dumps(rows, indent=1))
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Event-loop stalls in a broker under P4's load, and which slow records they explain:
``python -m bench.loop_lag``.

The broker (``python -m cli broker``, the bench's settings; with ``--requests`` its metrics
endpoint on, to count requests) runs with a probe installed before its first import (this
file, run as the broker's ``__main__``):

- a task on the broker's loop sleeps ``--tick-ms`` at a time and records how late each
  wake-up is (the loop's lag: time it was busy, or ready but not running);
- with ``--stacks``, a watchdog thread looks at the loop thread every millisecond and, when
  the loop has not ticked for ``--stall-ms``, takes the loop thread's Python stack, and
  again every ``--stall-ms`` while the stall lasts, so that a stack's count weighs the
  time stalled there (``sys._current_frames``: an in-process ``py-spy dump``). A stall whose stack is
  the loop's own ``run_forever`` (waiting in epoll) was not the loop's work: the process
  did not get a core, or a thread held the interpreter lock;
- the CPU time of each thread of the process (``/proc/self/task``), by thread name;
- the garbage collections (``gc.callbacks``), per generation, on the loop's thread and in
  other threads (a collection holds the interpreter lock throughout, wherever it runs), with
  their CPU; each stall says how much of its loop thread CPU was collections.

The load is P4's at ``--rate`` records/s (``bench.load`` ``latency_produce``, linger 0, and
``latency_consume``, librdkafka's consumer). After ``--warmup-s`` the window opens
(SIGUSR1), ``--window-s`` later it closes (SIGUSR2) and the probe writes what it saw. The
consumer reports each record slower than ``--stall-ms`` with its receive time, and each is
matched with the stalls that overlap its life (produce to receive): so the report says how
much of the tail the loop's stalls explain.

``--cluster N`` measures the controller instead: ZooKeeper (devcluster.zookeeper) and three
brokers, broker 1 (started first: the controller) probed; the window spans the creation of
N partitions (topics of at most 1,000, replication factor 3, as the controller elects,
writes to ZooKeeper and sends LeaderAndIsr / UpdateMetadata to every broker, and the
followers start fetching) and ``--settle-s`` after it.

``--startup N`` measures a start-up instead: a first broker creates N partitions (topics of
at most 1,000) and stops cleanly; a second one starts on that log dir with the window open
from its first step (``BrokerServer.run``) until it serves requests (the controller's
LeaderAndIsr applied, every partition hosted). No load runs; the report is the loop's
wake-ups, stalls and stacks during the start-up.

Times stretch with the machine's load; on a busy machine read the CPU columns and the
stacks, not the milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import gc
import itertools
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any, Final

STATE_ENV: Final[str] = "BENCH_LOOP_LAG_STATE"  # the child's output file and settings (JSON)
BUCKETS_MS: Final[tuple[float, ...]] = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
MAX_STALLS: Final[int] = 20_000
STACK_FRAMES: Final[int] = 8
LONGEST_STALLS: Final[int] = 8  # reported with their own stacks


def _commonest(keys: list[str], n: int = 3) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return sorted(counts.items(), key=lambda kv: -kv[1])[:n]


def _stack_key(frame: FrameType | None, frames: int) -> str:
    """The innermost ``frames`` frames of another thread's stack, innermost first, as
    ``file:function:line`` joined by `` < ``, read from the frame objects in a few bytecodes.
    ``traceback.extract_stack`` runs much more Python code around its walk (and looks source
    lines up through the file system), during which the interpreter lock can pass to the
    walked thread, which then changes its stack: one probe run died of a segfault in
    ``PyFrame_GetBack`` in the watchdog's thread (Python 3.11). Whether this avoids it
    entirely is not shown; it makes the window far smaller."""
    parts: list[str] = []
    while frame is not None and len(parts) < frames:
        code = frame.f_code
        parts.append(f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return " < ".join(parts)


def _thread_cpu() -> dict[str, float]:
    """CPU seconds (utime + stime) of each live thread of this process, by thread name."""
    ticks = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        name = names.get(int(tid), f"native-{tid}")
        out[name] = out.get(name, 0.0) + cpu
    return out


class Probe:
    """Inside the broker: loop lag by a sleeping task, stacks by a watchdog thread."""

    def __init__(self, out: Path, tick_s: float, stall_s: float, stacks: bool,
                 frames: int = STACK_FRAMES) -> None:
        self.out = out
        self.frames = frames
        self.tick_s = tick_s
        self.stall_s = stall_s
        self.stacks = stacks
        self.loop_tid = threading.get_ident()
        self.last_tick = time.monotonic()
        self._gc_cpu = 0.0  # thread_time at the start of the collection under way
        self.window = False
        self.reset()

    def reset(self) -> None:
        self.ticks = 0
        self.lag_s = 0.0
        self.buckets = [0] * (len(BUCKETS_MS) + 1)
        # (wake-up time, lateness s, loop thread CPU s from the sleep to the wake-up, the
        # wake-up before: the key of the stall's stacks, CPU s of collections in it)
        self.stalls: list[tuple[float, float, float, float, float]] = []
        self.stack_counts: dict[str, int] = {}
        # Per stall (keyed by the tick before it): the stacks sampled during it, in order.
        self.stall_stacks: dict[float, list[str]] = {}
        # Garbage collections: per generation on the loop's thread, then per generation in
        # other threads, [count, CPU s, longest CPU s]; and the CPU of those on the loop's
        # thread since its last tick (what the ticker charges to a stall).
        self.collections = [[0, 0.0, 0.0] for _ in range(6)]
        self.gc_cpu_since_tick = 0.0
        self.cpu0 = _thread_cpu()
        self.loop_cpu0 = time.thread_time()
        self.t0 = time.monotonic()

    def start(self) -> None:
        asyncio.get_running_loop().create_task(self._ticker(), name="loop-lag-probe")
        gc.callbacks.append(self._on_gc)
        if self.stacks:
            threading.Thread(target=self._watchdog, name="loop-lag-watchdog", daemon=True).start()

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        """A collection, in any thread: it holds the interpreter lock throughout, so one in
        a worker thread stalls the loop as much as one on it. Its CPU is the thread's."""
        if phase == "start":
            self._gc_cpu = time.thread_time()
            return
        took = time.thread_time() - self._gc_cpu
        on_loop = threading.get_ident() == self.loop_tid
        if on_loop:
            self.gc_cpu_since_tick += took
        if self.window:
            entry = self.collections[info["generation"] + (0 if on_loop else 3)]
            entry[0] += 1
            entry[1] += took
            entry[2] = max(entry[2], took)

    async def _ticker(self) -> None:
        tick = self.tick_s
        while True:
            due = time.monotonic() + tick
            cpu = time.thread_time()
            self.gc_cpu_since_tick = 0.0
            await asyncio.sleep(tick)
            now = time.monotonic()
            before, self.last_tick = self.last_tick, now
            if not self.window:
                continue
            late = max(0.0, now - due)
            self.ticks += 1
            self.lag_s += late
            self.buckets[bisect.bisect_right(BUCKETS_MS, late * 1000)] += 1
            if late >= self.stall_s and len(self.stalls) < MAX_STALLS:
                # The loop thread's CPU meanwhile: near the stall's length, the loop was
                # working; near 0, it waited (for a core, or another thread's GIL).
                self.stalls.append((now, late, time.thread_time() - cpu, before,
                                    self.gc_cpu_since_tick))

    def _watchdog(self) -> None:
        sampled = 0.0
        while True:
            time.sleep(0.001)
            now = time.monotonic()
            if (not self.window or now - self.last_tick < self.stall_s
                    or now - sampled < self.stall_s):
                continue
            sampled = now  # one stack per --stall-ms of a stall: counts weigh by time
            frame = sys._current_frames().get(self.loop_tid)
            if frame is None:
                continue
            key = _stack_key(frame, self.frames)
            self.stack_counts[key] = self.stack_counts.get(key, 0) + 1
            if len(self.stall_stacks) < MAX_STALLS:
                self.stall_stacks.setdefault(self.last_tick, []).append(key)

    def open_window(self, _signum: int, _frame: object) -> None:
        self.reset()
        self.window = True

    def close_window(self, _signum: int, _frame: object) -> None:
        self.window = False
        cpu1 = _thread_cpu()
        state = {
            "seconds": time.monotonic() - self.t0,
            "loop_cpu_s": time.thread_time() - self.loop_cpu0,
            "ticks": self.ticks,
            "lag_s": self.lag_s,
            "buckets": self.buckets,
            "stalls": self.stalls,
            "stacks": self.stack_counts,
            "longest": [[cpu, late, _commonest(self.stall_stacks.get(before, [])), gc_cpu]
                        for _, late, cpu, before, gc_cpu in sorted(
                            self.stalls, key=lambda st: -st[2])[:LONGEST_STALLS]],
            "collections": self.collections,
            "tracked": len(gc.get_objects()),  # objects the collector tracks at the close
            "frozen": gc.get_freeze_count(),
            "thread_cpu_s": {name: cpu1[name] - self.cpu0.get(name, 0.0) for name in cpu1},
        }
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.out)


def _child(argv: list[str]) -> int:
    """Inside the broker process: install the probe on the broker's loop, run the broker."""
    settings = json.loads(os.environ[STATE_ENV])
    sys.path.insert(0, os.getcwd())  # the tree the broker runs from (--tree)
    from broker import server
    from cli.main import main as cli_main

    probe = Probe(Path(settings["out"]), settings["tick_ms"] / 1000, settings["stall_ms"] / 1000,
                  settings["stacks"], settings.get("frames", STACK_FRAMES))
    signal.signal(signal.SIGUSR1, probe.open_window)
    signal.signal(signal.SIGUSR2, probe.close_window)
    original = server.BrokerServer.run

    async def run(self: server.BrokerServer) -> int:
        probe.loop_tid = threading.get_ident()
        probe.start()
        if settings.get("startup"):  # the window is the start-up: open now, close when serving
            probe.open_window(0, None)

            async def close_when_started() -> None:
                await self.wait_started()
                probe.close_window(0, None)

            started = asyncio.get_running_loop().create_task(close_when_started())
            await asyncio.sleep(0)  # the ticker's first sleep is due before the broker's work
            try:
                return await original(self)
            finally:
                started.cancel()
        return await original(self)

    server.BrokerServer.run = run  # type: ignore[method-assign]
    return cli_main(argv)


def _wait_file(path: Path, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            result: dict[str, Any] = json.loads(path.read_text())
            return result
        time.sleep(0.05)
    raise TimeoutError(f"the broker did not write {path} within {timeout_s:.0f} s")


def _explained(outliers: list[list[float]], stalls: list[list[float]]) -> int:
    """How many slow records lived (from their send to their receive) through a stall."""
    spans = sorted((wake - late, wake) for wake, late, *_ in stalls)
    starts = [s for s, _e in spans]
    count = 0
    for received, latency_ms in outliers:
        sent = received - latency_ms / 1000
        i = bisect.bisect_right(starts, received)
        if any(end >= sent for _start, end in spans[max(0, i - 50):i]):
            count += 1
    return count


def _print_loop(args: argparse.Namespace, probe: dict[str, Any]) -> None:
    ticks = max(probe["ticks"], 1)
    labels = [f"<{BUCKETS_MS[0]:g}"] + [f"{a:g}-{b:g}" for a, b in itertools.pairwise(BUCKETS_MS)]
    labels.append(f">={BUCKETS_MS[-1]:g}")
    print(f"loop wake-ups ({args.tick_ms:g} ms sleeps), lateness ms: " + ", ".join(
        f"{label}: {n}" for label, n in zip(labels, probe["buckets"], strict=True)))
    stalls = probe["stalls"]
    print(f"stalls >= {args.stall_ms:g} ms: {len(stalls)}, {sum(s[1] for s in stalls) * 1000:.0f}"
          f" ms in all, longest {max((s[1] for s in stalls), default=0) * 1000:.1f} ms; "
          f"mean lateness {1000 * probe['lag_s'] / ticks:.2f} ms")
    cpu_ms = sorted((s[2] * 1000 for s in stalls), reverse=True)
    print("the loop thread's own CPU during the stalls (its work; the rest of a stall it "
          "waited for a core or the interpreter lock), longest ms: "
          + ", ".join(f"{ms:.1f}" for ms in cpu_ms[:10]))


def _print_collections(probe: dict[str, Any]) -> None:
    """The garbage collections in the window, on the loop's thread and in others."""
    def line(collections: list[list[float]]) -> str:
        return "; ".join(f"gen {gen}: {count:.0f}, {total * 1000:.0f} ms in all, longest "
                         f"{longest * 1000:.1f} ms"
                         for gen, (count, total, longest) in enumerate(collections))

    print(f"garbage collections (CPU) on the loop's thread: {line(probe['collections'][:3])}; "
          f"in other threads: {line(probe['collections'][3:])}; {probe['tracked']:,} objects "
          f"tracked at the close, {probe['frozen']:,} frozen")


def _print_thread_cpu(probe: dict[str, Any]) -> None:
    """Each thread's CPU time in the window, the busiest first."""
    print("thread CPU in the window: " + ", ".join(
        f"{name} {cpu:.2f} s" for name, cpu in sorted(probe["thread_cpu_s"].items(),
                                                      key=lambda kv: -kv[1]) if cpu > 0))


def _print_stacks(probe: dict[str, Any]) -> None:
    if probe.get("longest"):
        print("the stalls with the most loop thread CPU, and their commonest stacks:")
        for cpu, late, stacks, gc_cpu in probe["longest"]:
            print(f"  {cpu * 1000:.1f} ms of CPU in a {late * 1000:.1f} ms stall"
                  + (f" ({gc_cpu * 1000:.1f} ms of it garbage collection)" if gc_cpu else ""))
            for stack, n in stacks:
                print(f"    {n:5d}  {stack}")
    if probe["stacks"]:
        print("loop thread's stack during stalls (innermost first):")
        for stack, n in sorted(probe["stacks"].items(), key=lambda kv: -kv[1])[:15]:
            print(f"  {n:5d}  {stack}")


def _startup(args: argparse.Namespace, argv_broker: list[str], settings: dict[str, Any],
             work: Path, port: int) -> int:
    """A clean stop over ``args.startup`` partitions, then the measured start-up."""
    from bench.partition_scaling import topic_layout
    from bench.procs import spawn, stop, wait_for_port
    from client.sync import SyncClient

    topics, per_topic = topic_layout(args.startup)
    env = {**os.environ, STATE_ENV: json.dumps(settings)}
    first = spawn(argv_broker, log_path=work / "broker-create.log", env=env, cwd=args.tree)
    try:
        wait_for_port(port, proc=first, timeout_s=60)
        with SyncClient(f"127.0.0.1:{port}", timeout_ms=600_000) as client:
            for i in range(topics):
                client.create_topic(f"startup-{i}", per_topic, 1, {})
    finally:
        stop(first, sig=signal.SIGTERM, grace_s=120)
    state = Path(settings["out"])
    state.unlink(missing_ok=True)
    t0 = time.monotonic()
    broker = spawn(argv_broker, log_path=work / "broker.log",
                   env={**env, STATE_ENV: json.dumps({**settings, "startup": True})},
                   cwd=args.tree)
    try:
        probe = _wait_file(state, timeout_s=600)
        served_s = time.monotonic() - t0
    finally:
        stop(broker, sig=signal.SIGTERM, grace_s=120)
    seconds = probe["seconds"]
    print(f"start-up over {args.startup:,} partitions ({topics} topics): serving "
          f"{served_s:.2f} s after the spawn; window {seconds:.2f} s, loop thread CPU "
          f"{probe['loop_cpu_s']:.2f} s")
    _print_loop(args, probe)
    _print_collections(probe)
    _print_thread_cpu(probe)
    _print_stacks(probe)
    print(f"work dir: {work}")
    return 0


def _cluster(args: argparse.Namespace, settings: dict[str, Any], work: Path) -> int:
    """Three brokers on a ZooKeeper of their own, broker 1 (the controller) probed while
    ``args.cluster`` partitions are created with replication factor 3."""
    from bench.partition_scaling import topic_layout
    from bench.procs import free_port, spawn, stop
    from client.sync import SyncClient
    from devcluster.zookeeper import ZooKeeper

    topics, per_topic = topic_layout(args.cluster)
    zk = ZooKeeper(work / "zookeeper", nodes=1).start()
    ports = {i: free_port() for i in (1, 2, 3)}
    procs: dict[int, Any] = {}

    def launch(broker_id: int) -> None:
        props = {"broker.id": str(broker_id),
                 "listeners": f"PLAINTEXT://127.0.0.1:{ports[broker_id]}",
                 "log.dirs": str(work / f"broker-{broker_id}"),
                 "zookeeper.connect": f"{zk.connect_string}/loop-lag",
                 "zookeeper.session.timeout.ms": "6000",
                 **dict(item.split("=", 1) for item in args.override)}
        overrides = [a for k, v in props.items() for a in ("--override", f"{k}={v}")]
        env = dict(os.environ)
        if broker_id == 1:
            env[STATE_ENV] = json.dumps(settings)
            argv = [sys.executable, str(Path(__file__).resolve()), "--child", "broker", *overrides]
        else:
            argv = [sys.executable, "-m", "cli", "broker", *overrides]
        procs[broker_id] = spawn(argv, log_path=work / f"broker-{broker_id}.log", env=env,
                                 cwd=args.tree)

    def wait_ready(broker_id: int, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        log_path = work / f"broker-{broker_id}.log"
        while time.monotonic() < deadline:
            if "minikafka: started broker" in log_path.read_text(errors="replace"):
                return
            time.sleep(0.1)
        raise RuntimeError(f"broker {broker_id} did not start: see {log_path}")

    try:
        launch(1)
        wait_ready(1)
        launch(2)
        launch(3)
        wait_ready(2)
        wait_ready(3)
        os.kill(procs[1].pid, signal.SIGUSR1)
        t0 = time.monotonic()
        with SyncClient(f"127.0.0.1:{ports[1]}", timeout_ms=600_000) as client:
            for i in range(topics):
                client.create_topic(f"cluster-{i}", per_topic, 3, {})
        created_s = time.monotonic() - t0
        time.sleep(args.settle_s)
        os.kill(procs[1].pid, signal.SIGUSR2)
        probe = _wait_file(Path(settings["out"]))
    finally:
        for proc in procs.values():
            stop(proc, sig=signal.SIGKILL)
        zk.stop()
    print(f"cluster of 3 brokers, controller probed: {args.cluster:,} partitions created "
          f"({topics} topics, replication factor 3) in {created_s:.2f} s; window "
          f"{probe['seconds']:.2f} s, loop thread CPU {probe['loop_cpu_s']:.2f} s")
    _print_loop(args, probe)
    _print_collections(probe)
    _print_stacks(probe)
    print(f"work dir: {work}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--child"]:
        return _child(args_in[1:])
    from bench.brokers import SHARED_SETTINGS
    from bench.load_procs import start_latency_pair
    from bench.load_specs import latency_specs
    from bench.procs import BenchError, free_port, spawn, stop, wait_for_port
    from bench.syscalls import TOPIC, _requests_served
    from client.sync import SyncClient

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000, help="records/s")
    parser.add_argument("--warmup-s", type=float, default=4.0)
    parser.add_argument("--window-s", type=float, default=15.0)
    parser.add_argument("--tick-ms", type=float, default=1.0)
    parser.add_argument("--stall-ms", type=float, default=3.0,
                        help="a wake-up this late is a stall; a record this slow is an outlier")
    parser.add_argument("--stacks", action="store_true", help="take the loop's stack during stalls "
                        "(a watchdog thread: ~3-6%% of a core, and interpreter-lock hand-offs)")
    parser.add_argument("--frames", type=int, default=STACK_FRAMES,
                        help="--stacks: the innermost frames kept of each stack")
    parser.add_argument("--requests", action="store_true", help="count requests (the broker's "
                        "metrics endpoint on, which costs CPU per request)")
    parser.add_argument("--tree", type=Path, default=None,
                        help="run the broker from this checkout (default: this one)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--startup", type=int, default=0, metavar="N",
                        help="measure a start-up over N partitions instead of P4's load")
    parser.add_argument("--cluster", type=int, default=0, metavar="N",
                        help="measure a 3-broker cluster's controller creating N partitions")
    parser.add_argument("--settle-s", type=float, default=3.0,
                        help="--cluster: how long the window stays open after the creation")
    parser.add_argument("--out-dir", type=Path, default=Path(tempfile.gettempdir()) / "loop-lag")
    args = parser.parse_args(args_in)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="lag-", dir=args.out_dir))
    state = work / "probe.json"
    port, metrics_port = free_port(), free_port()
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(work / "data"),
             **SHARED_SETTINGS, **dict(item.split("=", 1) for item in args.override)}
    metrics_url = ""
    if args.requests:  # the endpoint costs CPU per request: off unless asked
        props["metrics.prometheus.listener"] = f"127.0.0.1:{metrics_port}"
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    settings = {"out": str(state), "tick_ms": args.tick_ms, "stall_ms": args.stall_ms,
                "stacks": args.stacks, "frames": args.frames}
    argv_broker = [sys.executable, str(Path(__file__).resolve()), "--child", "broker",
                   *(a for k, v in props.items() for a in ("--override", f"{k}={v}"))]
    if args.startup:
        return _startup(args, argv_broker, settings, work, port)
    if args.cluster:
        return _cluster(args, settings, work)
    broker = spawn(argv_broker, log_path=work / "broker.log",
                   env={**os.environ, STATE_ENV: json.dumps(settings)}, cwd=args.tree)
    records = int(args.rate * (args.warmup_s + args.window_s))
    try:
        wait_for_port(port, proc=broker, timeout_s=60)
        bootstrap = f"127.0.0.1:{port}"
        with SyncClient(bootstrap, timeout_ms=60_000) as client:
            client.create_topic(TOPIC, 1, 1, {})
        consume, produce = latency_specs(
            TOPIC, args.rate, records, int(args.rate * args.warmup_s), 100, bootstrap,
            outliers_ms=args.stall_ms, timeout_s=args.warmup_s + args.window_s + 60)
        with start_latency_pair(consume, produce, name="P4", log_dir=work) as pair:
            time.sleep(args.warmup_s)
            before = _requests_served(metrics_url) if metrics_url else 0
            os.kill(broker.pid, signal.SIGUSR1)
            time.sleep(args.window_s)
            os.kill(broker.pid, signal.SIGUSR2)
            after = _requests_served(metrics_url) if metrics_url else 0
            probe = _wait_file(state)
            produced_out, consumed_out = pair.results(produce_timeout_s=120)
    except BenchError as exc:
        print(f"load failed: {exc}", file=sys.stderr)
        return 1
    finally:
        stop(broker, sig=signal.SIGTERM)
    produced, consumed = produced_out.result, consumed_out.result
    requests = after - before
    seconds = probe["seconds"]
    print(f"P4 at {args.rate:,} records/s: producer held {produced['records'] / produced['send_s']:,.0f}"
          f" records/s (at worst {produced['max_behind_ms']:.1f} ms behind schedule); "
          f"loop thread CPU {probe['loop_cpu_s'] / seconds:.0%} of the {seconds:.1f} s window"
          + (f"; {requests:,} requests ({requests / seconds:,.0f}/s, Fetch counted twice as "
             f"Kafka's metrics do), {1e6 * probe['loop_cpu_s'] / max(requests, 1):.0f} us "
             f"per request" if metrics_url else ""))
    lat = consumed["latency_ms"]
    print("e2e latency ms: " + ", ".join(f"{k} {lat[k]:.3g}" for k in
                                        ("p50", "p90", "p99", "p99.9", "p99.99", "p100")))
    _print_loop(args, probe)
    _print_collections(probe)
    outliers = consumed.get("outliers", [])
    samples = lat["samples"]
    explained = _explained(outliers, probe["stalls"])
    print(f"records slower than {args.stall_ms:g} ms: {len(outliers):,} of {samples:,.0f} "
          f"({len(outliers) / max(samples, 1):.3%}); {explained:,} of them lived through a stall")
    _print_thread_cpu(probe)
    _print_stacks(probe)
    print(f"work dir: {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Garbage collections in a broker under load, counted by ``gc.callbacks``: ``python -m bench.gc_counts``.

The broker (``python -m cli broker``, the bench's settings) runs with a ``gc.callbacks``
hook installed before its first import (this file, run as the broker's ``__main__``), which
counts per generation the collections, the objects they collected and the time each took
(the times stretch with the machine's load; the counts do not). The load is P5's or P4's
(``bench.syscalls``: ``--workload p5|p4``); after ``--warmup-s`` the broker is asked for a
snapshot (SIGUSR1), again ``--window-s`` later, and the difference is reported per 1,000
requests, with the objects the collector tracks (per generation) at both ends and what one
full collection costs at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

STATE_ENV: Final[str] = "BENCH_GC_COUNTS_STATE"  # the child's snapshot file (not MINIKAFKA_*: those are properties)


def _child(argv: list[str]) -> int:
    """Inside the broker process: count collections, snapshot on SIGUSR1, run the broker."""
    out = Path(os.environ[STATE_ENV])
    counts = [{"collections": 0, "collected": 0, "uncollectable": 0, "seconds": 0.0,
               "max_seconds": 0.0} for _ in range(3)]
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        took = time.perf_counter() - started[0]
        entry = counts[info["generation"]]
        entry["collections"] += 1
        entry["collected"] += info["collected"]
        entry["uncollectable"] += info["uncollectable"]
        entry["seconds"] += took
        entry["max_seconds"] = max(entry["max_seconds"], took)

    def snapshot(_signum: int, _frame: object) -> None:
        state = {"counts": [dict(c) for c in counts],
                 "tracked": [len(gc.get_objects(g)) for g in range(3)],
                 "frozen": gc.get_freeze_count(), "threshold": list(gc.get_threshold())}
        with out.open("a") as f:
            f.write(json.dumps(state) + "\n")

    def full_collection(_signum: int, _frame: object) -> None:
        tracked = len(gc.get_objects())
        t0 = time.perf_counter()
        collected = gc.collect()
        with out.open("a") as f:
            f.write(json.dumps({"full": {"tracked": tracked, "collected": collected,
                                         "seconds": time.perf_counter() - t0}}) + "\n")

    gc.callbacks.append(on_gc)
    signal.signal(signal.SIGUSR1, snapshot)
    signal.signal(signal.SIGUSR2, full_collection)
    sys.path.insert(0, os.getcwd())  # the tree the broker runs from (--tree)
    from cli.main import main as cli_main

    return cli_main(argv)


def _snapshots(path: Path, n: int, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= n:
            return [json.loads(line) for line in lines]
        time.sleep(0.05)
    raise TimeoutError(f"the broker wrote {path} {n} times within {timeout_s:.0f} s")


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--child"]:
        return _child(args_in[1:])
    from bench.brokers import SHARED_SETTINGS
    from bench.procs import free_port, spawn, stop, wait_for_port
    from bench.syscalls import TOPIC, _end_offset, _loads, _requests_served
    from client.sync import SyncClient

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workload", choices=("p5", "p4"), default="p4")
    parser.add_argument("--producers", type=int, default=16, help="p5")
    parser.add_argument("--rate", type=int, default=10_000, help="p4: records/s")
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--window-s", type=float, default=30.0)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--tree", type=Path, default=None,
                        help="run the broker from this checkout (default: this one)")
    parser.add_argument("--out-dir", type=Path, default=Path(tempfile.gettempdir()) / "gc-counts")
    args = parser.parse_args(args_in)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gc-", dir=args.out_dir))
    state = work / "gc.jsonl"
    port = free_port()
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(work / "data"),
             **SHARED_SETTINGS}
    metrics_url = ""
    if args.workload == "p4":
        metrics_port = free_port()
        props["metrics.prometheus.listener"] = f"127.0.0.1:{metrics_port}"
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    argv_broker = [sys.executable, str(Path(__file__).resolve()), "--child", "broker",
                   *(a for k, v in props.items() for a in ("--override", f"{k}={v}"))]
    broker = spawn(argv_broker, log_path=work / "broker.log",
                   env={**os.environ, STATE_ENV: str(state)}, cwd=args.tree)
    try:
        wait_for_port(port, proc=broker, timeout_s=60)
        bootstrap = f"127.0.0.1:{port}"
        with SyncClient(bootstrap, timeout_ms=60_000) as client:
            client.create_topic(TOPIC, 1, 1, {})
            os.kill(broker.pid, signal.SIGUSR1)  # start-up done: what it left
            specs = _loads(args.workload, bootstrap, producers=args.producers, rate=args.rate,
                           seconds=args.warmup_s + args.window_s + 2.0,
                           record_bytes=args.record_bytes)
            loads = [spawn([sys.executable, "-m", "bench.load", json.dumps(spec)],
                           log_path=work / f"load{i}.log", stdout_pipe=True)
                     for i, spec in enumerate(specs)]

            def served() -> int:
                return (_requests_served(metrics_url) if metrics_url
                        else _end_offset(client))

            try:
                time.sleep(args.warmup_s)
                before = served()
                os.kill(broker.pid, signal.SIGUSR1)
                time.sleep(args.window_s)
                os.kill(broker.pid, signal.SIGUSR1)
                after = served()
            finally:
                for load in loads:
                    stop(load)
            os.kill(broker.pid, signal.SIGUSR2)
            snaps = _snapshots(state, 4)
    finally:
        stop(broker, sig=signal.SIGTERM)
    at_start, first, last, full = snaps[0], snaps[1], snaps[2], snaps[3]["full"]
    requests = after - before
    print(f"{args.workload}: {requests} requests in {args.window_s:.0f} s "
          f"(after {args.warmup_s:.0f} s of warm-up); threshold {first['threshold']}")
    print(f"tracked objects per generation: after start-up {at_start['tracked']}, "
          f"window start {first['tracked']}, window end {last['tracked']}")
    for g in range(3):
        a, b = first["counts"][g], last["counts"][g]
        n = b["collections"] - a["collections"]
        collected = b["collected"] - a["collected"]
        seconds = b["seconds"] - a["seconds"]
        per_k = 1000 * n / requests if requests else float("nan")
        print(f"  gen {g}: {n} collections ({per_k:.3f} per 1,000 requests), {collected} objects "
              f"collected, {seconds * 1000:.1f} ms in all (load-dependent; "
              f"longest since start {b['max_seconds'] * 1000:.1f} ms)")
    print(f"one full collection at the end: {full['tracked']} objects tracked, "
          f"{full['collected']} collected, {full['seconds'] * 1000:.1f} ms (load-dependent)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

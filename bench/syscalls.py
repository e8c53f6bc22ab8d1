"""System calls per request, counted by strace: ``python -m bench.syscalls``.

The broker (``python -m cli broker``, the bench's settings) serves a load; after
``--warmup-s``, ``strace -f -c`` is attached to every thread of the broker for
``--window-s``, and strace's table is divided by the requests served meanwhile:

- ``--workload p5`` (default): P5's load (``bench.load`` ``small``: ``--producers``
  librdkafka producers, one record per Produce request, one request in flight each). The
  requests are counted by the log end offset (ListOffsets) before and after the window:
  one record per request;
- ``--workload p4``: P4's load at ``--rate`` records/s (``latency_produce``, linger 0,
  and ``latency_consume``, librdkafka's consumer with its fetch.wait.max.ms 500). The
  broker runs with its metrics endpoint on, and the requests of every kind are counted by
  ``kafka_network_requestmetrics_requests_total`` scraped before and after the window.

The counts do not depend on the machine's load the way times do, but batching does: a
slower broker (strace itself slows it) finds more connections ready per ``epoll_wait``, so
read the per-request figures of calls made once per request (``recvfrom``, ``sendto``,
``getpid``), not of the loop's own calls, as exact.

``--tree DIR`` runs the broker from another checkout (e.g. ``git archive`` of main), for a
before/after comparison; ``--env K=V`` sets broker environment variables, ``--override
KEY=VALUE`` broker properties.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Final

from bench.brokers import SHARED_SETTINGS
from bench.procs import free_port, spawn, stop, wait_for_port
from client.sync import SyncClient
from protocol.topic_partition import TopicPartition

TOPIC: Final[str] = "syscalls"
LATEST: Final[int] = -1
# strace -c's table: "% time  seconds  usecs/call  calls  [errors]  syscall".
_ROW: Final = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:(\d+)\s+)?(\w+)\s*$")


def parse_strace_summary(text: str) -> dict[str, int]:
    """syscall -> calls, from ``strace -c``'s table."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        match = _ROW.match(line)
        if match and match.group(3) != "total":
            counts[match.group(3)] = int(match.group(1))
    return counts


def _end_offset(client: SyncClient) -> int:
    tp = TopicPartition(TOPIC, 0)
    listed = client.list_offsets({tp: LATEST})
    return int(listed[tp].offset)


def _requests_served(metrics_url: str) -> int:
    """Requests of every kind answered so far, from the broker's metrics endpoint."""
    with urllib.request.urlopen(metrics_url, timeout=30) as answer:
        text = answer.read().decode()
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("kafka_network_requestmetrics_requests_total{")))


def _loads(workload: str, bootstrap: str, *, producers: int, rate: int, seconds: float,
           record_bytes: int) -> list[dict[str, object]]:
    if workload == "p5":
        return [{"workload": "small", "topic": TOPIC, "producers": producers,
                 "duration_s": seconds, "record_bytes": record_bytes, "bootstrap": bootstrap}]
    records = int(rate * seconds)
    return [{"workload": "latency_consume", "topic": TOPIC, "records": records,
             "bootstrap": bootstrap, "timeout_s": seconds + 60},
            {"workload": "latency_produce", "topic": TOPIC, "records": records, "rate": rate,
             "record_bytes": max(record_bytes, 8), "bootstrap": bootstrap}]


def measure(*, workload: str, producers: int, rate: int, warmup_s: float, window_s: float,
            record_bytes: int, out_dir: Path, tree: Path | None, env: dict[str, str],
            overrides: dict[str, str]) -> tuple[dict[str, int], int]:
    """(syscall -> calls in the window, requests served in the window)."""
    work = Path(tempfile.mkdtemp(prefix="syscalls-", dir=out_dir))
    port = free_port()
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(work / "data"),
             **SHARED_SETTINGS, **overrides}
    metrics_url = ""
    if workload == "p4":
        metrics_port = free_port()
        props["metrics.prometheus.listener"] = f"127.0.0.1:{metrics_port}"
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    argv = [sys.executable, "-m", "cli", "broker",
            *(a for k, v in props.items() for a in ("--override", f"{k}={v}"))]
    broker = spawn(argv, log_path=work / "broker.log", env={**os.environ, **env}, cwd=tree)
    try:
        wait_for_port(port, proc=broker, timeout_s=60)
        bootstrap = f"127.0.0.1:{port}"
        with SyncClient(bootstrap, timeout_ms=60_000) as client:
            client.create_topic(TOPIC, 1, 1, {})
            specs = _loads(workload, bootstrap, producers=producers, rate=rate,
                           seconds=warmup_s + window_s + 2.0, record_bytes=record_bytes)
            loads = [spawn([sys.executable, "-m", "bench.load", json.dumps(spec)],
                           log_path=work / f"load{i}.log", stdout_pipe=True)
                     for i, spec in enumerate(specs)]

            def served() -> int:
                return _requests_served(metrics_url) if metrics_url else _end_offset(client)

            try:
                time.sleep(warmup_s)
                before = served()
                summary = work / "strace.txt"
                tracer = subprocess.Popen(["strace", "-f", "-c", "-S", "calls", "-o", str(summary),
                                           "-p", str(broker.pid)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(window_s)
                tracer.send_signal(signal.SIGINT)
                tracer.wait(60)
                after = served()
            finally:
                for load in loads:
                    stop(load)
    finally:
        stop(broker, sig=signal.SIGTERM)
    return parse_strace_summary(summary.read_text()), after - before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workload", choices=("p5", "p4"), default="p5")
    parser.add_argument("--producers", type=int, default=16, help="p5")
    parser.add_argument("--rate", type=int, default=10_000, help="p4: records/s")
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--window-s", type=float, default=5.0)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--tree", type=Path, default=None,
                        help="run the broker from this checkout (default: this one)")
    parser.add_argument("--env", action="append", default=[], metavar="K=V",
                        help="an environment variable for the broker (repeatable)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker property (repeatable), e.g. metrics.prometheus.listener")
    parser.add_argument("--out-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "syscalls")
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(item.split("=", 1) for item in args.env)
    overrides = dict(item.split("=", 1) for item in args.override)
    counts, requests = measure(workload=args.workload, producers=args.producers,
                               rate=args.rate, warmup_s=args.warmup_s,
                               window_s=args.window_s, record_bytes=args.record_bytes,
                               out_dir=args.out_dir, tree=args.tree, env=env,
                               overrides=overrides)
    if requests <= 0:
        print(f"no Produce request served in the window ({requests})", file=sys.stderr)
        return 1
    load = (f"{args.producers} producers" if args.workload == "p5"
            else f"{args.rate:,} records/s produced and consumed")
    print(f"{requests} requests in {args.window_s:.0f} s under strace ({args.workload}: "
          f"{load}); system calls per request:")
    for name, calls in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<20} {calls / requests:8.3f}  ({calls} calls)")
    print(f"  {'total':<20} {sum(counts.values()) / requests:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

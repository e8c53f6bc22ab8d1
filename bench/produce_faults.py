"""Minor page faults and broker CPU per byte of large produces (P1's requests), by tree.

``python -m bench.produce_faults --tree <checkout> --requests 400 [--records 4096]``

A broker (``python -m cli broker``, the bench's settings) runs from ``--tree`` (default:
this checkout); one client (``client.sync``) sends ``--requests`` sequential produces of
one batch of ``--records`` 100-byte records (acks=1) after 20 of warm-up. Printed: the
broker's minor page faults over them per MB of records (``/proc/<pid>/stat``) and its CPU
time per GB (``/proc/<pid>/task/*/schedstat``: user and kernel, every thread, in ns).
Run trees interleaved, several times: the CPU figure moves with the machine's load, the
fault count hardly at all. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from bench.brokers import SHARED_SETTINGS
from bench.procs import free_port, spawn, stop, wait_for_port
from client.sync import SyncClient
from protocol.messages.produce import ProduceRequest
from protocol.records import NewRecord, build_batch

WARMUP = 20
TOPIC = "produce-faults"


def minor_faults_and_cpu_ns(pid: int) -> tuple[int, int]:
    """(minor faults, CPU ns over every thread) of ``pid`` so far."""
    faults = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])
    cpu_ns = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            cpu_ns += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return faults, cpu_ns


def measure(tree: Path | None, requests: int, records: int) -> str:
    work = Path(tempfile.mkdtemp(prefix="produce-faults-"))
    port = free_port()
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(work / "data"),
             **SHARED_SETTINGS}
    argv = [sys.executable, "-m", "cli", "broker",
            *(a for k, v in props.items() for a in ("--override", f"{k}={v}"))]
    proc = spawn(argv, log_path=work / "broker.log", cwd=tree)
    try:
        wait_for_port(port, proc=proc, timeout_s=120)
        batch = build_batch([NewRecord(None, os.urandom(100), (), None)] * records)
        request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
            ProduceRequest.TopicProduceData(TOPIC, [
                ProduceRequest.PartitionProduceData(0, batch)])])
        with SyncClient(f"127.0.0.1:{port}", timeout_ms=60_000) as client:
            client.create_topic(TOPIC, 1, 1, {})
            for _ in range(WARMUP):
                client.send(request)
            faults0, cpu0 = minor_faults_and_cpu_ns(proc.pid)
            for _ in range(requests):
                client.send(request)
            faults1, cpu1 = minor_faults_and_cpu_ns(proc.pid)
    finally:
        stop(proc, sig=signal.SIGTERM)
        shutil.rmtree(work, ignore_errors=True)
    mb = requests * len(batch) / 1e6
    return (f"{tree or '.'}: {requests} produces of {len(batch):,} bytes ({mb:.1f} MB): "
            f"{(faults1 - faults0) / mb:.1f} minor faults per MB, broker CPU "
            f"{(cpu1 - cpu0) / 1e6:.0f} ms = {(cpu1 - cpu0) / 1e6 / mb:.2f} s per GB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tree", type=Path, default=None,
                        help="run the broker from this checkout (default: this one)")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--records", type=int, default=4096, help="100-byte records a batch")
    args = parser.parse_args(argv)
    print(measure(args.tree, args.requests, args.records), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

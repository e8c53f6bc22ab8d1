"""User-space instructions per produce request with metrics off and on, by callgrind.

``python -m bench.metrics_instructions [--small 200] [--large 1200] [--out DIR]``

Instruction counts do not depend on the machine's load, unlike the P5 throughput bench.
For each side (``metrics.prometheus.listener`` empty, then on an ephemeral port) the broker
(``python -m cli broker``) runs under ``valgrind --tool=callgrind`` twice: it serves 50
warm-up requests, then ``--small`` or ``--large`` sequential acks=1 produce requests of one
100-byte record from one client, and is stopped with SIGTERM. The difference of the two
totals over ``large - small`` is the cost of one request (start-up and shutdown cancel
out). The on side is scraped once before the measured requests, so the scrape-time
collectors are imported and built in both runs alike.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Final

from client.sync import SyncClient
from tests.integration.data_path_client import batch, create_topic, produce

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
START_TIMEOUT_S: Final = 600.0
STOP_TIMEOUT_S: Final = 600.0
WARMUP: Final = 50


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, deadline: float, proc: subprocess.Popen[bytes]) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"broker not listening on {port} within {START_TIMEOUT_S:.0f} s")


def run_once(work: Path, *, metrics: bool, requests: int) -> int:
    """Total instructions (callgrind's Ir) of one broker serving WARMUP + ``requests``."""
    port = _free_port()
    mport = _free_port() if metrics else 0
    tag = f"{'on' if metrics else 'off'}-{requests}"
    log_dir = work / f"data-{tag}"
    out = work / f"callgrind-{tag}.out"
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            "--trace-children=no", sys.executable, "-m", "cli", "broker",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={log_dir}",
            "--override", f"metrics.prometheus.listener={f'127.0.0.1:{mport}' if metrics else ''}"]
    with open(work / f"broker-{tag}.log", "wb") as log:
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_port(port, time.monotonic() + START_TIMEOUT_S, proc)
        bootstrap = f"127.0.0.1:{port}"
        create_topic(bootstrap, "t")
        record = batch([b"x" * 100])
        with SyncClient(bootstrap, timeout_ms=120_000) as client:
            for _ in range(WARMUP):
                produce(client, "t", 0, record, acks=1)
            if metrics:
                with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics",
                                            timeout=120) as resp:
                    resp.read()
            for _ in range(requests):
                result = produce(client, "t", 0, record, acks=1)
                if result.error_code != 0:
                    raise RuntimeError(f"produce failed: {result}")
        proc.send_signal(signal.SIGTERM)
        proc.wait(STOP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    match = re.search(rb"^summary: (\d+)", out.read_bytes(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no summary line in {out}")
    return int(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_instructions")
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--large", type=int, default=1200)
    parser.add_argument("--out", type=Path, default=None,
                        help="keep the callgrind files and broker logs here")
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="metrics-instructions-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    per_request: dict[bool, float] = {}
    for metrics in (False, True):
        small = run_once(work, metrics=metrics, requests=args.small)
        large = run_once(work, metrics=metrics, requests=args.large)
        per_request[metrics] = (large - small) / (args.large - args.small)
        print(f"metrics {'on' if metrics else 'off'}: {small:,} / {large:,} instructions "
              f"-> {per_request[metrics]:,.0f} per request", flush=True)
    off, on = per_request[False], per_request[True]
    print(f"on - off: {on - off:+,.0f} instructions per request ({(on - off) / off:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

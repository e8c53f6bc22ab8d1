"""Instructions per P5 request and per scrape, metrics off and on, by callgrind.

``python -m bench.metrics_p5_instructions [--producers 16] [--short 10] [--long 60]
[--rounds 2] [--scrapes 5] [--partitions 0] [--out-dir DIR]``

P5's load, not a sequential loop: ``--producers`` confluent-kafka producers (threads of this
process) with P5's settings (``bench.load.run_small``: acks=1, linger 0, one record of 100
bytes per request, one request in flight, wait for the ack before the next) against one
broker (``python -m cli broker``, the bench's settings) under ``valgrind --tool=callgrind``.
After a warm-up, rounds of ``--short`` then ``--long`` records per producer; the broker's
instruction counter (every thread, ``callgrind_control -e Ir``) is read around each batch,
and ``(long batch - short batch) / (producers x (long - short))`` is one request, the
queueing of 16 connections included (the broker under valgrind is saturated, as P5's is).

With metrics on, the requests the broker counted (``kafka_network_requestmetrics_requests
_total`` per request type, read by a scrape outside the measured batches) show the mix,
and then ``--scrapes`` scrapes of ``/metrics`` are counted alone: instructions per scrape
(the HTTP thread's rendering included). ``--partitions N`` adds a topic of N partitions
first, to see how a scrape grows with the partitions hosted.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Final

from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from bench.brokers import SHARED_SETTINGS
from bench.instructions import instructions
from bench.procs import free_port, spawn, stop, wait_for_port
from client.sync import SyncClient

TOPIC: Final = "p5"
START_TIMEOUT_S: Final = 600.0
STOP_TIMEOUT_S: Final = 300.0
WARMUP: Final = 5  # records per producer before the counting starts
RECORD_BYTES: Final = 100


def _producer(bootstrap: str) -> Producer:
    return Producer({
        "bootstrap.servers": bootstrap, "client.id": "bench-producer", "acks": 1,
        "enable.idempotence": False, "compression.type": "none", "linger.ms": 0,
        "batch.num.messages": 1, "max.in.flight.requests.per.connection": 1,
        "message.timeout.ms": 300_000, "request.timeout.ms": 300_000,
        "socket.timeout.ms": 300_000,
    })


def _send_all(producers: list[Producer], records: int) -> None:
    """Each producer sends ``records`` records, one request each, in parallel."""
    value = os.urandom(RECORD_BYTES)
    failures: list[str] = []

    def worker(producer: Producer) -> None:
        for _ in range(records):
            producer.produce(TOPIC, value)
            if producer.flush(300.0):
                failures.append("record not acknowledged in 300 s")
                return

    threads = [threading.Thread(target=worker, args=(p,)) for p in producers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=3600)
    if failures:
        raise RuntimeError(failures[0])


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=600) as resp:
        return str(resp.read().decode())


def _requests_by_type(text: str) -> dict[str, float]:
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "kafka_network_requestmetrics_requests":
            for s in family.samples:
                if s.name.endswith("_total"):
                    key = s.labels["request"]
                    counts[key] = counts.get(key, 0.0) + s.value
    return counts


def measure(*, metrics: bool, producers: int, short: int, long: int, rounds: int,
            scrapes: int, partitions: int, out_dir: Path) -> dict[str, object]:
    tag = "on" if metrics else "off"
    work = Path(tempfile.mkdtemp(prefix=f"p5-{tag}-", dir=out_dir))
    port = free_port()
    mport = free_port() if metrics else 0
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(work / "data"),
             **SHARED_SETTINGS,
             "metrics.prometheus.listener": f"127.0.0.1:{mport}" if metrics else ""}
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/callgrind.%p",
            "--trace-children=no", sys.executable, "-m", "cli", "broker",
            *(a for k, v in props.items() for a in ("--override", f"{k}={v}"))]
    proc = spawn(argv, log_path=work / "broker.log", env={**os.environ, "PYTHONHASHSEED": "0"})
    result: dict[str, object] = {"metrics": tag}
    try:
        wait_for_port(port, proc=proc, timeout_s=START_TIMEOUT_S)
        bootstrap = f"127.0.0.1:{port}"
        with SyncClient(bootstrap, timeout_ms=300_000) as admin:
            admin.create_topic(TOPIC, 1, 1, {})
            if partitions:
                admin.create_topic("many", partitions, 1, {})
        clients = [_producer(bootstrap) for _ in range(producers)]
        _send_all(clients, WARMUP)
        if metrics:
            _scrape(mport)  # the scrape-time code imported and warm in both halves
        per_request: list[float] = []
        mix_before = _requests_by_type(_scrape(mport)) if metrics else {}
        for _ in range(rounds):
            counts = [instructions(proc.pid)]
            started = time.monotonic()
            for n in (short, long):
                _send_all(clients, n)
                counts.append(instructions(proc.pid))
            each = ((counts[2] - counts[1]) - (counts[1] - counts[0])) / (
                producers * (long - short))
            per_request.append(each)
            print(f"{tag}: {each:,.0f} instructions per request "
                  f"({producers * (short + long) / (time.monotonic() - started):.0f} req/s "
                  "under valgrind)", flush=True)
        result["per_request"] = per_request
        if metrics:
            mix_after = _requests_by_type(_scrape(mport))
            result["mix"] = {k: v - mix_before.get(k, 0.0) for k, v in mix_after.items()
                             if v - mix_before.get(k, 0.0)}
            before = instructions(proc.pid)
            size = 0
            for _ in range(scrapes):
                size = len(_scrape(mport))
            result["per_scrape"] = (instructions(proc.pid) - before) / scrapes
            result["scrape_bytes"] = size
        for c in clients:
            c.flush(10)
        del clients
    finally:
        stop(proc, grace_s=STOP_TIMEOUT_S, sig=signal.SIGTERM)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--producers", type=int, default=16)
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scrapes", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=0)
    parser.add_argument("--sides", default="off,on")
    parser.add_argument("--out-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "metrics-p5-instructions")
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    medians: dict[str, float] = {}
    for side in args.sides.split(","):
        res = measure(metrics=side == "on", producers=args.producers, short=args.short,
                      long=args.long, rounds=args.rounds, scrapes=args.scrapes,
                      partitions=args.partitions, out_dir=args.out_dir)
        each = res["per_request"]
        assert isinstance(each, list)
        medians[side] = statistics.median(each)
        print(f"{side}: median {medians[side]:,.0f} [{min(each):,.0f}-{max(each):,.0f}] "
              f"instructions per P5 request", flush=True)
        if "mix" in res:
            print(f"{side}: requests counted in the measured batches: {res['mix']}")
            print(f"{side}: {res['per_scrape']:,.0f} instructions per scrape "
                  f"({res['scrape_bytes']:,} bytes of exposition)", flush=True)
    if "off" in medians and "on" in medians:
        off, on = medians["off"], medians["on"]
        print(f"on - off: {on - off:+,.0f} instructions per P5 request ({(on - off) / off:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Log cleaner benchmark: minikafka's cleaner and Apache Kafka's, same workload, same client.

``python -m bench.cleaner_bench [--size-mb 1024] [--busy-p5-size-mb 2048] [--keys 100000]
[--brokers minikafka,kafka] [--runs 1]``

Per broker (each alone on the machine, one after the other; ``--runs`` repeats the pair):

1. Three topics, ``dirty-a`` and ``dirty-b`` (``size`` MiB each) and ``dirty-c``
   (``busy-p5-size`` MiB: its cleaning must outlast P5's 20 s), 1 partition,
   ``cleanup.policy=delete``, ``retention.ms=-1``, ``segment.bytes`` 100 MiB, are filled
   with keyed records (``keys`` distinct 12-byte keys chosen at random, 100-byte values;
   linger 5 ms, acks=1, librdkafka), then the active segment is rolled (``segment.ms``
   lowered, one more record). Nothing is cleaned yet: the policy is delete.
2. Idle: P1 (1,000,000 100-byte records, linger 5 ms, acks=1, 1 partition) and P5 (16
   producers, one record per request, 20 s) on other topics (``bench.load``).
3. Cleaner alone: ``dirty-a`` is switched to ``cleanup.policy=compact``
   (IncrementalAlterConfigs); the time until its ``cleaner-offset-checkpoint`` entry reaches
   the end gives the cleaning wall time, and the broker's own log line(s) (both print "X MB
   of log processed in Y seconds") the cleaner's MB/s. The CPU time the broker's process
   and its children (minikafka's cleaner workers) used meanwhile is the cleaning's cost,
   whatever the machine's load (``cleaner CPU s``).
4. Cleaner running: ``dirty-b`` is switched to compact and P1 runs; then ``dirty-c`` and
   P5. The report gives, per load, for how many of its seconds the cleaning ran
   (``cleaning s during``, from polling the checkpoint every 0.1 s).

Both brokers get ``log.cleaner.backoff.ms=1000`` (Kafka's 15 s default would only add
waiting) and their default dedupe buffer (128 MiB), one cleaner thread. The results go to
stdout as JSON lines and a short table; ``uptime`` is recorded before and after each run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from bench.brokers import BrokerUnderTest
from bench.kafka_broker import ApacheKafka
from bench.minikafka_broker import MiniKafka
from bench.procs import BenchError

MIB = 1 << 20
SEGMENT_BYTES = 100 * MIB
SETTINGS = {"log.cleaner.backoff.ms": "1000"}
_PROCESSED = re.compile(
    r"cleaned log (\S+) \(dirty section = \[(\d+), (\d+)\]\)[^\n]*?\s*"
    r"([\d,.]+) MB of log processed in ([\d,.]+) seconds")


def _admin(bootstrap: str) -> Any:
    return AdminClient({"bootstrap.servers": bootstrap})


def create(bootstrap: str, topic: str, **configs: str) -> None:
    admin = _admin(bootstrap)  # kept alive until the answer
    fut = admin.create_topics([NewTopic(topic, 1, 1, config=configs)])
    fut[topic].result(timeout=60)


def alter(bootstrap: str, topic: str, **configs: str) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    admin = _admin(bootstrap)
    admin.incremental_alter_configs([resource])[resource].result(timeout=60)


def fill(bootstrap: str, topic: str, size_bytes: int, keys: int) -> int:
    """Keyed 100-byte records until ``size_bytes`` of values are written; returns records."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1,
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20,
                         "enable.idempotence": False, "log_level": 3})
    rnd = random.Random(topic)
    value = os.urandom(100)
    names = [b"key-%08d" % i for i in range(keys)]
    n = size_bytes // 130  # ~130 bytes a record on disk (key, value, record framing)
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value, names[rnd.randrange(keys)], partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        if i & 0x3FFF == 0:
            producer.poll(0)
    if producer.flush(300):
        raise BenchError(f"{topic}: records unacknowledged")
    return n


def roll(bootstrap: str, topic: str) -> int:
    """Close the active segment: lower segment.ms, wait, write one record; its offset."""
    alter(bootstrap, topic, **{"segment.ms": "1000"})
    time.sleep(1.5)
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    got: list[int] = []
    producer.produce(topic, b"x", b"__roll__", partition=0,
                     on_delivery=lambda err, msg: got.append(-1 if err else msg.offset()))
    producer.flush(60)
    if not got or got[0] < 0:
        raise BenchError(f"{topic}: roll record failed")
    return got[0]


def checkpoint(log_dir: Path, topic: str) -> int:
    path = log_dir / "cleaner-offset-checkpoint"
    try:
        for line in path.read_text().splitlines()[2:]:
            name, part, offset = line.split()
            if name == topic and part == "0":
                return int(offset)
    except (OSError, ValueError):
        pass
    return -1


def log_bytes(log_dir: Path, topic: str) -> int:
    return sum(p.stat().st_size for p in (log_dir / f"{topic}-0").glob("*.log"))


def load(bootstrap: str, spec: dict[str, Any]) -> dict[str, Any]:
    spec = {"bootstrap": bootstrap, **spec}
    out = subprocess.run([sys.executable, "-m", "bench.load", json.dumps(spec)],
                         capture_output=True, text=True, timeout=900, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise BenchError(f"load failed: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    if not result.get("ok"):
        raise BenchError(f"load failed: {result}")
    return result


def p1(bootstrap: str, topic: str) -> dict[str, float]:
    create(bootstrap, topic)
    res = load(bootstrap, {"workload": "produce", "topic": topic, "records": 1_000_000,
                           "record_bytes": 100, "linger_ms": 5})
    return {"records/s": res["records"] / res["elapsed_s"],
            "MiB/s": res["bytes"] / MIB / res["elapsed_s"]}


def p5(bootstrap: str, topic: str) -> dict[str, float]:
    create(bootstrap, topic)
    res = load(bootstrap, {"workload": "small", "topic": topic, "producers": 16,
                           "duration_s": 20, "record_bytes": 100})
    return {"requests/s": res["requests"] / res["elapsed_s"],
            "p99 ms": res["latency_ms"]["p99"]}


def cleaner_lines(text: str, topic: str) -> tuple[float, float]:
    """(MB processed, seconds) summed over the broker's cleaning log lines for ``topic``."""
    mb = secs = 0.0
    for m in _PROCESSED.finditer(text):
        if m.group(1) == f"{topic}-0":
            mb += float(m.group(4).replace(",", ""))
            secs += float(m.group(5).replace(",", ""))
    return mb, secs


def _stat_fields(pid: int) -> list[str]:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()  # fields from the state on


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live children (clock ticks)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _stat_fields(int(entry))
        except (OSError, ValueError):
            continue
        if int(entry) == pid or fields[1] == str(pid):
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


class CleaningWatch:
    """When the cleaning of ``topic`` up to ``end`` finished (checkpoint polled every 0.1 s)."""

    def __init__(self, log_dir: Path, topic: str, end: int) -> None:
        self.started = time.monotonic()
        self.finished: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(log_dir, topic, end),
                                        daemon=True)
        self._thread.start()

    def _poll(self, log_dir: Path, topic: str, end: int) -> None:
        while not self._stop.wait(0.1):
            if checkpoint(log_dir, topic) >= end:
                self.finished = time.monotonic()
                return

    def overlap_s(self, start: float, end: float) -> float:
        """Seconds of [start, end] during which the cleaning ran."""
        stop = end if self.finished is None else min(end, self.finished)
        return max(0.0, stop - max(start, self.started))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def busy_load(broker: BrokerUnderTest, dirty: str, end: int, load: Any,
              topic: str) -> tuple[dict[str, float], float, float]:
    """Switch ``dirty`` to compact, run ``load`` at once; (result, load s, cleaning s in it)."""
    watch = CleaningWatch(broker.log_dir, dirty, end)
    alter(broker.bootstrap, dirty, **{"cleanup.policy": "compact"})
    time.sleep(0.5)
    t0 = time.monotonic()
    result = load(broker.bootstrap, topic)
    t1 = time.monotonic()
    watch.close()
    return result, t1 - t0, watch.overlap_s(t0, t1)


def run_one(broker: BrokerUnderTest, log_text: Any, size_bytes: int, busy_p5_bytes: int,
            keys: int) -> dict[str, Any]:
    bs = broker.bootstrap
    topic_cfg = {"cleanup.policy": "delete", "retention.ms": "-1",
                 "segment.bytes": str(SEGMENT_BYTES)}
    result: dict[str, Any] = {"broker": broker.name, "uptime before": uptime()}
    for topic, size in (("dirty-a", size_bytes), ("dirty-b", size_bytes),
                        ("dirty-c", busy_p5_bytes)):
        create(bs, topic, **topic_cfg)
        t0 = time.monotonic()
        result[f"{topic} records"] = fill(bs, topic, size, keys)
        result[f"{topic} fill s"] = time.monotonic() - t0
        result[f"{topic} end"] = roll(bs, topic)
        result[f"{topic} bytes before"] = log_bytes(broker.log_dir, topic)
    result["idle P1"] = p1(bs, "p1-idle")
    result["idle P5"] = p5(bs, "p5-idle")
    # the cleaner alone
    result["uptime at cleaning"] = uptime()
    cpu0 = tree_cpu_s(broker.pid)
    t0 = time.monotonic()
    alter(bs, "dirty-a", **{"cleanup.policy": "compact"})
    while checkpoint(broker.log_dir, "dirty-a") < result["dirty-a end"]:
        if time.monotonic() - t0 > 3600:
            raise BenchError("dirty-a not cleaned within an hour")
        time.sleep(0.1)
    wall = time.monotonic() - t0
    result["cleaner CPU s"] = tree_cpu_s(broker.pid) - cpu0
    mb, secs = cleaner_lines(log_text(), "dirty-a")
    result["clean wall s"] = wall
    result["clean MB (log)"] = mb
    result["clean s (log)"] = secs
    result["cleaner MB/s (log)"] = mb / secs if secs else float("nan")
    result["cleaner MiB/s (wall)"] = result["dirty-a bytes before"] / MIB / wall
    result["cleaner MiB per CPU s"] = result["dirty-a bytes before"] / MIB / result["cleaner CPU s"]
    result["dirty-a bytes after"] = log_bytes(broker.log_dir, "dirty-a")
    # the cleaner running under P1, then under P5 (each its own dirty log)
    for key, dirty, load in (("P1", "dirty-b", p1), ("P5", "dirty-c", p5)):
        res, load_s, overlap = busy_load(broker, dirty, result[f"{dirty} end"], load,
                                         f"{key.lower()}-busy")
        result[f"busy {key}"] = res
        result[f"{key} s"] = load_s
        result[f"cleaning s during {key}"] = overlap
    result["uptime after"] = uptime()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--busy-p5-size-mb", type=int, default=2048)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--brokers", default="minikafka,kafka")
    parser.add_argument("--work-dir", default="/tmp/cleaner-bench")
    args = parser.parse_args(argv)
    results = []
    for run in range(args.runs):
        for name in args.brokers.split(","):
            res = bench_broker(name, Path(args.work_dir) / name, args)
            res["run"] = run + 1
            print(json.dumps(res), flush=True)
            results.append(res)
    for res in results:
        print(f"run {res['run']} {res['broker']}: cleaner {res['cleaner MB/s (log)']:.1f} MB/s "
              f"by its log ({res['clean MB (log)']:.0f} MB in {res['clean s (log)']:.1f} s; "
              f"wall {res['clean wall s']:.1f} s, {res['cleaner MiB/s (wall)']:.1f} MiB/s; "
              f"{res['cleaner CPU s']:.1f} CPU s, {res['cleaner MiB per CPU s']:.1f} MiB per "
              f"CPU s); {res['dirty-a bytes before'] / MIB:.0f} -> "
              f"{res['dirty-a bytes after'] / MIB:.1f} MiB")
        for key in ("P1", "P5"):
            idle, busy = res[f"idle {key}"], res[f"busy {key}"]
            cells = ", ".join(f"{m} {idle[m]:,.1f} idle / {busy[m]:,.1f} cleaning" for m in idle)
            print(f"  {key}: {cells} (cleaning ran {res[f'cleaning s during {key}']:.1f} s of "
                  f"{res[f'{key} s']:.1f} s)")
    return 0


def bench_broker(name: str, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    if work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    broker: BrokerUnderTest
    if name == "kafka":
        broker = ApacheKafka(work, settings=SETTINGS)
        logs = [work / "server.log"]
    else:
        broker = MiniKafka(work, settings=SETTINGS)
        logs = [work / "broker.log"]

    def text(paths: list[Path] = logs) -> str:
        return "".join(p.read_text(errors="replace") for p in paths if p.exists())

    broker.start()
    try:
        return run_one(broker, text, args.size_mb * MIB, args.busy_p5_size_mb * MIB, args.keys)
    finally:
        broker.stop()
        subprocess.run(["rm", "-rf", str(work)], check=True)


if __name__ == "__main__":
    raise SystemExit(main())

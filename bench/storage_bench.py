"""Storage engine benchmarks: ``python -m bench.storage_bench [--log-mib N] [--dir D]``.

Measures, on real files (page cache; no fsync unless stated):

1. append throughput with 1 MiB batches (target >= 1 GB/s);
2. appends per second with 1 KiB batches (target >= 50,000/s);
3. ``Log.read`` lookups at random offsets in a ``--log-mib`` log (target >= 100,000/s);
4. recovery of that log's active segment after an unclean stop (seconds);
5. start-up of 1,000 partitions after a clean shutdown (target < 0.5 s).

Each figure is the best of ``--repeat`` runs. The machine is shared: next to wall-clock
rates the bench prints CPU-time rates (``time.process_time``: this process's own CPU
seconds, so waiting for a core another process holds is not counted) and the load average.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from protocol.records import NewRecord, build_batch
from storage.config import LogConfig
from storage.loader import load_log
from storage.log import Log
from storage.manager import LogManager
from storage.naming import TopicPartition

MIB = 1024 * 1024


def _batch_of_size(total_bytes: int) -> bytearray:
    """One uncompressed batch of exactly ``total_bytes`` bytes (one record)."""
    value_len = total_bytes - 61 - 12
    for _ in range(8):  # varint widths settle in a couple of turns
        data = build_batch([NewRecord(None, b"x" * value_len, timestamp_ms=1_700_000_000_000)])
        value_len += total_bytes - len(data)
        if len(data) == total_bytes:
            return bytearray(data)
    raise RuntimeError(f"cannot build a {total_bytes}-byte batch")


def _fresh_log(root: Path, name: str, **props: str) -> Log:
    cfg = LogConfig.from_properties({"segment.bytes": str(2**31 - 1), "retention.ms": "-1",
                                     "max.message.bytes": str(2 * MIB), **props})
    return load_log(root / f"{name}-0", TopicPartition(name, 0), cfg, clean_shutdown=True)


class Timing:
    """Wall-clock and CPU seconds of one run."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def _best(repeat: int, run: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    """Best wall and best CPU seconds over ``repeat`` runs."""
    results = [run() for _ in range(repeat)]
    return min(r[0] for r in results), min(r[1] for r in results)


def bench_append(
    root: Path, batch_bytes: int, total_bytes: int, repeat: int
) -> tuple[float, float, int]:
    """(wall s, CPU s, appends) for ``total_bytes`` of appends, best of ``repeat``."""
    batch = _batch_of_size(batch_bytes)
    count = total_bytes // batch_bytes

    def run() -> tuple[float, float]:
        lg = _fresh_log(root, "append")
        t = Timing()
        for _ in range(count):
            lg.append(batch, 0)
        elapsed = t.stop()
        lg.abandon()
        shutil.rmtree(root / "append-0")
        return elapsed

    wall, cpu = _best(repeat, run)
    return wall, cpu, count


def build_big_log(root: Path, total_bytes: int) -> Log:
    """A single-segment log of ``total_bytes`` made of 16 KiB batches."""
    lg = _fresh_log(root, "big")
    batch = _batch_of_size(16 * 1024)
    for _ in range(total_bytes // len(batch)):
        lg.append(batch, 0)
    return lg


def bench_reads(lg: Log, lookups: int, repeat: int) -> tuple[float, float]:
    """Random-offset reads (1 MiB max, upper bound = LEO - 1000): (wall/s, CPU/s)."""
    leo = lg.log_end_offset
    rng = random.Random(1)
    offsets = [rng.randrange(0, leo) for _ in range(lookups)]
    hw = leo - 1000

    def run() -> tuple[float, float]:
        t = Timing()
        for off in offsets:
            lg.read(off, MIB, hw if off < hw else None)
        return t.stop()

    wall, cpu = _best(repeat, run)
    return lookups / wall, lookups / cpu


def bench_recovery(root: Path, lg: Log) -> tuple[tuple[float, float], int]:
    """(wall s, CPU s) to load the log after an unclean stop (whole segment re-scanned)."""
    leo = lg.log_end_offset
    lg.abandon()
    t = Timing()
    recovered = load_log(root / "big-0", TopicPartition("big", 0), lg.config,
                         recovery_point=0, clean_shutdown=False)
    elapsed = t.stop()
    assert recovered.log_end_offset == leo, (recovered.log_end_offset, leo)
    size = recovered.size_bytes
    recovered.abandon()
    return elapsed, size


def bench_clean_start(root: Path, partitions: int, repeat: int) -> tuple[float, float]:
    """Seconds for LogManager.startup() over ``partitions`` logs after a clean shutdown."""
    d = root / "many"
    m = LogManager(d)
    m.startup()
    batch = _batch_of_size(1024)
    for p in range(partitions):
        lg = m.get_or_create_log(TopicPartition("many", p))
        for _ in range(10):
            lg.append(batch, 0)
    m.shutdown()

    def run() -> tuple[float, float]:
        t = Timing()
        m2 = LogManager(d)
        m2.startup()
        elapsed = t.stop()
        assert len(m2.logs()) == partitions and m2.had_clean_shutdown
        m2.shutdown()
        return elapsed

    return _best(repeat, run)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log-mib", type=int, default=1024, help="size of the read/recovery log")
    p.add_argument("--append-mib", type=int, default=1024, help="bytes appended in 1 MiB batches")
    p.add_argument("--small-appends", type=int, default=200_000, help="1 KiB appends")
    p.add_argument("--lookups", type=int, default=200_000)
    p.add_argument("--partitions", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", type=Path, default=None, help="scratch directory (default: tmp)")
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir))
    try:
        print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        wall, cpu, _ = bench_append(root, MIB, args.append_mib * MIB, args.repeat)
        total = args.append_mib * MIB
        print(f"append 1 MiB batches: {total / wall / 1e9:.2f} GB/s wall, "
              f"{total / cpu / 1e9:.2f} GB/s CPU-time ({args.append_mib} MiB)  "
              f"[target >= 1 GB/s]")
        wall, cpu, count = bench_append(root, 1024, args.small_appends * 1024, args.repeat)
        print(f"append 1 KiB batches: {count / wall:,.0f} appends/s wall, "
              f"{count / cpu:,.0f} appends/s CPU-time  [target >= 50,000/s]")
        lg = build_big_log(root, args.log_mib * MIB)
        wall_rate, cpu_rate = bench_reads(lg, args.lookups, args.repeat)
        print(f"read() at random offsets in a {args.log_mib} MiB log: {wall_rate:,.0f}/s wall, "
              f"{cpu_rate:,.0f}/s CPU-time  [target >= 100,000/s]")
        (wall, cpu), size = bench_recovery(root, lg)
        print(f"recovery after unclean stop, {size / MIB:.0f} MiB active segment: "
              f"{wall:.2f} s wall, {cpu:.2f} s CPU")
        wall, cpu = bench_clean_start(root, args.partitions, args.repeat)
        print(f"start-up after clean shutdown, {args.partitions} partitions: {wall:.3f} s wall, "
              f"{cpu:.3f} s CPU  [target < 0.5 s]")
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

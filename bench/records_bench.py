"""Micro-benchmarks of protocol.records: ``python -m bench.records_bench``.

Prints the median (and min) wall time of each operation over several repeats:

- CRC32C verify of one 1 MiB batch (target: well under 0.5 ms);
- iter_batches and scan_batches (with CRC) over 1 MiB of ~1 KiB batches;
- build_batch of 1000 records (100-byte values), uncompressed and with each codec;
- decoding those 1000 records with RecordBatch.records().
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

from protocol.records import (
    CompressionType,
    NewRecord,
    RecordBatch,
    build_batch,
    iter_batches,
    scan_batches,
)

MIB = 1 << 20


def measure(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median and minimum of ``repeats`` timed calls, in milliseconds."""
    fn()  # warm up
    times_ms = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        fn()
        times_ms.append((time.perf_counter_ns() - start) / 1e6)
    return statistics.median(times_ms), min(times_ms)


def report(name: str, fn: Callable[[], object], repeats: int) -> None:
    median_ms, min_ms = measure(fn, repeats)
    print(f"{name:<52} median {median_ms:9.3f} ms   min {min_ms:9.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    repeats: int = args.repeats

    # One 1 MiB batch: 1 record with a random value (incompressible, so the size holds).
    big = RecordBatch(build_batch([NewRecord(None, os.urandom(MIB - 100), (), 0)]))
    print(f"one batch of {big.size_bytes} bytes")
    report("verify_crc, 1 MiB batch", big.verify_crc, repeats * 4)

    # 1 MiB of ~1 KiB batches (each 8 records of ~100 bytes).
    small = build_batch([NewRecord(b"key", os.urandom(110), (), 0) for _ in range(8)])
    buf = small * (MIB // len(small))
    count = len(buf) // len(small)
    print(f"{count} batches of {len(small)} bytes ({len(buf)} bytes)")
    report(
        "iter_batches, 1 MiB of 1 KiB batches", lambda: sum(1 for _ in iter_batches(buf)), repeats
    )
    report("scan_batches (CRC), 1 MiB of 1 KiB batches", lambda: scan_batches(buf), repeats)
    report(
        "iter_batches + last_offset, 1 MiB of 1 KiB batches",
        lambda: [b.last_offset for b in iter_batches(buf)],
        repeats,
    )

    records = [
        NewRecord(b"key-%d" % i, os.urandom(50) * 2, (), 1_700_000_000_000 + i) for i in range(1000)
    ]
    for codec in CompressionType:
        report(
            f"build_batch, 1000 records, {codec.name}",
            partial(build_batch, records, compression=codec),
            repeats,
        )
    built = RecordBatch(build_batch(records))
    report("records() decode, 1000 records, NONE", lambda: list(built.records()), repeats)
    zbuilt = RecordBatch(build_batch(records, compression=CompressionType.ZSTD))
    report("records() decode, 1000 records, ZSTD", lambda: list(zbuilt.records()), repeats)


if __name__ == "__main__":
    main()

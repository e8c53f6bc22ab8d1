"""kcat as a P2L consumer: librdkafka's own command-line client, a real C consumer.

The Python consumer (``bench.load``'s ``consume``, librdkafka through confluent-kafka) is
bound by its own process with 64 KiB records: every value becomes a Python ``bytes``
(``bench/results/per-request-cpu/2026-11-27-p2l.md``). kcat is the same librdkafka without
Python: what a consumer written in C gets from a broker, beside the bare Fetch loop
(``bench.fetch_drain``, the broker's own pace).

``kcat -C -b <bootstrap> -t <topic> -p 0 -o beginning -c <records> -q -f '%S\\n'``, its
librdkafka's defaults (the Debian package: kcat 1.7.1 on librdkafka 2.0.2, which has no
``fetch.queue.backoff.ms``, the Python consumer's one setting): partition 0 from its first
offset, one line per record with its value's size, which this process sums (``bytes``: the
values, as ``consume`` counts them). Timed from the start of the process to its exit (as ``consume``
is timed from the consumer's creation), its CPU time from ``getrusage(RUSAGE_CHILDREN)``.

Run as the ``kcat`` workload of ``bench.load`` (its own process); result as ``consume``.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import time
from typing import Any, Final

KCAT: Final[str] = "kcat"


class KcatError(Exception):
    """kcat is missing, failed, timed out or printed fewer records than asked."""


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_kcat(spec: dict[str, Any]) -> dict[str, Any]:
    records = int(spec["records"])
    timeout_s = float(spec.get("timeout_s", 120))
    if shutil.which(KCAT) is None:
        raise KcatError("kcat is not installed (scripts/setup installs it)")
    argv = [KCAT, "-C", "-b", spec["bootstrap"], "-t", spec["topic"], "-p", "0",
            "-o", "beginning", "-c", str(records), "-q", "-f", "%S\n"]
    cpu0, t0 = _children_cpu_s(), time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise KcatError(f"kcat did not finish within {timeout_s:.0f} s") from exc
    elapsed_s, cpu_s = time.monotonic() - t0, _children_cpu_s() - cpu0
    if done.returncode != 0:
        raise KcatError(f"kcat exited with {done.returncode}: {done.stderr.decode()[-500:]}")
    sizes = done.stdout.split()
    if len(sizes) != records:
        raise KcatError(f"kcat printed {len(sizes)} of {records} records")
    return {"records": len(sizes), "bytes": sum(int(s) for s in sizes),
            "elapsed_s": elapsed_s, "cpu_s": cpu_s}

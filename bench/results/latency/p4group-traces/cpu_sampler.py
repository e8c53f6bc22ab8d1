"""Ad hoc (p4group, 2026-11-27): every 0.5 s, the CPU (utime+stime from /proc/<pid>/stat) of the
bench's brokers started from the p4group tree (Kafka's JVM, minikafka's broker), as % of one
core over the last half second: ``python cpu_sampler.py OUT SECONDS`` beside a bench run.
Lines: time, pid, which, %."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")


def which(pid: str) -> str | None:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    cmd = raw.replace(b"\0", b" ").decode(errors="replace")
    if "p4group" not in cmd:
        return None
    if "kafka.Kafka" in cmd:
        return "kafka"
    if "-m cli broker" in cmd:
        return "minikafka"
    return None


def main(out_path: str, seconds: float) -> None:
    prev: dict[str, tuple[float, int]] = {}
    end = time.time() + seconds
    with open(out_path, "w") as out:
        while time.time() < end:
            now = time.time()
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    kind = which(pid)
                    if kind is None:
                        continue
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    ticks = int(fields[11]) + int(fields[12])
                except (OSError, IndexError):
                    continue
                if pid in prev:
                    t0, k0 = prev[pid]
                    pct = 100.0 * (ticks - k0) / HZ / (now - t0)
                    stamp = time.strftime("%H:%M:%S", time.localtime(now))
                    out.write(f"{stamp} {pid} {kind} {pct:.1f}\n")
                prev[pid] = (now, ticks)
            out.flush()
            time.sleep(0.5)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))

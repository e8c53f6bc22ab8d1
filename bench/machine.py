"""The machine and software versions for the report header (from /proc, uname, the clients)."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import confluent_kafka


def _first(path: str, prefix: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def cpu_model() -> str:
    return _first("/proc/cpuinfo", "model name")


def memory_gib() -> float:
    kib = _first("/proc/meminfo", "MemTotal").split()[0]
    return int(kib) / (1 << 20) if kib.isdigit() else float("nan")


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _version_str(version: object) -> str:
    """confluent-kafka's version() is a str in 2.16 and a (str, int) tuple in older releases."""
    return str(version[0]) if isinstance(version, tuple) else str(version)


def describe() -> dict[str, str]:
    """Key facts: cores, CPU model, memory, kernel, Python and client library versions."""
    return {
        "cores": str(os.cpu_count()),
        "cpu": cpu_model(),
        "memory": f"{memory_gib():.1f} GiB",
        "kernel": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "confluent-kafka": _version_str(confluent_kafka.version()),
        "librdkafka": confluent_kafka.libversion()[0],
    }

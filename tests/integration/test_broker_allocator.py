"""The broker's allocator settings (broker/allocator.py), against a real broker process.

Produces of one 450 KB batch each (P1's request size), from the project's client on a
real socket, must not fault the pages of the request's buffers in again per request: the
broker's minor page faults over 100 such produces (``/proc/<pid>/stat``) stay below 32 per
MB produced. With glibc's default thresholds the same requests cost 400-660 faults per MB
(measured on this machine). The start-up log says what was set, and a malloc setting in
the broker's environment is left in force.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from tests.integration.data_path_client import create_topic, produce

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc"),
]

RECORDS_PER_BATCH = 4096  # 100-byte records: a 450 KB batch
REQUESTS = 100
FAULTS_PER_MB_MAX = 32


def _minor_faults(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7])  # minflt, field 10 of proc(5)


def _glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError):
        return False


@pytest.mark.skipif(not _glibc(), reason="the thresholds are glibc's")
def test_large_produces_do_not_fault_their_buffers_in_again(broker: Any) -> None:
    assert ("Allocator: glibc malloc, mmap threshold 4 MiB, trim threshold 32 MiB"
            in broker.stderr_text())
    create_topic(broker.bootstrap, "big")
    batch = build_batch([NewRecord(None, os.urandom(100), (), None)] * RECORDS_PER_BATCH)
    with SyncClient(broker.bootstrap, timeout_ms=30_000) as client:
        for _ in range(10):  # warm-up: the heap grows to what the requests need
            assert produce(client, "big", 0, batch, acks=1).error_code == ErrorCode.NO_ERROR
        before = _minor_faults(broker.pid)
        for _ in range(REQUESTS):
            assert produce(client, "big", 0, batch, acks=1).error_code == ErrorCode.NO_ERROR
        faults = _minor_faults(broker.pid) - before
    mb = REQUESTS * len(batch) / 1e6
    assert faults / mb < FAULTS_PER_MB_MAX, f"{faults} minor page faults for {mb:.0f} MB"


def test_malloc_settings_from_the_environment_are_left_in_force(broker_factory: Any) -> None:
    broker = broker_factory(env={"MALLOC_TRIM_THRESHOLD_": str(1 << 20)})
    text = broker.stderr_text()
    if _glibc():
        assert "Allocator: glibc malloc as the environment sets it (MALLOC_TRIM_THRESHOLD_)" in text
    else:
        assert "Allocator: left as it is (not glibc)" in text

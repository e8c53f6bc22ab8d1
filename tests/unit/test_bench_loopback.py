"""``bench.loopback``: the loopback ceiling is measured between two processes of their own,
every byte of the files reaching the receiver, once per iteration, call size and receive
low-water mark (a receiver woken only once that much is there still gets the tail of the
stream at its end)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.loopback import measure_sendfile
from bench.procs import BenchError


@pytest.mark.timeout(60)
def test_every_call_size_sends_every_byte_between_two_processes(tmp_path: Path) -> None:
    files = [tmp_path / "00000000000000000000.log", tmp_path / "00000000000000001000.log"]
    files[0].write_bytes(os.urandom(3 << 20))
    files[1].write_bytes(os.urandom(100_001))  # not a multiple of any call size
    result = measure_sendfile(files, tmp_path, call_sizes=(64 << 10, 1 << 20),
                              low_water_marks=(0, 256 << 10), iterations=3)

    assert result.size_bytes == (3 << 20) + 100_001
    assert [(r.call_bytes, r.low_water_bytes) for r in result.by_call_size] == [
        (64 << 10, 0), (64 << 10, 256 << 10), (1 << 20, 0), (1 << 20, 256 << 10)]
    for r in result.by_call_size:
        # The sender checks the receiver's count of every iteration (else BenchError).
        assert len(r.elapsed_s) == len(r.sender_cpu_s) == len(r.receiver_cpu_s) == 3
        assert all(t > 0 for t in r.elapsed_s)
        assert r.mib_per_s > 0
        # Each side reports the CPU of its own process: both spent some.
        assert r.sender_cpu_pct > 0 and r.receiver_cpu_pct > 0
    assert result.mib_per_s == max(r.mib_per_s for r in result.by_call_size)
    # The children are gone once the measurement is.
    assert "bench.loopback" not in _own_children_cmdlines()


def test_nothing_to_send_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(BenchError):
        measure_sendfile([], tmp_path)


def _own_children_cmdlines() -> str:
    me = str(os.getpid())
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            ppid = stat.rsplit(")", 1)[1].split()[1]
            if ppid == me:
                found.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
        except OSError:
            continue
    return "\n".join(found)

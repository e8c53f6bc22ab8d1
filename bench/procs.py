"""Child processes of the bench: each in its own process group, all stopped at exit.

Every broker, load generator and profiler the bench starts goes through ``spawn``, which puts
it in a new session (its own process group) and registers it. ``stop_all`` (run from
``atexit`` and from the runner's ``finally``) sends SIGTERM to every live group, waits, then
SIGKILLs what is left; and each child asks the kernel (``PR_SET_PDEATHSIG``) for SIGKILL
should the bench itself be killed, so no broker outlives the bench whatever happens.

CPU accounting reads ``/proc/<pid>/stat`` (fields 14 and 15: utime and stime in clock ticks)
for a process and all its descendants, so a broker that forks workers is counted whole;
memory reads ``VmRSS`` of ``/proc/<pid>/status`` for the same tree.

``paused`` stops process groups (SIGSTOP) for a block and resumes them (SIGCONT) after it,
whatever happens in it: the runner pauses every broker but the one being measured, so an
idle broker's background work (a JVM's compiler and collector threads) takes no CPU from it.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final, TextIO

CLOCK_TICKS_PER_S: Final[int] = os.sysconf("SC_CLK_TCK")
STOP_GRACE_S: Final[float] = 30.0

PR_SET_PDEATHSIG: Final[int] = 1
_LIVE: dict[int, subprocess.Popen[bytes]] = {}
_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    """preexec_fn: the kernel SIGKILLs the child if the bench dies, even by SIGKILL."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class BenchError(Exception):
    """A bench step failed (a broker did not start, a workload reported an error)."""


def spawn(
    argv: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout_pipe: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new process group; stderr (and stdout unless piped) go to log_path."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log: TextIO = log_path.open("a")
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout_pipe else log,
            stderr=log,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only prctl runs between fork and exec
        )
    finally:
        log.close()
    _LIVE[proc.pid] = proc
    return proc


def spawn_ready(argv: Sequence[str], *, log_path: Path, what: str) -> subprocess.Popen[bytes]:
    """``spawn`` with stdout piped, once the process has printed its ``ready`` line (its
    first); raises ``RuntimeError`` naming ``what`` and its log if the first line is not that."""
    proc = spawn(argv, log_path=log_path, stdout_pipe=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"ready":
        raise RuntimeError(f"{what} did not start: see {log_path}")
    return proc


def stop(
    proc: subprocess.Popen[bytes], *, grace_s: float = STOP_GRACE_S, sig: int = signal.SIGTERM
) -> float:
    """Signal the process group, wait up to grace_s, then SIGKILL it. Returns seconds taken."""
    started = time.monotonic()
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    # Leftovers of the group (a child that ignored SIGTERM) are killed too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.stdout is not None:
        proc.stdout.close()
    _LIVE.pop(proc.pid, None)
    return time.monotonic() - started


def stop_all() -> None:
    """Stop every process group the bench started and has not stopped yet."""
    for proc in list(_LIVE.values()):
        stop(proc, grace_s=10.0)


atexit.register(stop_all)


@contextlib.contextmanager
def paused(pids: Sequence[int]) -> Iterator[None]:
    """Each process group in ``pids`` (the bench's children lead their own) stopped with
    SIGSTOP for the block and continued with SIGCONT after it, also when it raises."""
    stopped: list[int] = []
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGSTOP)
                stopped.append(pid)
        yield
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGCONT)


def free_port() -> int:
    """An ephemeral port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, *, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Wait until something accepts on 127.0.0.1:port; fail if proc exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(
                f"process {proc.args!r} exited with {proc.returncode} before listening"
            )
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise BenchError(f"nothing listens on 127.0.0.1:{port} after {timeout_s:.0f} s")


def _children(pid: int) -> list[int]:
    """Direct children of pid, from /proc/<pid>/task/*/children."""
    kids: list[int] = []
    task_dir = Path(f"/proc/{pid}/task")
    with contextlib.suppress(OSError):
        for task in task_dir.iterdir():
            with contextlib.suppress(OSError):
                kids.extend(int(x) for x in (task / "children").read_text().split())
    return kids


def _own_cpu_ticks(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    # The command name (field 2) may hold spaces; fields after the last ')' are fixed.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime (14) + stime (15), 1-based from pid


def tree_pids(pid: int) -> list[int]:
    """pid and its live descendants (at most 1,000)."""
    found: list[int] = []
    pending = [pid]
    while pending and len(found) < 1000:
        current = pending.pop()
        found.append(current)
        pending.extend(_children(current))
    return found


def tree_cpu_s(pid: int) -> float:
    """utime+stime of pid and its live descendants, in seconds (depth and count bounded)."""
    return sum(_own_cpu_ticks(p) for p in tree_pids(pid)) / CLOCK_TICKS_PER_S


def _own_rss_bytes(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024  # "VmRSS:   123456 kB"
    return 0


def tree_rss_bytes(pid: int) -> int:
    """Resident set size of pid and its live descendants, in bytes."""
    return sum(_own_rss_bytes(p) for p in tree_pids(pid))


def self_cpu_s() -> float:
    """utime+stime of this process (all threads), in seconds, from /proc/self/stat."""
    return _own_cpu_ticks(os.getpid()) / CLOCK_TICKS_PER_S

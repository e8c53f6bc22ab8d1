"""The loopback ceiling for P2 and P2L: ``os.sendfile`` of a topic's segment bytes over
127.0.0.1, from a sender process to a receiver process.

The broker's segment files of the topic are read once first (page-cached, as a fresh log
is). Then two processes of their own, started from this module (``python -m bench.loopback
receive`` / ``send``), so that neither can slow the other by holding an interpreter lock
they share:

- the receiver listens on 127.0.0.1; each connection starts with the receive low-water mark
  to use (int64; 0: none), which it sets (``SO_RCVLOWAT``), then it ``recv_into``s one
  reused 1 MiB buffer until end of stream, discarding the bytes, answers the byte count and
  the CPU time it spent (``struct ">qq"``) and closes;
- the sender, for each pair of call size (``CALL_SIZES``: a consumer's 1 MiB
  ``max.partition.fetch.bytes``, 64 MiB) and receive low-water mark (``LOW_WATER_MARKS``:
  none, 128 KiB, 512 KiB) in turn, ``ITERATIONS`` times: connects, sends every file with
  ``os.sendfile`` calls of at most that size, shuts down its side and waits for the
  receiver's answer. One iteration's time runs from the first sendfile to the answer.

Both sockets keep the kernel's buffer defaults (autotuning; no TCP_NODELAY needed: the
answer comes after end of stream). Each pair's figure is the median over its iterations;
the ceiling is the highest of those medians: the fastest this machine's loopback moved
those bytes from page cache to another process, against which a broker's consume MiB/s is
read (a broker adds, per fetch, the request's round trip and its own work).

Why the low-water marks (measured 2026-11-27, quiet machine, 2 GiB of 64 KiB records): a
receiver that reads as soon as anything arrives is woken for nearly every segment, and on
this virtual machine the wake-ups, charged to the sender's sendfile (loopback delivers in
the sender's context), hold the sender at 95-99% of a core and the stream at 2.2-2.5 GiB/s,
below what a bare Fetch loop gets out of a broker in bursts of 1 MiB (3.0 GiB/s). Woken
once 512 KiB are there, the same stream moved 4.6-4.7 GiB/s. After the machine was restarted
(2026-11-27 14:32; about half as fast since) the receiver was at 92-96% of a core in every
mode and the fastest pair had no low-water mark (3.3-3.6 GiB/s; 2.4-2.9 with one): which mode
wins depends on the machine, which is why all are measured and the best is taken. Before
2026-11-27 sender and receiver were two threads of the bench's own process (2.3-2.5 GiB/s):
not a ceiling either.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from bench.procs import BenchError, spawn, stop
from bench.sockets import recv_exact

REPO_ROOT: Final[Path] = Path(__file__).resolve().parents[1]
MIB: Final[int] = 1 << 20
RECV_BUFFER_BYTES: Final[int] = 1 << 20
CALL_SIZES: Final[tuple[int, ...]] = (1 << 20, 64 << 20)
LOW_WATER_MARKS: Final[tuple[int, ...]] = (0, 128 << 10, 512 << 10)  # 0: SO_RCVLOWAT unset
ITERATIONS: Final[int] = 5
TIMEOUT_S: Final[float] = 120.0
_ANSWER: Final[struct.Struct] = struct.Struct(">qq")  # bytes received, receiver CPU ns
_LOW_WATER: Final[struct.Struct] = struct.Struct(">q")  # first on each connection


@dataclass(frozen=True, slots=True)
class CallSizeResult:
    """One call size and receive low-water mark: per iteration, seconds and the two sides'
    CPU seconds."""

    call_bytes: int
    low_water_bytes: int  # 0: none
    size_bytes: int
    elapsed_s: tuple[float, ...]
    sender_cpu_s: tuple[float, ...]
    receiver_cpu_s: tuple[float, ...]

    def _median_index(self) -> int:
        """The iteration whose time is the median (the lower middle of an even count)."""
        order = sorted(range(len(self.elapsed_s)), key=lambda i: self.elapsed_s[i])
        return order[(len(order) - 1) // 2]

    @property
    def mib_per_s(self) -> float:
        """MiB/s of the median iteration."""
        return self.size_bytes / MIB / statistics.median_low(self.elapsed_s)

    @property
    def sender_cpu_pct(self) -> float:
        i = self._median_index()
        return 100.0 * self.sender_cpu_s[i] / self.elapsed_s[i]

    @property
    def receiver_cpu_pct(self) -> float:
        i = self._median_index()
        return 100.0 * self.receiver_cpu_s[i] / self.elapsed_s[i]


@dataclass(frozen=True, slots=True)
class LoopbackResult:
    size_bytes: int
    by_call_size: tuple[CallSizeResult, ...]

    @property
    def ceiling(self) -> CallSizeResult:
        """The pair with the highest median MiB/s."""
        return max(self.by_call_size, key=lambda r: r.mib_per_s)

    @property
    def mib_per_s(self) -> float:
        """The ceiling: the highest median MiB/s over the pairs."""
        return self.ceiling.mib_per_s


def measure_sendfile(files: list[Path], work_dir: Path, *,
                     call_sizes: tuple[int, ...] = CALL_SIZES,
                     low_water_marks: tuple[int, ...] = LOW_WATER_MARKS,
                     iterations: int = ITERATIONS) -> LoopbackResult:
    """Send the files (read once first, so page-cached) over loopback with sendfile from a
    sender process to a receiver process, ``iterations`` times per call size and receive
    low-water mark; time it."""
    if not files or iterations < 1 or not call_sizes or not low_water_marks:
        raise BenchError("loopback: nothing to send")
    try:
        for path in files:
            with path.open("rb") as warm:
                while warm.read(MIB):
                    pass
        size_bytes = sum(path.stat().st_size for path in files)
    except OSError as exc:
        raise BenchError(f"loopback sendfile: {exc}") from exc
    log_path = work_dir / "loopback.log"
    module = [sys.executable, "-m", "bench.loopback"]
    receiver = spawn([*module, "receive"], log_path=log_path, cwd=REPO_ROOT, stdout_pipe=True)
    try:
        port = int(_read_line(receiver, "receiver"))
        sender = spawn([*module, "send", "--port", str(port), "--iterations", str(iterations),
                        "--call-sizes", ",".join(map(str, call_sizes)),
                        "--low-water-marks", ",".join(map(str, low_water_marks)),
                        *map(str, files)], log_path=log_path, cwd=REPO_ROOT,
                       stdout_pipe=True)
        try:
            out = json.loads(_read_line(sender, "sender"))
            if sender.wait(timeout=TIMEOUT_S) != 0:
                raise BenchError(f"loopback sender exited with {sender.returncode}")
        finally:
            stop(sender, grace_s=5.0)
    except (ValueError, subprocess.TimeoutExpired) as exc:
        raise BenchError(f"loopback sendfile: {exc} (see {log_path})") from exc
    finally:
        stop(receiver, grace_s=5.0)
    results = tuple(
        CallSizeResult(call_bytes=int(r["call_bytes"]),
                       low_water_bytes=int(r["low_water_bytes"]), size_bytes=size_bytes,
                       elapsed_s=tuple(r["elapsed_s"]), sender_cpu_s=tuple(r["sender_cpu_s"]),
                       receiver_cpu_s=tuple(r["receiver_cpu_s"]))
        for r in out)
    return LoopbackResult(size_bytes=size_bytes, by_call_size=results)


def _read_line(proc: subprocess.Popen[bytes], what: str) -> str:
    """The child's first line of output (it prints one when ready or done)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()  # bounded: the child exits within TIMEOUT_S, or is killed
    if not line:
        proc.wait(timeout=TIMEOUT_S)
        raise BenchError(f"loopback {what} exited with {proc.returncode} without an answer")
    return line.decode().strip()


def _cpu_s() -> float:
    return time.process_time()  # this process's user + system time, not in 10 ms ticks


def receive() -> None:
    """The receiver process: prints its port, then serves connections until killed."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        print(server.getsockname()[1], flush=True)
        buf = bytearray(RECV_BUFFER_BYTES)
        while True:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(TIMEOUT_S)
                (low_water,) = _LOW_WATER.unpack(recv_exact(conn, _LOW_WATER.size))
                if low_water > 0:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, low_water)
                cpu0 = _cpu_s()
                got = 0
                while n := conn.recv_into(buf):
                    got += n
                conn.sendall(_ANSWER.pack(got, int((_cpu_s() - cpu0) * 1e9)))


def send(port: int, files: list[Path], call_sizes: list[int], low_water_marks: list[int],
         iterations: int) -> None:
    """The sender process: prints one JSON line, a list of results per call size and low-water
    mark."""
    size_bytes = sum(path.stat().st_size for path in files)
    out = []
    sources = [path.open("rb") for path in files]
    try:
        for call_bytes, low_water in itertools.product(call_sizes, low_water_marks):
            elapsed: list[float] = []
            sender_cpu: list[float] = []
            receiver_cpu: list[float] = []
            for _ in range(iterations):
                with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
                    sock.sendall(_LOW_WATER.pack(low_water))
                    sock.settimeout(None)  # blocking: os.sendfile on a timeout socket: EAGAIN
                    cpu0, t0 = _cpu_s(), time.monotonic()
                    for src in sources:
                        _send_file(sock, src, call_bytes)
                    sock.shutdown(socket.SHUT_WR)
                    sock.settimeout(TIMEOUT_S)
                    answer = recv_exact(sock, _ANSWER.size)
                    t1, cpu1 = time.monotonic(), _cpu_s()
                got, receiver_cpu_ns = _ANSWER.unpack(answer)
                if got != size_bytes:
                    raise BenchError(f"loopback receiver got {got} of {size_bytes} bytes")
                elapsed.append(t1 - t0)
                sender_cpu.append(cpu1 - cpu0)
                receiver_cpu.append(receiver_cpu_ns / 1e9)
            out.append({"call_bytes": call_bytes, "low_water_bytes": low_water,
                        "elapsed_s": elapsed,
                        "sender_cpu_s": sender_cpu, "receiver_cpu_s": receiver_cpu})
    finally:
        for src in sources:
            src.close()
    print(json.dumps(out), flush=True)


def _send_file(sock: socket.socket, src: BinaryIO, call_bytes: int) -> None:
    fd = src.fileno()
    size_bytes = os.fstat(fd).st_size
    offset = 0
    while offset < size_bytes:
        sent = os.sendfile(sock.fileno(), fd, offset, min(call_bytes, size_bytes - offset))
        if sent == 0:
            raise BenchError(f"sendfile stopped at {offset} of {size_bytes} bytes")
        offset += sent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.loopback")
    sub = parser.add_subparsers(dest="role", required=True)
    sub.add_parser("receive")
    snd = sub.add_parser("send")
    snd.add_argument("--port", type=int, required=True)
    snd.add_argument("--iterations", type=int, default=ITERATIONS)
    snd.add_argument("--call-sizes", default=",".join(map(str, CALL_SIZES)))
    snd.add_argument("--low-water-marks", default=",".join(map(str, LOW_WATER_MARKS)))
    snd.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.role == "receive":
        receive()
    else:
        send(args.port, args.files, [int(s) for s in args.call_sizes.split(",")],
             [int(s) for s in args.low_water_marks.split(",")], args.iterations)


if __name__ == "__main__":
    main()

"""The loopback limit for P2: ``os.sendfile`` of the same number of bytes over 127.0.0.1.

The broker's own segment files of the P2 topic are read once (so they sit in the page
cache, as a fresh log does), then sent with ``os.sendfile`` over a connected TCP socket to a
receiver thread that ``recv_into``s a 1 MiB buffer and discards it. Both sides release the
interpreter lock in their system calls. The result is the fastest a broker on this machine
could hand those bytes to a consumer.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bench.procs import BenchError

CHUNK_BYTES: Final[int] = 1 << 20
TIMEOUT_S: Final[float] = 120.0


@dataclass(frozen=True, slots=True)
class LoopbackResult:
    size_bytes: int
    elapsed_s: float

    @property
    def mib_per_s(self) -> float:
        return self.size_bytes / (1 << 20) / self.elapsed_s


def measure_sendfile(files: list[Path], work_dir: Path) -> LoopbackResult:
    """Send the files (read once first, so page-cached) over loopback with sendfile; time it."""
    try:
        return _measure(files)
    except OSError as exc:
        raise BenchError(f"loopback sendfile: {exc}") from exc


def _measure(files: list[Path]) -> LoopbackResult:
    for path in files:
        with path.open("rb") as warm:
            while warm.read(CHUNK_BYTES):
                pass
    size_bytes = sum(path.stat().st_size for path in files)
    received = [0]
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(TIMEOUT_S)

        def receive() -> None:
            conn, _ = server.accept()
            buf = bytearray(CHUNK_BYTES)
            with conn:
                conn.settimeout(TIMEOUT_S)
                while True:
                    n = conn.recv_into(buf)
                    if n == 0:
                        return
                    received[0] += n

        receiver = threading.Thread(target=receive, daemon=True)
        receiver.start()
        with socket.create_connection(server.getsockname(), timeout=TIMEOUT_S) as sender:
            sender.settimeout(None)  # blocking: os.sendfile on a timeout socket gets EAGAIN
            t0 = time.monotonic()
            for path in files:
                _send_file(sender, path)
            sender.shutdown(socket.SHUT_WR)
            receiver.join(timeout=TIMEOUT_S)
            elapsed_s = time.monotonic() - t0
    if received[0] != size_bytes:
        raise BenchError(f"loopback receiver got {received[0]} of {size_bytes} bytes")
    return LoopbackResult(size_bytes=size_bytes, elapsed_s=elapsed_s)


def _send_file(sender: socket.socket, path: Path) -> None:
    with path.open("rb") as src:
        size_bytes = os.fstat(src.fileno()).st_size
        offset = 0
        while offset < size_bytes:
            sent = os.sendfile(sender.fileno(), src.fileno(), offset, size_bytes - offset)
            if sent == 0:
                raise BenchError(f"sendfile of {path} stopped at {offset} of {size_bytes} bytes")
            offset += sent

"""A TCP proxy on 127.0.0.1 that a test can cut and restore (a broker's link to ZooKeeper).

``TcpProxy(target_port)`` listens on a free port of 127.0.0.1 and pipes every connection to
``127.0.0.1:target_port``. ``cut()`` stops listening and closes every piped connection (the
client sees a connection loss, then refused connections); ``restore()`` listens again on
the same port. ``accepted`` counts connections accepted so far. Threads only; every socket
operation is bounded by ``IO_TIMEOUT_S`` or by ``close()``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Final

IO_TIMEOUT_S: Final = 0.2
CHUNK: Final = 65536


class TcpProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.accepted = 0
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.port = self._listen(0)

    def _listen(self, port: int) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(16)
        sock.settimeout(IO_TIMEOUT_S)
        stop = threading.Event()
        self._stop = stop
        self._listener = sock
        self._spawn(self._accept_loop, sock, stop)
        return int(sock.getsockname()[1])

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self, sock: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                client, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if stop.is_set():
                    client.close()
                    upstream.close()
                    return
                self.accepted += 1
                self._conns += [client, upstream]
            self._spawn(self._pump, client, upstream)
            self._spawn(self._pump, upstream, client)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(None)
        try:
            while data := src.recv(CHUNK):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Stop listening and close every piped connection."""
        self._stop.set()
        with self._lock:
            conns, self._conns = self._conns, []
            if self._listener is not None:
                self._listener.close()
                self._listener = None
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def restore(self) -> None:
        """Listen again, on the same port."""
        self._listen(self.port)

    def close(self) -> None:
        self.cut()
        for thread in self._threads:
            thread.join(timeout=2)

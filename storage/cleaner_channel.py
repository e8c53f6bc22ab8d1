"""The channel between the broker and one cleaner worker process, and its messages.

A Unix stream socket pair, blocking. Each frame is a 4-byte big-endian length followed by
that many bytes of ``pickle`` of one message below (both ends are this program, started by
the broker; nothing else can reach the socket). Frames are at most ``MAX_FRAME_BYTES``; a
larger length is a broken channel. A file descriptor travels as ``SCM_RIGHTS`` data sent
with the frame that names it (``FdReply``); the receiver keeps received descriptors in
arrival order and the frame takes the oldest.

Broker -> worker: ``Configure`` (once, first), ``Clean``, ``FdReply`` (+ descriptor),
``SwapReply``, ``Abort``, ``Stop``.
Worker -> broker: ``Ready`` (once, first), ``NeedFd``, ``Swap``, ``LogLine``, and one of
``Done``, ``Aborted``, ``Failed`` to end each ``Clean``.

Only one cleaning is in flight per worker and the worker waits for the answer to each
request, so what is queued on either side is bounded by a few frames (and by the socket
buffers, which block the sender when full).

Thread-safety: none; each end is used by one thread.
"""

from __future__ import annotations

import array
import collections
import math
import os
import pickle
import select
import socket
import struct
import time
from typing import NamedTuple

from storage.cleaner_engine import CleanerConfig, CleaningJob
from storage.cleaner_stats import CleanerStats

MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_FDS_PER_READ = 16
_LENGTH = struct.Struct(">I")
_READ_BYTES = 256 * 1024


class ChannelClosedError(Exception):
    """The other end is gone (its process ended) or the channel broke."""


# ---------------------------------------------------------------------- broker -> worker
class Configure(NamedTuple):
    worker_id: int
    config: CleanerConfig
    log_level: int


class Clean(NamedTuple):
    job: CleaningJob


class FdReply(NamedTuple):
    base_offset: int
    ok: bool  # a descriptor comes with it exactly when ok
    reason: str


class SwapReply(NamedTuple):
    ok: bool
    reason: str


class Abort(NamedTuple):
    reason: str


class Stop(NamedTuple):
    pass


# ---------------------------------------------------------------------- worker -> broker
class Ready(NamedTuple):
    pid: int
    scan_build: str


class NeedFd(NamedTuple):
    base_offset: int


class Swap(NamedTuple):
    base_offset: int
    old_base_offsets: list[int]


class LogLine(NamedTuple):
    level: int
    logger: str
    message: str


class Done(NamedTuple):
    end_offset: int
    stats: CleanerStats


class Aborted(NamedTuple):
    reason: str


class Failed(NamedTuple):
    """An unexpected error in the worker: ``errno`` is set for an ``OSError``."""

    error_type: str
    message: str
    errno: int | None
    filename: str | None
    traceback: str


Message = (Configure | Clean | FdReply | SwapReply | Abort | Stop | Ready | NeedFd | Swap
           | LogLine | Done | Aborted | Failed)
_MESSAGE_TYPES = (Configure, Clean, FdReply, SwapReply, Abort, Stop, Ready, NeedFd, Swap,
                  LogLine, Done, Aborted, Failed)


class Channel:
    """One end of the socket pair."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self.sock = sock
        self._buffer = bytearray()
        self._fds: collections.deque[int] = collections.deque()
        self._poller = select.poll()  # not select(): the broker's descriptors pass 1024
        self._poller.register(sock, select.POLLIN)
        self.closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: Message, fd: int | None = None) -> None:
        """Send one frame (and ``fd`` with it); ``ChannelClosedError`` if the peer is gone."""
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        if len(payload) > MAX_FRAME_BYTES:
            raise ValueError(f"{type(message).__name__} frame of {len(payload)} bytes")
        frame = _LENGTH.pack(len(payload)) + payload
        try:
            if fd is None:
                self.sock.sendall(frame)
                return
            sent = self.sock.sendmsg(
                [frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
            if sent < len(frame):
                self.sock.sendall(memoryview(frame)[sent:])
        except OSError as exc:  # EPIPE, ECONNRESET: the peer ended
            self.closed = True
            raise ChannelClosedError(f"send failed: {exc}") from None

    def recv(self, timeout_s: float | None) -> Message | None:
        """The next message; None if none came within ``timeout_s`` (None: wait as long as
        it takes); ``ChannelClosedError`` at the end of the stream."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:  # each turn reads >= 1 byte, or returns, or raises
            message = self._next_frame()
            if message is not None:
                return message
            if deadline is not None:
                left_ms = max(deadline - time.monotonic(), 0.0) * 1000
                if not self._poller.poll(math.ceil(left_ms)):
                    return None
            self._read()

    def poll(self) -> Message | None:
        """A message if one is already here or readable now, else None (never waits)."""
        return self.recv(0.0)

    def take_fd(self) -> int:
        """The oldest descriptor received (the one sent with the frame just read)."""
        if not self._fds:
            raise ChannelClosedError("a frame announced a descriptor that did not come")
        return self._fds.popleft()

    def close(self) -> None:
        self.closed = True
        while self._fds:
            os.close(self._fds.popleft())
        self.sock.close()

    def _next_frame(self) -> Message | None:
        buf = self._buffer
        if len(buf) < _LENGTH.size:
            return None
        (length,) = _LENGTH.unpack_from(buf, 0)
        if length > MAX_FRAME_BYTES:
            raise ChannelClosedError(f"frame of {length} bytes announced")
        if len(buf) < _LENGTH.size + length:
            return None
        payload = bytes(buf[_LENGTH.size : _LENGTH.size + length])
        del buf[: _LENGTH.size + length]
        message = pickle.loads(payload)
        if not isinstance(message, _MESSAGE_TYPES):
            raise ChannelClosedError(f"unexpected frame {type(message).__name__}")
        return message

    def _read(self) -> None:
        try:
            data, ancdata, flags, _ = self.sock.recvmsg(
                _READ_BYTES, socket.CMSG_SPACE(MAX_FDS_PER_READ * array.array("i").itemsize))
        except OSError as exc:
            self.closed = True
            raise ChannelClosedError(f"receive failed: {exc}") from None
        for level, kind, raw in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(raw[: len(raw) - len(raw) % fds.itemsize])
                self._fds.extend(fds)
        if flags & socket.MSG_CTRUNC:
            raise ChannelClosedError("descriptors were lost (control data truncated)")
        if not data:
            self.closed = True
            raise ChannelClosedError("the other end closed the channel")
        self._buffer += data

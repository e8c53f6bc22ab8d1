"""A log cleaner worker process: ``python -m storage.cleaner_worker --fd N --parent-pid P``.

The broker starts one per ``log.cleaner.threads`` (``storage.cleaner_process``) so that the
cleaning's Python work (offset map, filter, writing the ``.cleaned`` segment and its
indexes) never holds the broker's interpreter lock. It speaks ``storage.cleaner_channel``
over the socket ``--fd``:

1. receives ``Configure`` and answers ``Ready`` (its pid, and which build of the record
   scan it runs: ``storage.cleaner_native``);
2. for each ``Clean``: runs ``storage.cleaner_engine.CleaningEngine`` with the broker as its
   host (segment descriptors and swaps are requests over the channel; an ``Abort`` or
   ``Stop`` is noticed at the next chunk or while waiting for an answer), and ends it with
   ``Done``, ``Aborted`` or ``Failed``;
3. exits on ``Stop`` between cleanings or when the channel closes.

Its log records go to the broker as ``LogLine`` messages (the broker's logging formats
them). It dies with the broker: on Linux it asks for SIGKILL when its parent ends
(``PR_SET_PDEATHSIG``), and it exits when the channel closes, so no worker outlives a
kill -9 of the broker to write into a log dir that a new broker owns.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import logging
import os
import signal
import socket
import sys
import threading
import traceback

from storage.cleaner_channel import (
    Abort,
    Aborted,
    Channel,
    ChannelClosedError,
    Clean,
    Configure,
    Done,
    Failed,
    FdReply,
    LogLine,
    Message,
    NeedFd,
    Ready,
    Stop,
    Swap,
    SwapReply,
)
from storage.cleaner_engine import (
    CleaningAbortedError,
    CleaningEngine,
    CleaningJob,
    Throttler,
)

log = logging.getLogger("storage.cleaner")

_PR_SET_PDEATHSIG = 1


class _StopRequestedError(CleaningAbortedError):
    """The broker asked the worker to stop (shutdown)."""


class ChannelHost:
    """The broker, seen from the worker: every host call is a request over the channel."""

    def __init__(self, channel: Channel, job: CleaningJob) -> None:
        self.channel = channel
        self.job = job
        self.stop_requested = False

    def _control(self, message: Message) -> None:
        """A message that may come at any time: an abort or stop ends the cleaning."""
        if isinstance(message, Stop):
            self.stop_requested = True
            raise _StopRequestedError("the cleaner is shutting down")
        if isinstance(message, Abort):
            raise CleaningAbortedError(message.reason)
        raise ChannelClosedError(f"unexpected {type(message).__name__} during a cleaning")

    def _answer(self) -> Message:
        while True:  # each turn takes one message; aborts and stops raise
            message = self.channel.recv(None)
            if isinstance(message, FdReply | SwapReply):
                return message
            assert message is not None
            self._control(message)

    def check_done(self) -> None:
        message = self.channel.poll()
        if message is not None:
            self._control(message)

    def segment_fd(self, base_offset: int) -> int:
        self.channel.send(NeedFd(base_offset))
        answer = self._answer()
        if not isinstance(answer, FdReply) or answer.base_offset != base_offset:
            raise ChannelClosedError(f"expected the descriptor of segment {base_offset}")
        if not answer.ok:
            raise CleaningAbortedError(answer.reason)
        return self.channel.take_fd()

    def swap(self, base_offset: int, old_base_offsets: list[int]) -> None:
        self.channel.send(Swap(base_offset, old_base_offsets))
        answer = self._answer()
        if not isinstance(answer, SwapReply):
            raise ChannelClosedError("expected the answer to a swap")
        if not answer.ok:
            raise CleaningAbortedError(answer.reason)


class _ChannelLogHandler(logging.Handler):
    """Sends each record to the broker, formatted (with its traceback, if any)."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self.channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
            self.channel.send(LogLine(record.levelno, record.name, message))
        except ChannelClosedError:
            pass  # the broker is gone; the worker exits at its next receive


def _failed(exc: BaseException) -> Failed:
    tb = "".join(traceback.format_exception(exc)).rstrip()
    if isinstance(exc, OSError):
        return Failed(type(exc).__name__, exc.strerror or str(exc), exc.errno,
                      None if exc.filename is None else str(exc.filename), tb)
    return Failed(type(exc).__name__, str(exc), None, None, tb)


def serve(channel: Channel, engine: CleaningEngine) -> None:
    """Answer ``Clean`` requests until ``Stop`` or the end of the channel."""
    while True:  # one cleaning a turn; ends on Stop or ChannelClosedError
        message = channel.recv(None)
        if isinstance(message, Stop):
            return
        if isinstance(message, Abort):
            continue  # meant for a cleaning that ended already
        if not isinstance(message, Clean):
            raise ChannelClosedError(f"unexpected {type(message).__name__} between cleanings")
        host = ChannelHost(channel, message.job)
        try:
            end_offset, stats = engine.clean(message.job, host)
        except ChannelClosedError:
            raise
        except CleaningAbortedError as exc:
            channel.send(Aborted(str(exc)))
            if host.stop_requested:
                return
        except Exception as exc:
            channel.send(_failed(exc))
        else:
            channel.send(Done(end_offset, stats))


def _die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when the broker ends (Linux), and exit now if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m storage.cleaner_worker")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    args = parser.parse_args(argv)
    _die_with_parent(args.parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the broker
    channel = Channel(socket.socket(fileno=args.fd))
    try:
        first = channel.recv(None)
        if not isinstance(first, Configure):
            raise ChannelClosedError(f"expected Configure, got {type(first).__name__}")
        root = logging.getLogger()
        root.handlers[:] = [_ChannelLogHandler(channel)]
        root.setLevel(first.log_level)
        config = first.config
        from storage.cleaner_native import SCAN_BUILD  # imported here: after logging is set

        share = config.max_io_bytes_per_second / max(config.threads, 1)
        engine = CleaningEngine(config, Throttler(share, threading.Event()))
        channel.send(Ready(os.getpid(), SCAN_BUILD))
        serve(channel, engine)
    except ChannelClosedError:
        return 0  # the broker is gone or closed the channel: nothing left to do
    finally:
        channel.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

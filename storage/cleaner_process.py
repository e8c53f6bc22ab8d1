"""A cleaner worker process as the broker drives it (the other end of
``storage.cleaner_worker``, over ``storage.cleaner_channel``).

``start`` spawns ``python -m storage.cleaner_worker`` (no descriptor of the broker's but its
end of a fresh socket pair), sends ``Configure`` and waits for ``Ready``. ``clean`` sends a
``Clean`` and serves the worker's requests with the broker's ``CleaningHost`` (a private
descriptor per segment, the swap under the log's lock) until the worker ends the cleaning.
Meanwhile it asks the host every ``POLL_S`` whether to stop, and tells the worker
(``Abort``); a worker that has not ended an aborted cleaning within ``ABORT_WAIT_S`` is
killed. A worker that dies (its channel closes) raises ``WorkerDiedError``: the caller
aborts that cleaning and starts a new worker. ``stop`` asks the worker to exit and waits
``STOP_WAIT_S`` before killing it.

The worker's log lines are logged here, under the worker's logger names.

Thread-safety: one thread drives a ``CleanerProcess``; ``kill`` may come from another.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

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
    NeedFd,
    Ready,
    Stop,
    Swap,
    SwapReply,
)
from storage.cleaner_engine import (
    CleanerConfig,
    CleaningAbortedError,
    CleaningHost,
    CleaningJob,
)
from storage.cleaner_stats import CleanerStats
from storage.naming import TopicPartition

log = logging.getLogger("storage.cleaner")

START_TIMEOUT_S = 60.0
POLL_S = 0.1
ABORT_WAIT_S = 30.0
STOP_WAIT_S = 10.0
_ROOT = Path(__file__).resolve().parent.parent  # holds the storage package


class WorkerDiedError(Exception):
    """The worker process ended (or broke its channel) in the middle of a cleaning."""

    def __init__(self, message: str, tp: TopicPartition | None = None) -> None:
        super().__init__(message)
        self.tp = tp


class CleanerWorkerError(Exception):
    """An unexpected error inside the worker; the message carries its traceback."""


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class CleanerProcess:
    """One worker process (``log-cleaner-worker-<id>``)."""

    def __init__(self, worker_id: int, config: CleanerConfig) -> None:
        self.worker_id = worker_id
        self.config = config
        self._proc: subprocess.Popen[bytes] | None = None
        self._channel: Channel | None = None
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._channel is not None

    def start(self) -> None:
        """Spawn the worker and wait until it is ready; ``WorkerDiedError`` if it is not
        within ``START_TIMEOUT_S``."""
        if self._proc is not None:
            self._reap(0.0)
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "storage.cleaner_worker", "--fd",
                 str(child_end.fileno()), "--parent-pid", str(os.getpid())],
                pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL, env=env)
        except OSError:
            parent_end.close()
            raise
        finally:
            child_end.close()
        self.starts += 1
        channel = self._channel = Channel(parent_end)
        level = logging.getLogger("storage.cleaner").getEffectiveLevel()
        try:
            channel.send(Configure(self.worker_id, self.config, level))
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:  # log lines, then Ready; bounded by the deadline
                message = channel.recv(max(deadline - time.monotonic(), 0.0))
                if isinstance(message, LogLine):
                    self._relay(message)
                    continue
                if isinstance(message, Ready):
                    break
                raise ChannelClosedError(f"no Ready within {START_TIMEOUT_S:.0f} s"
                                         if message is None else f"got {message!r}")
        except ChannelClosedError as exc:
            how = self._reap(5.0)
            raise WorkerDiedError(f"log cleaner worker {self.worker_id} did not start "
                                  f"({exc}; it {how})") from None
        log.info("Log cleaner worker %d started (pid %d, record scan %s)", self.worker_id,
                 message.pid, message.scan_build)

    def stop(self, timeout_s: float = STOP_WAIT_S) -> None:
        """Ask the worker to exit (between cleanings) and wait; killed after ``timeout_s``."""
        if self._proc is None:
            return
        pid = self._proc.pid
        if self._channel is not None and self._proc.poll() is None:
            with contextlib.suppress(ChannelClosedError):  # already gone: nothing to ask
                self._channel.send(Stop())
        try:
            code = self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("Log cleaner worker %d (pid %d) did not exit within %.0f s: killing it",
                        self.worker_id, pid, timeout_s)
            self._proc.kill()
            code = self._proc.wait()
        self._close_channel()
        self._proc = None
        log.info("Log cleaner worker %d (pid %d) stopped (%s)", self.worker_id, pid,
                 _describe_exit(code))

    def kill(self) -> None:
        """SIGKILL the worker now (a stuck shutdown, or a test)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    # ------------------------------------------------------------------ one cleaning
    def clean(self, job: CleaningJob, host: CleaningHost) -> tuple[int, CleanerStats]:
        """Run ``job`` in the worker; raises what the cleaning raised (``OSError`` and
        ``CleaningAbortedError`` as themselves, anything else as ``CleanerWorkerError``),
        or ``WorkerDiedError``."""
        channel = self._channel
        if channel is None or not self.alive:
            raise WorkerDiedError(f"log cleaner worker {self.worker_id} is not running", job.tp)
        try:
            channel.send(Clean(job))
            return self._serve(channel, job, host)
        except ChannelClosedError as exc:
            how = self._reap(5.0)
            raise WorkerDiedError(
                f"log cleaner worker {self.worker_id} (pid {self.pid}) {how} during the "
                f"cleaning of {job.tp} ({exc})", job.tp) from None

    def _serve(self, channel: Channel, job: CleaningJob,
               host: CleaningHost) -> tuple[int, CleanerStats]:
        stopping: BaseException | None = None  # why the broker wants the cleaning to end
        deadline = 0.0
        while True:  # one message (or poll timeout) a turn; ends with the cleaning
            message = channel.recv(POLL_S)
            if message is None:
                if stopping is None:
                    try:
                        host.check_done()
                    except CleaningAbortedError as exc:
                        stopping, deadline = exc, time.monotonic() + ABORT_WAIT_S
                        channel.send(Abort(str(exc)))
                elif time.monotonic() > deadline:
                    log.warning("Log cleaner worker %d (pid %s) did not end the cleaning of %s "
                                "within %.0f s of being told to: killing it", self.worker_id,
                                self.pid, job.tp, ABORT_WAIT_S)
                    self.kill()
                    self._reap(5.0)
                    raise stopping
                continue
            if isinstance(message, LogLine):
                self._relay(message)
            elif isinstance(message, NeedFd):
                stopping, deadline = self._send_fd(channel, host, message, stopping, deadline)
            elif isinstance(message, Swap):
                stopping, deadline = self._swap(channel, host, message, stopping, deadline)
            elif isinstance(message, Done):
                if stopping is not None and not isinstance(stopping, CleaningAbortedError):
                    raise stopping
                return message.end_offset, message.stats
            elif isinstance(message, Aborted):
                raise stopping if stopping is not None else CleaningAbortedError(message.reason)
            elif isinstance(message, Failed):
                if stopping is not None and not isinstance(stopping, CleaningAbortedError):
                    raise stopping
                raise self._remote_error(message)
            else:
                raise ChannelClosedError(f"unexpected {type(message).__name__} from the worker")

    @staticmethod
    def _send_fd(channel: Channel, host: CleaningHost, message: NeedFd,
                 stopping: BaseException | None, deadline: float,
                 ) -> tuple[BaseException | None, float]:
        base = message.base_offset
        if stopping is not None:
            channel.send(FdReply(base, False, str(stopping)))
            return stopping, deadline
        try:
            fd = host.segment_fd(base)
        except CleaningAbortedError as exc:
            channel.send(FdReply(base, False, str(exc)))
            return stopping, deadline
        except BaseException as exc:
            channel.send(FdReply(base, False, f"the broker could not open segment {base}"))
            return exc, time.monotonic() + ABORT_WAIT_S
        try:
            channel.send(FdReply(base, True, ""), fd)
        finally:
            os.close(fd)
        return stopping, deadline

    @staticmethod
    def _swap(channel: Channel, host: CleaningHost, message: Swap,
              stopping: BaseException | None, deadline: float,
              ) -> tuple[BaseException | None, float]:
        if stopping is not None:
            channel.send(SwapReply(False, str(stopping)))
            return stopping, deadline
        try:
            host.swap(message.base_offset, message.old_base_offsets)
        except CleaningAbortedError as exc:
            channel.send(SwapReply(False, str(exc)))
            return stopping, deadline
        except BaseException as exc:
            channel.send(SwapReply(False, f"the swap failed in the broker: {exc}"))
            return exc, time.monotonic() + ABORT_WAIT_S
        channel.send(SwapReply(True, ""))
        return stopping, deadline

    @staticmethod
    def _remote_error(failed: Failed) -> Exception:
        if failed.errno is not None:
            return OSError(failed.errno, f"{failed.message} (in the cleaner worker)",
                           failed.filename)
        return CleanerWorkerError(f"{failed.error_type}: {failed.message}\n"
                                  f"in the cleaner worker:\n{failed.traceback}")

    @staticmethod
    def _relay(line: LogLine) -> None:
        logger = logging.getLogger(line.logger)
        if logger.isEnabledFor(line.level):
            logger.log(line.level, "%s", line.message)

    # ------------------------------------------------------------------ ending
    def _close_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _reap(self, timeout_s: float) -> str:
        """Collect the ended (or ending) worker; how it ended."""
        self._close_channel()
        proc = self._proc
        if proc is None:
            return "was not running"
        try:
            code = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        return _describe_exit(code)

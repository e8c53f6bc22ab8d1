"""Disk errors and offline log directories (Kafka's ``LogDirFailureChannel``).

Storage sorts every ``OSError`` it meets into one of two outcomes:

- **full**: ENOSPC or EDQUOT on an operation that was undone (an append rolled back, a
  checkpoint whose temp file was removed). Nothing changed; the caller answers
  KAFKA_STORAGE_ERROR for that partition and the next request may succeed once space is
  freed. ``report_full`` logs it, one line per log dir per ``interval_s``.
- **failed**: any other error (EIO, EROFS, ...), a rollback that itself failed, or a
  failed fsync (the page cache's state is unknown after one, so it is never retried).
  ``fail`` takes the log directory offline: every log in it refuses reads and writes
  (``LogDirOfflineError``, KAFKA_STORAGE_ERROR) until the broker restarts and loads it
  again. The first failure of a directory is logged once, with its cause, and every
  listener is told (``subscribe``): the log manager marks the directory's logs, the
  broker answers their partitions with KAFKA_STORAGE_ERROR and stops when no directory is
  left, and a ZooKeeper controller writes Kafka's ``/log_dir_event_notification`` so the
  cluster moves the partitions' leadership.

Listeners run on the thread that met the error (the event loop, or a thread-pool worker
for flushes, checkpoints and retention): they must be quick and thread-safe, and must
not call back into the log that failed (its lock may be held). Thread-safety: a lock
guards the offline table; listeners are called outside it.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from storage.throttled_log import DEFAULT_INTERVAL_S, ThrottledLog

log = logging.getLogger(__name__)

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: OSError) -> bool:
    return exc.errno in _FULL_ERRNOS


@dataclass(frozen=True, slots=True)
class LogDirFailure:
    """A log directory went offline: which, why, and when (ms since the epoch)."""

    log_dir: Path
    reason: str
    at_ms: int


LogDirFailureListener = Callable[[LogDirFailure], None]


class LogDirFailureChannel:
    def __init__(self, *, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self._lock = threading.Lock()
        self._offline: dict[Path, LogDirFailure] = {}
        self._listeners: list[LogDirFailureListener] = []
        self._throttle = ThrottledLog(log, interval_s)

    def subscribe(self, listener: LogDirFailureListener) -> None:
        """Call ``listener`` once for each directory that goes offline from now on."""
        with self._lock:
            self._listeners.append(listener)

    def is_offline(self, log_dir: Path) -> bool:
        with self._lock:
            return log_dir in self._offline

    def offline_dirs(self) -> dict[Path, LogDirFailure]:
        with self._lock:
            return dict(self._offline)

    def report_full(self, log_dir: Path, what: str, exc: OSError) -> None:
        """A full disk met by ``what`` and undone (rate-limited log line)."""
        self._throttle.warning(
            ("full", log_dir, exc.errno),
            "Log dir %s: %s failed: %s; partitions there answer KAFKA_STORAGE_ERROR to "
            "writes until space is freed", log_dir, what, exc)

    def fail(self, log_dir: Path, what: str, exc: BaseException) -> LogDirFailure:
        """Take ``log_dir`` offline after ``what`` failed with ``exc`` (idempotent)."""
        failure = LogDirFailure(log_dir, f"{what}: {exc}", int(time.time() * 1000))
        with self._lock:
            known = self._offline.get(log_dir)
            if known is not None:
                return known
            self._offline[log_dir] = failure
            listeners = list(self._listeners)
        log.error("Log dir %s is offline: %s failed: %s. Its partitions answer "
                  "KAFKA_STORAGE_ERROR until the broker is restarted with the directory "
                  "readable and writable", log_dir, what, exc)
        for listener in listeners:
            try:
                listener(failure)
            except Exception:  # one listener's bug must not hide the failure from others
                log.exception("Log dir failure listener %r failed", listener)
        return failure

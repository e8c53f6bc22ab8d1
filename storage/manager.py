"""``LogManager``: every partition log in the broker's log directories (Kafka's ``LogManager``).

``log.dirs`` may name several directories (JBOD); each is a ``storage.log_dir.LogDir``
with its own lock, checkpoints and clean-shutdown marker. A new partition goes to the
online directory holding the fewest partitions (Kafka's ``nextLogDirs``); a partition
found in two directories fails start-up, as in Kafka.

Disk failures (``storage.log_dir_failure``): the manager owns the
``LogDirFailureChannel`` and is its first listener. When a directory fails, at start-up
or later (an append whose rollback failed, EIO, a failed fsync, a checkpoint that cannot
be written), every log in it is marked offline and stays in the table, so its partitions
answer KAFKA_STORAGE_ERROR instead of being recreated empty somewhere else; the other
directories keep serving. ``failure_channel.subscribe`` is the hook for the rest of the
broker (and, in a cluster, for the controller's ``/log_dir_event_notification``). Start-up
fails only when every directory failed. A full disk is not a failure: the operation is
undone and the next one may succeed once space is freed.

All methods here block (disk, fsync): the broker calls them at start-up, at shutdown, and
from a thread pool for periodic work (``retention_pass``, ``flush_due``,
``write_checkpoints``). ``get_log`` is cheap. Thread-safety: an internal lock guards the
partition table; each ``Log`` has its own lock.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from storage import fileio
from storage.checkpoints import fsync_dir
from storage.cleaner import CleanerConfig, LogCleaner, PartitionStates
from storage.cleaner_manager import CleanerManager
from storage.config import LogConfig
from storage.errors import LogDirOfflineError, LogIOError, StorageError
from storage.loader import load_log
from storage.log import Log, now_ms
from storage.log_dir import LOCK_FILE, MAX_PARTITIONS, LogDir, LogDirInUseError
from storage.log_dir_failure import LogDirFailure, LogDirFailureChannel, is_disk_full
from storage.naming import (
    TopicPartition,
    delete_dir_name,
    partition_dir_name,
)

__all__ = ["LOCK_FILE", "LogDirInUseError", "LogManager"]

log = logging.getLogger(__name__)

DEFAULT_RETENTION_CHECK_INTERVAL_MS = 300_000  # log.retention.check.interval.ms
SHUTDOWN_THREADS = 8  # parallel log closes (fsync-bound) at shutdown
METADATA_WRITE_THREADS = 8  # partition.metadata files written at once


class LogManager:
    """The logs of the log directories. Call ``startup()`` before use, ``shutdown()`` last."""

    def __init__(
        self,
        log_dirs: Path | Sequence[Path],
        default_config: LogConfig | None = None,
        *,
        config_for: Callable[[str], LogConfig] | None = None,
        clock_ms: Callable[[], int] = now_ms,
        retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS,
        broker_files: Collection[str] = (),
        failure_channel: LogDirFailureChannel | None = None,
        recovery_threads_per_dir: int = 1,
    ) -> None:
        paths = [log_dirs] if isinstance(log_dirs, Path) else list(log_dirs)
        if not paths:
            raise ValueError("at least one log dir is needed")
        self._dirs = [LogDir(p, broker_files=broker_files) for p in paths]
        self.default_config = default_config or LogConfig()
        self._config_for = config_for
        self._clock_ms = clock_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.recovery_threads_per_dir = max(1, recovery_threads_per_dir)
        self._logs: dict[TopicPartition, Log] = {}
        self._lock = threading.Lock()
        self._pending_dir_deletes: list[tuple[int, Path]] = []
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self.failure_channel.subscribe(self._on_dir_failure)
        self.cleaner: LogCleaner | None = None
        self._closing = False  # shutdown or abandon began: the logs write what they need

    # ------------------------------------------------------------------ directories
    @property
    def log_dirs(self) -> list[Path]:
        """Every configured log directory, in configuration order."""
        return [d.path for d in self._dirs]

    @property
    def log_dir(self) -> Path:
        """The first log directory (where the broker keeps its own files)."""
        return self._dirs[0].path

    def is_offline(self, log_dir: Path) -> bool:
        return self.failure_channel.is_offline(log_dir)

    def online_dirs(self) -> list[Path]:
        return [d.path for d in self._dirs if not self.is_offline(d.path)]

    @property
    def had_clean_shutdown(self) -> bool:
        """Every online directory was shut down cleanly last time."""
        return all(d.had_clean_shutdown for d in self._dirs if not self.is_offline(d.path))

    def _on_dir_failure(self, failure: LogDirFailure) -> None:
        # No lock: the failure may be met under it (get_or_create_log). Copying the values
        # is one C call, atomic under the GIL.
        for lg in list(self._logs.values()):
            if lg.log_dir == failure.log_dir:
                lg.mark_offline()

    def _fail(self, log_dir: Path, what: str, exc: OSError) -> StorageError:
        """Sort ``exc`` for an undone operation: LogIOError (full) or the dir goes offline."""
        if is_disk_full(exc):
            self.failure_channel.report_full(log_dir, what, exc)
            return LogIOError(f"{what} failed: {exc}")
        self.failure_channel.fail(log_dir, what, exc)
        return LogDirOfflineError(f"{what} failed: {exc}; log dir {log_dir} is offline")

    # ------------------------------------------------------------------ start-up
    def config_for(self, topic: str) -> LogConfig:
        return self._config_for(topic) if self._config_for is not None else self.default_config

    def startup(self) -> None:
        """Lock every directory and load its partitions (recovering after an unclean stop,
        ``recovery_threads_per_dir`` at a time: Kafka's ``num.recovery.threads.per.data.dir``).
        Blocking: the broker calls it from a worker thread, so that its event loop runs on.

        A directory the disk fails while loading goes offline; start-up fails only when
        every directory failed, another process holds a lock (``LogDirInUseError``), or a
        partition is found in two directories."""
        for d in self._dirs:
            try:
                d.lock()
                logs = d.load(self.config_for, clock_ms=self._clock_ms,
                              failure_channel=self.failure_channel,
                              max_partitions=MAX_PARTITIONS - len(self._logs),
                              threads=self.recovery_threads_per_dir)
            except OSError as exc:
                self.failure_channel.fail(d.path, "loading the logs", exc)
                continue
            except BaseException:
                self.abandon()
                raise
            for tp, lg in logs.items():
                other = self._logs.get(tp)
                if other is not None:
                    self.abandon()
                    for opened in logs.values():
                        opened.abandon()
                    raise StorageError(f"Duplicate log directories for {tp} are found in "
                                       f"both {other.dir} and {lg.dir}")
                self._logs[tp] = lg
        if not self.online_dirs():
            self.abandon()
            raise StorageError(f"every log dir failed at start-up: "
                               f"{', '.join(str(p) for p in self.log_dirs)}")

    def cluster_id(self) -> str | None:
        """The cluster id the online directories' ``meta.properties`` hold (they must agree)."""
        found: dict[str, Path] = {}
        for d in self._dirs:
            if self.is_offline(d.path):
                continue
            try:
                cid = d.cluster_id()
            except OSError as exc:
                self.failure_channel.fail(d.path, "reading meta.properties", exc)
                continue
            if cid is not None:
                found.setdefault(cid, d.path)
        if len(found) > 1:
            raise StorageError("log dirs hold different cluster ids: " + ", ".join(
                f"{p}: {cid}" for cid, p in found.items()))
        return next(iter(found), None)

    def ensure_meta_properties(self, broker_id: int, cluster_id: str | None) -> None:
        """Write ``meta.properties`` in every online directory, or check it names this
        broker and cluster (StorageError when it does not)."""
        for d in self._dirs:
            if self.is_offline(d.path):
                continue
            try:
                d.ensure_meta_properties(broker_id, cluster_id)
            except OSError as exc:
                self.failure_channel.fail(d.path, "writing meta.properties", exc)

    def start_cleaner(
        self, config: CleanerConfig, partition_states: PartitionStates | None = None
    ) -> LogCleaner | None:
        """Start the log cleaner's threads (after ``startup``); None when
        ``log.cleaner.enable`` is false (compacted logs then grow, as in Kafka)."""
        if not config.enable or config.threads < 1:
            log.info("log cleaner disabled")
            return None
        manager = CleanerManager(self.online_dirs(), self.logs)
        self.cleaner = LogCleaner(config, manager, partition_states=partition_states,
                                  clock_ms=self._clock_ms)
        self.cleaner.start()
        return self.cleaner

    def stop_cleaner(self) -> None:
        cleaner, self.cleaner = self.cleaner, None
        if cleaner is not None:
            cleaner.shutdown()

    # ------------------------------------------------------------------ partitions
    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def logs_in(self, log_dir: Path) -> dict[TopicPartition, Log]:
        return {tp: lg for tp, lg in self.logs().items() if lg.log_dir == log_dir}

    def _next_log_dir(self) -> Path:
        """The online directory with the fewest partitions (the first on a tie)."""
        counts = {p: 0 for p in self.online_dirs()}
        if not counts:
            raise LogDirOfflineError("every log dir is offline")
        if len(counts) == 1:  # no need to count (every log, for every partition created)
            return next(iter(counts))
        for lg in self._logs.values():
            if lg.log_dir in counts:
                counts[lg.log_dir] += 1
        return min(counts, key=lambda p: counts[p])

    def get_or_create_log(
        self,
        tp: TopicPartition,
        config: LogConfig | None = None,
        *,
        topic_id: bytes | None = None,
        is_new: bool = True,
    ) -> Log:
        """The partition's log, created empty if missing; ``topic_id`` is recorded in it
        (a log that has none gets it, Kafka's ``assignTopicId``; one with another id
        raises InconsistentTopicIdError) and ``partition.metadata`` written later
        (``flush_partition_metadata``, or at the log's first append, flush or close).

        ``is_new=False`` (a partition that should already exist) refuses to create it while
        a directory is offline, as Kafka does: it may be there. A disk error while
        creating removes what was made and raises (LogIOError or LogDirOfflineError)."""
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                if topic_id is not None:
                    existing.record_topic_id(topic_id)
                return existing
            offline = [p for p in self.log_dirs if self.is_offline(p)]
            if not is_new and offline:
                raise LogDirOfflineError(
                    f"Cannot create log for {tp}: log dirs {', '.join(map(str, offline))} "
                    "are offline and may hold it")
            if len(self._logs) >= MAX_PARTITIONS:
                raise StorageError(f"more than {MAX_PARTITIONS} partitions")
            parent = self._next_log_dir()
            directory = parent / partition_dir_name(tp)
            created = not directory.exists()
            try:
                fileio.mkdir(directory)
                new = load_log(
                    directory,
                    tp,
                    config or self.config_for(tp.topic),
                    clean_shutdown=True,
                    clock_ms=self._clock_ms,
                    failure_channel=self.failure_channel,
                )
            except OSError as exc:
                if created:
                    shutil.rmtree(directory, ignore_errors=True)
                raise self._fail(parent, f"creating the log of {tp}", exc) from exc
            if topic_id is not None:
                try:
                    new.record_topic_id(topic_id)
                except StorageError:  # a directory left behind holds another topic's id
                    new.abandon()
                    raise
            # The directory entry is fsynced by flush_partition_metadata or the first flush.
            new.fresh_directory = created
            self._logs[tp] = new
            return new

    def flush_partition_metadata(self) -> int:
        """Write every recorded, unwritten ``partition.metadata`` (Kafka's scheduled
        ``maybeFlush``), ``METADATA_WRITE_THREADS`` at a time (each: file fsync, rename,
        fsync of its partition directory), then fsync each log directory that holds one
        of them once, for the new partition directories' entries. Blocking; returns how
        many were written. A failure is the log's (full disk: retried later; else its
        directory goes offline), logged here."""
        dirty = [lg for lg in self.logs().values() if lg.topic_id_unwritten]
        if not dirty:
            return 0

        def write(lg: Log) -> bool:
            try:
                return lg.write_topic_id()
            except StorageError as exc:  # reported by the log (full disk or dir offline)
                log.debug("%s: partition.metadata not written: %s", lg.topic_partition, exc)
                return False

        with ThreadPoolExecutor(max_workers=min(METADATA_WRITE_THREADS, len(dirty))) as pool:
            written = [lg for lg, ok in zip(dirty, pool.map(write, dirty), strict=True) if ok]
        for parent in {lg.log_dir for lg in written}:
            if self.is_offline(parent) or self._closing:
                continue
            try:
                fsync_dir(parent)
            except OSError as exc:
                self._fail(parent, "syncing new partition directories", exc)
        return len(written)

    def delete_log(self, tp: TopicPartition) -> bool:
        """Close the log and rename its directory ``<tp>.<uuid>-delete`` (removed after
        ``file.delete.delay.ms`` by ``delete_pending``). False if there was no log.
        On an offline directory the files stay where they are (logged)."""
        cleaner = self.cleaner
        if cleaner is not None:
            # A running cleaning of it stops at its next chunk; its swap would find the log
            # closed and give up; its reads use descriptors of their own. No need to wait.
            cleaner.manager.abort(tp)
        with self._lock:
            victim = self._logs.pop(tp, None)
        if victim is None:
            return False
        victim.close()
        if cleaner is not None:
            cleaner.manager.remove(tp)
        parent = victim.log_dir
        if self.is_offline(parent):
            log.warning("%s: partition %s deleted; its files stay in the offline log dir",
                        parent, tp)
            return True
        target = parent / delete_dir_name(tp)
        try:
            fileio.replace(victim.dir, target)
            fileio.fsync_dir(parent)
        except OSError as exc:
            self.failure_channel.fail(parent, f"deleting the log of {tp}", exc)
            raise LogDirOfflineError(f"deleting the log of {tp} failed: {exc}") from exc
        due = self._clock_ms() + victim.config.file_delete_delay_ms
        with self._lock:
            self._pending_dir_deletes.append((due, target))
        log.info("%s: partition %s deleted (directory renamed to %s)", parent, tp, target.name)
        return True

    def delete_pending(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Remove deleted partition directories whose delay passed; returns how many."""
        now = self._clock_ms() if now_ms is None else now_ms
        with self._lock:
            due = [p for t, p in self._pending_dir_deletes if force or t <= now]
            self._pending_dir_deletes = [
                (t, p) for t, p in self._pending_dir_deletes if not (force or t <= now)
            ]
        for path in due:
            shutil.rmtree(path, ignore_errors=True)
        return len(due)

    # ------------------------------------------------------------------ periodic work
    def retention_pass(
        self,
        now_ms: int | None = None,
        high_watermark_for: Callable[[TopicPartition], int | None] | None = None,
    ) -> int:
        """Delete old segments of every log (``log.retention.check.interval.ms``) and the
        files whose delete delay passed. Returns segments deleted."""
        now = self._clock_ms() if now_ms is None else now_ms
        deleted = 0
        for tp, lg in self.logs().items():
            if lg.offline:
                continue
            hw = high_watermark_for(tp) if high_watermark_for is not None else None
            try:
                deleted += lg.delete_old_segments(now, hw)
                lg.delete_pending_files(now)
            except StorageError as exc:  # closed or deleted meanwhile; disk errors reported
                log.debug("retention skipped %s: %s", tp, exc)
        self.delete_pending(now)
        return deleted

    def flush_due(self, now_ms: int | None = None) -> int:
        """Flush every log whose ``flush.ms`` passed; returns how many were flushed."""
        return self.flush_logs(self.due_for_flush(now_ms))

    def due_for_flush(self, now_ms: int | None = None) -> dict[TopicPartition, Log]:
        """The logs whose ``flush.ms`` passed, with unflushed data. Cheap (no disk, no
        log lock): the broker asks on its event loop, and hands a thread work only when
        there is some."""
        now = self._clock_ms() if now_ms is None else now_ms
        return {tp: lg for tp, lg in self.logs().items() if lg.flush_due(now)}

    def flush_logs(self, logs: Mapping[TopicPartition, Log]) -> int:
        """Flush ``logs`` (blocking); returns how many were flushed."""
        flushed = 0
        for tp, lg in logs.items():
            try:
                lg.flush()
            except StorageError as exc:  # already reported by the log
                log.debug("flush of %s failed: %s", tp, exc)
                continue
            flushed += 1
        return flushed

    def write_checkpoints(self) -> None:
        """Write recovery points and log start offsets of every online directory
        (atomically, with fsync). A directory whose write fails keeps its old files."""
        for d in self._dirs:
            if self.is_offline(d.path):
                continue
            try:
                d.write_checkpoints(self.logs_in(d.path))
            except OSError as exc:
                self._fail(d.path, "writing the offset checkpoints", exc)

    def write_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """``replication-offset-checkpoint`` of every online directory: the broker's high
        watermarks of the partitions that live there."""
        where = {tp: lg.log_dir for tp, lg in self.logs().items()}
        for d in self._dirs:
            if self.is_offline(d.path):
                continue
            mine = {tp: hw for tp, hw in high_watermarks.items() if where.get(tp) == d.path}
            try:
                d.write_high_watermarks(mine)
            except OSError as exc:
                self._fail(d.path, "writing replication-offset-checkpoint", exc)

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for d in self._dirs:
            if self.is_offline(d.path):
                continue
            try:
                out.update(d.read_high_watermarks())
            except OSError as exc:
                self.failure_channel.fail(d.path, "reading replication-offset-checkpoint", exc)
        return out

    # ------------------------------------------------------------------ shutdown
    def shutdown(self, high_watermarks: Mapping[TopicPartition, int] | None = None) -> None:
        """Ordered clean shutdown: flush and close every log (indexes trimmed), write the
        checkpoints, then the clean-shutdown marker last, then release the locks. An offline
        directory gets no checkpoint and no marker: its next start recovers it."""
        self._closing = True
        self.stop_cleaner()  # no swap may run while the logs close
        logs = self.logs()
        # Close (flush: recovery point = log end offset) in parallel: fsync releases the GIL.
        # Each log fsyncs its partition directory once, after everything written there;
        # the log dirs' own fsyncs come with the checkpoints written next in each of them.
        with ThreadPoolExecutor(max_workers=SHUTDOWN_THREADS) as pool:
            list(pool.map(_close_leaving_log_dir_sync, logs.values()))
        self.write_checkpoints()
        if high_watermarks is not None:
            self.write_high_watermarks(high_watermarks)
        self.delete_pending(force=True)
        for d in self._dirs:
            if self.is_offline(d.path):
                log.warning("%s: offline, not marked as cleanly shut down", d.path)
                continue
            try:
                d.write_clean_shutdown_marker()
            except OSError as exc:
                self.failure_channel.fail(d.path, "writing the clean-shutdown marker", exc)
        with self._lock:
            self._logs.clear()
        for d in self._dirs:
            d.unlock()
        log.info("clean shutdown of %s complete", ", ".join(str(p) for p in self.log_dirs))

    def abandon(self) -> None:
        """Drop every file handle without flushing, trimming or checkpoints: what a crash
        leaves behind (crash-recovery tests, failed start-up; never a real shutdown)."""
        self._closing = True
        self.stop_cleaner()
        for lg in self.logs().values():
            lg.abandon()
        with self._lock:
            self._logs.clear()
        for d in self._dirs:
            d.unlock()


def _close_leaving_log_dir_sync(lg: Log) -> None:
    lg.close(sync_log_dir=False)

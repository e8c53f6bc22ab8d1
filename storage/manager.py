"""``LogManager``: every partition log in one log directory (Kafka's ``LogManager``).

Directory layout (``log.dirs`` entry)::

    .lock                              flock'd while a broker uses the directory
    .kafka_cleanshutdown               written last on clean shutdown, removed on start
    meta.properties                    broker.id, version, cluster.id
    recovery-point-offset-checkpoint   topic partition recoveryPoint
    log-start-offset-checkpoint        topic partition logStartOffset
    replication-offset-checkpoint      topic partition highWatermark (the broker's values)
    <topic>-<partition>/               one ``Log`` each
    <topic>-<partition>.<uuid>-delete/ a deleted partition, removed after file.delete.delay.ms

Start-up (``startup``) loads every partition: after a clean shutdown it trusts the files
(no scans); otherwise each log recovers from its checkpointed recovery point. Bad input
is repaired and logged, never fatal: stray files are reported and left, unreadable
checkpoints mean full recovery, corrupt segment tails are cut.

All methods here block (disk, fsync): the broker calls them at start-up, at shutdown, and
from a thread pool for periodic work (``retention_pass``, ``flush_due``,
``write_checkpoints``). ``get_log`` is cheap. Thread-safety: an internal lock guards the
partition table; each ``Log`` has its own lock.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from storage.checkpoints import (
    fsync_dir,
    read_offset_checkpoint,
    read_properties,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
)
from storage.cleaner import CleanerConfig, LogCleaner, PartitionStates
from storage.cleaner_manager import CleanerManager
from storage.config import LogConfig
from storage.errors import CorruptCheckpointError, StorageError
from storage.loader import load_log
from storage.log import Log, now_ms
from storage.naming import (
    CLEAN_SHUTDOWN_MARKER,
    CLEANER_CHECKPOINT,
    FUTURE_DIR_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    STRAY_DIR_SUFFIX,
    TopicPartition,
    delete_dir_name,
    is_delete_dir,
    parse_partition_dir,
    partition_dir_name,
)

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
_LOG_DIR_FILES = frozenset(
    {
        LOCK_FILE,
        CLEAN_SHUTDOWN_MARKER,
        META_PROPERTIES,
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        REPLICATION_CHECKPOINT,
        CLEANER_CHECKPOINT,
    }
)
DEFAULT_RETENTION_CHECK_INTERVAL_MS = 300_000  # log.retention.check.interval.ms
MAX_PARTITIONS = 1_000_000
SHUTDOWN_THREADS = 8  # parallel log closes (fsync-bound) at shutdown


class LogDirInUseError(StorageError):
    """Another process holds the log directory's ``.lock``."""


class LogManager:
    """The logs of one log directory. Call ``startup()`` before use, ``shutdown()`` last."""

    def __init__(
        self,
        log_dir: Path,
        default_config: LogConfig | None = None,
        *,
        config_for: Callable[[str], LogConfig] | None = None,
        clock_ms: Callable[[], int] = now_ms,
        retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS,
    ) -> None:
        self.log_dir = log_dir
        self.default_config = default_config or LogConfig()
        self._config_for = config_for
        self._clock_ms = clock_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._lock = threading.Lock()
        self._pending_dir_deletes: list[tuple[int, Path]] = []
        self._lock_file: int | None = None
        self.had_clean_shutdown = False
        self.cleaner: LogCleaner | None = None

    # ------------------------------------------------------------------ start-up
    def config_for(self, topic: str) -> LogConfig:
        return self._config_for(topic) if self._config_for is not None else self.default_config

    def _acquire_dir_lock(self) -> None:
        fd = os.open(self.log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirInUseError(
                f"{self.log_dir} is in use by another process (.lock is held)"
            ) from None
        self._lock_file = fd

    def _read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(self.log_dir / name)
        except (CorruptCheckpointError, OSError) as exc:
            log.warning("%s: ignoring unreadable %s (%s)", self.log_dir, name, exc)
            return {}

    def startup(self) -> None:
        """Lock the directory and load every partition (recovering after an unclean stop)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._acquire_dir_lock()
        marker = self.log_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        self.had_clean_shutdown = clean
        recovery_points = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        cleaned = self._read_checkpoint(CLEANER_CHECKPOINT)
        if clean and not (self.log_dir / RECOVERY_POINT_CHECKPOINT).exists():
            clean = False  # a marker without checkpoints proves nothing
        for entry in os.scandir(self.log_dir):
            name = entry.name
            if not entry.is_dir():
                if name not in _LOG_DIR_FILES and not name.endswith(".tmp"):
                    log.warning("%s: ignoring stray file %s", self.log_dir, name)
                continue
            if is_delete_dir(name):
                log.info("%s: removing deleted partition directory %s", self.log_dir, name)
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            if name.endswith((FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
                log.warning("%s: ignoring directory %s", self.log_dir, name)
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                log.warning("%s: ignoring stray directory %s", self.log_dir, name)
                continue
            if len(self._logs) >= MAX_PARTITIONS:
                raise StorageError(f"{self.log_dir}: more than {MAX_PARTITIONS} partitions")
            tp_clean = clean and tp in recovery_points
            self._logs[tp] = load_log(
                Path(entry.path),
                tp,
                self.config_for(tp.topic),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                clean_shutdown=tp_clean,
                cleaned=tp in cleaned,
                clock_ms=self._clock_ms,
            )
        # From now on a crash is an unclean shutdown.
        if marker.exists():
            marker.unlink()
            fsync_dir(self.log_dir)
        log.info("%s: loaded %d partition logs (clean shutdown: %s)",
                 self.log_dir, len(self._logs), clean)

    def ensure_meta_properties(self, broker_id: int, cluster_id: str | None) -> None:
        """Write ``meta.properties``, or check that it names this broker and cluster."""
        path = self.log_dir / META_PROPERTIES
        if not path.exists():
            write_meta_properties(path, broker_id, cluster_id)
            return
        props = read_properties(path)
        if props.get("broker.id") != str(broker_id):
            raise StorageError(
                f"{path}: broker.id {props.get('broker.id')} does not match {broker_id}"
            )
        if cluster_id is not None and props.get("cluster.id") not in (None, cluster_id):
            raise StorageError(
                f"{path}: cluster.id {props.get('cluster.id')} does not match {cluster_id}"
            )

    def start_cleaner(
        self, config: CleanerConfig, partition_states: PartitionStates | None = None
    ) -> LogCleaner | None:
        """Start the log cleaner's threads (after ``startup``); None when
        ``log.cleaner.enable`` is false (compacted logs then grow, as in Kafka)."""
        if not config.enable or config.threads < 1:
            log.info("%s: log cleaner disabled", self.log_dir)
            return None
        manager = CleanerManager(self.log_dir, self.logs)
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

    def get_or_create_log(
        self,
        tp: TopicPartition,
        config: LogConfig | None = None,
        *,
        topic_id: bytes | None = None,
    ) -> Log:
        """The partition's log, created empty (with ``partition.metadata``) if missing."""
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            if len(self._logs) >= MAX_PARTITIONS:
                raise StorageError(f"{self.log_dir}: more than {MAX_PARTITIONS} partitions")
            directory = self.log_dir / partition_dir_name(tp)
            directory.mkdir(parents=True, exist_ok=True)
            if topic_id is not None:
                write_partition_metadata(directory / PARTITION_METADATA, topic_id)
            new = load_log(
                directory,
                tp,
                config or self.config_for(tp.topic),
                clean_shutdown=True,
                clock_ms=self._clock_ms,
            )
            new.topic_id = topic_id if topic_id is not None else new.topic_id
            self._logs[tp] = new  # the directory entry is fsynced by the log's first flush
            return new

    def delete_log(self, tp: TopicPartition) -> bool:
        """Close the log and rename its directory ``<tp>.<uuid>-delete`` (removed after
        ``file.delete.delay.ms`` by ``delete_pending``). False if there was no log."""
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
        target = self.log_dir / delete_dir_name(tp)
        os.replace(victim.dir, target)
        fsync_dir(self.log_dir)
        due = self._clock_ms() + victim.config.file_delete_delay_ms
        with self._lock:
            self._pending_dir_deletes.append((due, target))
        log.info("%s: partition %s deleted (directory renamed to %s)", self.log_dir, tp,
                 target.name)
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
            hw = high_watermark_for(tp) if high_watermark_for is not None else None
            try:
                deleted += lg.delete_old_segments(now, hw)
                lg.delete_pending_files(now)
            except StorageError as exc:  # a log closed or deleted meanwhile
                log.debug("%s: retention skipped %s: %s", self.log_dir, tp, exc)
        self.delete_pending(now)
        return deleted

    def flush_due(self, now_ms: int | None = None) -> int:
        """Flush every log whose ``flush.ms`` passed; returns how many were flushed."""
        now = self._clock_ms() if now_ms is None else now_ms
        flushed = 0
        for lg in self.logs().values():
            if lg.flush_due(now):
                lg.flush()
                flushed += 1
        return flushed

    def write_checkpoints(self) -> None:
        """Write recovery points and log start offsets (atomically, with fsync)."""
        logs = self.logs()
        write_offset_checkpoint(
            self.log_dir / RECOVERY_POINT_CHECKPOINT,
            {tp: lg.recovery_point for tp, lg in logs.items()},
        )
        write_offset_checkpoint(
            self.log_dir / LOG_START_OFFSET_CHECKPOINT,
            {tp: lg.log_start_offset for tp, lg in logs.items()},
        )

    def write_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """``replication-offset-checkpoint``: the broker's high watermarks."""
        write_offset_checkpoint(self.log_dir / REPLICATION_CHECKPOINT, high_watermarks)

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        return self._read_checkpoint(REPLICATION_CHECKPOINT)

    # ------------------------------------------------------------------ shutdown
    def shutdown(self, high_watermarks: Mapping[TopicPartition, int] | None = None) -> None:
        """Ordered clean shutdown: flush and close every log (indexes trimmed), write the
        checkpoints, then the clean-shutdown marker last, then release the lock."""
        self.stop_cleaner()  # no swap may run while the logs close
        logs = self.logs()
        # Close (flush: recovery point = log end offset) in parallel: fsync releases the GIL.
        with ThreadPoolExecutor(max_workers=SHUTDOWN_THREADS) as pool:
            list(pool.map(Log.close, logs.values()))
        self.write_checkpoints()
        if high_watermarks is not None:
            self.write_high_watermarks(high_watermarks)
        self.delete_pending(force=True)
        marker = self.log_dir / CLEAN_SHUTDOWN_MARKER
        with open(marker, "wb") as f:
            os.fsync(f.fileno())
        fsync_dir(self.log_dir)
        with self._lock:
            self._logs.clear()
        if self._lock_file is not None:
            os.close(self._lock_file)
            self._lock_file = None
        log.info("%s: clean shutdown complete", self.log_dir)

    def abandon(self) -> None:
        """Drop every file handle without flushing, trimming or checkpoints: what a crash
        leaves behind (crash-recovery tests; never used on a real shutdown)."""
        self.stop_cleaner()
        for lg in self.logs().values():
            lg.abandon()
        with self._lock:
            self._logs.clear()
        if self._lock_file is not None:
            os.close(self._lock_file)
            self._lock_file = None

"""One log directory (one ``log.dirs`` entry): its lock, its files, loading its partitions.

Directory layout::

    .lock                              flock'd while a broker uses the directory
    .kafka_cleanshutdown               written last on clean shutdown, removed on start
    meta.properties                    broker.id, version, cluster.id
    recovery-point-offset-checkpoint   topic partition recoveryPoint
    log-start-offset-checkpoint        topic partition logStartOffset
    replication-offset-checkpoint      topic partition highWatermark (the broker's values)
    <topic>-<partition>/               one ``Log`` each
    <topic>-<partition>.<uuid>-delete/ a deleted partition, removed after file.delete.delay.ms

Loading (``load``): after a clean shutdown the files are trusted (no scans); otherwise
each log recovers from its checkpointed recovery point. Bad input is repaired and
logged, never fatal: stray files are reported and left, unreadable checkpoints mean full
recovery, corrupt segment tails are cut. Files the broker itself keeps here
(``broker_files``) are not strays.

Every method blocks (disk, fsync) and raises ``OSError`` as the disk does; the log manager
decides what an error means (``storage.log_dir_failure``). Thread-safety: none of its own;
the log manager calls these from one thread at a time per directory.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from storage import fileio
from storage.checkpoints import (
    read_offset_checkpoint,
    read_properties,
    write_meta_properties,
    write_offset_checkpoint,
)
from storage.config import LogConfig
from storage.errors import CorruptCheckpointError, StorageError
from storage.loader import load_log
from storage.log import Log
from storage.log_dir_failure import LogDirFailureChannel
from storage.naming import (
    CLEAN_SHUTDOWN_MARKER,
    CLEANER_CHECKPOINT,
    FUTURE_DIR_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    STRAY_DIR_SUFFIX,
    TopicPartition,
    is_delete_dir,
    parse_partition_dir,
)

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
LOG_DIR_FILES = frozenset(
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
MAX_PARTITIONS = 1_000_000


class LogDirInUseError(StorageError):
    """Another process holds the log directory's ``.lock``."""


class LogDir:
    """See the module docstring."""

    def __init__(self, path: Path, *, broker_files: Collection[str] = ()) -> None:
        self.path = path
        self._known_files = LOG_DIR_FILES | frozenset(broker_files)
        self._lock_fd: int | None = None
        self.had_clean_shutdown = False

    def __repr__(self) -> str:
        return f"LogDir({self.path})"

    # ------------------------------------------------------------------ lock
    def lock(self) -> None:
        """Create the directory if needed and flock its ``.lock`` (LogDirInUseError)."""
        fileio.mkdir(self.path)
        fd = fileio.open_new(self.path / LOCK_FILE, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirInUseError(
                f"{self.path} is in use by another process (.lock is held)"
            ) from None
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------------ loading
    def _read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(self.path / name)
        except CorruptCheckpointError as exc:
            log.warning("%s: ignoring unreadable %s (%s)", self.path, name, exc)
            return {}

    def load(self, config_for: Callable[[str], LogConfig], *, clock_ms: Callable[[], int],
             failure_channel: LogDirFailureChannel,
             max_partitions: int = MAX_PARTITIONS) -> dict[TopicPartition, Log]:
        """Every partition log of the directory, recovered if the last stop was unclean.
        Raises ``OSError`` if the disk fails (the logs opened so far are closed again)."""
        marker = self.path / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        recovery_points = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        cleaned = self._read_checkpoint(CLEANER_CHECKPOINT)
        if clean and not (self.path / RECOVERY_POINT_CHECKPOINT).exists():
            clean = False  # a marker without checkpoints proves nothing
        self.had_clean_shutdown = clean
        logs: dict[TopicPartition, Log] = {}
        try:
            for entry in os.scandir(self.path):
                name = entry.name
                if not entry.is_dir():
                    if name not in self._known_files and not name.endswith(".tmp"):
                        log.warning("%s: ignoring stray file %s", self.path, name)
                    continue
                if is_delete_dir(name):
                    log.info("%s: removing deleted partition directory %s", self.path, name)
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                if name.endswith((FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
                    log.warning("%s: ignoring directory %s", self.path, name)
                    continue
                tp = parse_partition_dir(name)
                if tp is None:
                    log.warning("%s: ignoring stray directory %s", self.path, name)
                    continue
                if len(logs) >= max_partitions:
                    raise StorageError(f"{self.path}: more than {max_partitions} partitions")
                logs[tp] = load_log(
                    Path(entry.path),
                    tp,
                    config_for(tp.topic),
                    recovery_point=recovery_points.get(tp, 0),
                    log_start_offset=start_offsets.get(tp, 0),
                    clean_shutdown=clean and tp in recovery_points,
                    cleaned=tp in cleaned,
                    clock_ms=clock_ms,
                    failure_channel=failure_channel,
                )
            # From now on a crash is an unclean shutdown.
            if marker.exists():
                marker.unlink()
                fileio.fsync_dir(self.path)
        except BaseException:
            for opened in logs.values():
                opened.abandon()
            raise
        log.info("%s: loaded %d partition logs (clean shutdown: %s)", self.path, len(logs), clean)
        return logs

    # ------------------------------------------------------------------ meta.properties
    def cluster_id(self) -> str | None:
        """The ``cluster.id`` in ``meta.properties``, if the broker ran here before."""
        path = self.path / META_PROPERTIES
        if not path.exists():
            return None
        try:
            return read_properties(path).get("cluster.id") or None
        except CorruptCheckpointError as exc:
            raise StorageError(f"{path}: unreadable: {exc}") from None

    def ensure_meta_properties(self, broker_id: int, cluster_id: str | None) -> None:
        """Write ``meta.properties``, or check that it names this broker and cluster."""
        path = self.path / META_PROPERTIES
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

    # ------------------------------------------------------------------ checkpoints
    def write_checkpoints(self, logs: Mapping[TopicPartition, Log]) -> None:
        """Recovery points and log start offsets of ``logs`` (atomically, with fsync)."""
        write_offset_checkpoint(
            self.path / RECOVERY_POINT_CHECKPOINT,
            {tp: lg.recovery_point for tp, lg in logs.items()},
        )
        write_offset_checkpoint(
            self.path / LOG_START_OFFSET_CHECKPOINT,
            {tp: lg.log_start_offset for tp, lg in logs.items()},
        )

    def write_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        write_offset_checkpoint(self.path / REPLICATION_CHECKPOINT, high_watermarks)

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        return self._read_checkpoint(REPLICATION_CHECKPOINT)

    def write_clean_shutdown_marker(self) -> None:
        """Last step of a clean shutdown: the next start trusts the files. Created in place,
        empty, as Kafka does (its presence is the whole message)."""
        fd = fileio.open_new(self.path / CLEAN_SHUTDOWN_MARKER, os.O_WRONLY)
        try:
            fileio.fsync(fd, self.path / CLEAN_SHUTDOWN_MARKER)
        finally:
            os.close(fd)
        fileio.fsync_dir(self.path)

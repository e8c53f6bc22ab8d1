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
from concurrent.futures import ThreadPoolExecutor
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
             max_partitions: int = MAX_PARTITIONS,
             threads: int = 1) -> dict[TopicPartition, Log]:
        """Every partition log of the directory, recovered if the last stop was unclean,
        then ``threads`` partitions at a time (Kafka's ``num.recovery.threads.per.data.dir``:
        recovery scans wait on the disk without the GIL); after a clean stop one at a time.
        Raises ``OSError`` if the disk fails (the logs opened so far are closed again)."""
        marker = self.path / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        recovery_points = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        cleaned = self._read_checkpoint(CLEANER_CHECKPOINT)
        if clean and not (self.path / RECOVERY_POINT_CHECKPOINT).exists():
            clean = False  # a marker without checkpoints proves nothing
        self.had_clean_shutdown = clean
        found: list[tuple[TopicPartition, Path]] = []
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
            if len(found) >= max_partitions:
                raise StorageError(f"{self.path}: more than {max_partitions} partitions")
            found.append((tp, Path(entry.path)))

        def load_one(item: tuple[TopicPartition, Path]) -> Log:
            tp, directory = item
            return load_log(
                directory,
                tp,
                config_for(tp.topic),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                clean_shutdown=clean and tp in recovery_points,
                cleaned=tp in cleaned,
                clock_ms=clock_ms,
                failure_channel=failure_channel,
            )

        logs: dict[TopicPartition, Log] = {}
        if clean:
            # Nothing to recover: each load is a few file opens and reads under the
            # interpreter lock, which threads would only contend for (1,000 partitions
            # loaded in 0.28-0.34 s by one thread, 0.47-0.58 s by two, here).
            threads = 1
        try:
            if threads <= 1 or len(found) <= 1:
                for item in found:
                    logs[item[0]] = load_one(item)
            else:
                self._load_in_threads(found, load_one, logs, threads)
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

    def _load_in_threads(self, found: list[tuple[TopicPartition, Path]],
                         load_one: Callable[[tuple[TopicPartition, Path]], Log],
                         logs: dict[TopicPartition, Log], threads: int) -> None:
        """``load_one`` over ``found`` in ``threads`` threads, each a share of the partitions
        one after the other (one task a thread: a task a partition costs more in hand-overs
        than a clean start's load). Every opened log lands in ``logs`` (in ``found``'s
        order), also when another one failed; the first failure is raised after all stop."""
        threads = min(threads, len(found))
        shares = [found[i::threads] for i in range(threads)]
        failed: list[BaseException] = []

        def load_share(share: list[tuple[TopicPartition, Path]]) -> list[Log]:
            opened: list[Log] = []
            for item in share:
                if failed:  # another share failed: stop early
                    break
                try:
                    opened.append(load_one(item))
                except BaseException as exc:
                    failed.append(exc)
                    break
            return opened

        with ThreadPoolExecutor(max_workers=threads,
                                thread_name_prefix=f"log-recovery-{self.path.name}") as pool:
            loaded = list(pool.map(load_share, shares))
        by_tp = {tp: lg for i, opened in enumerate(loaded)
                 for (tp, _), lg in zip(shares[i], opened, strict=False)}
        for tp, _ in found:
            if tp in by_tp:
                logs[tp] = by_tp[tp]
        if failed:
            raise failed[0]

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

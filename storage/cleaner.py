"""The log cleaner: compaction of ``cleanup.policy=compact`` logs (Kafka's ``LogCleaner``),
with the cleaning work in worker processes, off the broker's interpreter.

Per ``log.cleaner.threads``: one broker thread (``log-cleaner-thread-<n>``) and the worker
process it drives (``storage.cleaner_process``, started with the thread at start-up). The
thread loops: choose the dirtiest log (``storage.cleaner_manager``), hand it to the worker
as a ``CleaningJob``, serve the worker's requests until the cleaning ends, checkpoint;
else sleep ``log.cleaner.backoff.ms``. The worker does the cleaning itself
(``storage.cleaner_engine``: offset map, filter, ``.cleaned`` segment and indexes, all the
per-record Python work), so the broker's event loop never waits for the interpreter lock
behind it. The broker keeps what must stay in the process that owns the log
(``LogHost``): the choice, a private descriptor per segment read (dup'd under the log's
lock), and the swap (``Log.replace_segments``: renames only, under the log's lock; the
loader finishes or undoes a swap cut by a crash at any step), the checkpoint and the
metrics. A cleaning stops at its next chunk when the cleaner shuts down or the partition
is deleted, and is abandoned (its ``.cleaned`` files deleted, nothing checkpointed) when
the log was truncated or lost a segment meanwhile.

Reconfiguration (Kafka's ``LogCleaner.reconfigure``, for the dynamic broker configs):
``reconfigure(config)`` stops the threads as shutdown does (a running cleaning stops at
its next chunk, its files removed, the log dirty as before) and starts ``config.threads``
new ones, whose workers take the new settings; what the manager knows (checkpoints,
uncleanable partitions) stays.

Failures: an unexpected error in a cleaning marks the partition uncleanable until
restart, with one warning (Kafka's rule). A worker that dies (killed, out of memory)
aborts its cleaning: the thread removes the partition's ``.cleaned`` files, starts a new
worker (after ``WORKER_RESTART_BACKOFF_S``, doubling up to ``WORKER_RESTART_BACKOFF_MAX_S``
while it keeps dying) and the log is retried; after ``MAX_WORKER_DEATHS`` deaths in a row
on the same partition it is marked uncleanable. Shutdown: stop flag, running cleanings
abort, each thread stops its worker (``Stop``, killed after ``STOP_WAIT_S``), threads
joined within the bound.

``Cleaner`` runs the same cleaning in the calling thread (tests, tools).

The high watermark and the producers' last offsets live in the broker: it passes
``partition_states``, called from the cleaner threads, which answers for a set of
partitions (``PartitionState``); a partition it does not answer for is not cleaned.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from storage.cleaner_engine import (
    CleanerConfig,
    CleaningAbortedError,
    CleaningEngine,
    CleaningJob,
    SegmentRef,
    Throttler,
    cleaned_paths,
    read_chunks,
)
from storage.cleaner_manager import CleanerManager, LogToClean
from storage.cleaner_process import CleanerProcess, WorkerDiedError
from storage.cleaner_stats import CleanerStats, LastRecord
from storage.errors import LogDirOfflineError, LogIOError
from storage.naming import CLEANED_SUFFIX, TopicPartition
from storage.segment import LogSegment
from storage.testhooks import pause_point

__all__ = ["Cleaner", "CleanerConfig", "CleaningAbortedError", "LogCleaner", "PartitionState",
           "PartitionStates", "Throttler", "read_chunks"]

log = logging.getLogger("storage.cleaner")

MAX_WORKER_DEATHS = 3
WORKER_RESTART_BACKOFF_S = 1.0
WORKER_RESTART_BACKOFF_MAX_S = 60.0


class PartitionState(NamedTuple):
    """What the broker knows of a partition that the cleaner must respect."""

    last_stable_offset: int
    active_producers: Mapping[int, LastRecord]


PartitionStates = Callable[[Sequence[TopicPartition]], Mapping[TopicPartition, PartitionState]]


def job_for(ltc: LogToClean, now_ms: int, producers: Mapping[int, LastRecord]) -> CleaningJob:
    view = ltc.view
    config = view.config
    return CleaningJob(
        tp=ltc.tp, directory=ltc.log.dir,
        segments=tuple(SegmentRef(s.base_offset, s.next_offset, s.size_bytes)
                       for s in view.segments),
        first_dirty_offset=ltc.first_dirty_offset,
        first_uncleanable_offset=ltc.first_uncleanable_offset, now_ms=now_ms,
        active_producers=dict(producers), segment_bytes=config.segment_bytes,
        segment_index_bytes=config.segment_index_bytes,
        index_interval_bytes=config.index_interval_bytes,
        delete_retention_ms=config.delete_retention_ms,
    )


class LogHost:
    """The broker's side of one cleaning (``storage.cleaner_engine.CleaningHost``)."""

    def __init__(self, ltc: LogToClean, check_done: Callable[[TopicPartition], None]) -> None:
        self.ltc = ltc
        self._check_done = check_done
        self._segments = {s.base_offset: s.segment for s in ltc.view.segments}

    def _segment(self, base_offset: int) -> LogSegment:
        seg = self._segments.get(base_offset)
        if seg is None:
            raise CleaningAbortedError(f"{self.ltc.tp}: no segment {base_offset} when chosen")
        return seg

    def segment_fd(self, base_offset: int) -> int:
        fds = self.ltc.log.dup_segment_fds([self._segment(base_offset)])
        if fds is None:
            raise CleaningAbortedError(f"{self.ltc.tp}: a segment left the log")
        return fds[0]

    def check_done(self) -> None:
        self._check_done(self.ltc.tp)

    def swap(self, base_offset: int, old_base_offsets: list[int]) -> None:
        ltc = self.ltc
        lg = ltc.log
        config = ltc.view.config
        old = [self._segment(b) for b in old_base_offsets]
        pause_point("cleaner:cleaned-written")
        self.check_done()
        cleaned = LogSegment.open(lg.dir, base_offset,
                                  index_interval_bytes=config.index_interval_bytes,
                                  max_index_size_bytes=config.segment_index_bytes,
                                  suffix=CLEANED_SUFFIX)
        try:
            if not lg.replace_segments(cleaned, old, ltc.view.truncations,
                                       step=lambda name: pause_point(f"cleaner:{name}")):
                raise CleaningAbortedError(f"{ltc.tp}: the log changed during the cleaning")
        except BaseException:
            if cleaned.suffix == CLEANED_SUFFIX:
                cleaned.delete_files()
            raise
        log.info("Swapped in cleaned segment %d for %d segment(s) %s of log %s (%d bytes)",
                 base_offset, len(old), old_base_offsets, ltc.tp, cleaned.size_bytes)


class CleanerBackend(Protocol):
    """What runs a cleaning for a cleaner thread."""

    id: int

    def clean(self, ltc: LogToClean, now_ms: int,
              active_producers: Mapping[int, LastRecord]) -> tuple[int, CleanerStats]: ...


class Cleaner:
    """Cleans in the calling thread (tests, tools): the engine with the log as its host."""

    def __init__(self, cleaner_id: int, config: CleanerConfig, throttler: Throttler,
                 check_done: Callable[[TopicPartition], None]) -> None:
        self.id = cleaner_id
        self.engine = CleaningEngine(config, throttler)
        self.check_done = check_done

    def clean(self, ltc: LogToClean, now_ms: int,
              active_producers: Mapping[int, LastRecord]) -> tuple[int, CleanerStats]:
        """Clean ``ltc``; returns the next first dirty offset and the statistics."""
        return self.engine.clean(job_for(ltc, now_ms, active_producers),
                                 LogHost(ltc, self.check_done))


class WorkerCleaner:
    """Cleans in a worker process (``storage.cleaner_process``), restarted when it dies."""

    def __init__(self, cleaner_id: int, config: CleanerConfig,
                 check_done: Callable[[TopicPartition], None]) -> None:
        self.id = cleaner_id
        self.process = CleanerProcess(cleaner_id, config)
        self.check_done = check_done
        self.restart_backoff_s = WORKER_RESTART_BACKOFF_S
        self.start_attempts = 0

    def clean(self, ltc: LogToClean, now_ms: int,
              active_producers: Mapping[int, LastRecord]) -> tuple[int, CleanerStats]:
        return self.process.clean(job_for(ltc, now_ms, active_producers),
                                  LogHost(ltc, self.check_done))


@dataclass(slots=True)
class CleanerTotals:
    """Counters over every cleaning since start-up (for metrics)."""

    cleanings: int = 0
    aborted: int = 0
    failed: int = 0
    worker_restarts: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    last: CleanerStats | None = None


class LogCleaner:
    """The cleaner threads and workers of the broker. ``start()``, then ``shutdown()``."""

    def __init__(self, config: CleanerConfig, manager: CleanerManager, *,
                 partition_states: PartitionStates | None = None,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.config = config
        self.manager = manager
        self._partition_states = partition_states
        self._clock_ms = clock_ms
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.throttler = Throttler(config.max_io_bytes_per_second, self._stop)
        self._threads: list[threading.Thread] = []
        self._workers: list[WorkerCleaner] = []
        self._totals_lock = threading.Lock()
        # start, reconfigure and shutdown one at a time; nothing starts after shutdown
        self._lifecycle_lock = threading.Lock()
        self._shut_down = False
        self._generation = 0  # threads of an older one (past the stop bound) end their loop
        self._deaths: dict[TopicPartition, int] = {}  # worker deaths in a row, per partition
        self.totals = CleanerTotals()

    def start(self) -> None:
        with self._lifecycle_lock:
            if not self._shut_down:
                self._start_threads()

    def reconfigure(self, config: CleanerConfig, timeout_s: float = 30.0) -> None:
        """Restart the threads and workers with ``config`` (see the module docstring).
        Blocking (joins the threads): from a worker thread. Nothing after ``shutdown``."""
        with self._lifecycle_lock:
            if self._shut_down:
                return
            old = self.config
            if config.max_io_bytes_per_second != old.max_io_bytes_per_second:
                log.info("Updating logCleanerIoMaxBytesPerSecond: %s",
                         config.max_io_bytes_per_second)
                self.throttler.rate = config.max_io_bytes_per_second
            self._stop_threads(timeout_s)
            self.config = config
            self._stop.clear()
            self._wake.clear()
            self._start_threads()

    def _start_threads(self) -> None:
        log.info("Starting the log cleaner (%d threads, each with a worker process)",
                 self.config.threads)
        for i in range(self.config.threads):
            worker = WorkerCleaner(i, self.config, self._check_done)
            thread = threading.Thread(target=self._run, args=(worker, self._generation),
                                      name=f"log-cleaner-thread-{i}", daemon=True)
            self._workers.append(worker)
            self._threads.append(thread)
            thread.start()

    @property
    def dead_thread_count(self) -> int:
        """Threads that ended, or whose worker is not running, while the cleaner runs
        (Kafka's ``DeadThreadCount``)."""
        if self._stop.is_set():
            return 0
        return sum(not t.is_alive() or (w.process.starts > 0 and not w.process.alive)
                   for t, w in zip(self._threads, self._workers, strict=True))

    def worker_pids(self) -> list[int | None]:
        return [w.process.pid if w.process.alive else None for w in self._workers]

    def wake(self) -> None:
        """Look for work now instead of after the backoff (tests, config changes)."""
        self._wake.set()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the threads (a running cleaning stops at its next chunk), which stop their
        workers, and wait; workers still running after the bound are killed."""
        with self._lifecycle_lock:
            self._shut_down = True
            self._stop_threads(timeout_s)

    def _stop_threads(self, timeout_s: float) -> None:
        if not self._threads:
            return
        log.info("Shutting down the log cleaner")
        self._generation += 1
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + timeout_s
        for thread, worker in zip(self._threads, self._workers, strict=True):
            thread.join(max(deadline - time.monotonic(), 0.0))
            if thread.is_alive():
                log.warning("%s did not stop within %.0f s: killing its worker", thread.name,
                            timeout_s)
                worker.process.kill()
        self._threads.clear()
        self._workers.clear()

    def _check_done(self, tp: TopicPartition) -> None:
        if self._stop.is_set():
            raise CleaningAbortedError("the cleaner is shutting down")
        if self.manager.is_aborted(tp):
            raise CleaningAbortedError(f"{tp}: cleaning aborted")

    def _run(self, worker: WorkerCleaner, generation: int) -> None:
        try:
            while not self._stop.is_set() and generation == self._generation:
                if not worker.process.alive and not self._start_worker(worker):
                    continue
                try:
                    cleaned = self.clean_filthiest(worker)
                except Exception:  # the loop must go on; the failing log is marked already
                    log.exception("Log cleaner thread %d failed a pass", worker.id)
                    cleaned = False
                if not cleaned:
                    self._wake.wait(self.config.backoff_ms / 1000)
                    self._wake.clear()
        finally:
            worker.process.stop()

    def _start_worker(self, worker: WorkerCleaner) -> bool:
        """(Re)start the thread's worker; False (after waiting the backoff) if it failed."""
        if worker.start_attempts > 0:
            if self._stop.wait(worker.restart_backoff_s):
                return False
            # the next restart, if this worker dies too before a cleaning succeeds, waits longer
            worker.restart_backoff_s = min(worker.restart_backoff_s * 2,
                                           WORKER_RESTART_BACKOFF_MAX_S)
            log.info("Restarting log cleaner worker %d", worker.id)
            with self._totals_lock:
                self.totals.worker_restarts += 1
        worker.start_attempts += 1
        try:
            worker.process.start()
        except (OSError, WorkerDiedError) as exc:
            log.error("Cannot start log cleaner worker %d: %s", worker.id, exc)
            return False
        return True

    def _states(self) -> tuple[dict[TopicPartition, int], Mapping[TopicPartition, PartitionState]]:
        if self._partition_states is None:
            return {}, {}
        tps = [tp for tp, lg in self.manager.logs().items() if lg.config.compacts]
        states = self._partition_states(tps) if tps else {}
        lsos = {tp: (states[tp].last_stable_offset if tp in states else 0) for tp in tps}
        return lsos, states

    def clean_filthiest(self, cleaner: CleanerBackend) -> bool:
        """One pass: clean the dirtiest log if one is cleanable; True if one was chosen."""
        lsos, states = self._states()
        now = self._clock_ms()
        ltc = self.manager.grab_filthiest(now, lsos)
        if ltc is None:
            return False
        end: int | None = None
        state = states.get(ltc.tp)
        try:
            end, stats = cleaner.clean(ltc, now, state.active_producers if state else {})
            self._record(cleaner.id, ltc, end, stats)
            self._deaths.pop(ltc.tp, None)
            if isinstance(cleaner, WorkerCleaner):
                cleaner.restart_backoff_s = WORKER_RESTART_BACKOFF_S
        except CleaningAbortedError as exc:
            log.info("Cleaning of log %s stopped: %s", ltc.tp, exc)
            with self._totals_lock:
                self.totals.aborted += 1
        except (OSError, LogIOError, LogDirOfflineError) as exc:
            # A disk error: the cleaned files are gone (a full disk: try again later) or
            # the log dir is offline (reported once by storage.log_dir_failure).
            if isinstance(exc, OSError):
                ltc.log.io_failed(f"cleaning {ltc.tp}", exc)
            with self._totals_lock:
                self.totals.aborted += 1
        except WorkerDiedError as exc:
            self._worker_died(cleaner, ltc, exc)
        except Exception as exc:
            if ltc.log.truncations != ltc.view.truncations:  # read a segment being cut
                log.info("Cleaning of log %s stopped: the log was truncated (%s)", ltc.tp, exc)
                with self._totals_lock:
                    self.totals.aborted += 1
                return True
            log.warning("Unexpected error cleaning log %s: marking it uncleanable", ltc.tp,
                        exc_info=True)
            self.manager.mark_uncleanable(ltc.tp)
            with self._totals_lock:
                self.totals.failed += 1
        finally:
            self.manager.done_cleaning(ltc.tp, end)
        if end is not None:
            pause_point("cleaner:checkpointed")
        return True

    def _worker_died(self, cleaner: CleanerBackend, ltc: LogToClean,
                     exc: WorkerDiedError) -> None:
        """The cleaning is aborted: its files go, the log is retried by a new worker, up
        to ``MAX_WORKER_DEATHS`` times in a row."""
        for base in {s.base_offset for s in ltc.view.segments}:
            for path in cleaned_paths(ltc.log.dir, base):
                path.unlink(missing_ok=True)
        deaths = self._deaths[ltc.tp] = self._deaths.get(ltc.tp, 0) + 1
        if deaths >= MAX_WORKER_DEATHS:
            log.warning("%s: %d cleanings of %s in a row ended so: marking it uncleanable",
                        exc, deaths, ltc.tp)
            self.manager.mark_uncleanable(ltc.tp)
            self._deaths.pop(ltc.tp, None)
            with self._totals_lock:
                self.totals.failed += 1
        else:
            log.warning("%s: the cleaning is aborted and will be retried (%d of %d)", exc,
                        deaths, MAX_WORKER_DEATHS)
            with self._totals_lock:
                self.totals.aborted += 1

    def _record(self, cleaner_id: int, ltc: LogToClean, end: int, stats: CleanerStats) -> None:
        with self._totals_lock:
            t = self.totals
            t.cleanings += 1
            t.bytes_read += stats.bytes_read
            t.bytes_written += stats.bytes_written
            t.messages_read += stats.messages_read
            t.messages_written += stats.messages_written
            t.last = stats
        mb = 1024 * 1024
        elapsed = stats.elapsed_s
        read_mb = stats.bytes_read / mb
        log.info(
            "Log cleaner thread %d cleaned log %s (dirty section = [%d, %d]): %.1f MB of log "
            "processed in %.1f seconds (%.1f MB/sec); offset map %.1f MB in %.1f s (buffer "
            "utilization %.1f%%); start size %.1f MB (%d messages), end size %.1f MB (%d "
            "messages): %.1f%% size reduction (%.1f%% fewer messages)",
            cleaner_id, ltc.tp, ltc.first_dirty_offset, end, read_mb, elapsed,
            read_mb / elapsed, stats.map_bytes_read / mb, stats.elapsed_index_s,
            100 * stats.buffer_utilization, read_mb, stats.messages_read,
            stats.bytes_written / mb, stats.messages_written,
            100 * (1 - stats.bytes_written / stats.bytes_read) if stats.bytes_read else 0.0,
            100 * (1 - stats.messages_written / stats.messages_read) if stats.messages_read
            else 0.0,
        )
        if stats.invalid_messages_read:
            log.warning("Found %d invalid messages (no key) while cleaning %s",
                        stats.invalid_messages_read, ltc.tp)

"""Which log the cleaner cleans next, and how far each log is cleaned (Kafka's
``LogCleanerManager``).

State, guarded by one lock:

- ``cleaner-offset-checkpoint`` in each log dir (offset checkpoint format, see
  ``storage.checkpoints``): per partition of that dir, the first dirty offset, i.e. where
  the next cleaning starts. Written atomically after every cleaning; partitions without a
  log are dropped from it; a dir whose logs are offline is not written.
- Partitions in progress (a cleaner thread is on them), paused (``abort_and_pause``:
  deletion waits for a running cleaning to stop) and uncleanable (a cleaning raised an
  unexpected error: logged once, skipped until restart).

Choosing (``grab_filthiest``), as Kafka does, over logs whose ``cleanup.policy`` contains
``compact``:

- first dirty offset: the checkpoint, reset to the log start offset when it is below it or
  past the log end (and the checkpoint is rewritten);
- first uncleanable offset: the smallest of the last stable offset (the high watermark
  here), the active segment's base offset, and, with ``min.compaction.lag.ms`` > 0, the
  first dirty segment whose largest timestamp is newer than ``now - lag``; then rounded
  down to the base offset of the segment holding it;
- cleanable bytes: the segments from the one holding the first dirty offset up to that
  segment; clean bytes: the segments below the first dirty offset;
- a log must clean now when a dirty non-active segment's first batch is older than
  ``max.compaction.lag.ms``;
- candidates are logs with a dirty ratio (cleanable / (clean + cleanable)) above
  ``min.cleanable.dirty.ratio``, or that must clean now and have cleanable bytes; the one
  with the highest ratio wins.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from storage.checkpoints import read_offset_checkpoint, write_offset_checkpoint
from storage.errors import CorruptCheckpointError, StorageError
from storage.log import CleaningView, Log
from storage.naming import CLEANER_CHECKPOINT, TopicPartition
from storage.offsets import LONG_MAX

log = logging.getLogger("storage.cleaner")

MAX_PAUSE_WAIT_S = 60.0


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A log chosen for cleaning, with the offsets and sizes that chose it."""

    tp: TopicPartition
    log: Log
    view: CleaningView
    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment base offset (or the active's)
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def cleanable_offsets(
    view: CleaningView, checkpoint: int | None, last_stable_offset: int, now_ms: int
) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, checkpoint needs rewriting)."""
    start = view.log_start_offset
    dirty = start if checkpoint is None else checkpoint
    force = False
    if dirty < start:
        if not view.config.deletes:
            log.warning("Resetting first dirty offset to log start offset %d since the "
                        "checkpointed offset %d is invalid", start, dirty)
        dirty, force = start, True
    elif dirty > view.log_end_offset:
        log.warning("The checkpointed dirty offset %d is past the log end offset %d: resetting "
                    "to the log start offset %d", dirty, view.log_end_offset, start)
        dirty, force = start, True
    uncleanable = min(last_stable_offset, view.active_base_offset)
    lag_ms = max(view.config.min_compaction_lag_ms, 0)
    if lag_ms > 0:
        for seg in view.segments:
            if seg.next_offset <= dirty:
                continue
            if seg.largest_timestamp > now_ms - lag_ms:
                uncleanable = min(uncleanable, seg.base_offset)
                break
    return dirty, max(dirty, uncleanable), force


def cleanable_bytes(view: CleaningView, first_dirty: int, uncleanable: int) -> tuple[int, int]:
    """(base offset of the first uncleanable segment, cleanable bytes before it)."""
    first_uncleanable = view.active_base_offset
    for seg in view.segments:
        if seg.base_offset <= uncleanable < seg.next_offset:
            first_uncleanable = seg.base_offset
            break
    low = min(first_dirty, first_uncleanable)
    total = sum(s.size_bytes for s in view.segments
                if s.next_offset > low and s.base_offset < first_uncleanable)
    return first_uncleanable, total


def max_compaction_delay_ms(view: CleaningView, first_dirty: int, now_ms: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty segment is (0: not yet)."""
    lag_ms = view.config.max_compaction_lag_ms
    if lag_ms >= LONG_MAX:
        return 0
    stamps = [s.first_batch_timestamp for s in view.segments
              if s.next_offset > first_dirty and s.first_batch_timestamp > 0]
    if not stamps:
        return 0
    until = now_ms - max(lag_ms, 0)
    earliest = min(stamps)
    return until - earliest if earliest < until else 0


class CleanerManager:
    def __init__(self, log_dirs: Path | Sequence[Path],
                 logs: Callable[[], Mapping[TopicPartition, Log]]) -> None:
        self.log_dirs = [log_dirs] if isinstance(log_dirs, Path) else list(log_dirs)
        self._logs = logs
        self._lock = threading.Condition()
        self._in_progress: set[TopicPartition] = set()
        self._aborting: set[TopicPartition] = set()
        self._paused: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()
        self._checkpoints = self._read_checkpoints()
        self.max_dirty_ratio = 0.0  # the dirtiest log's ratio at the last choice (metric)
        self.last_run_ms = 0  # when a cleaner thread last looked for work (metric)

    def _read_checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for log_dir in self.log_dirs:
            try:
                out.update(read_offset_checkpoint(log_dir / CLEANER_CHECKPOINT))
            except (CorruptCheckpointError, OSError) as exc:
                log.warning("%s: ignoring unreadable %s (%s): every compacted log there is "
                            "cleaned from its start", log_dir, CLEANER_CHECKPOINT, exc)
        return out

    def logs(self) -> Mapping[TopicPartition, Log]:
        return self._logs()

    def checkpoints(self) -> dict[TopicPartition, int]:
        with self._lock:
            return dict(self._checkpoints)

    def _write_checkpoints(self) -> None:
        """Persist (lock held); entries of logs that are gone are dropped."""
        live = self._logs()
        self._checkpoints = {tp: off for tp, off in self._checkpoints.items() if tp in live}
        for log_dir in self.log_dirs:
            here = [tp for tp, lg in live.items() if lg.log_dir == log_dir]
            if any(live[tp].offline for tp in here):
                continue  # no writes to a failed disk
            write_offset_checkpoint(
                log_dir / CLEANER_CHECKPOINT,
                {tp: off for tp, off in self._checkpoints.items() if tp in here})

    # ------------------------------------------------------------------ choosing
    def grab_filthiest(
        self, now_ms: int, last_stable_offsets: Mapping[TopicPartition, int]
    ) -> LogToClean | None:
        """Choose the dirtiest cleanable log and mark it in progress (None: nothing to do)."""
        with self._lock:
            self.last_run_ms = now_ms
            candidates: list[LogToClean] = []
            force_write = False
            for tp, lg in self._logs().items():
                config = lg.config
                if (not config.compacts or tp in self._in_progress or tp in self._paused
                        or tp in self._uncleanable):
                    continue
                try:
                    view = lg.cleaning_view(
                        largest_timestamps=config.min_compaction_lag_ms > 0,
                        first_timestamps=config.max_compaction_lag_ms < LONG_MAX)
                    lowest = lg.take_lowest_truncation()
                except StorageError:
                    continue  # closed meanwhile (deleted)
                checkpoint = self._checkpoints.get(tp)
                if lowest is not None and checkpoint is not None and checkpoint > lowest:
                    checkpoint = self._checkpoints[tp] = lowest
                    force_write = True
                lso = last_stable_offsets.get(tp, view.log_end_offset)
                dirty, uncleanable, force = cleanable_offsets(view, checkpoint, lso, now_ms)
                if force:
                    self._checkpoints[tp] = dirty
                    force_write = True
                first_uncleanable, cleanable = cleanable_bytes(view, dirty, uncleanable)
                clean = sum(s.size_bytes for s in view.segments if s.base_offset < dirty)
                delay = max_compaction_delay_ms(view, dirty, now_ms)
                ltc = LogToClean(tp, lg, view, dirty, first_uncleanable, clean, cleanable,
                                 delay > 0)
                if ltc.total_bytes > 0:
                    candidates.append(ltc)
            if force_write:
                self._write_checkpoints()
            self.max_dirty_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
            cleanable_logs = [
                c for c in candidates
                if (c.needs_compaction_now and c.cleanable_bytes > 0)
                or c.cleanable_ratio > c.view.config.min_cleanable_dirty_ratio
            ]
            if not cleanable_logs:
                return None
            best = max(cleanable_logs, key=lambda c: c.cleanable_ratio)
            self._in_progress.add(best.tp)
            return best

    # ------------------------------------------------------------------ progress
    def is_aborted(self, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._aborting

    def done_cleaning(self, tp: TopicPartition, end_offset: int | None) -> None:
        """A cleaning of ``tp`` ended; ``end_offset`` (the next first dirty offset) is
        checkpointed unless the cleaning was aborted or failed (None)."""
        with self._lock:
            self._in_progress.discard(tp)
            aborted = tp in self._aborting
            self._aborting.discard(tp)
            if end_offset is not None and not aborted and tp in self._logs():
                self._checkpoints[tp] = end_offset
                self._write_checkpoints()
            self._lock.notify_all()

    @property
    def uncleanable_count(self) -> int:
        with self._lock:
            return len(self._uncleanable)

    def mark_uncleanable(self, tp: TopicPartition) -> None:
        with self._lock:
            self._uncleanable.add(tp)

    def abort_and_pause(self, tp: TopicPartition, timeout_s: float = MAX_PAUSE_WAIT_S) -> bool:
        """Stop a running cleaning of ``tp`` (it aborts at its next check) and keep the
        cleaner off it until ``resume``. Blocks until no cleaning of ``tp`` runs; False if
        that took longer than ``timeout_s``."""
        with self._lock:
            self._paused[tp] = self._paused.get(tp, 0) + 1
            if tp in self._in_progress:
                self._aborting.add(tp)
            return self._lock.wait_for(lambda: tp not in self._in_progress, timeout_s)

    def abort(self, tp: TopicPartition) -> None:
        """Make a running cleaning of ``tp`` stop at its next check, without waiting (the
        log is being deleted: its swap would find the log closed anyway)."""
        with self._lock:
            if tp in self._in_progress:
                self._aborting.add(tp)

    def resume(self, tp: TopicPartition) -> None:
        with self._lock:
            count = self._paused.get(tp, 0) - 1
            if count > 0:
                self._paused[tp] = count
            else:
                self._paused.pop(tp, None)

    def remove(self, tp: TopicPartition) -> None:
        """Forget ``tp`` (its log was deleted): checkpoint entry and uncleanable mark."""
        with self._lock:
            self._uncleanable.discard(tp)
            if self._checkpoints.pop(tp, None) is not None:
                try:
                    self._write_checkpoints()
                except OSError as exc:
                    log.warning("cannot rewrite %s: %s", CLEANER_CHECKPOINT, exc)

"""The leader epoch cache: which leader epoch began at which offset (``leader-epoch-checkpoint``).

File layout (Kafka's ``LeaderEpochCheckpointFile``; text, one entry per line)::

    0               version
    2               number of entries
    0 0             epoch startOffset
    3 1500

Entries are strictly increasing in both epoch and start offset. ``end_offset_for`` answers
OffsetForLeaderEpoch exactly as Kafka's ``LeaderEpochFileCache.endOffsetFor`` does.

Durability: changes mark the cache dirty and ``flush`` writes the file atomically (fsync;
call it from a thread pool). The log flushes the cache before it advances its recovery
point, so entries for data below the recovery point are always on disk; entries above it
are rebuilt from the batches' epochs by recovery.

Thread-safety: none of its own; the owning ``Log`` serialises calls under its lock.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

from storage.checkpoints import read_versioned_lines, write_versioned_lines
from storage.offsets import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpoch, Offset

log = logging.getLogger(__name__)

MAX_EPOCH_ENTRIES = 1_000_000  # bound: one entry per leader change


class EpochEntry(NamedTuple):
    epoch: LeaderEpoch
    start_offset: Offset


def _parse_entry(parts: list[str]) -> EpochEntry:
    epoch, start = int(parts[0]), int(parts[1])
    if epoch < 0 or start < 0:
        raise ValueError("negative epoch or offset")
    return EpochEntry(LeaderEpoch(epoch), Offset(start))


class LeaderEpochCache:
    """Epoch -> start offset for one partition, persisted in ``leader-epoch-checkpoint``."""

    def __init__(self, path: Path, entries: list[EpochEntry] | None = None) -> None:
        self.path = path
        self._entries: list[EpochEntry] = []
        self._dirty = False
        for entry in entries or []:
            self.assign(entry.epoch, entry.start_offset)
        self._dirty = False

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache:
        """Read the checkpoint (missing is empty). Raises ``CorruptCheckpointError``."""
        if not path.exists():
            return cls(path)
        entries = read_versioned_lines(path, 2, _parse_entry)
        return cls(path, entries)

    # ------------------------------------------------------------------ queries
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def is_dirty(self) -> bool:
        return self._dirty

    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def latest_epoch(self) -> LeaderEpoch | None:
        return self._entries[-1].epoch if self._entries else None

    def epoch_for_offset(self, offset: int) -> LeaderEpoch | None:
        """The epoch whose range holds ``offset`` (None if before the first entry)."""
        found: LeaderEpoch | None = None
        for entry in self._entries:  # bounded by MAX_EPOCH_ENTRIES; usually a handful
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[LeaderEpoch, Offset]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as Kafka's ``endOffsetFor``:

        - requested -1: (-1, -1);
        - the latest epoch: (epoch, log end offset);
        - an older epoch: (largest known epoch <= requested, start offset of the next
          larger epoch); if none is <= requested, (requested, start of the first larger);
        - larger than every epoch, or an empty cache: (-1, -1).
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        latest = self.latest_epoch()
        if latest is not None and latest == requested_epoch:
            return LeaderEpoch(requested_epoch), Offset(log_end_offset)
        floor: EpochEntry | None = None
        higher: EpochEntry | None = None
        for entry in self._entries:
            if entry.epoch <= requested_epoch:
                floor = entry
            else:
                higher = entry
                break
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if floor is None:
            return LeaderEpoch(requested_epoch), higher.start_offset
        return floor.epoch, higher.start_offset

    # ------------------------------------------------------------------ changes
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed.

        As Kafka: ignored for negative epochs and when it adds nothing; entries with an
        epoch >= ``epoch`` or a start offset >= ``start_offset`` are dropped first, so
        both sequences stay increasing.
        """
        if epoch < 0 or start_offset < 0:
            return False
        entries = self._entries  # self.latest_entry(), inline: once per append
        latest = entries[-1] if entries else None
        if latest is not None and latest.epoch == epoch and latest.start_offset <= start_offset:
            return False
        kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        if len(kept) != len(self._entries):
            log.info(
                "%s: epoch %d at offset %d replaces entries %s",
                self.path, epoch, start_offset, self._entries[len(kept):],
            )
        kept.append(EpochEntry(LeaderEpoch(epoch), Offset(start_offset)))
        if len(kept) > MAX_EPOCH_ENTRIES:
            kept = kept[-MAX_EPOCH_ENTRIES:]
        self._entries = kept
        self._dirty = True
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to it)."""
        if end_offset < 0:
            return
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._dirty = True

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop entries wholly before it and move the
        start of the epoch that holds it up to ``start_offset`` (Kafka's truncateFromStart)."""
        floor_index = -1
        for i, entry in enumerate(self._entries):
            if entry.start_offset <= start_offset:
                floor_index = i
            else:
                break
        if floor_index < 0:
            return
        floor = self._entries[floor_index]
        if floor_index == 0 and floor.start_offset == start_offset:
            return
        self._entries = [EpochEntry(floor.epoch, Offset(start_offset)), *self._entries[floor_index + 1:]]
        self._dirty = True

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._dirty = True

    def flush(self, *, sync_dir: bool = True) -> bool:
        """Write the checkpoint atomically if it changed (blocking: fsync); True if it was
        written. ``sync_dir=False``: the caller fsyncs the directory afterwards."""
        if not self._dirty:
            return False
        write_versioned_lines(self.path, [f"{e.epoch} {e.start_offset}" for e in self._entries],
                              sync_dir=sync_dir)
        self._dirty = False
        return True

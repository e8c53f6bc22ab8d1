"""Where the group coordinator writes its records: one ``__consumer_offsets`` partition each.

``RecordLog`` is the narrow interface the sans-IO coordinator writes through: append a list
of (key, value-or-None) records to a partition and get a callback with Kafka's error code
once the append is durable (acks=all on the partition), or failed. The production
implementation (``broker.group.log_store``) appends a magic-2 batch to the local
``__consumer_offsets`` log through the replica manager. ``MemoryRecordLog`` keeps records in
lists, for unit tests and tools: it completes appends at once, or when ``flush`` is called
(``deferred=True``) so the "state changed while the write was in flight" paths can be tested,
and it can be told to fail the next appends with a given error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeAlias

from protocol.errors import ErrorCode

GroupRecord: TypeAlias = tuple[bytes, bytes | None]  # (key, value); value None = tombstone
AppendCallback: TypeAlias = Callable[[ErrorCode], None]


class RecordLog(Protocol):
    def append(self, partition: int, records: list[GroupRecord], callback: AppendCallback) -> None:
        """Append ``records`` to ``__consumer_offsets-<partition>``; then ``callback(error)``."""
        ...


class MemoryRecordLog:
    MAX_PENDING = 100_000

    def __init__(self, *, deferred: bool = False) -> None:
        self.partitions: dict[int, list[GroupRecord]] = {}
        self.deferred = deferred
        self.fail_with: ErrorCode | None = None
        self._pending: list[tuple[int, list[GroupRecord], AppendCallback]] = []

    def append(self, partition: int, records: list[GroupRecord], callback: AppendCallback) -> None:
        if self.deferred:
            if len(self._pending) >= self.MAX_PENDING:
                callback(ErrorCode.REQUEST_TIMED_OUT)
                return
            self._pending.append((partition, list(records), callback))
            return
        self._complete(partition, list(records), callback)

    def _complete(self, partition: int, records: list[GroupRecord], callback: AppendCallback) -> None:
        if self.fail_with is not None:
            callback(self.fail_with)
            return
        self.partitions.setdefault(partition, []).extend(records)
        callback(ErrorCode.NO_ERROR)

    def flush(self) -> int:
        """Complete every deferred append, in order; returns how many."""
        pending, self._pending = self._pending, []
        for partition, records, callback in pending:
            self._complete(partition, records, callback)
        return len(pending)

    def records(self, partition: int) -> list[GroupRecord]:
        return list(self.partitions.get(partition, ()))

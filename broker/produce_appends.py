"""Produce appends gathered during one turn of the event loop and done together at its end.

Under P5 (16 producers, one request in flight each) the loop reads ~14 produce requests for
the same partition in one turn. The first produce the fast path serves in a turn is
appended at once, as when requests come alone; its answer is held for the end of the turn
(``broker.network.write_batch``). While answers are held, the turn is open: a further
produce request is not appended when it is read but added here (and so is the first of a
turn, after a turn whose appends held several requests: such a load goes on), and at the
end of the turn, before the held answers are written, each partition's added batches are
appended together
(``ReplicaManager.append_group``: the same checks and answers as one after the other, one
write) and each of those requests answered, in the order they were read. An answer is never
sent before its append. Each connection has at most one request in flight (it is muted
meanwhile), so what waits here is bounded by the number of connections.

Why: the append's fixed cost per call (the call chain, the partition's role and log checks,
the roll and index checks, the write system call, the high watermark, the purgatory
wake-ups, producer expiry) is paid once per partition per turn instead of once per request;
a request that comes alone costs what it cost before (nothing is held, so nothing waits).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.partition import AppendResult, GroupResults
    from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)
_new_tuple = tuple.__new__  # a NamedTuple's own __new__ is Python code; this is C


class PendingAppend(Protocol):
    """One request's records waiting for the end of the turn; ``appended`` gets its result
    once, or ``failed`` is called where there is none (a bug: the request's connection is
    closed). The handler's, which answers the request from there."""

    records: memoryview | bytes | None

    def appended(self, result: AppendResult) -> None: ...

    def failed(self) -> None: ...

    def answer_group(self, group: list[PendingAppend], results: GroupResults) -> None:
        """Answer each request of ``group`` (this one is its first; all are the same
        handler's) with its result, in order, as ``appended`` would one by one: together,
        where the handler's answers share what they can. Each answer that fails is logged
        and its request ``failed``."""


class Turn(Protocol):
    """The loop's turn as the connections' held answers see it (``WriteBatch``)."""

    holding: bool  # answers are held for the end of this turn, and not being written yet

    def before_writing(self, work: Callable[[], None]) -> None:
        """Run ``work`` at the end of this turn, before the held answers are written."""

    def write_now(self) -> None:
        """Write the answers held now (none are held at the end of the turn's writing)."""


class ProduceAppends:
    """The appends added in this turn, by (topic, partition, produce version), in arrival
    order."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self._replica_manager = replica_manager
        # A plain tuple each (the TopicPartition is made once per group, in _run).
        self._pending: dict[tuple[str, int, int], list[PendingAppend]] = {}
        self._turn: Turn | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the turn's (its call_soon)
        # The last turn's appends held more than one request: under such a load the first
        # request of a turn is added here too (it would be appended alone otherwise).
        self._concurrent = False

    def attach(self, turn: Turn) -> None:
        """The network's turn (set when it starts serving, on its loop; until then nothing
        is added)."""
        self._turn = turn
        # Kept: asyncio.get_running_loop() checks the process id (a getpid system call).
        self._loop = asyncio.get_running_loop()

    def deferring(self) -> bool:
        """Whether a produce read now is added here rather than appended at once: the turn
        is open (answers are held for its end)."""
        turn = self._turn
        return turn is not None and (turn.holding or self._concurrent)

    def add(self, topic: str, partition: int, produce_version: int,
            pending: PendingAppend) -> None:
        """Append ``pending`` (acks=1) to ``topic``'s ``partition`` at the end of this turn,
        then answer it (only while ``deferring()``)."""
        waiting = self._pending
        if not waiting:
            turn = self._turn
            assert turn is not None
            if turn.holding:
                turn.before_writing(self._run)
            else:  # the first of the turn: nothing else marks its end
                assert self._loop is not None
                self._loop.call_soon(self._run)
        key = (topic, partition, produce_version)
        group = waiting.get(key)
        if group is None:
            waiting[key] = [pending]
        else:
            group.append(pending)

    def _run(self) -> None:
        waiting, self._pending = self._pending, {}
        self._concurrent = len(waiting) > 1 or any(len(g) > 1 for g in waiting.values())
        append_group = self._replica_manager.append_group
        for (topic, partition, version), group in waiting.items():
            tp = _new_tuple(TopicPartition, (topic, partition))
            try:
                results = append_group(tp, [p.records for p in group], version)
            except Exception:
                log.exception("Appending %d produce request(s) to %s-%d failed; closing their "
                              "connections", len(group), tp[0], tp[1])
                for pending in group:
                    pending.failed()
                continue
            group[0].answer_group(group, results)
        turn = self._turn
        if turn is not None:  # the answers held (when run outside the end of the turn)
            turn.write_now()

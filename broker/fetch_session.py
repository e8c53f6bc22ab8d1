"""Incremental fetch sessions (KIP-227; Kafka's ``FetchSession.scala``).

A client that sends a full fetch with session epoch 0 gets a session id; its next requests
(epoch 1, 2, ...) carry only the partitions whose fetch position changed, plus the
partitions to forget, and the answer carries only the partitions with something new:
records, a moved high watermark / last stable offset / log start offset, or an error. The
broker keeps each session's partitions (fetch offset, max bytes, and the HW / LSO / log
start it last answered with) in a bounded cache.

Request metadata (session_id, session_epoch) decides the context::

    epoch -1  (FINAL)     sessionless full fetch; a session_id given is closed
    epoch  0  (INITIAL)   full fetch; a session_id given is closed; a new session is made
                          if the cache has room, else the answer has session_id 0
    epoch  >0             incremental: unknown id -> FETCH_SESSION_ID_NOT_FOUND,
                          epoch not the expected one -> INVALID_FETCH_SESSION_EPOCH;
                          the expected epoch then advances (wrapping to 1 after 2**31-1)

Partitions answered in an incremental response move to the end of the session's order, so
a partition with a lot of data cannot starve the others across requests (as in Kafka).

Bounds: at most ``max_slots`` sessions (``max.incremental.fetch.session.cache.slots``,
1000); when full, the least recently used session idle for more than ``eviction_ms``
(``min.incremental.fetch.session.eviction.ms``, 120 s) is evicted, else no session is made
(session id 0; clients then keep sending full fetches). ``max_slots`` 0 disables sessions.

Thread-safety: none; the broker's event loop only.
"""

from __future__ import annotations

import enum
import random
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
DEFAULT_MAX_SLOTS = 1000
DEFAULT_EVICTION_MS = 120_000

# A partition's identity in a session: (topic id, or topic name before Fetch v13; partition)
PartitionKey = tuple["uuid.UUID | str", int]


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= INT32_MAX else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the request side and the last values answered."""

    topic: str | None  # None: unknown topic id (answered UNKNOWN_TOPIC_ID)
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def must_respond(self, error: int, size_bytes: int, high_watermark: int,
                     last_stable_offset: int, log_start_offset: int) -> bool:
        """Kafka's maybeUpdateResponseData: is there news for the client? Updates the cache."""
        respond = size_bytes > 0
        if high_watermark != self.high_watermark:
            respond = True
            self.high_watermark = high_watermark
        if last_stable_offset != self.last_stable_offset:
            respond = True
            self.last_stable_offset = last_stable_offset
        if log_start_offset != self.log_start_offset:
            respond = True
            self.log_start_offset = log_start_offset
        if error != ErrorCode.NO_ERROR:
            self.high_watermark = -1  # so the partition is sent again once the error clears
            respond = True
        return respond


class FetchSession:
    def __init__(self, session_id: int, uses_topic_ids: bool,
                 partitions: OrderedDict[PartitionKey, CachedPartition], now_ms: int) -> None:
        self.id = session_id
        self.uses_topic_ids = uses_topic_ids
        self.partitions = partitions
        self.epoch = next_epoch(INITIAL_EPOCH)  # the epoch the next request must carry
        self.last_used_ms = now_ms

    def move_to_end(self, key: PartitionKey) -> None:
        self.partitions.move_to_end(key)


class ContextKind(enum.Enum):
    SESSIONLESS = "sessionless"
    FULL = "full"
    INCREMENTAL = "incremental"


@dataclass(slots=True)
class FetchContext:
    """What one Fetch request reads and how its answer is shaped."""

    kind: ContextKind
    partitions: list[tuple[PartitionKey, CachedPartition]]
    session: FetchSession | None = None
    error: ErrorCode = ErrorCode.NO_ERROR


class FetchSessionCache:
    """Bounded map of session id -> session. See the module docstring."""

    def __init__(self, max_slots: int = DEFAULT_MAX_SLOTS,
                 eviction_ms: int = DEFAULT_EVICTION_MS) -> None:
        if max_slots < 0:
            raise ValueError(f"max_slots must be >= 0, got {max_slots}")
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # LRU first
        self._rng = random.Random()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def new_context(self, session_id: int, epoch: int, uses_topic_ids: bool,
                    requested: list[tuple[PartitionKey, CachedPartition]],
                    forgotten: list[PartitionKey], now_ms: int | None = None) -> FetchContext:
        """Decide the context of a request (see the module docstring)."""
        now = _now_ms() if now_ms is None else now_ms
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            kind = ContextKind.SESSIONLESS if epoch == FINAL_EPOCH else ContextKind.FULL
            return FetchContext(kind, requested)
        if epoch < FINAL_EPOCH:
            return FetchContext(ContextKind.SESSIONLESS, [], None,
                                ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext(ContextKind.INCREMENTAL, [], None,
                                ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(ContextKind.INCREMENTAL, [], None,
                                ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(ContextKind.INCREMENTAL, [], None,
                                ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        for key, part in requested:
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = part
            else:
                cached.fetch_offset = part.fetch_offset
                cached.max_bytes = part.max_bytes
                cached.current_leader_epoch = part.current_leader_epoch
                cached.topic = part.topic
        for key in forgotten:
            session.partitions.pop(key, None)
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now
        self._sessions.move_to_end(session_id)
        return FetchContext(ContextKind.INCREMENTAL, list(session.partitions.items()), session)

    def create(self, uses_topic_ids: bool, partitions: list[tuple[PartitionKey, CachedPartition]],
               now_ms: int | None = None) -> int:
        """A new session holding ``partitions``; its id, or 0 when there is no room."""
        now = _now_ms() if now_ms is None else now_ms
        if self.max_slots == 0:
            return INVALID_SESSION_ID
        if len(self._sessions) >= self.max_slots:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now - oldest.last_used_ms < self.eviction_ms:
                return INVALID_SESSION_ID
            del self._sessions[oldest_id]
        session_id = INVALID_SESSION_ID
        for _ in range(100):  # bounded: with <= 1000 sessions a collision is very rare
            candidate = self._rng.randint(1, INT32_MAX)
            if candidate not in self._sessions:
                session_id = candidate
                break
        if session_id == INVALID_SESSION_ID:
            return INVALID_SESSION_ID
        self._sessions[session_id] = FetchSession(session_id, uses_topic_ids,
                                                  OrderedDict(partitions), now)
        return session_id


def _now_ms() -> int:
    return int(time.monotonic() * 1000)

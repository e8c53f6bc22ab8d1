"""Delayed operations: requests whose answer must wait (Kafka's ``DelayedOperationPurgatory``).

A ``DelayedOperation`` has a three-method contract (Kafka's ``DelayedOperation.scala``):

- ``try_complete() -> bool``: check whether the operation can finish now (cheap, no awaits);
- ``on_complete()``: build the answer; called exactly once, whether satisfied or expired;
- ``on_expiration()``: called once, just before ``on_complete``, when the delay ran out.

The purgatory watches an operation under keys (a topic-partition for produce and fetch):
``try_complete_else_watch(op, keys)`` tries once, else parks the operation under every key
with a timer of ``op.delay_ms``; ``check_and_complete(key)`` (called when the partition's
high watermark or log end moves) retries the operations watching that key. Whichever comes
first (a successful try, the timer, ``shutdown``) completes the operation; the others find it
completed and do nothing. ``await op.wait()`` returns once it has completed (one waiter: the
request that made the operation).

The purgatory looks its event loop up once, when it first parks an operation, and makes the
parked operation's waiter future there (``op.loop`` is that loop): on CPython 3.11 every
``asyncio.get_running_loop()`` (and the first wait of an ``asyncio.Event``) is a ``getpid``
system call, and a fetch that waits for data parks once per request. An operation nobody
awaits (``awaited`` False: the fetch fast path's, which answers its connection from
``on_complete``) gets no future.

Bounds: at most ``max_operations`` operations are watched at once; past that
``try_complete_else_watch`` completes the newcomer at once as expired (its ``on_expiration``
answers with whatever it has), so memory stays bounded. In practice the network layer mutes a
connection while its request is in flight, so there is at most one operation per connection.

Thread-safety: none. Every call runs on the broker's event loop (timers use it too).
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Hashable, Iterable
from typing import Generic, TypeVar

from broker.metrics.stages import waiting_on_others

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

DEFAULT_MAX_OPERATIONS = 100_000


class DelayedOperation(ABC):
    """One request parked until ``try_complete`` says yes or ``delay_ms`` passes."""

    # Whether a request awaits ``wait()``: the purgatory then makes the future it waits on
    # when it parks the operation. One that hands its answer over itself from
    # ``on_complete`` (the fetch fast path's, through ``loop``) needs none.
    awaited = True

    def __init__(self, delay_ms: int) -> None:
        if delay_ms < 0:
            raise ValueError(f"delay_ms must be >= 0, got {delay_ms}")
        self.delay_ms = delay_ms
        self._completed = False
        self._expired = False
        # Done when the operation completes; made by the purgatory that parks it (else by
        # ``wait``). One waiter: the request that made the operation.
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the purgatory's, once parked

    @abstractmethod
    def try_complete(self) -> bool:
        """True when the operation can complete now. Must not await or block."""

    @abstractmethod
    def on_complete(self) -> None:
        """Build the result. Called exactly once."""

    def on_expiration(self) -> None:  # noqa: B027 - optional hook, default does nothing
        """Called once, before ``on_complete``, when the operation timed out."""

    @property
    def is_completed(self) -> bool:
        return self._completed

    @property
    def expired(self) -> bool:
        """True when the operation completed because its delay ran out (or on shutdown)."""
        return self._expired

    def force_complete(self, *, expired: bool = False) -> bool:
        """Complete now unless already completed; True if this call completed it."""
        if self._completed:
            return False
        self._completed = True
        self._expired = expired
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        try:
            if expired:
                self.on_expiration()
        finally:
            try:
                self.on_complete()
            finally:
                waiter = self._waiter
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
        return True

    async def wait(self) -> None:
        """Return once the operation has completed (its result is then ready)."""
        waiter = self._waiter
        if waiter is None or waiter.cancelled():  # not parked, or an earlier wait cancelled
            if self._completed:
                return
            waiter = self._waiter = asyncio.get_running_loop().create_future()
        await waiter


OpT = TypeVar("OpT", bound=DelayedOperation)


def complete_ready(ops: Collection[OpT], unwatch: Callable[[OpT], object]) -> int:
    """Retry the watched ``ops`` once: unwatch those already completed, complete (and
    unwatch) those whose ``try_complete`` now says yes. Returns how many this call completed.

    Iterates over a copy (bounded by ``len(ops)``), so ``unwatch`` may remove from ``ops``.
    Shared by ``Purgatory`` and the group coordinator's ``JoinPurgatory``.
    """
    completed = 0
    for op in list(ops):
        if op.is_completed:
            unwatch(op)
        elif op.try_complete():
            unwatch(op)
            if op.force_complete():
                completed += 1
    return completed


class Purgatory(Generic[K]):
    """Operations parked under keys, each completed exactly once. See the module docstring."""

    def __init__(self, name: str, *, max_operations: int = DEFAULT_MAX_OPERATIONS) -> None:
        if max_operations < 1:
            raise ValueError(f"max_operations must be >= 1, got {max_operations}")
        self.name = name
        self.max_operations = max_operations
        self._watchers: dict[K, dict[DelayedOperation, None]] = {}
        self._watched: dict[DelayedOperation, tuple[K, ...]] = {}  # op -> its keys
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None  # looked up at the first park

    def __len__(self) -> int:
        """Operations currently watched (not yet completed)."""
        return len(self._watched)

    @property
    def watched_entries(self) -> int:
        """Operations watched, counted once per key they watch (Kafka's PurgatorySize)."""
        return sum(len(ops) for ops in self._watchers.values())

    def watcher_count(self, key: K) -> int:
        return len(self._watchers.get(key, ()))

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[K]) -> bool:
        """Complete ``op`` now if it can; else watch it under ``keys`` until done or expired.

        Returns True when the operation completed during this call.
        """
        if op.is_completed:
            return True
        if op.try_complete():
            return op.force_complete()
        return self.watch(op, keys)

    def watch(self, op: DelayedOperation, keys: Iterable[K]) -> bool:
        """``try_complete_else_watch`` without the first try, for a caller that has just
        found, with nothing run in between, what that try would find: not yet. Returns
        True when the operation completed during this call (expired at once: the
        purgatory is closed or full, or ``op.delay_ms`` is 0)."""
        if op.is_completed:
            return True
        key_list = tuple(dict.fromkeys(keys))
        if self._closed or op.delay_ms == 0 or not key_list:
            return op.force_complete(expired=True)
        if len(self._watched) >= self.max_operations:
            log.warning("purgatory %s full (%d operations): expiring a new one at once",
                        self.name, len(self._watched))
            return op.force_complete(expired=True)
        for key in key_list:
            self._watchers.setdefault(key, {})[op] = None
        self._watched[op] = key_list
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        op.loop = loop
        if op.awaited:
            op._waiter = loop.create_future()
        op._timer = loop.call_later(op.delay_ms / 1000.0, self._expire, op)
        waiting_on_others()  # the request's remote time (RemoteTimeMs) starts
        return False

    def check_and_complete(self, key: K) -> int:
        """Retry the operations watching ``key``; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        return complete_ready(ops, self._unwatch)

    def _expire(self, op: DelayedOperation) -> None:
        op._timer = None
        self._unwatch(op)
        op.force_complete(expired=True)

    def _unwatch(self, op: DelayedOperation) -> None:
        keys = self._watched.pop(op, None)
        if keys is None:
            return
        for key in keys:
            ops = self._watchers.get(key)
            if ops is None:
                continue
            ops.pop(op, None)
            if not ops:
                del self._watchers[key]

    def shutdown(self) -> int:
        """Expire every watched operation (their requests get answered); refuse new ones."""
        self._closed = True
        ops = list(self._watched)
        for op in ops:
            self._unwatch(op)
            op.force_complete(expired=True)
        return len(ops)

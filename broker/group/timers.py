"""Time for the group coordinator: a clock and one-shot timers, behind a small interface.

The coordinator is sans-IO: it never sleeps or touches the event loop itself. It asks a
``Timers`` for the time and to run a callback later. ``LoopTimers`` is the production
implementation (the running asyncio loop; wall-clock time for timestamps stored in
``__consumer_offsets``). ``ManualTimers`` is a deterministic clock moved by ``advance`` (Kafka's
``MockTime``/``MockScheduler``), so rebalance and session-timeout logic is tested exactly.

Thread-safety: none; everything runs on one event loop.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Timers(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (what Kafka stores as timestamps)."""
        ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once, ``delay_ms`` from now, unless cancelled first."""
        ...


class LoopTimers:
    """Timers on the running asyncio loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        loop = self._loop if self._loop is not None else asyncio.get_running_loop()
        return loop.call_later(max(delay_ms, 0) / 1000.0, callback)


class _ManualHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualTimers:
    """A clock that moves only when told to; due callbacks run in deadline order."""

    MAX_CALLBACKS_PER_ADVANCE = 1_000_000  # a bound: callbacks rescheduling at 0 ms forever

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._queue: list[tuple[int, int, _ManualHandle, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now_ms

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        handle = _ManualHandle()
        heapq.heappush(
            self._queue, (self._now_ms + max(delay_ms, 0), next(self._seq), handle, callback)
        )
        return handle

    def pending(self) -> int:
        return sum(1 for entry in self._queue if not entry[2].cancelled)

    def advance(self, delta_ms: int) -> None:
        """Move the clock by ``delta_ms``, running every callback that falls due on the way."""
        if delta_ms < 0:
            raise ValueError(f"time does not go backwards: {delta_ms}")
        target_ms = self._now_ms + delta_ms
        for _ in range(self.MAX_CALLBACKS_PER_ADVANCE):
            if not self._queue or self._queue[0][0] > target_ms:
                break
            due_ms, _seq, handle, callback = heapq.heappop(self._queue)
            self._now_ms = max(self._now_ms, due_ms)
            if not handle.cancelled:
                callback()
        else:
            raise RuntimeError("ManualTimers.advance: too many callbacks (a timer loop?)")
        self._now_ms = target_ms

"""Controller events and the one task that processes them (Kafka's ``ControllerEventManager``).

Everything that changes the controller's state is an event, processed one at a time, in
order, by a single task: store notifications (topics, partitions, deletions), responses
from brokers, and in a cluster ZooKeeper watches (broker registrations, the controller
znode), which arrive on kazoo's threads and come in through ``put_threadsafe``. So the
controller's state needs no locks, and an event handler may await (store writes) without
another event interleaving.

The queue is bounded (``MAX_QUEUED_EVENTS``). Events are frozen dataclasses; an event
equal to one already waiting is not queued twice (notifications say only *that*
something changed, so one pending copy is enough). A handler that raises is logged with
its traceback and the next event runs: one bad event must not stop the controller.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

log = logging.getLogger(__name__)

MAX_QUEUED_EVENTS: Final = 10_000


class ControllerEventManager:
    def __init__(self, process: Callable[[object], Awaitable[None]], *,
                 name: str = "controller-event-thread",
                 max_queued: int = MAX_QUEUED_EVENTS) -> None:
        self._process = process
        self._name = name
        self._max_queued = max_queued
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._pending: set[object] = set()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name=self._name)

    def put(self, event: object) -> bool:
        """Queue ``event`` (on the loop); False if it was already waiting or the queue is
        full (logged)."""
        if event in self._pending:
            return False
        if self._queue.qsize() >= self._max_queued:
            log.error("controller event queue full (%d): dropping %r", self._max_queued, event)
            return False
        self._pending.add(event)
        self._idle.clear()
        self._queue.put_nowait(event)
        return True

    def put_threadsafe(self, event: object) -> None:
        """Queue ``event`` from another thread (kazoo's callbacks)."""
        if self._loop is None:
            raise RuntimeError("controller event manager not started")
        self._loop.call_soon_threadsafe(self.put, event)

    async def wait_idle(self) -> None:
        """Wait until every queued event has been processed (tests, start-up)."""
        await self._idle.wait()

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            self._pending.discard(event)
            try:
                await self._process(event)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller event %r failed", event)
            if self._queue.empty():
                self._idle.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._idle.set()

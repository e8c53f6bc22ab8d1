"""Where a request's local time ends: the moment its handler starts waiting on others.

Kafka splits a request's time into stages (``RequestChannel.Request``): queue, **local**
(the handler thread's work), **remote** (waiting in a purgatory for replicas, the rebalance,
a group write), response queue, send. A handler here parks in an asyncio task, so the split
point is marked from where it parks: ``Purgatory.try_complete_else_watch`` when the
operation is watched, and the group handlers' ``CallbackFuture.wait_bounded`` when the
answer is not there yet. They call ``waiting_on_others()``, which stamps the request handled
by the current task: a request channel that times its requests registers here (``watch``),
and is asked for the request of ``asyncio.current_task()`` (its map of handler tasks, kept
anyway to drain and stop them); a handler runs its first step before it has a task (it parks
there, if at all), and the channel knows that request as the one whose first step is
running. Nothing is done per request for this: only a handler that parks pays for the
lookup. Work a handler hands to a task of its own (a group write) does not stamp it; the
handler stamps when it waits for that work.

With no timing request channel registered the call is one list test.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any, Protocol


class Timed(Protocol):
    start_ns: int
    local_done_ns: int


class HandlerTasks(Protocol):
    def request_of(self, task: asyncio.Task[Any] | None) -> Timed | None:
        """The request being handled by ``task`` (None: outside any task), if it is one of
        this channel's."""
        ...


_CHANNELS: list[weakref.ref[HandlerTasks]] = []


def watch(channel: HandlerTasks) -> None:
    """``channel`` times its requests: look for the parking request there from now on."""
    _CHANNELS[:] = [ref for ref in _CHANNELS if ref() is not None]
    _CHANNELS.append(weakref.ref(channel))


def waiting_on_others() -> None:
    """The current request's handler now waits on others: its local time ends here
    (only the first call counts)."""
    if not _CHANNELS:
        return
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop
        return
    for ref in _CHANNELS:  # task None: a handler's first step, outside any task
        channel = ref()
        request = channel.request_of(task) if channel is not None else None
        if request is not None:
            if request.start_ns and not request.local_done_ns:
                request.local_done_ns = time.monotonic_ns()
            return

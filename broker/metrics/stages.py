"""Where a request's local time ends: the moment its handler starts waiting on others.

Kafka splits a request's time into stages (``RequestChannel.Request``): queue, **local**
(the handler thread's work), **remote** (waiting in a purgatory for replicas, the
rebalance, a group write), response queue, send. A handler here is one asyncio task, so
the split point is marked from where it parks: ``Purgatory.try_complete_else_watch`` when
the operation is watched, and the group handlers' ``CallbackFuture.wait_bounded`` when the
answer is not there yet. They call ``waiting_on_others()``, which stamps the request being
handled in the current task (a ``ContextVar`` set by the request channel at the start of
the handler's task; each task has its own copy, so nothing is reset).

When metrics are off nothing is set and the call is one ``ContextVar.get``.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Protocol


class Timed(Protocol):
    local_done_ns: int


CURRENT_REQUEST: ContextVar[Timed | None] = ContextVar("minikafka_current_request", default=None)


def waiting_on_others() -> None:
    """The current request's handler now waits on others: its local time ends here
    (only the first call counts)."""
    request = CURRENT_REQUEST.get()
    if request is not None and not request.local_done_ns:
        request.local_done_ns = time.monotonic_ns()

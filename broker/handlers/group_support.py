"""Small helpers the group API handlers share: reaching the coordinator, waiting for answers.

JoinGroup and SyncGroup answers arrive through a callback, maybe much later (the rebalance);
``CallbackFuture`` turns that into an awaitable that is resolved at most once, and
``wait_bounded`` gives up after a bound so a handler never hangs (the coordinator answers
within the rebalance timeout, and on shutdown; the bound is a safety net).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic, TypeVar

from broker.group.partitioning import GROUP_METADATA_TOPIC
from broker.metrics.stages import waiting_on_others

if TYPE_CHECKING:
    from broker.group.service import GroupService
    from broker.handlers.base import RequestContext

T = TypeVar("T")


async def group_service(ctx: RequestContext) -> GroupService | None:
    """The broker's group service with ``__consumer_offsets`` ready, else None (not available)."""
    service = ctx.broker.group_coordinator
    if not await service.ensure_offsets_topic():
        return None
    return service


class CallbackFuture(Generic[T]):
    """A callback that resolves a future once; later calls are ignored."""

    def __init__(self) -> None:
        self.future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def __call__(self, result: T) -> None:
        if not self.future.done():
            self.future.set_result(result)

    async def wait_bounded(self, timeout_ms: int, fallback: T) -> T:
        if not self.future.done():
            waiting_on_others()  # the request's remote time (RemoteTimeMs) starts
        try:
            return await asyncio.wait_for(asyncio.shield(self.future), timeout_ms / 1000.0)
        except TimeoutError:
            self(fallback)
            return self.future.result()


__all__ = ["GROUP_METADATA_TOPIC", "CallbackFuture", "group_service"]

"""Bytes of request frames held at once (Kafka's ``queued.max.request.bytes`` memory pool).

A connection reserves a frame's size before reading its body and releases it once the
response is written (or the connection closes). When the pool is exhausted, connections
wait before reading (Kafka mutes them the same way), so request memory stays bounded
however many clients send large frames at once. ``-1`` (Kafka's default) means no pool.

Invariant: ``0 <= available <= capacity``; a reservation never exceeds the capacity
(the config requires ``queued.max.request.bytes >= socket.request.max.bytes``).
Thread-safety: none; the broker's event loop only.
"""

from __future__ import annotations

import asyncio


class MemoryPool:
    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes  # <= 0: unbounded
        self.available_bytes = capacity_bytes
        self._changed = asyncio.Condition()
        self._waiting = 0  # connections inside reserve(); try_reserve never jumps them

    @property
    def bounded(self) -> bool:
        return self.capacity_bytes > 0

    def try_reserve(self, size_bytes: int) -> bool:
        """Hold ``size_bytes`` now if they are available (no waiting); True if held."""
        if self.capacity_bytes <= 0:  # not self.bounded: once per request, a property call
            return True
        if size_bytes > self.capacity_bytes:
            raise ValueError(f"{size_bytes} bytes exceed the pool's {self.capacity_bytes}")
        if self._waiting or self.available_bytes < size_bytes:
            return False
        self.available_bytes -= size_bytes
        return True

    async def reserve(self, size_bytes: int) -> None:
        """Wait until ``size_bytes`` can be held, then hold them."""
        if not self.bounded:
            return
        if size_bytes > self.capacity_bytes:
            raise ValueError(f"{size_bytes} bytes exceed the pool's {self.capacity_bytes}")
        self._waiting += 1
        try:
            async with self._changed:
                await self._changed.wait_for(lambda: self.available_bytes >= size_bytes)
                self.available_bytes -= size_bytes
        finally:
            self._waiting -= 1

    def release(self, size_bytes: int) -> None:
        if self.capacity_bytes <= 0 or size_bytes == 0:  # not self.bounded (as try_reserve)
            return
        self.available_bytes = min(self.available_bytes + size_bytes, self.capacity_bytes)
        if self._waiting:
            asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

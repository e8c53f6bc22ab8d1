"""Connection counts: ``max.connections`` (all listeners) and ``max.connections.per.ip``.

As in Kafka's ``ConnectionQuotas``:

- over ``max.connections.per.ip`` (or the host's ``max.connections.per.ip.overrides``
  entry) a new connection is closed at once, with a log line (Kafka's
  ``TooManyConnectionsException``);
- at ``max.connections`` the acceptor stops accepting until a connection closes (new
  connections wait in the listen backlog), rather than accept-and-drop.

Thread-safety: none; used on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class TooManyConnectionsError(Exception):
    """The client's address already has ``max.connections.per.ip`` connections."""


class ConnectionQuotas:
    def __init__(self, max_connections: int, max_for_host: Callable[[str], int]) -> None:
        self.max_connections = max_connections
        self._max_for_host = max_for_host
        self._per_host: dict[str, int] = {}
        self.total = 0
        self._slot_free = asyncio.Event()
        self._slot_free.set()

    def count(self, host: str) -> int:
        return self._per_host.get(host, 0)

    async def wait_for_slot(self) -> None:
        """Return when fewer than ``max.connections`` connections are open."""
        while self.total >= self.max_connections:
            self._slot_free.clear()
            await self._slot_free.wait()

    def inc(self, host: str) -> None:
        """Count a new connection from ``host``; TooManyConnectionsError over its limit."""
        current = self._per_host.get(host, 0)
        limit = self._max_for_host(host)
        if current >= limit:
            raise TooManyConnectionsError(
                f"Too many connections from {host} (maximum = {limit})")
        self._per_host[host] = current + 1
        self.total += 1

    def dec(self, host: str) -> None:
        current = self._per_host.get(host, 0)
        if current <= 1:
            self._per_host.pop(host, None)
        else:
            self._per_host[host] = current - 1
        self.total = max(self.total - 1, 0)
        self._slot_free.set()

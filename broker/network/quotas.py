"""Connection counts: ``max.connections`` (all listeners) and ``max.connections.per.ip``.

As in Kafka's ``ConnectionQuotas``:

- over ``max.connections.per.ip`` (or the host's ``max.connections.per.ip.overrides``
  entry) a new connection is closed at once, with a log line (Kafka's
  ``TooManyConnectionsException``);
- at ``max.connections`` the acceptor stops accepting until a connection closes (new
  connections wait in the listen backlog), rather than accept-and-drop;
- ``max.connection.creation.rate`` (connections per second, all listeners) delays accepts
  once exceeded, as Kafka's acceptor throttles (``ConnectionRateLimiter``).

Thread-safety: none; used on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import time
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


class ConnectionRateLimiter:
    """A token bucket of ``rate_per_s`` tokens refilled continuously, burst ``rate_per_s``."""

    def __init__(self, rate_per_s: int) -> None:
        self.rate_per_s = rate_per_s
        self._tokens = float(rate_per_s)
        self._updated = time.monotonic()

    async def acquire(self) -> None:
        """Return once a connection may be accepted (at once under the rate)."""
        if self.rate_per_s <= 0 or self.rate_per_s >= 2**31 - 1:
            return
        now = time.monotonic()
        self._tokens = min(float(self.rate_per_s),
                           self._tokens + (now - self._updated) * self.rate_per_s)
        self._updated = now
        if self._tokens < 1.0:
            await asyncio.sleep((1.0 - self._tokens) / self.rate_per_s)
            self._tokens = 1.0
            self._updated = time.monotonic()
        self._tokens -= 1.0

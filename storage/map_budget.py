"""A process-wide bound on the read-only file maps storage keeps, each an open file.

Python 3.11's ``mmap.mmap`` duplicates the descriptor it maps and keeps the duplicate for
as long as the map lives (``trackfd=False`` exists only from 3.13), so every map held is
one open file. Storage maps a file only where reading it in place pays: a sealed
segment's ``.index`` and ``.timeindex`` (lookups), a segment's ``.log`` (batch header
walks, recovery scans). Those maps are made on demand and registered here; when more than
``limit`` are registered, the oldest registration is evicted: its owner drops its
reference to the map (``MapOwner.evict_map``) and maps the file again on its next use.
First in, first out: a map is not moved on use, so that reads pay nothing here.

Dropping a reference never invalidates a map under a reader: code that reads a map holds
it in a local variable (or a ``memoryview`` of it) for the whole operation, and the map is
closed (unmapped, its descriptor closed) only when the last reference goes. That is what
makes eviction safe from any thread without taking the owner's lock.

The limit defaults to an eighth of the soft ``RLIMIT_NOFILE`` (between ``MIN_LIMIT`` and
``MAX_LIMIT``): 2,500 maps under a limit of 20,000 files, leaving the rest to one ``.log``
descriptor per segment and to sockets.

Thread-safety: registration and eviction take one lock (a few dict operations; the evicted
map may be closed under it, a ``munmap`` and a ``close``).
"""

from __future__ import annotations

import resource
import threading
from collections import OrderedDict
from typing import Protocol

MIN_LIMIT = 16
MAX_LIMIT = 4096


class MapOwner(Protocol):
    def evict_map(self) -> None:
        """Drop the reference to the registered map (called with the budget's lock held:
        attribute assignments only, no call back into the budget)."""


def default_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_LIMIT
    return max(MIN_LIMIT, min(MAX_LIMIT, soft // 8))


class MapBudget:
    """The registered maps, oldest first; at most ``limit`` of them."""

    def __init__(self, limit: int | None = None) -> None:
        self._lock = threading.Lock()
        self._owners: OrderedDict[MapOwner, None] = OrderedDict()
        self._limit = default_limit() if limit is None else limit
        self.evictions = 0

    @property
    def limit(self) -> int:
        return self._limit

    def set_limit(self, limit: int) -> None:
        """Change the bound (evicting down to it now)."""
        if limit < 1:
            raise ValueError(f"map limit {limit} is below 1")
        with self._lock:
            self._limit = limit
            self._evict_over(None)

    def __len__(self) -> int:
        return len(self._owners)

    def mapped(self, owner: MapOwner) -> None:
        """``owner`` now holds a map (a new registration, the newest)."""
        with self._lock:
            self._owners.pop(owner, None)
            self._owners[owner] = None
            self._evict_over(owner)

    def unmapped(self, owner: MapOwner) -> None:
        """``owner`` dropped its map by itself (close, truncation, remap)."""
        with self._lock:
            self._owners.pop(owner, None)

    def _evict_over(self, keep: MapOwner | None) -> None:
        for _ in range(len(self._owners)):
            if len(self._owners) <= self._limit:
                return
            victim, _ = self._owners.popitem(last=False)
            if victim is keep:  # a limit of 1 and only the new one left
                self._owners[victim] = None
                return
            victim.evict_map()
            self.evictions += 1


MAPS = MapBudget()

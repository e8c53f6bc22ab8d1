"""A process-wide bound on the files storage keeps open beyond one per partition.

Python 3.11's ``mmap.mmap`` duplicates the descriptor it maps and keeps the duplicate for
as long as the map lives (``trackfd=False`` exists only from 3.13), so every map held is
one open file. Storage maps a file only where reading it in place pays: a sealed
segment's ``.index`` and ``.timeindex`` (lookups), a segment's ``.log`` (batch header
walks, recovery scans); and it keeps a sealed segment's ``.log`` open only while it is
read. Those maps and files are made on demand and registered here, each by the callback
that drops it (``Evict``: its owner's ``evict_map`` or ``evict_file``); when more than
``limit`` are registered, the oldest registration is evicted: its owner drops its
reference and maps or opens the file again on its next use. First in, first out: a
registration is not moved on use, so that reads pay nothing here.

Dropping a reference never invalidates a map or a file under a reader: code that uses one
holds it in a local variable (a ``memoryview`` of a map, a ``FileSlice`` of a file) for the
whole operation, and the map or file is closed only when the last reference goes. That is
what makes eviction safe from any thread without taking the owner's lock.

The limit defaults to an eighth of the soft ``RLIMIT_NOFILE`` (between ``MIN_LIMIT`` and
``MAX_LIMIT``): 2,500 under a limit of 20,000 files, leaving the rest to the active
segment's ``.log`` of each partition and to sockets.

Thread-safety: registration and eviction take one lock (a few dict operations; the evicted
map may be closed under it, a ``munmap`` and a ``close``).
"""

from __future__ import annotations

import resource
import threading
from collections import OrderedDict
from collections.abc import Callable

MIN_LIMIT = 16
MAX_LIMIT = 4096

# Drops one registered map or file: an owner's bound method (equal for the same owner and
# method, so it is also the registration's key). Called with the budget's lock held:
# attribute assignments only, no call back into the budget.
Evict = Callable[[], None]


def default_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_LIMIT
    return max(MIN_LIMIT, min(MAX_LIMIT, soft // 8))


class MapBudget:
    """The registered maps and files, oldest first; at most ``limit`` of them."""

    def __init__(self, limit: int | None = None) -> None:
        self._lock = threading.Lock()
        self._owners: OrderedDict[Evict, None] = OrderedDict()
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

    def mapped(self, owner: Evict) -> None:
        """``owner`` now holds a map or file (a new registration, the newest)."""
        with self._lock:
            self._owners.pop(owner, None)
            self._owners[owner] = None
            self._evict_over(owner)

    def unmapped(self, owner: Evict) -> None:
        """``owner`` dropped its map or file by itself (close, truncation, remap)."""
        with self._lock:
            self._owners.pop(owner, None)

    def _evict_over(self, keep: Evict | None) -> None:
        for _ in range(len(self._owners)):
            if len(self._owners) <= self._limit:
                return
            victim, _ = self._owners.popitem(last=False)
            if victim is keep:  # a limit of 1 and only the new one left
                self._owners[victim] = None
                return
            victim()
            self.evictions += 1


MAPS = MapBudget()

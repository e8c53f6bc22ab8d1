"""How long log flushes take (Kafka's ``LogFlushStats.logFlushTimer``: LogFlushRateAndTimeMs).

``Log.flush`` records the time of every flush that had something to write (the segments'
fsyncs and, after a roll, the directory's). Flushes run in thread pools, so counts are
updated under a lock; they are rare (bounded by the flush settings and segment rolls), so
the lock costs nothing that matters. Like Kafka's, the timer is one per process.

Layout: ``counts[i]`` counts flushes of at most ``BOUNDS_NS[i]`` ns (and more than the bound
before it); the last slot those above every bound. ``sum_ns`` is their total time.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from typing import Final

BOUNDS_MS: Final[tuple[float, ...]] = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500,
    5000, 10000, 30000,
)
BOUNDS_NS: Final[tuple[int, ...]] = tuple(int(b * 1_000_000) for b in BOUNDS_MS)


class FlushStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = [0] * (len(BOUNDS_NS) + 1)
        self._sum_ns = 0

    def record(self, elapsed_ns: int) -> None:
        slot = bisect_left(BOUNDS_NS, elapsed_ns)
        with self._lock:
            self._counts[slot] += 1
            self._sum_ns += elapsed_ns

    def snapshot(self) -> tuple[list[int], int]:
        """(counts per slot, sum in ns), consistent with each other."""
        with self._lock:
            return list(self._counts), self._sum_ns


LOG_FLUSH_STATS: Final = FlushStats()

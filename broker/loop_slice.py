"""``LoopSlice``: a long loop on the event loop gives the loop back every few milliseconds.

Work over every partition (a LeaderAndIsr's role changes, a fetcher's first truncation
round, a fetch response of many partitions) runs on the event loop in one go, and at
thousands of partitions that is tens to hundreds of milliseconds during which no other
request is served. Such a loop calls ``await slice.pause()`` between items: when it has
held the loop for ``SLICE_S`` it yields once (``asyncio.sleep(0)``: every callback that
became ready meanwhile runs), then goes on. One clock read per item otherwise.

The caller must leave its state consistent at each ``pause()``: other coroutines run
there (requests, other fetchers), as they would between two requests.

Thread-safety: none; one coroutine on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

SLICE_S: Final = 0.002  # the longest a sliced loop holds the event loop between yields


class LoopSlice:
    """See the module docstring."""

    __slots__ = ("_slice_s", "_until", "yields")

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self._slice_s = slice_s
        self._until = time.monotonic() + slice_s
        self.yields = 0  # how many times the loop was given back

    async def pause(self) -> None:
        """Yield the event loop if this slice is used up."""
        if time.monotonic() >= self._until:
            await asyncio.sleep(0)
            self.yields += 1
            self._until = time.monotonic() + self._slice_s

"""``HeapFreezer``: the objects of hosted partitions kept out of full garbage collections.

CPython's cycle collector runs a full (generation 2) collection whenever the objects that
survived into its oldest generation have grown by a quarter since the last one, and a full
collection scans every object the collector tracks, holding the interpreter lock
throughout, on whichever thread allocated last (the event loop's or a worker's: either way
the loop stands still). A hosted partition is some 70 tracked objects (its log, segments,
indexes, producer state, replica states), so a broker's heap grows with its partitions:
while 3,000 partitions are created, a broker ran five full collections of up to 215,000
objects, 50-96 ms each (``bench.loop_lag --cluster 3000``).

Those objects live as long as their partitions. So every ``FREEZE_EVERY_PARTITIONS``
partitions this broker opens, the young generations are collected (a few ms) and every
tracked object is frozen (``gc.freeze``: moved to the permanent generation, which
collections skip), and again at the end of a LeaderAndIsr that opened some; once more when
the broker has started (what start-up made: modules,
configuration, the partitions it opened). Later full collections scan only what was made
since, and are short.

What it costs: cyclic garbage among frozen objects is not reclaimed while they are frozen:
the cycles already unreachable in the oldest generation at a freeze (at most what built up
since the last full collection), and frozen objects that die later in a reference cycle.
Reference counting frees everything else as before. A partition that is deleted unfreezes
everything (``gc.unfreeze``), so that its objects are collected by the next full collection
as they would have been without any of this; in a broker whose partitions neither come nor
go, nothing is frozen or unfrozen and the collector runs as it always did.

The collector is the process's: brokers sharing a process (tests) share it.
Thread-safety: the broker's event loop only.
"""

from __future__ import annotations

import gc
import logging
from typing import Final

log = logging.getLogger(__name__)

FREEZE_EVERY_PARTITIONS: Final = 200


def freeze() -> None:
    """Collect the young generations, then freeze every tracked object."""
    gc.collect(1)
    gc.freeze()


class HeapFreezer:
    """Counts the partitions a broker starts hosting; see the module docstring."""

    __slots__ = ("_every", "_hosted", "freezes")

    def __init__(self, every: int = FREEZE_EVERY_PARTITIONS) -> None:
        self._every = every
        self._hosted = 0  # partitions hosted since the last freeze
        self.freezes = 0

    def hosted(self, count: int = 1) -> None:
        """``count`` more partitions are opened here (their objects made)."""
        self._hosted += count
        if self._hosted >= self._every:
            self._hosted = 0
            self.freezes += 1
            freeze()
            log.debug("froze the heap after %d hosted partitions", self._every)

    def settle(self) -> None:
        """The partitions opened since the last freeze have their roles (a LeaderAndIsr is
        done with them): frozen now, not left for the next request's growth to scan."""
        if self._hosted:
            self._hosted = 0
            self.freezes += 1
            freeze()

    def removed(self) -> None:
        """A hosted partition was deleted: its objects become collectable again."""
        gc.unfreeze()

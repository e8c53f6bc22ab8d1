"""Offset kinds, kept apart by type (Redpanda's habit): absolute offsets, offsets relative
to a segment's base offset, byte positions in a segment file, and leader epochs.

``Offset`` is what the public API returns; arguments accept plain ``int`` too (an ``Offset``
is an ``int``). ``RelativeOffset`` and ``Position`` are what the index files store (int32).
"""

from __future__ import annotations

from typing import NewType

Offset = NewType("Offset", int)  # absolute offset in a partition
RelativeOffset = NewType("RelativeOffset", int)  # offset - segment base offset, int32
Position = NewType("Position", int)  # byte position in a segment's .log file, int32
LeaderEpoch = NewType("LeaderEpoch", int)

UNDEFINED_EPOCH = LeaderEpoch(-1)
UNDEFINED_OFFSET = Offset(-1)
INT32_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
NO_TIMESTAMP = -1

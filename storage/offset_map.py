"""The cleaner's key -> latest offset map (Kafka's ``OffsetMap`` / ``SkimpyOffsetMap``).

Kafka keeps a 16-byte MD5 of each key and an 8-byte offset in a flat buffer of
``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` bytes (24 bytes a slot) and stops
adding keys at ``log.cleaner.io.buffer.load.factor`` of its slots. Here the map is a Python
dict, whose real cost per entry is far above 24 bytes, so the same setting is honoured as
a bound on the memory the map may use, counted per entry as ``ENTRY_OVERHEAD_BYTES`` plus
the stored key's length:

- keys of at most ``MAX_RAW_KEY_BYTES`` (15) bytes are stored as they are (exact);
- longer keys are stored as their 16-byte MD5 digest, as Kafka stores every key. The two
  kinds never meet: a raw key is shorter than a digest.

``map_chunk`` scans whole batches (``storage.cleaner_scan``, compiled when built) and keeps
the largest offset per key; ``latest_offset`` is the largest offset the map has seen
(``updateLatestOffset``), which is where the next cleaning starts. ``kept_offsets`` is the
sorted list of the map's offsets: in the mapped range a record survives exactly when its
offset is one of them (while ``in_order``: the records' offsets increased, as Kafka
requires), which lets the filter drop a batch without reading its records.

Thread-safety: none; one cleaner owns a map.
"""

from __future__ import annotations

import hashlib

from storage.cleaner_scan import ENTRY_OVERHEAD_BYTES, MAX_RAW_KEY_BYTES, BodyOf

__all__ = ["ENTRY_OVERHEAD_BYTES", "MAX_RAW_KEY_BYTES", "OffsetMap"]

_MIN_SLOTS = 2


class OffsetMap:
    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        slots = memory_bytes // (ENTRY_OVERHEAD_BYTES + 16)
        if slots * load_factor < _MIN_SLOTS - 1:
            raise ValueError(
                f"offset map of {memory_bytes} bytes is too small to hold a single key: raise "
                "log.cleaner.dedupe.buffer.size or lower log.cleaner.threads"
            )
        self.memory_bytes = memory_bytes
        self.load_factor = load_factor
        self._budget_bytes = int(memory_bytes * load_factor)
        self._used_bytes = 0
        self._map: dict[bytes, int] = {}
        self._kept: list[int] | None = None
        self.latest_offset = -1
        self.in_order = True  # every mapped batch's record offsets increased
        self._last_seen = -1

    @staticmethod
    def map_key(key: bytes | memoryview) -> bytes:
        if len(key) <= MAX_RAW_KEY_BYTES:
            return bytes(key)
        return hashlib.md5(key, usedforsecurity=False).digest()

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def entries(self) -> dict[bytes, int]:
        """The map itself (map key -> offset), for lookups by the filter."""
        return self._map

    @property
    def is_full(self) -> bool:
        """No room for another key (Kafka: ``map.size >= slots * loadFactor``)."""
        return self._used_bytes + ENTRY_OVERHEAD_BYTES + 16 > self._budget_bytes

    @property
    def utilization(self) -> float:
        return self._used_bytes / self.memory_bytes if self.memory_bytes else 0.0

    def clear(self) -> None:
        self._map.clear()
        self._kept = None
        self._used_bytes = 0
        self.latest_offset = -1
        self.in_order = True
        self._last_seen = -1

    def put(self, map_key: bytes, offset: int) -> None:
        """Record ``offset`` for a key made by ``map_key`` (offsets only grow)."""
        if map_key not in self._map:
            self._used_bytes += ENTRY_OVERHEAD_BYTES + len(map_key)
        self._map[map_key] = offset
        self._kept = None
        if offset > self.latest_offset:
            self.latest_offset = offset

    def map_chunk(self, chunk: bytes, start_offset: int, body_of: BodyOf) -> tuple[int, int, bool]:
        """Put the keys of every record at or after ``start_offset`` in the whole batches of
        ``chunk`` (see ``storage.cleaner_scan.map_chunk``). Returns (records read, records
        without a key, full): when full, the map stopped before a key it had no room for."""
        # Here, not at import: the broker builds an OffsetMap only to check its size at
        # start-up; which scan runs (compiled or pure) matters to a cleaning.
        from storage.cleaner_native import scan

        self._kept = None
        if chunk and int.from_bytes(chunk[:8], "big", signed=True) <= self._last_seen:
            self.in_order = False  # this chunk starts at or below where the last one ended
        used, latest, messages, nulls, full, in_order = scan.map_chunk(
            chunk, start_offset, self._map, self._used_bytes,
            self._budget_bytes - ENTRY_OVERHEAD_BYTES - 16, body_of)
        self._used_bytes = used
        self.in_order = self.in_order and in_order
        self._last_seen = max(self._last_seen, latest)
        if latest > self.latest_offset:
            self.latest_offset = latest
        return messages, nulls, full

    def kept_offsets(self) -> list[int]:
        """The map's offsets, sorted (computed once per filled map)."""
        if self._kept is None:
            self._kept = sorted(self._map.values())
        return self._kept

    def get(self, map_key: bytes) -> int:
        """The latest offset of the key, -1 if the map does not hold it."""
        return self._map.get(map_key, -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

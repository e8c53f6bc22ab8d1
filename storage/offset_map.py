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

``put`` keeps the largest offset per key; ``latest_offset`` is the largest offset the map
has seen (``updateLatestOffset``), which is where the next cleaning starts.

Thread-safety: none; one cleaner thread owns a map.
"""

from __future__ import annotations

import hashlib

MAX_RAW_KEY_BYTES = 15
ENTRY_OVERHEAD_BYTES = 120  # a dict slot, the key's bytes object and the offset's int
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
        self.latest_offset = -1

    @staticmethod
    def map_key(key: bytes | memoryview) -> bytes:
        if len(key) <= MAX_RAW_KEY_BYTES:
            return bytes(key)
        return hashlib.md5(key, usedforsecurity=False).digest()

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def is_full(self) -> bool:
        """No room for another key (Kafka: ``map.size >= slots * loadFactor``)."""
        return self._used_bytes + ENTRY_OVERHEAD_BYTES + 16 > self._budget_bytes

    @property
    def utilization(self) -> float:
        return self._used_bytes / self.memory_bytes if self.memory_bytes else 0.0

    def clear(self) -> None:
        self._map.clear()
        self._used_bytes = 0
        self.latest_offset = -1

    def put(self, map_key: bytes, offset: int) -> None:
        """Record ``offset`` for a key made by ``map_key`` (offsets only grow)."""
        if map_key not in self._map:
            self._used_bytes += ENTRY_OVERHEAD_BYTES + len(map_key)
        self._map[map_key] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def put_keys(self, base_offset: int, records: list[tuple[int, int, bytes | None, bool, int, int]],
                 start_offset: int) -> bool:
        """``put`` every keyed record at or after ``start_offset`` (records as
        ``storage.cleaner_records.parse_records`` returns them, offsets ``base_offset`` +
        delta). False, having stopped, when the map filled up (Kafka's ``map.size <
        maxDesiredMapSize`` check before each put)."""
        entries = self._map
        used = self._used_bytes
        budget = self._budget_bytes - ENTRY_OVERHEAD_BYTES - 16
        md5 = hashlib.md5
        latest = self.latest_offset
        try:
            for _, delta, key, _, _, _ in records:
                offset = base_offset + delta
                if key is None or offset < start_offset:
                    continue
                if used > budget:
                    return False
                k = key if len(key) <= MAX_RAW_KEY_BYTES else md5(key, usedforsecurity=False).digest()
                if k not in entries:
                    used += ENTRY_OVERHEAD_BYTES + len(k)
                entries[k] = offset
                if offset > latest:
                    latest = offset
            return True
        finally:
            self._used_bytes = used
            self.latest_offset = latest

    def offsets_of(self, keys: list[bytes | None]) -> list[int]:
        """``get`` for each key (-1 for None or a key not in the map)."""
        entries = self._map
        md5 = hashlib.md5
        return [-1 if key is None else entries.get(
            key if len(key) <= MAX_RAW_KEY_BYTES else md5(key, usedforsecurity=False).digest(), -1)
            for key in keys]

    def get(self, map_key: bytes) -> int:
        """The latest offset of the key, -1 if the map does not hold it."""
        return self._map.get(map_key, -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

"""Which ``__consumer_offsets`` partition holds a group (Kafka's ``GroupMetadataManager.partitionFor``).

Kafka maps a group to ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`` where
``hashCode`` is Java's ``String.hashCode`` (UTF-16 code units, ``h = 31*h + c`` in int32
arithmetic) and ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 (it is ``n & 0x7fffffff``).
The coordinator of a group is the leader of that partition.
"""

from __future__ import annotations

from typing import Final

GROUP_METADATA_TOPIC: Final = "__consumer_offsets"
DEFAULT_OFFSETS_TOPIC_PARTITIONS: Final = 50


def java_string_hash_code(value: str) -> int:
    """Java's ``String.hashCode`` as a signed int32 (over UTF-16 code units)."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``n & 0x7fffffff`` (so ``abs(Integer.MIN_VALUE)`` is 0)."""
    return n & 0x7FFFFFFF


def partition_for(group_id: str, num_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition of ``group_id``."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return kafka_abs(java_string_hash_code(group_id)) % num_partitions

"""``TopicPartition``: the one (topic, partition) type every layer uses.

A ``NamedTuple``, so it hashes and compares like the plain ``(topic, partition)`` tuple
(a dict keyed by one finds the other) and costs no more to build. ``str()`` is Kafka's
``topic-partition`` spelling, which is also the partition's directory name on disk.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

"""Admin requests waiting for the metadata cache (Kafka's ``DelayedCreatePartitions`` and
``DelayedDeleteTopics`` in the topic purgatory).

An admin request writes the topic store and then waits, under its topic's key, until this
broker's metadata cache shows the result: every new partition with a leader (creation,
partition increase), or the topic gone (deletion). Each UpdateMetadata retries the
operations of the topics it names; the request's own timeout expires them, and a topic
still not ready then is answered REQUEST_TIMED_OUT. Three-method contract as every
delayed operation (``broker.purgatory``).
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.metadata_cache import MetadataCache
from broker.purgatory import DelayedOperation
from protocol.errors import ErrorCode


class DelayedCreatePartitions(DelayedOperation):
    """Completes when each of ``partitions`` of ``topic`` has a leader in the cache."""

    def __init__(self, delay_ms: int, cache: MetadataCache, topic: str,
                 partitions: Iterable[int]) -> None:
        super().__init__(max(delay_ms, 0))
        self.cache = cache
        self.topic = topic
        self.partitions = sorted(partitions)
        self.error = ErrorCode.NO_ERROR

    def try_complete(self) -> bool:
        for p in self.partitions:
            info = self.cache.partition_info(self.topic, p)
            if info is None or not info.has_leader:
                return False
        return True

    def on_expiration(self) -> None:
        self.error = ErrorCode.REQUEST_TIMED_OUT

    def on_complete(self) -> None:
        """``error`` holds the answer."""


class DelayedDeleteTopics(DelayedOperation):
    """Completes when ``topic`` is gone from the cache."""

    def __init__(self, delay_ms: int, cache: MetadataCache, topic: str) -> None:
        super().__init__(max(delay_ms, 0))
        self.cache = cache
        self.topic = topic
        self.error = ErrorCode.NO_ERROR

    def try_complete(self) -> bool:
        return not self.cache.contains_topic(self.topic)

    def on_expiration(self) -> None:
        self.error = ErrorCode.REQUEST_TIMED_OUT

    def on_complete(self) -> None:
        """``error`` holds the answer."""

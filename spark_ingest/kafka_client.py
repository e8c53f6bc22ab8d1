"""What the source needs from a Kafka cluster (Metadata, ListOffsets, Fetch), for blocking code.

``Cluster`` wraps the project's client (``client.sync.SyncClient``: connections per broker,
versions negotiated, leader routing, retries with backoff) and words every failure for the
person who wrote the query: ``SourceError`` naming ``kafka.bootstrap.servers`` when no
broker answers, the topic-partition and Kafka's error name otherwise. Spark executors call
it from plain Python (``read`` runs there), the driver from the data source's methods.

Requests: Metadata (names; no auto-creation), ListOffsets (-2 earliest, -1 latest, or ms)
grouped by leader, Fetch sessionless at the highest version both sides support, READ_UNCOMMITTED
(as Spark's consumer reads). Routing waits for a leader at most ``LEADER_ATTEMPTS`` tries.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from client import ClientConfig, ClientError, error_name
from client.fetch import FetchedPartition
from client.sync import SyncClient
from protocol.errors import ErrorCode
from spark_ingest.offsets import EARLIEST, LATEST, PartitionOffsets, SourceError, TopicPartition

CLIENT_ID: Final = "minikafka-spark"
LEADER_ATTEMPTS: Final = 5
RETRIABLE: Final = frozenset({
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.OFFSET_NOT_AVAILABLE,
})

__all__ = ["RETRIABLE", "Cluster", "FetchedPartition", "Metadata", "error_name"]


@dataclass(slots=True)
class Metadata:
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    topics: dict[str, int] = field(default_factory=dict)  # name -> partition count
    missing: dict[str, str] = field(default_factory=dict)  # name -> error name


class Cluster:
    """Connections to the brokers of one cluster; use as a context manager."""

    def __init__(self, bootstrap: str, timeout_ms: int = 30_000) -> None:
        self._bootstrap = bootstrap
        self._timeout_ms = timeout_ms
        config = ClientConfig(client_id=CLIENT_ID, request_timeout_ms=timeout_ms,
                              default_api_timeout_ms=timeout_ms,
                              connection_setup_timeout_ms=min(timeout_ms, 10_000))
        try:
            self._client = SyncClient(bootstrap, config)
        except ClientError as exc:
            raise SourceError(f"kafka.bootstrap.servers: cannot reach any broker of {bootstrap!r} "
                              f"({exc})") from None

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def metadata(self, topics: Iterable[str] | None = None) -> Metadata:
        """Partition leaders for ``topics`` (all non-internal topics when None)."""
        names = None if topics is None else sorted(set(topics))
        try:
            fresh = self._client.refresh_metadata(names)
        except ClientError as exc:
            raise SourceError(f"kafka.bootstrap.servers: Metadata failed: {exc}") from None
        meta = Metadata()
        for name, t in fresh.topics.items():
            if t.error_code != 0:
                meta.missing[name] = error_name(t.error_code)
                continue
            if t.is_internal and names is None:
                continue
            meta.topics[name] = len(t.partitions)
            for p in t.partitions.values():
                meta.leaders[TopicPartition(name, p.partition)] = p.leader
        return meta

    def leader_of(self, tp: TopicPartition) -> int:
        """The partition's leader; a new partition may need a moment to get one."""
        client = self._client.client
        try:
            leaders = self._client.run(client.retry(
                lambda: client.leaders_now([tp]), what=f"Leader of {tp}",
                timeout_ms=self._timeout_ms, max_attempts=LEADER_ATTEMPTS))
            return next(iter(leaders))
        except ClientError as exc:
            raise SourceError(f"no leader for {tp} ({exc.error_name}: {exc})") from None

    def list_offsets(self, wanted: dict[TopicPartition, int]) -> PartitionOffsets:
        """``{tp: timestamp}`` (-2 earliest, -1 latest, else ms) -> ``{tp: offset}``.

        For a timestamp with no record at or after it the answer is -1, as Kafka gives it.
        """
        try:
            found = self._client.list_offsets(wanted, timeout_ms=self._timeout_ms)
        except ClientError as exc:
            raise SourceError(f"ListOffsets of {', '.join(sorted(map(str, wanted)))} failed: "
                              f"{exc.error_name} ({exc})") from None
        return {TopicPartition(*tp): o.offset for tp, o in found.items()}

    def earliest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return self.list_offsets(dict.fromkeys(tps, EARLIEST))

    def latest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return self.list_offsets(dict.fromkeys(tps, LATEST))

    def fetch(self, tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int) -> FetchedPartition:
        """One Fetch of one partition from its leader; a failed exchange is NETWORK_EXCEPTION."""
        self.leader_of(tp)
        try:
            return self._client.fetch(tp, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms)
        except ClientError as exc:
            if not exc.retriable:
                raise SourceError(f"Fetch of {tp} at offset {offset} failed: {exc}") from None
            return FetchedPartition(ErrorCode.NETWORK_EXCEPTION, -1, -1, -1, b"")

    def refresh(self, tp: TopicPartition) -> None:
        """Look ``tp``'s leader up again before the next request (after a retriable error)."""
        self._client.invalidate([tp.topic])

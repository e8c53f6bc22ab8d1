"""What the source needs from a Kafka cluster: Metadata, ListOffsets and Fetch, blocking.

Built on ``broker.tools.client.KafkaClient`` (engineer F's: one socket per broker, ApiVersions
negotiation, a deadline on every call, bounded frames). ``Cluster`` adds the bootstrap ->
metadata -> per-leader connections step, turns every failure into ``SourceError`` (a refused
bootstrap address names ``kafka.bootstrap.servers``) and retries retriable Kafka errors a
bounded number of times with a metadata refresh in between.

Requests: Metadata at the highest common version (names; no auto-creation), ListOffsets
(timestamps -2 earliest, -1 latest, or ms) grouped by leader, Fetch v4-12 (topic names,
sessionless: session id 0, epoch -1, READ_UNCOMMITTED, as Spark's consumer reads).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final

from broker.tools.client import ClientError, KafkaClient
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from spark_ingest.offsets import EARLIEST, LATEST, PartitionOffsets, SourceError, TopicPartition

CLIENT_ID: Final = "minikafka-spark"
FETCH_MAX_VERSION: Final = 12  # v13+ names topics by id; names are all we need
MAX_ATTEMPTS: Final = 5
RETRY_BACKOFF_MS: Final = 200
RETRIABLE: Final = frozenset({
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.OFFSET_NOT_AVAILABLE,
})


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition of a Fetch answer: its error, watermarks and raw record bytes."""

    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes


@dataclass(slots=True)
class Metadata:
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    topics: dict[str, int] = field(default_factory=dict)  # name -> partition count
    missing: dict[str, str] = field(default_factory=dict)  # name -> error name


class Cluster:
    """Connections to the brokers of one cluster; use as a context manager."""

    def __init__(self, bootstrap: str, timeout_ms: int = 30_000) -> None:
        self._bootstrap = bootstrap
        self._timeout_ms = timeout_ms
        self._conns: dict[int, KafkaClient] = {}
        self._meta = Metadata()
        self._boot: KafkaClient = self._connect_bootstrap()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in [self._boot, *self._conns.values()]:
            conn.close()
        self._conns.clear()

    # -- connections ---------------------------------------------------------------------

    def _connect_bootstrap(self) -> KafkaClient:
        errors: list[str] = []
        for server in self._bootstrap.split(","):
            try:
                return KafkaClient(server.strip(), self._timeout_ms, CLIENT_ID)
            except (OSError, ClientError) as exc:
                errors.append(f"{server.strip()}: {exc}")
        raise SourceError(
            f"kafka.bootstrap.servers: cannot reach any broker of {self._bootstrap!r} "
            f"({'; '.join(errors)})"
        )

    def _conn(self, node_id: int) -> KafkaClient:
        conn = self._conns.get(node_id)
        if conn is not None:
            return conn
        address = self._meta.brokers.get(node_id)
        if address is None:
            raise SourceError(f"broker {node_id} is not in the cluster metadata")
        try:
            conn = KafkaClient(f"{address[0]}:{address[1]}", self._timeout_ms, CLIENT_ID)
        except (OSError, ClientError) as exc:
            raise SourceError(f"cannot reach broker {node_id} at {address[0]}:{address[1]}: {exc}") from None
        self._conns[node_id] = conn
        return conn

    def _drop(self, node_id: int) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close()

    # -- metadata ------------------------------------------------------------------------

    def metadata(self, topics: Iterable[str] | None = None) -> Metadata:
        """Brokers and partition leaders for ``topics`` (all topics when None)."""
        names = None if topics is None else sorted(set(topics))
        request = MetadataRequest(
            topics=None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=False,
        )
        try:
            response: MetadataResponse = self._boot.send(request, self._boot.version_for(MetadataRequest))
        except (ClientError, OSError) as exc:
            raise SourceError(f"kafka.bootstrap.servers: Metadata failed: {exc}") from None
        meta = Metadata(brokers={b.node_id: (b.host, b.port) for b in response.brokers})
        for t in response.topics:
            name = t.name or ""
            if t.error_code != 0:
                meta.missing[name] = error_name(t.error_code)
                continue
            if t.is_internal and names is None:
                continue
            meta.topics[name] = len(t.partitions)
            for p in t.partitions:
                meta.leaders[TopicPartition(name, p.partition_index)] = p.leader_id
        self._remember(meta)
        return meta

    def _remember(self, meta: Metadata) -> None:
        known = self._meta
        known.brokers.update(meta.brokers)
        for topic in set(meta.topics) | set(meta.missing):
            for tp in [tp for tp in known.leaders if tp.topic == topic]:
                del known.leaders[tp]
        known.leaders.update(meta.leaders)

    def leader_of(self, tp: TopicPartition) -> int:
        """The partition's leader; a new partition may need a moment to get one."""
        for attempt in range(MAX_ATTEMPTS):
            leader = self._meta.leaders.get(tp)
            if leader is not None and leader >= 0:
                return leader
            if attempt:
                self._backoff(attempt - 1)
            self.metadata([tp.topic])
        raise SourceError(f"no leader for {tp} (unknown topic or partition)")

    # -- list offsets --------------------------------------------------------------------

    def list_offsets(self, wanted: dict[TopicPartition, int]) -> PartitionOffsets:
        """``{tp: timestamp}`` (-2 earliest, -1 latest, else ms) -> ``{tp: offset}``.

        For a timestamp with no record at or after it the answer is -1, as Kafka gives it.
        """
        out: PartitionOffsets = {}
        pending = dict(wanted)
        for attempt in range(MAX_ATTEMPTS):
            by_leader: dict[int, dict[TopicPartition, int]] = {}
            for tp, ts in pending.items():
                by_leader.setdefault(self.leader_of(tp), {})[tp] = ts
            retry: dict[TopicPartition, int] = {}
            for node, tps in by_leader.items():
                for tp, code, offset in self._list_offsets_at(node, tps):
                    if code == 0:
                        out[tp] = offset
                    elif code in RETRIABLE:
                        retry[tp] = tps[tp]
                    else:
                        raise SourceError(f"ListOffsets for {tp} failed: {error_name(code)}")
            if not retry:
                return out
            pending = retry
            self._backoff(attempt)
            self.metadata({tp.topic for tp in pending})
        raise SourceError(f"ListOffsets kept failing for {sorted(pending)} after {MAX_ATTEMPTS} attempts")

    def _list_offsets_at(
        self, node: int, tps: dict[TopicPartition, int]
    ) -> Iterator[tuple[TopicPartition, int, int]]:
        topics: dict[str, list[ListOffsetsRequest.ListOffsetsPartition]] = {}
        for tp, ts in sorted(tps.items()):
            topics.setdefault(tp.topic, []).append(
                ListOffsetsRequest.ListOffsetsPartition(partition_index=tp.partition, timestamp=ts))
        request = ListOffsetsRequest(
            replica_id=-1, isolation_level=0,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=n, partitions=p) for n, p in topics.items()],
        )
        try:
            conn = self._conn(node)
            response: ListOffsetsResponse = conn.send(request, conn.version_for(ListOffsetsRequest))
        except (ClientError, OSError):
            self._drop(node)
            for tp in tps:
                yield tp, ErrorCode.NETWORK_EXCEPTION, -1
            return
        for t in response.topics:
            for p in t.partitions:
                yield TopicPartition(t.name, p.partition_index), p.error_code, p.offset

    def earliest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return self.list_offsets(dict.fromkeys(tps, EARLIEST))

    def latest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return self.list_offsets(dict.fromkeys(tps, LATEST))

    # -- fetch ---------------------------------------------------------------------------

    def fetch(self, tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int) -> FetchedPartition:
        """One Fetch of one partition from its leader (sessionless)."""
        node = self.leader_of(tp)
        request = FetchRequest(
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
            isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=tp.topic, partitions=[
                FetchRequest.FetchPartition(partition=tp.partition, fetch_offset=offset,
                                            partition_max_bytes=max_bytes)])],
        )
        try:
            conn = self._conn(node)
            version = conn.version_for(FetchRequest, FETCH_MAX_VERSION)
            response: FetchResponse = conn.send(request, version)
        except (ClientError, OSError):
            self._drop(node)
            return FetchedPartition(ErrorCode.NETWORK_EXCEPTION, -1, -1, b"")
        if response.error_code != 0:
            return FetchedPartition(response.error_code, -1, -1, b"")
        for t in response.responses:
            for p in t.partitions:
                if p.partition_index == tp.partition:
                    records = p.records
                    data = bytes(records) if isinstance(records, bytes | bytearray | memoryview) else b""
                    return FetchedPartition(p.error_code, p.high_watermark, p.log_start_offset, data)
        return FetchedPartition(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, b"")

    def refresh(self, tp: TopicPartition) -> None:
        """Forget ``tp``'s leader (after a retriable error) and look it up again."""
        self._meta.leaders.pop(tp, None)
        self.metadata([tp.topic])

    @staticmethod
    def _backoff(attempt: int) -> None:
        time.sleep(RETRY_BACKOFF_MS * (attempt + 1) / 1000)

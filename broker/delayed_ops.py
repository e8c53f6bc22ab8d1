"""The two delayed operations of the data path (Kafka's DelayedProduce and DelayedFetch).

DelayedProduce (acks=all): parked after the local append until, for every partition of the
request, the high watermark reaches the end of what was appended (``required_offset`` =
last offset + 1) -- then NO_ERROR (or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank
below min.insync.replicas); partitions still short when ``timeout_ms`` runs out get
REQUEST_TIMED_OUT. Keys: the topic-partitions; retried whenever one's HW moves.

DelayedFetch (long poll): parked when the first read returned fewer than ``min_bytes``;
retried whenever one of its partitions gets new data; completes when the bytes available
over all partitions reach ``min_bytes``, when a partition errors (deleted, leader change,
its log dir offline), or after ``max_wait_ms``. On completion the partitions are read again (so the response
carries all the data there is at that moment) by ``read_all`` -- except where the check that
completes it has just made that very read: a consumer's fetch of one partition (no rack, its
partition limit within the request's) completed by the bytes an append brought; its answer
is that read's records, with the partition's offsets of the same moment (nothing runs in
between), instead of a second read of the log. A fetch of many partitions (a follower's)
is read by its request once it resumes instead (``read_on_complete`` False), a slice at a
time: the completion runs on the loop in one go, in a timer's or an append's callback.

Thread-safety: none; the broker's event loop only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.partition import AppendResult, IsolationLevel, Partition, ReadResult
from broker.purgatory import DelayedOperation
from protocol.errors import ErrorCode
from protocol.fileslice import FileSlice
from protocol.topic_partition import TopicPartition

_NO_ERROR = ErrorCode.NO_ERROR  # an Enum member read per check, looked up once


@dataclass(slots=True)
class ProducePartitionStatus:
    required_offset: int
    result: AppendResult
    acks_pending: bool


class DelayedProduce(DelayedOperation):
    def __init__(self, delay_ms: int, statuses: dict[TopicPartition, ProducePartitionStatus],
                 get_partition: Callable[[TopicPartition], Partition | None]) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self._get_partition = get_partition

    def try_complete(self) -> bool:
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self._get_partition(tp)
            if partition is None:
                status.acks_pending = False
                status.result.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            if partition.log.offline:  # its log dir failed while the request waited
                status.acks_pending = False
                status.result.error = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            reached, error = partition.check_enough_replicas_reach_offset(status.required_offset)
            if reached:
                status.acks_pending = False
                status.result.error = error
        return not any(s.acks_pending for s in self.statuses.values())

    def on_expiration(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:
                status.acks_pending = False
                status.result.error = ErrorCode.REQUEST_TIMED_OUT

    def on_complete(self) -> None:
        """The statuses hold the answer; nothing more to build."""


@dataclass(slots=True)
class FetchPartitionStatus:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int


@dataclass(slots=True)  # not frozen: one per fetch, and frozen __init__ costs a setattr call per field
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: IsolationLevel
    # Consumers of Fetch v11+ may read from a follower (KIP-392); followers and older
    # consumers only from the leader (Kafka's ``fetchOnlyLeader``).
    follower_reads: bool = False
    client_rack: str = ""  # the consumer's client.rack (Fetch v11+ rack_id)


ReadAll = Callable[[FetchParams, list[FetchPartitionStatus]], list[ReadResult]]


class DelayedFetch(DelayedOperation):
    def __init__(self, params: FetchParams, statuses: list[FetchPartitionStatus],
                 get_partition: Callable[[str, int], Partition | None],
                 read_all: ReadAll, *, read_on_complete: bool = True) -> None:
        """``read_on_complete`` False: the completion reads nothing (``results`` stays
        empty); the waiter reads once it resumes."""
        super().__init__(params.max_wait_ms)
        self.params = params
        self.statuses = statuses
        self._get_partition = get_partition
        self._read_all = read_all
        self._read_on_complete = read_on_complete
        self.results: list[ReadResult] = []
        # The read that completed the operation, when it is the one read_all would make
        # (``reusable``: one partition, see the module docstring): (partition, records).
        self._ready: tuple[Partition, FileSlice] | None = None
        self.reusable = (len(statuses) == 1 and params.replica_id < 0 and not params.client_rack
                          and 0 <= statuses[0].max_bytes <= params.max_bytes)

    def try_complete(self) -> bool:
        accumulated = 0
        params = self.params
        if self.reusable:
            return self._try_complete_one(self.statuses[0])
        for s in self.statuses:
            partition = self._get_partition(s.topic, s.partition)
            if partition is None or not (partition.is_leader or params.follower_reads):
                return True  # deleted or moved: answer now with the error
            if partition.log.offline:
                return True  # its log dir failed: answer now with the error
            if partition.check_leader_epoch(s.current_leader_epoch) is not ErrorCode.NO_ERROR:
                return True
            end = partition.fetch_upper_bound(params.replica_id, params.isolation)
            if s.fetch_offset > end and s.fetch_offset > partition.log_end_offset:
                return True  # the log was truncated below the fetch offset
            if s.fetch_offset < partition.log_start_offset:
                return True  # records deleted under the fetch offset
            if end > s.fetch_offset:
                accumulated += partition.bytes_available(
                    s.fetch_offset, s.max_bytes, params.replica_id, params.isolation
                )
                if accumulated >= params.min_bytes:
                    return True
        return accumulated >= params.min_bytes

    def _try_complete_one(self, s: FetchPartitionStatus) -> bool:
        """``try_complete`` of one partition: the same checks, and the read kept when it
        completes the operation (``read_all`` would make the same: the same offset, limit
        and bound, at least one batch)."""
        params = self.params
        partition = self._get_partition(s.topic, s.partition)
        if partition is None or not (partition.is_leader or params.follower_reads):
            return True  # deleted or moved: answer now with the error
        if partition.log.offline:
            return True  # its log dir failed: answer now with the error
        if partition.check_leader_epoch(s.current_leader_epoch) is not _NO_ERROR:
            return True
        end = partition.fetch_upper_bound(params.replica_id, params.isolation)
        if s.fetch_offset > end and s.fetch_offset > partition.log_end_offset:
            return True  # the log was truncated below the fetch offset
        if s.fetch_offset < partition.log_start_offset:
            return True  # records deleted under the fetch offset
        if end > s.fetch_offset:
            records = partition.records_available(s.fetch_offset, s.max_bytes,
                                                  params.replica_id, params.isolation)
            if records is not None and records.length >= params.min_bytes:
                self._ready = (partition, records)
                return True
            return params.min_bytes <= 0
        return params.min_bytes <= 0

    def on_complete(self) -> None:
        ready, self._ready = self._ready, None
        if ready is not None and not self.expired:
            p, records = ready
            self.results = [ReadResult(_NO_ERROR, p.high_watermark, p.last_stable_offset,
                                       p.log_start_offset,
                                       records if records.length > 0 else None)]
            return
        if self._read_on_complete:
            self.results = self._read_all(self.params, self.statuses)

"""The partitions this broker hosts, and the produce and fetch paths over them.

``ReplicaManager`` (Kafka's ``ReplicaManager``) owns the ``Partition`` objects (leader
epoch, HW, LEO over storage's ``Log``), the produce purgatory (acks=all waits for the HW)
and the fetch purgatory (long polls wait for data). Handlers reach it as
``ctx.broker.replica_manager``.

Produce: each partition's records are validated and appended locally
(``Partition.append_records_as_leader``); with acks=-1 a ``DelayedProduce`` then waits until
the HW covers them. On one node the HW follows the LEO at once, so the operation completes
on its first try -- through the same path replication uses when followers move the HW.

Fetch: a first read of every partition; if that is enough (``min_bytes``), or the request
may not wait, or an error came back, the answer goes at once; otherwise a ``DelayedFetch``
watches the partitions and is completed by the next append (``check_and_complete``) or by
``max_wait_ms``. Response limits follow KIP-74: partitions are read in request order, each
up to ``partition_max_bytes`` and what is left of ``max_bytes``; only the first partition
that has data may return one whole batch above those limits.

Thread-safety: none; the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from broker.delayed_ops import (
    DelayedFetch,
    DelayedProduce,
    FetchParams,
    FetchPartitionStatus,
    ProducePartitionStatus,
    TopicPartition,
)
from broker.fetch_session import DEFAULT_MAX_SLOTS, FetchSessionCache
from broker.partition import AppendResult, Partition, ReadResult
from broker.purgatory import Purgatory
from broker.record_validation import ValidationConfig
from broker.topics import INTERNAL_TOPICS
from protocol.errors import ErrorCode
from storage.config import LogConfig
from storage.manager import LogManager
from storage.naming import TopicPartition as StorageTopicPartition

if TYPE_CHECKING:
    from broker.metrics.topics import BrokerTopicStats

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
PRODUCER_ID_CHECK_INTERVAL_MS = 600_000  # producer.id.expiration.check.interval.ms


def _now_ms() -> int:
    return int(time.time() * 1000)


def validation_config(log_config: LogConfig) -> ValidationConfig:
    return ValidationConfig(
        max_message_bytes=log_config.max_message_bytes,
        compacted=log_config.compacts,
        timestamp_before_max_ms=log_config.message_timestamp_before_max_ms,
        timestamp_after_max_ms=log_config.message_timestamp_after_max_ms,
    )


class ReplicaManager:
    """See the module docstring."""

    def __init__(self, log_manager: LogManager, *, broker_id: int,
                 fetch_session_cache_slots: int = DEFAULT_MAX_SLOTS,
                 producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
                 producer_id_expiration_check_interval_ms: int = PRODUCER_ID_CHECK_INTERVAL_MS,
                 ) -> None:
        self.log_manager = log_manager
        self.broker_id = broker_id
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        self._last_producer_check_ms = _now_ms()
        self.fetch_sessions = FetchSessionCache(fetch_session_cache_slots)
        self.partitions: dict[TopicPartition, Partition] = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self._checkpointed_hws: dict[StorageTopicPartition, int] | None = None
        self._flushing: set[Partition] = set()
        self.produce_purgatory: Purgatory[TopicPartition] = Purgatory("Produce")
        self.fetch_purgatory: Purgatory[TopicPartition] = Purgatory("Fetch")
        # Bytes/messages in and out per topic (broker.metrics.topics); None: not counted.
        self.topic_stats: BrokerTopicStats | None = None
        # ISR changes of partitions led here (Kafka's IsrShrinksPerSec / IsrExpandsPerSec);
        # counted where the ISR changes.
        self.isr_shrinks = 0
        self.isr_expands = 0

    # ------------------------------------------------------------ partitions

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return self._topic_names.get(topic_id)

    def ensure_partition(self, topic: str, partition: int, topic_id: uuid.UUID,
                         log_config: LogConfig) -> Partition:
        """Create or open the partition's log and become its leader (idempotent).

        The leader epoch is the latest one in the log's leader-epoch-checkpoint (0 for a
        new log): one node never changes leader. The HW starts from
        replication-offset-checkpoint and, with the ISR being just this broker, moves to
        the log end at once. Producer state is loaded from the newest snapshot and the
        batches after it (or rebuilt from the whole log).
        """
        tp = (topic, partition)
        existing = self.partitions.get(tp)
        if existing is not None:
            return existing
        stp = StorageTopicPartition(topic, partition)
        plog = self.log_manager.get_or_create_log(stp, log_config, topic_id=topic_id.bytes)
        plog.update_config(log_config)
        latest_epoch = plog.latest_epoch()
        leader_epoch = 0 if latest_epoch is None else int(latest_epoch)
        if self._checkpointed_hws is None:
            self._checkpointed_hws = self.log_manager.read_high_watermarks()
        hw = self._checkpointed_hws.get(stp, 0)
        p = Partition(
            topic, partition, topic_id, plog, broker_id=self.broker_id,
            leader_epoch=leader_epoch, high_watermark=hw,
            validation=validation_config(log_config),
            log_append_time=log_config.log_append_time,
            min_insync_replicas=log_config.min_insync_replicas,
            log_deletes=log_config.deletes,
        )
        replayed = p.producer_state.load(p.log_start_offset, p.log_end_offset, p.batches_from)
        if replayed:
            log.info("%s-%d: producer state rebuilt, %d batches replayed from the log",
                     topic, partition, replayed)
        self.partitions[tp] = p
        self._topic_names[topic_id] = topic
        return p

    def delete_partition(self, topic: str, partition: int) -> None:
        p = self.partitions.pop((topic, partition), None)
        if p is None:
            return
        if not any(t == topic for t, _ in self.partitions):
            self._topic_names.pop(p.topic_id, None)
            if self.topic_stats is not None:
                self.topic_stats.remove_topic(topic, [p])
        # wake the waiters: they find the partition gone and answer with an error
        self.produce_purgatory.check_and_complete((topic, partition))
        self.fetch_purgatory.check_and_complete((topic, partition))
        self.log_manager.delete_log(StorageTopicPartition(topic, partition))

    def update_log_config(self, topic: str, log_config: LogConfig) -> None:
        for (t, _), p in self.partitions.items():
            if t == topic:
                p.log.update_config(log_config)
                p.validation = validation_config(log_config)
                p.log_append_time = log_config.log_append_time
                p.min_insync_replicas = log_config.min_insync_replicas
                p.log_deletes = log_config.deletes

    def high_watermarks(self) -> dict[StorageTopicPartition, int]:
        """For replication-offset-checkpoint (LogManager.write_high_watermarks / shutdown)."""
        return {StorageTopicPartition(t, i): p.high_watermark
                for (t, i), p in self.partitions.items()}

    # ------------------------------------------------------------ produce

    async def append_records(
        self, *, timeout_ms: int, required_acks: int, produce_version: int,
        entries: Iterable[tuple[TopicPartition, memoryview | bytes | None]],
        internal_topics_allowed: bool = True,
    ) -> dict[TopicPartition, AppendResult]:
        """Append every partition's records; with acks=-1 wait for the HW (or timeout).

        Client produce passes ``internal_topics_allowed=False``: an append to an internal
        topic (``__consumer_offsets``) is then INVALID_TOPIC_EXCEPTION, as in Kafka; the
        broker's own writers (the group coordinator) keep the default.
        """
        results: dict[TopicPartition, AppendResult] = {}
        if required_acks not in VALID_ACKS:
            for tp, _ in entries:
                results[tp] = AppendResult(ErrorCode.INVALID_REQUIRED_ACKS)
            return results
        appended: list[TopicPartition] = []
        for tp, records in entries:
            p = self.partitions.get(tp)
            if not internal_topics_allowed and tp[0] in INTERNAL_TOPICS:
                results[tp] = AppendResult(ErrorCode.INVALID_TOPIC,
                                           error_message=f"Cannot append to internal topic {tp[0]}")
                continue
            if p is None:
                results[tp] = AppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            result = p.append_records_as_leader(records, produce_version, required_acks)
            results[tp] = result
            if self.topic_stats is not None:
                self.topic_stats.on_append(p, 0 if records is None else len(records), result)
            if result.error is ErrorCode.NO_ERROR:
                appended.append(tp)
        for tp in appended:
            self.fetch_purgatory.check_and_complete(tp)
            self.produce_purgatory.check_and_complete(tp)
            self._maybe_flush(self.partitions[tp])
        now = _now_ms()
        if now - self._last_producer_check_ms >= self.producer_id_expiration_check_interval_ms:
            self._last_producer_check_ms = now
            self.expire_producers(now)
        if required_acks != -1 or not appended:
            return results
        statuses = {
            tp: ProducePartitionStatus(results[tp].last_offset + 1, results[tp], True)
            for tp in appended
        }
        op = DelayedProduce(max(timeout_ms, 0), statuses, self.get_partition)
        if not self.produce_purgatory.try_complete_else_watch(op, appended):
            await op.wait()
        return results

    def _maybe_flush(self, p: Partition) -> None:
        """Background disk work after an append, in the default thread pool, at most one
        job per partition at a time: the fsync the log asked for (flush.messages reached,
        or a roll) and, after a roll, a producer-state snapshot (encoded here, on the
        loop, so the thread never reads state the loop is changing)."""
        if not (p.needs_flush or p.snapshot_due) or p in self._flushing:
            return
        flush, p.needs_flush = p.needs_flush, False
        snapshot: tuple[int, bytes] | None = None
        if p.snapshot_due:
            p.snapshot_due = False
            snapshot = (p.log_end_offset, p.producer_state.snapshot_bytes())
        self._flushing.add(p)

        def work() -> None:
            if flush:
                p.log.flush()
            if snapshot is not None:
                p.producer_state.write_snapshot(*snapshot)

        future = asyncio.get_running_loop().run_in_executor(None, work)

        def done(f: asyncio.Future[None]) -> None:
            self._flushing.discard(p)
            if not f.cancelled() and f.exception() is not None:
                log.error("%s-%d: background flush/snapshot failed: %s", p.topic, p.partition,
                          f.exception())

        future.add_done_callback(done)

    def expire_producers(self, now_ms: int) -> int:
        """Forget producers silent for producer.id.expiration.ms (1 day), and those whose
        data retention or DeleteRecords removed (Kafka's periodic producer expiration).
        Runs on the loop from the produce path every
        producer.id.expiration.check.interval.ms (10 min); returns how many went."""
        removed = 0
        for p in self.partitions.values():
            removed += p.producer_state.remove_expired(now_ms, self.producer_id_expiration_ms)
            removed += p.producer_state.remove_before(p.log_start_offset)
        if removed:
            log.info("expired %d producer ids", removed)
        return removed

    def on_high_watermark_moved(self, tp: TopicPartition) -> None:
        """Replication hook: a follower's fetch moved the HW."""
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    # ------------------------------------------------------------ fetch

    def read_all(self, params: FetchParams,
                 statuses: list[FetchPartitionStatus]) -> list[ReadResult]:
        """Read every partition once, with the KIP-74 byte limits (see the module docstring)."""
        results: list[ReadResult] = []
        remaining = params.max_bytes
        min_one_message = True
        for s in statuses:
            p = self.partitions.get((s.topic, s.partition))
            if p is None:
                results.append(ReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            limit = max(0, min(s.max_bytes, remaining))
            result = p.read(s.fetch_offset, limit, replica_id=params.replica_id,
                            isolation=params.isolation, min_one_message=min_one_message,
                            current_leader_epoch=s.current_leader_epoch)
            size = result.size_bytes
            if size > 0:
                min_one_message = False
                remaining = max(0, remaining - size)
            results.append(result)
        return results

    async def fetch_messages(self, params: FetchParams,
                             statuses: list[FetchPartitionStatus]) -> list[ReadResult]:
        """Read now, or wait (long poll) for ``min_bytes`` up to ``max_wait_ms``."""
        results = self.read_all(params, statuses)
        total = sum(r.size_bytes for r in results)
        any_error = any(r.error is not ErrorCode.NO_ERROR for r in results)
        if (params.max_wait_ms <= 0 or not statuses or total >= params.min_bytes or any_error):
            return self._counted(params, statuses, results)
        op = DelayedFetch(params, statuses, self.get_partition, self.read_all)
        keys = [(s.topic, s.partition) for s in statuses]
        if not self.fetch_purgatory.try_complete_else_watch(op, keys):
            await op.wait()
        return self._counted(params, statuses, op.results)

    def _counted(self, params: FetchParams, statuses: list[FetchPartitionStatus],
                 results: list[ReadResult]) -> list[ReadResult]:
        """Count the answered reads in the topic stats (when on); returns ``results``."""
        stats = self.topic_stats
        if stats is not None:
            follower = params.replica_id >= 0
            for s, result in zip(statuses, results, strict=True):
                p = self.partitions.get((s.topic, s.partition))
                if p is not None:
                    stats.on_read(p, result, follower=follower)
        return results

    # ------------------------------------------------------------ shutdown

    def complete_delayed_operations(self) -> int:
        """Answer every parked request now, as expired (long polls return what they have,
        acks=all waits answer REQUEST_TIMED_OUT), and refuse to park new ones. Call it
        before draining in-flight requests at shutdown, so no request waits out its delay.
        Returns how many operations were completed."""
        return self.produce_purgatory.shutdown() + self.fetch_purgatory.shutdown()

    def shutdown(self) -> None:
        """Complete parked requests (if not done yet), then snapshot producer state.

        Blocking (snapshot files are fsynced): part of the broker's ordered shutdown, after
        the network stopped and before ``LogManager.shutdown(self.high_watermarks())``.
        """
        self.complete_delayed_operations()
        for p in self.partitions.values():
            try:
                p.producer_state.take_snapshot(p.log_end_offset)
            except OSError as exc:
                log.warning("%s-%d: producer snapshot failed: %s", p.topic, p.partition, exc)

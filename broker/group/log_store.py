"""``__consumer_offsets`` as the coordinator's ``RecordLog``: appends through the replica
manager (acks=all, like Kafka's coordinator writes) and reads partitions back for loading.

Each ``append`` becomes one magic-2 batch, uncompressed, CreateTime = now, no producer id,
keyed records only (the topic is compacted). Appends are started in call order as asyncio
tasks; the replica manager appends synchronously before it waits for the high watermark, so
records land in the order the coordinator wrote them. The callback runs on the event loop
with the append's error code (NO_ERROR once acknowledged).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from broker.group.partitioning import GROUP_METADATA_TOPIC
from broker.group.store import AppendCallback, GroupRecord
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.partition import Partition
    from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

PRODUCE_VERSION: Final = 9  # the batch format rules of the newest Produce we accept


class ReplicaRecordLog:
    MAX_IN_FLIGHT = 10_000  # appends waiting for acks; past it new ones fail at once

    def __init__(self, replica_manager: ReplicaManager, commit_timeout_ms: int) -> None:
        self.replica_manager = replica_manager
        self.commit_timeout_ms = commit_timeout_ms
        self._tasks: set[asyncio.Task[None]] = set()

    def append(self, partition: int, records: list[GroupRecord], callback: AppendCallback) -> None:
        if len(self._tasks) >= self.MAX_IN_FLIGHT:
            log.warning("__consumer_offsets: %d appends in flight, refusing more", len(self._tasks))
            callback(ErrorCode.REQUEST_TIMED_OUT)
            return
        batch = build_batch([NewRecord(key, value) for key, value in records])
        task = asyncio.get_running_loop().create_task(self._append(partition, batch, callback))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _append(self, partition: int, batch: bytes, callback: AppendCallback) -> None:
        tp = TopicPartition(GROUP_METADATA_TOPIC, partition)
        try:
            results = await self.replica_manager.append_records(
                timeout_ms=self.commit_timeout_ms, required_acks=-1,
                produce_version=PRODUCE_VERSION, entries=[(tp, batch)],
            )
            error = results[tp].error
        except Exception:  # an append must always answer its callback
            log.exception("__consumer_offsets-%d: append failed", partition)
            error = ErrorCode.UNKNOWN_SERVER_ERROR
        callback(ErrorCode(error))

    async def drain(self, timeout_s: float) -> None:
        """Wait (bounded) for the appends in flight, e.g. at shutdown."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout_s)


def read_records(partition: Partition) -> Iterator[GroupRecord]:
    """Every keyed record of a ``__consumer_offsets`` partition, oldest first."""
    for batch in partition.batches_from(partition.log_start_offset):
        if batch.is_control:
            continue
        for record in batch.records():
            if record.key is None:
                continue
            yield bytes(record.key), (None if record.value is None else bytes(record.value))

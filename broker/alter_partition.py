"""A leader's ISR changes, sent to the controller (Kafka's ``AlterPartitionManager`` in
ZooKeeper mode: ``DefaultAlterPartitionManager`` over the broker-to-controller channel).

``submit(partition, isr)`` is called by ``Partition`` when it asks for an ISR (expand or
shrink); the partition is then "pending" (its HW counts the maximal ISR) until the answer.
One sender task batches every pending change into one AlterPartition (v2: topic ids;
the broker's id and epoch, each partition's leader epoch and partition epoch), sends it to
the controller the metadata cache names (inter-broker listener, with its TLS and SASL
settings) and hands the answer back:

- a partition's new state: ``Partition.isr_change_committed`` (the HW may move: the
  replica manager's ``on_high_watermark_moved`` hears it);
- INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED: the controller says it did not apply it,
  the partition goes back to its committed ISR (it may ask again);
- FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_OR_PARTITION: the leader's
  state is stale; the partition stays pending (no further ISR change, the HW keeps
  counting both ISRs) until a LeaderAndIsr gives it the controller's state, as Kafka does;
- anything else (NOT_CONTROLLER, STALE_BROKER_EPOCH, no controller known, no answer):
  retried after ``retry_backoff_ms``, unless a LeaderAndIsr replaced the pending state.
  CLUSTER_AUTHORIZATION_FAILED (the controller's authorizer does not grant this broker
  CLUSTER_ACTION) is retried the same way and logged at ERROR, as Kafka's
  ``DefaultAlterPartitionManager`` does, once and then every ``UNAUTHORIZED_LOG_EVERY``
  answers in a row (Kafka logs each one).

At most one request is in flight; changes submitted meanwhile go in the next one. A
partition submitted again replaces its earlier change.

Thread-safety: the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from client.config import ClientConfig
from client.connection import BrokerConnection
from client.errors import ClientError
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.partition import Partition

log = logging.getLogger(__name__)

REQUEST_VERSION: Final = 2
MAX_PARTITIONS_PER_REQUEST: Final = 10_000
UNAUTHORIZED_LOG_EVERY: Final = 100  # CLUSTER_AUTHORIZATION_FAILED answers in a row
# An AlterPartition answer: the first this many partitions log their new ISR at INFO, the
# others at DEBUG, with one INFO line for them all; a request of more than this many says
# so in one INFO line naming the first this many (the full list at DEBUG).
PER_PARTITION_INFO_MAX: Final = 10
_REVERT: Final = frozenset({ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED})
_WAIT_FOR_LEADER_AND_ISR: Final = frozenset({
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
})
_ZERO_UUID: Final = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class _Change:
    partition: Partition
    isr: frozenset[int]
    leader_epoch: int
    partition_epoch: int


class AlterPartitionManager:
    """See the module docstring."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], cache: MetadataCache,
                 listener: str, on_high_watermark_moved: Callable[[TopicPartition], None], *,
                 retry_backoff_ms: int = 100, request_timeout_ms: int = 30_000,
                 client_properties: Mapping[str, str] | None = None) -> None:
        """``client_properties``: how to reach the controller's inter-broker listener (TLS,
        SASL: the client's property names)."""
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._cache = cache
        self._listener = listener
        self._on_hw_moved = on_high_watermark_moved
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._unauthorized = 0  # CLUSTER_AUTHORIZATION_FAILED answers in a row
        self._config = ClientConfig.from_properties(client_properties or {}, ClientConfig(
            client_id=f"broker-{broker_id}-alter-partition", request_timeout_ms=request_timeout_ms,
            connection_setup_timeout_ms=request_timeout_ms, max_in_flight_requests_per_connection=1))
        self._pending: dict[TopicPartition, _Change] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: BrokerConnection | None = None
        self._connection_node = -1
        self._closed = False

    def submit(self, partition: Partition, isr: frozenset[int]) -> None:
        if self._closed:
            return
        self._pending[partition.topic_partition] = _Change(
            partition, isr, partition.leader_epoch, partition.partition_epoch)
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"alter-partition-{self.broker_id}")

    async def shutdown(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._close_connection()

    async def _close_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    def _still_wanted(self, change: _Change) -> bool:
        p = change.partition
        return (p.is_leader and p.leader_epoch == change.leader_epoch
                and p.pending_isr == change.isr)

    async def _run(self) -> None:
        while not self._closed:  # each turn sends one request or waits for work
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = {tp: c for tp, c in list(self._pending.items())[:MAX_PARTITIONS_PER_REQUEST]}
            for tp in batch:
                del self._pending[tp]
            batch = {tp: c for tp, c in batch.items() if self._still_wanted(c)}
            if not batch:
                continue
            retry = await self._send(batch)
            for tp, change in retry.items():
                if self._still_wanted(change):
                    self._pending.setdefault(tp, change)
            if retry:
                await asyncio.sleep(self._retry_backoff_s)

    async def _controller(self) -> BrokerConnection | None:
        controller_id = self._cache.controller_id
        if controller_id is None:
            return None
        if (self._connection is not None and not self._connection.closed
                and self._connection_node == controller_id):
            return self._connection
        await self._close_connection()
        broker = self._cache.alive_broker(controller_id)
        endpoint = None if broker is None else broker.endpoint(self._listener)
        if endpoint is None:
            return None
        self._connection = await BrokerConnection.open(endpoint.host, endpoint.port,
                                                       self._config, node_id=controller_id)
        self._connection_node = controller_id
        return self._connection

    async def _send(self, batch: dict[TopicPartition, _Change]) -> dict[TopicPartition, _Change]:
        """Send one request; returns the changes to retry."""
        by_topic: dict[str, list[tuple[TopicPartition, _Change]]] = {}
        for tp, change in batch.items():
            by_topic.setdefault(tp.topic, []).append((tp, change))
        version = REQUEST_VERSION
        if any(c.partition.topic_id == _ZERO_UUID for c in batch.values()):
            version = 1
        request = AlterPartitionRequest(
            broker_id=self.broker_id, broker_epoch=self._broker_epoch(),
            topics=[AlterPartitionRequest.TopicData(
                topic_name=topic, topic_id=changes[0][1].partition.topic_id,
                partitions=[AlterPartitionRequest.PartitionData(
                    partition_index=tp.partition, leader_epoch=c.leader_epoch,
                    new_isr=sorted(c.isr), partition_epoch=c.partition_epoch)
                    for tp, c in changes])
                for topic, changes in by_topic.items()])
        try:
            connection = await self._controller()
            if connection is None:
                log.info("AlterPartition of %d partitions waits: no controller known",
                         len(batch))
                return batch
            if len(batch) > PER_PARTITION_INFO_MAX:  # (a few: each partition said so at INFO)
                _log_changes(batch)
            response = await connection.send(request, version=version)
        except (ClientError, OSError) as exc:
            log.warning("AlterPartition to the controller failed (%s); retrying", exc)
            await self._close_connection()
            return batch
        return self._handle(batch, response, version)

    def _handle(self, batch: dict[TopicPartition, _Change], response: AlterPartitionResponse,
                version: int) -> dict[TopicPartition, _Change]:
        top = ErrorCode(response.error_code)
        if top is ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
            self._unauthorized += 1
            if self._unauthorized == 1 or self._unauthorized % UNAUTHORIZED_LOG_EVERY == 0:
                log.error("Broker is not authorized to send AlterPartition to controller (%s, "
                          "%d times in a row; the controller's authorizer must grant this "
                          "broker's principal CLUSTER_ACTION on the cluster); retrying %d "
                          "partitions", top.name, self._unauthorized, len(batch))
            return batch
        self._unauthorized = 0
        if top is not ErrorCode.NO_ERROR:
            log.info("AlterPartition answered %s; retrying %d partitions", top.name, len(batch))
            if top is ErrorCode.NOT_CONTROLLER:
                self._connection_node = -1
            return batch
        retry: dict[TopicPartition, _Change] = {}
        ids = {c.partition.topic_id: tp.topic for tp, c in batch.items()}
        answered: set[TopicPartition] = set()
        committed: list[TopicPartition] = []
        for topic in response.topics:
            name = ids.get(topic.topic_id) if version >= 2 else topic.topic_name
            if name is None:
                continue
            for r in topic.partitions:
                tp = TopicPartition(name, r.partition_index)
                change = batch.get(tp)
                if change is None:
                    continue
                answered.add(tp)
                p = change.partition
                error = ErrorCode(r.error_code)
                if not self._still_wanted(change):
                    continue  # a LeaderAndIsr (or a newer change) took over meanwhile
                if error is ErrorCode.NO_ERROR:
                    level = (logging.INFO if len(committed) < PER_PARTITION_INFO_MAX
                             else logging.DEBUG)
                    committed.append(tp)
                    if p.isr_change_committed(list(r.isr), r.leader_epoch, r.partition_epoch,
                                              level):
                        self._on_hw_moved(tp)
                elif error in _REVERT:
                    p.isr_change_failed(error, retriable=False)
                elif error in _WAIT_FOR_LEADER_AND_ISR:
                    log.info("%s: ISR change to %s answered %s: waiting for the controller's "
                             "LeaderAndIsr", tp, sorted(change.isr), error.name)
                else:
                    log.info("%s: ISR change to %s answered %s; retrying", tp,
                             sorted(change.isr), error.name)
                    retry[tp] = change
        for tp, change in batch.items():
            if tp not in answered:
                retry[tp] = change
        if len(committed) > PER_PARTITION_INFO_MAX:  # (the first ones said so at INFO)
            log.info("ISR updated for %d partitions by the controller (the first %d above, "
                     "the others at DEBUG)", len(committed), PER_PARTITION_INFO_MAX)
        return retry


def _log_changes(batch: Mapping[TopicPartition, _Change]) -> None:
    """One INFO line for the ISR changes an AlterPartition carries (each partition logs its
    own at DEBUG); up to PER_PARTITION_INFO_MAX of them in full."""
    expanding = [tp for tp, c in batch.items() if c.isr > c.partition.isr]
    changes = [f"{tp} {sorted(c.partition.isr)} -> {sorted(c.isr)}"
               for tp, c in list(batch.items())[:PER_PARTITION_INFO_MAX]]
    more = len(batch) - len(changes)
    log.info("AlterPartition of %d partitions (%d expanding, %d shrinking or other): %s%s",
             len(batch), len(expanding), len(batch) - len(expanding), ", ".join(changes),
             f" and {more} more (all at DEBUG)" if more > 0 else "")
    if more > 0 and log.isEnabledFor(logging.DEBUG):
        log.debug("AlterPartition changes: %s", ", ".join(
            f"{tp} {sorted(c.partition.isr)} -> {sorted(c.isr)}" for tp, c in batch.items()))

"""One partition hosted by this broker, as leader or follower, over storage's Log (Kafka's
``Partition``).

State and its invariants (Redpanda-style offset kinds)::

    log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset

- Role: only LeaderAndIsr changes it (``ReplicaManager.become_leader_or_follower``):
  ``make_leader`` / ``make_follower`` take the controller's partition state (leader,
  leader epoch, ISR, replicas, partition epoch). A new ``Partition`` has no role and
  leader epoch -1, so the first LeaderAndIsr (epoch >= 0) always applies.
- ``leader_epoch``: the controller's; the leader stamps it in every batch it appends, and
  on becoming leader of a new epoch records in the log's leader-epoch-checkpoint that the
  epoch starts at the log end offset (so followers can truncate against it).
- ``high_watermark`` (HW): the offset below which every ISR member has the data. The leader
  tracks each follower's fetch state (``follower_states``: log end offset, last caught-up
  time); HW = min LEO over the ISR, moved forward only. With no followers (one node, ISR =
  {leader}) the HW follows the LEO at once, through the same ``maybe_increment_high_watermark``
  path replication uses.
- ``last_stable_offset`` (LSO): equal to the HW (no transactions here).

Consumers (replica id -1) read from the leader below the HW (READ_UNCOMMITTED) or the LSO
(READ_COMMITTED); followers read up to the LEO. A follower answers clients
NOT_LEADER_OR_FOLLOWER. The partition's settings (max.message.bytes, min.insync.replicas,
timestamps, cleanup.policy, ...) are read from its log's ``LogConfig``, which config
changes replace. Truncation (a follower's, or a leader losing an epoch) cuts the log and
rebuilds the producer state in one operation (``truncate_to``).

Thread-safety: none; the broker's event loop only. A follower's truncation does its disk
work and producer-state rebuild in a worker thread (``truncate_off_loop``); role changes
wait for it (``settled``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NewType, TypeAlias

from broker.producer_state import (
    NO_PRODUCER_ID,
    ProducerStateError,
    ProducerStateManager,
    increment_sequence,
)
from broker.record_validation import (
    LONG_MAX,
    CheckedBatch,
    PlainBatch,
    RecordValidationError,
    ValidationConfig,
    check_crc,
    validate_client_batch,
    validate_group,
)
from protocol import checksum
from protocol.batch_header import CRC_START
from protocol.errors import ErrorCode
from protocol.fileslice import FileSlice
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.records import BatchHeader, RecordBatch, iter_batches
from protocol.topic_partition import TopicPartition
from storage.config import LogConfig
from storage.errors import CorruptSegmentError, LogDirOfflineError, LogIOError, StorageError
from storage.index import TimestampOffset
from storage.log import Log

if TYPE_CHECKING:
    from broker.metrics.topics import TopicStats
    from storage.batches import AppendInfo

log = logging.getLogger(__name__)
# Enum members read on the per-request path, looked up once: on Python 3.11 a class
# attribute of an Enum costs a metaclass __getattr__ hook call (~10x a global read).
_NO_ERROR = ErrorCode.NO_ERROR
_new_tuple = tuple.__new__  # a NamedTuple's own __new__ is Python code; this is C

Offset = NewType("Offset", int)  # a log offset of any kind; the names below say which

CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
NO_EPOCH = -1  # a partition's leader and partition epochs before its first LeaderAndIsr
DELETE_TO_HIGH_WATERMARK = -1
# ListOffsets special timestamps (ListOffsetsRequest)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


# What make_leader / make_follower read: one partition of a LeaderAndIsr request.
PartitionStateChange = LeaderAndIsrRequest.LeaderAndIsrPartitionState


class IsolationLevel(enum.IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


# Read on every fetch: on Python 3.11 an Enum class attribute costs a metaclass hook call.
_READ_COMMITTED = IsolationLevel.READ_COMMITTED


@dataclass(slots=True)
class AppendResult:
    """The outcome of appending one partition's records (a ProduceResponse partition)."""

    error: ErrorCode = ErrorCode.NO_ERROR
    base_offset: int = -1
    last_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    # A tuple by default (no list made per result); only read, never changed in place.
    record_errors: Sequence[tuple[int, str | None]] = ()


# A group append's placeholder for the answers the log gives (every one is replaced).
_UNANSWERED = AppendResult(ErrorCode.UNKNOWN_SERVER_ERROR)


class PlainResults:
    """The answers of a plain group append (``Partition.append_records_group``: every batch
    appended, none with a producer id, no LogAppendTime): each a success at its batch's
    first offset (``first_offsets``), with the group's ``log_start_offset``, made as an
    ``AppendResult`` only when read (by index, or in order). The group's answers are
    written from those two without one (``broker.handlers.produce_answer``): an
    ``AppendResult`` made and its seven fields set cost ~1,600 instructions a request.

    Not a ``Sequence`` subclass: where mypyc compiles this module it is a native class,
    which cannot derive from an ABC."""

    __slots__ = ("_ready", "first_offsets", "log_start_offset")

    def __init__(self, ready: list[PlainBatch], first_offsets: list[int],
                 log_start_offset: int) -> None:
        self._ready = ready  # (buffer, its header's fields) of each batch: its last offset
        self.first_offsets = first_offsets
        self.log_start_offset = log_start_offset

    def __len__(self) -> int:
        return len(self.first_offsets)

    def __getitem__(self, index: int) -> AppendResult:
        first = self.first_offsets[index]
        # f: the header's fields; lastOffsetDelta
        return AppendResult(_NO_ERROR, first, first + self._ready[index][1][6], -1,
                            self.log_start_offset)

    def __iter__(self) -> Iterator[AppendResult]:
        for index in range(len(self.first_offsets)):
            yield self[index]


# A group append's answers, in order: a list, or a plain group's made when read.
GroupResults: TypeAlias = list[AppendResult] | PlainResults


@dataclass(slots=True)
class ReadResult:
    """The outcome of reading one partition (a FetchResponse partition)."""

    error: ErrorCode = ErrorCode.NO_ERROR
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    preferred_read_replica: int = -1  # KIP-392: read from this replica instead

    @property
    def size_bytes(self) -> int:
        return 0 if self.records is None else self.records.length


class PartitionError(Exception):
    """A partition refuses the operation, with the error code to answer."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower from its fetches (Kafka's ``Replica``).

    ``last_caught_up_time_ms``: the last time the follower had fetched up to the leader's
    log end offset as it stood at that fetch, or at its previous fetch (Kafka's
    ``updateFetchStateOrThrow``): a follower that keeps up but is always one append
    behind still counts as caught up."""

    log_end_offset: int = -1  # -1 until its first fetch
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return (self.log_end_offset == leader_end_offset
                or now_ms - self.last_caught_up_time_ms <= max_lag_ms)




class Partition:
    """One hosted topic-partition. See the module docstring."""

    def __init__(self, topic: str, partition: int, topic_id: uuid.UUID, plog: Log, *,
                 broker_id: int, high_watermark: int) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_partition = TopicPartition(topic, partition)
        self.topic_id = topic_id
        self.log = plog
        self.broker_id = broker_id
        self.leader_id: int | None = None
        self.is_leader = False  # leader_id == broker_id, kept by make_leader / make_follower
        self.leader_epoch = NO_EPOCH
        self.partition_epoch = NO_EPOCH
        self.controller_epoch = 0
        self.replicas: tuple[int, ...] = ()
        # The committed ISR (the controller's); while an AlterPartition is in flight,
        # ``pending_isr`` is the ISR asked for and the HW counts both (``maximal_isr``).
        self.isr: set[int] = set()
        self.pending_isr: frozenset[int] | None = None
        self.follower_states: dict[int, ReplicaState] = {}
        # Sends this leader's AlterPartition (the replica manager's); None: ISR never changes.
        self.isr_change_sender: Callable[[Partition, frozenset[int]], None] | None = None
        # Told (expanded, shrunk) when the controller commits this leader's ISR change (the
        # replica manager's IsrExpandsPerSec / IsrShrinksPerSec).
        self.isr_change_listener: Callable[[bool, bool], None] | None = None
        # Brokers that may join the ISR (alive in the metadata cache, not shutting down).
        self.is_broker_eligible: Callable[[int], bool] = lambda _b: True
        self.leader_epoch_start_offset: int | None = None
        self.needs_flush = False  # the log asked for a flush (flush.messages, roll)
        self.snapshot_due = False  # a segment rolled since the last producer snapshot
        self.topic_stats: TopicStats | None = None  # broker.metrics.topics, when counted
        self.producer_state = ProducerStateManager(plog.dir, f"{topic}-{partition}")
        # A truncation whose disk work and state rebuild run in a worker thread.
        self._truncation: asyncio.Future[ProducerStateManager | None] | None = None
        self._validation_for: LogConfig | None = None
        self._validation = ValidationConfig()
        self._high_watermark = Offset(
            min(max(high_watermark, plog.log_start_offset), plog.log_end_offset)
        )

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return (f"Partition({self.topic}-{self.partition}, {role}, epoch={self.leader_epoch}, "
                f"lso={self.log_start_offset}, hw={self.high_watermark}, leo={self.log_end_offset})")

    # ------------------------------------------------------------ settings (the log's config)

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    @property
    def validation(self) -> ValidationConfig:
        """What record validation needs from the log config (rebuilt when it changes)."""
        config = self.log.config
        if config is not self._validation_for:
            self._validation = ValidationConfig(
                max_message_bytes=config.max_message_bytes,
                compacted=config.compacts,
                timestamp_before_max_ms=config.message_timestamp_before_max_ms,
                timestamp_after_max_ms=config.message_timestamp_after_max_ms,
            )
            self._validation_for = config
        return self._validation

    # ------------------------------------------------------------ roles

    def make_leader(self, state: PartitionStateChange, now_ms: int,
                    log_level: int = logging.INFO) -> bool:
        """Become (or stay) leader as ``state`` says; True if this broker was not leader.

        Skipped for an older partition epoch. A new leader epoch is recorded as starting
        at the log end offset, and every follower's fetch state is reset. ``log_level``:
        of the lines that say so (DEBUG where the caller logs a summary of many)."""
        if state.partition_epoch < self.partition_epoch:
            log.log(log_level, "%s: skipped become-leader at partition epoch %d (already at %d)",
                     self.topic_partition, state.partition_epoch, self.partition_epoch)
            return False
        self.controller_epoch = state.controller_epoch
        is_new_leader = not self.is_leader
        self.replicas = tuple(state.replicas)
        if set(state.isr) != self.isr or self.pending_isr is not None:
            log.log(log_level, "%s: ISR %s at partition epoch %d (was %s%s)",
                    self.topic_partition,
                     sorted(state.isr), state.partition_epoch, sorted(self.isr),
                     "" if self.pending_isr is None
                     else f", {sorted(self.pending_isr)} pending")
        self.isr = set(state.isr)
        self.pending_isr = None
        if state.leader_epoch > self.leader_epoch:
            start = self.log_end_offset
            log.log(log_level, "%s: leader at epoch %d from offset %d (ISR %s, previous "
                    "leader %s, epoch %d)", self.topic_partition, state.leader_epoch, start,
                     sorted(self.isr), self.leader_id, self.leader_epoch)
            self.log.assign_epoch_start_offset(state.leader_epoch, start)
            self.follower_states = {
                r: ReplicaState(last_caught_up_time_ms=now_ms if r in self.isr else 0)
                for r in self.replicas if r != self.broker_id
            }
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = start
        self.partition_epoch = state.partition_epoch
        self.leader_id = self.broker_id
        self.is_leader = True
        self.maybe_increment_high_watermark()
        return is_new_leader

    def make_follower(self, state: PartitionStateChange, log_level: int = logging.INFO) -> bool:
        """Follow ``state.leader``; True if the leader epoch is new (fetchers restart).
        ``log_level`` as ``make_leader``'s."""
        if state.partition_epoch < self.partition_epoch:
            log.log(log_level, "%s: skipped become-follower at partition epoch %d (already at %d)",
                     self.topic_partition, state.partition_epoch, self.partition_epoch)
            return False
        self.controller_epoch = state.controller_epoch
        is_new_epoch = state.leader_epoch > self.leader_epoch
        if is_new_epoch:
            log.log(log_level, "%s: follower of %d at epoch %d from offset %d (HW %d)",
                     self.topic_partition, state.leader, state.leader_epoch,
                     self.log_end_offset, self.high_watermark)
        self.leader_id = state.leader
        self.is_leader = state.leader == self.broker_id
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = None
        self.partition_epoch = state.partition_epoch
        self.replicas = tuple(state.replicas)
        self.isr = set(state.isr)  # the controller's view; a follower does not act on it
        self.pending_isr = None
        self.follower_states = {}
        return is_new_epoch

    def truncate_to(self, offset: int) -> None:
        """Cut the log at ``offset`` and rebuild the producer state to match (blocking: on
        the loop only where nothing else runs; a follower uses ``truncate_off_loop``)."""
        if self.log.truncate_to(offset):
            self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset``; producer state is forgotten."""
        self.log.truncate_fully_and_start_at(offset)
        self.producer_state.truncate_fully()
        self._after_truncation()

    def _after_truncation(self) -> None:
        self.producer_state.load(self.log_start_offset, self.log_end_offset, self.batches_from)
        self._high_watermark = Offset(
            min(max(self._high_watermark, self.log_start_offset), self.log_end_offset))

    async def truncate_off_loop(self, offset: int, *, fully: bool = False) -> None:
        """``truncate_to(offset)`` (``fully``: ``truncate_fully_and_start_at``) with its disk
        work (files cut, segments deleted) and the producer-state rebuild (snapshot read,
        log replayed) in a worker thread. The state is rebuilt into a new manager there and
        taken over on the loop, so appends, checks and snapshots on the loop never see it
        half built. One truncation at a time per partition; a role change waits for it
        (``settled``), as Kafka's fetcher removal waits for its truncation."""
        while self._truncation is not None:
            await self.settled()
        name, directory = self.producer_state.name, self.producer_state.partition_dir

        def cut_and_rebuild() -> ProducerStateManager | None:  # a worker thread
            if fully:
                self.log.truncate_fully_and_start_at(offset)
            elif not self.log.truncate_to(offset):
                return None
            fresh = ProducerStateManager(directory, name)
            if fully:
                fresh.truncate_fully()  # the snapshot files
            fresh.load(self.log_start_offset, self.log_end_offset, self.batches_from)
            return fresh

        work = asyncio.ensure_future(asyncio.to_thread(cut_and_rebuild))
        self._truncation = work
        # Runs before anything that awaits ``work`` (registered first): a role change
        # waiting in ``settled`` finds the state taken over.
        work.add_done_callback(self._truncated)
        await asyncio.shield(work)  # cancelled or not, the thread finishes and is taken over

    def _truncated(self, work: asyncio.Future[ProducerStateManager | None]) -> None:
        self._truncation = None
        if work.cancelled() or work.exception() is not None:
            return  # raised to the truncation's caller; the log reported a disk error
        fresh = work.result()
        if fresh is None:
            return
        self.producer_state.producers = fresh.producers
        self.producer_state.snapshot_offset = fresh.snapshot_offset
        # Retention or DeleteRecords may have moved the log start meanwhile.
        self.producer_state.remove_before(self.log_start_offset)
        self._high_watermark = Offset(
            min(max(self._high_watermark, self.log_start_offset), self.log_end_offset))

    async def settled(self) -> None:
        """Wait until no truncation of this partition runs in a worker thread."""
        while (work := self._truncation) is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(work)

    # ------------------------------------------------------------ offsets

    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    @property
    def high_watermark(self) -> int:
        return int(self._high_watermark)

    @property
    def last_stable_offset(self) -> int:
        return int(self._high_watermark)

    @property
    def maximal_isr(self) -> set[int]:
        """The committed ISR and, while an AlterPartition is in flight, the ISR asked for
        (Kafka's ``maximalIsr``): the HW waits for every one of them, so it never counts on
        a replica before the controller has committed it (expansion) nor forgets one the
        controller may still keep (shrink)."""
        if self.pending_isr is None:
            return self.isr
        return self.isr | self.pending_isr

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR (followers' fetch positions, the leader's own
        LEO); only a leader moves it, and only forward."""
        if not self.is_leader:
            return False
        new_hw: int = self.log.log_end_offset  # self.log_end_offset, without its int() and call
        pending = self.pending_isr  # self.maximal_isr, inline: once per append
        for replica in self.isr if pending is None else self.isr | pending:
            if replica != self.broker_id:
                state = self.follower_states.get(replica)
                new_hw = min(new_hw, state.log_end_offset if state is not None else 0)
        if new_hw > self._high_watermark:
            self._high_watermark = Offset(new_hw)
            return True
        return False

    # ------------------------------------------------------------ replication: leader side

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int,
                                    now_ms: int, log_level: int = logging.INFO) -> bool:
        """A follower fetched from ``fetch_offset`` (so it has everything below it):
        its fetch state moves, the ISR may grow, the HW may move. True if the HW moved.
        Unknown replicas (not in the assignment) are ignored. ``log_level``: of the line
        that says the ISR grows (DEBUG in a fetch of many partitions: the AlterPartition
        that carries the change sums them up)."""
        state = self.follower_states.get(replica_id)
        if state is None or not self.is_leader:
            return False
        leader_end = self.log_end_offset
        if fetch_offset >= leader_end:
            state.last_caught_up_time_ms = max(state.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= state.last_fetch_leader_log_end_offset >= 0:
            state.last_caught_up_time_ms = max(state.last_caught_up_time_ms,
                                               state.last_fetch_time_ms)
        moved_forward = fetch_offset != state.log_end_offset
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_log_end_offset = leader_end
        state.last_fetch_time_ms = now_ms
        self._maybe_expand_isr(replica_id, state, log_level)
        return moved_forward and self.maybe_increment_high_watermark()

    def _maybe_expand_isr(self, replica_id: int, state: ReplicaState, log_level: int) -> None:
        """Kafka's ``maybeExpandIsr``: a follower outside the ISR that reached the HW (and
        the start of this leader's epoch) joins it, through the controller."""
        if (self.pending_isr is not None or replica_id in self.isr
                or self.isr_change_sender is None):
            return
        start = self.leader_epoch_start_offset or 0
        if state.log_end_offset < self.high_watermark or state.log_end_offset < start:
            return
        if not self.is_broker_eligible(replica_id):
            return
        new_isr = frozenset(self.isr | {replica_id})
        log.log(log_level,
                "%s: expanding ISR from %s to %s (replica %d caught up to offset %d, HW %d)",
                self.topic_partition, sorted(self.isr), sorted(new_isr), replica_id,
                state.log_end_offset, self.high_watermark)
        self.pending_isr = new_isr
        self.isr_change_sender(self, new_isr)

    def maybe_shrink_isr(self, now_ms: int, max_lag_ms: int) -> bool:
        """Kafka's ``maybeShrinkIsr`` (run every replica.lag.time.max.ms / 2): followers
        that have not caught up with the log end offset for ``max_lag_ms`` leave the ISR,
        through the controller. True if a shrink was asked for."""
        if (not self.is_leader or self.pending_isr is not None
                or self.isr_change_sender is None):
            return False
        leader_end = self.log_end_offset
        out_of_sync = []
        for replica in sorted(self.isr):
            if replica == self.broker_id:
                continue
            state = self.follower_states.get(replica)
            if state is None or not state.is_caught_up(leader_end, now_ms, max_lag_ms):
                out_of_sync.append(replica)
        if not out_of_sync:
            return False
        new_isr = frozenset(self.isr - set(out_of_sync))
        details = ", ".join(
            f"replica {r}: log end offset {s.log_end_offset}, last caught up "
            f"{now_ms - s.last_caught_up_time_ms} ms ago"
            for r in out_of_sync for s in (self.follower_states.get(r, ReplicaState()),))
        log.info("%s: shrinking ISR from %s to %s (leader log end offset %d, HW %d; %s)",
                 self.topic_partition, sorted(self.isr), sorted(new_isr), leader_end,
                 self.high_watermark, details)
        self.pending_isr = new_isr
        self.isr_change_sender(self, new_isr)
        return True

    def isr_change_committed(self, isr: list[int], leader_epoch: int,
                             partition_epoch: int, log_level: int = logging.INFO) -> bool:
        """The controller answered an AlterPartition with the partition's state: adopt it
        if it is still this leader's epoch. True if the HW moved."""
        if not self.is_leader or leader_epoch != self.leader_epoch:
            log.info("%s: ignoring the AlterPartition answer for leader epoch %d (now %d)",
                     self.topic_partition, leader_epoch, self.leader_epoch)
            return False
        if partition_epoch < self.partition_epoch:
            return False
        log.log(log_level, "%s: ISR updated to %s at partition epoch %d (was %s)",
                self.topic_partition, sorted(isr), partition_epoch, sorted(self.isr))
        new_isr = set(isr)
        if self.isr_change_listener is not None:
            self.isr_change_listener(bool(new_isr - self.isr), bool(self.isr - new_isr))
        self.isr = new_isr
        self.pending_isr = None
        self.partition_epoch = partition_epoch
        return self.maybe_increment_high_watermark()

    def isr_change_failed(self, error: ErrorCode, *, retriable: bool) -> None:
        """The AlterPartition failed: a retriable failure keeps the pending ISR (the sender
        retries); otherwise the leader falls back to its committed ISR and waits for the
        controller's LeaderAndIsr (Kafka: FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, ...)."""
        if retriable:
            return
        log.info("%s: ISR change to %s failed (%s); keeping the committed ISR %s",
                 self.topic_partition, sorted(self.pending_isr or ()), error.name,
                 sorted(self.isr))
        self.pending_isr = None

    # ------------------------------------------------------------ replication: follower side

    def append_records_as_follower(self, records: memoryview | bytes) -> int:
        """Append batches fetched from the leader (offsets and epochs kept) and record
        their producers, so this replica deduplicates as the leader does if it leads
        next. Returns the new log end offset. Raises ``StorageError``."""
        active_base = self.log.active_segment.base_offset
        info = self.log.append_as_follower(records)
        for batch in iter_batches(records):
            if batch.producer_id >= 0:
                self.producer_state.update_from_batch(batch)
        if info.needs_flush:
            self.needs_flush = True
        if self.log.active_segment.base_offset != active_base:
            self.snapshot_due = True  # a segment rolled: snapshot the producer state
        return self.log_end_offset

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's HW: the leader's, capped by what this replica has."""
        self._high_watermark = Offset(
            max(self.log_start_offset, min(leader_high_watermark, self.log_end_offset)))

    def maybe_increment_log_start_offset(self, leader_log_start_offset: int) -> None:
        """A follower follows the leader's log start offset (DeleteRecords, retention)."""
        if leader_log_start_offset > self.log_start_offset:
            target = min(leader_log_start_offset, self.high_watermark)
            if target > self.log_start_offset:
                try:
                    self.log.delete_records(target, self.high_watermark)
                except StorageError as exc:
                    log.warning("%s: following the leader's log start offset %d failed: %s",
                                self.topic_partition, leader_log_start_offset, exc)
                    return
                self.producer_state.remove_before(self.log_start_offset)

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """DelayedProduce's question: has the HW passed ``required_offset``? (A partition
        that is no longer leader answers at once: NOT_LEADER_OR_FOLLOWER.)"""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self._high_watermark >= required_offset:
            if len(self.isr) < self.log.config.min_insync_replicas:
                return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, ErrorCode.NO_ERROR
        return False, ErrorCode.NO_ERROR

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """Kafka's rule for the client's view of the leader epoch (-1: not checked)."""
        if current_leader_epoch == UNDEFINED_EPOCH or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NO_ERROR
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def check_local_log(self, current_leader_epoch: int, *, require_leader: bool) -> ErrorCode:
        """Kafka's ``getLocalLog``: the client's leader epoch first, then the role."""
        error = self.check_leader_epoch(current_leader_epoch)
        if error is ErrorCode.NO_ERROR and require_leader and not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return error

    # ------------------------------------------------------------ produce

    def append_records_as_leader(self, records: memoryview | bytes | None, produce_version: int,
                                 required_acks: int) -> AppendResult:
        """Validate and append a client's records; never raises for bad input.

        The batch is checked (record_validation, which reads its header once) and against
        the producer state before the log sees it; the log verifies the CRC, copies the
        request's bytes once into a writable buffer and patches the offsets and leader
        epoch there (storage.log.Log.append_client_batch).
        """
        if not self.is_leader:
            return AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                error_message=f"{self.topic_partition} is not led by this broker")
        now_ms = int(time.time() * 1000)
        if self.log.offline:
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR,
                                log_start_offset=self.log_start_offset,
                                error_message=f"log dir {self.log.log_dir} is offline")
        try:
            if required_acks == -1 and len(self.isr) < self.log.config.min_insync_replicas:
                raise PartitionError(
                    ErrorCode.NOT_ENOUGH_REPLICAS,
                    f"{len(self.isr)} in-sync replicas, min.insync.replicas is "
                    f"{self.min_insync_replicas}",
                )
            # The CRC is computed once: by the log on append, or here on the paths that
            # answer without appending (duplicate, producer-state error), so a corrupt
            # batch always gets CORRUPT_MESSAGE first, as in Kafka.
            batch = validate_client_batch(records, produce_version, self.validation, now_ms,
                                          verify_crc=False)
            head = batch.head
            try:
                duplicate = self.producer_state.check_append(head)
            except ProducerStateError:
                check_crc(batch)
                raise
            if duplicate is not None:
                check_crc(batch)
                log.info("%s-%d: duplicate batch of producer %d (seq %d-%d) at offsets %d-%d",
                         self.topic, self.partition, head.producer_id, duplicate.first_seq,
                         duplicate.last_seq, duplicate.first_offset, duplicate.last_offset)
                # Kafka answers a duplicate with the retained batch's offsets and, as its
                # log append time, that batch's max timestamp (whatever the timestamp type)
                return AppendResult(ErrorCode.NO_ERROR, duplicate.first_offset,
                                    duplicate.last_offset, duplicate.timestamp_ms,
                                    self.log_start_offset)
            active_base = self.log.active_segment.base_offset
            info = self.log.append_client_batch(batch.buffer, head, self.leader_epoch,
                                                now_ms=now_ms)
        except PartitionError as not_here:
            return AppendResult(not_here.error_code, log_start_offset=self.log_start_offset,
                                error_message=str(not_here))
        except (RecordValidationError, ProducerStateError, StorageError) as refused:
            return self._refused(refused)
        result = self._appended(head, info, active_base)
        self.maybe_increment_high_watermark()
        return result

    def append_records_group(self, records: list[memoryview | bytes | None],
                             produce_version: int) -> GroupResults:
        """``append_records_as_leader`` (acks=1) of several client requests' records, in
        order, as if each had been appended alone, one after the other: the same checks
        and answers for each, one request's refusal never touching another's. The batches
        that pass are written together (``Log.append_client_batches``: one write, one roll
        and index check, the high watermark moved once); where that could differ from one
        after the other the log says so and they are appended one by one.

        Checked apart, the batches must not see each other's producer state: if two come
        from one producer id, all go one after the other (``append_records_as_leader``)."""
        if len(records) == 1 or not self.is_leader or self.log.offline:
            return [self.append_records_as_leader(r, produce_version, 1) for r in records]
        now_ms = int(time.time() * 1000)
        config = self.validation
        checked, plain = validate_group(records, produce_version, config, now_ms)
        results: list[AppendResult]  # _UNANSWERED where the log's answer goes
        plain_results: PlainResults | None = None  # a plain group's, all appended
        ready: list[PlainBatch]  # (buffer, its header's fields), for the log
        at: list[int] | None  # ready[k]'s index in results; None: k (a plain group)
        if plain is not None:
            # Nothing refused, no producer id, every CRC checked (and no timestamp bounds:
            # those take the per-record checks, never plain): the log's answers alone.
            results, ready, at = [], plain, None
        else:
            producers: set[int] = set()
            for batch in checked:
                if not isinstance(batch, RecordValidationError) and batch[1].producer_id >= 0:
                    pid = batch[1].producer_id  # (buffer, head)
                    if pid in producers:  # one producer twice: each must see the one before
                        return [self.append_records_as_leader(r, produce_version, 1)
                                for r in records]
                    producers.add(pid)
            # The log's own checks, for each batch that passes the CRC: only timestamp bounds.
            log_checks = (config.timestamp_before_max_ms < LONG_MAX
                          or config.timestamp_after_max_ms < LONG_MAX)
            results, ready, at = self._check_group(checked, log_checks, now_ms)
            if not ready:
                return results
        plog = self.log
        epoch = self.leader_epoch
        try:
            group = plog.append_client_batches(ready, epoch, now_ms)
        except StorageError as failed:  # nothing of the group is in the log
            if at is None:
                results = [self._refused(failed) for _ in ready]
            else:
                for i in at:
                    results[i] = self._refused(failed)
        else:
            if group is None:  # one after the other
                if at is None:
                    results, at = [_UNANSWERED] * len(ready), list(range(len(ready)))
                for i, (buffer, f) in zip(at, ready, strict=True):
                    head = _new_tuple(BatchHeader, (0, *f))
                    active_base = plog.active_segment.base_offset
                    try:
                        info = plog.append_checked_client_batch(buffer, head, epoch, now_ms)
                    except Exception as exc:
                        results[i] = self._refused(exc)
                        continue
                    results[i] = self._appended(head, info, active_base)
            else:
                if group.needs_flush:
                    self.needs_flush = True
                start = group.log_start_offset
                if at is None:  # no producer state: the answers alone, made when read
                    plain_results = PlainResults(ready, group.first_offsets, start)
                else:
                    producer_state = self.producer_state
                    for i, (_, f), first in zip(at, ready, group.first_offsets, strict=True):
                        # f: baseOffset, batchLength, partitionLeaderEpoch, magic, crc,
                        # attributes, lastOffsetDelta, baseTimestamp, maxTimestamp,
                        # producerId, producerEpoch, baseSequence, recordsCount
                        delta = f[6]
                        last = first + delta
                        if f[9] >= 0:  # _appended, inline
                            first_seq = f[11]
                            max_ts = f[8]
                            producer_state.update(
                                f[9], f[10], first_seq, increment_sequence(first_seq, delta),
                                first, last, max_ts if max_ts > -1 else -1)
                        results[i] = AppendResult(_NO_ERROR, first, last, -1, start)
        self.maybe_increment_high_watermark()
        return results if plain_results is None else plain_results

    def _check_group(self, checked: list[CheckedBatch | RecordValidationError],
                     log_checks: bool, now_ms: int
                     ) -> tuple[list[AppendResult], list[PlainBatch], list[int]]:
        """``append_records_group``'s checks of each batch, as ``append_records_as_leader``
        checks it: (the answers, ``_UNANSWERED`` where the log's goes; the batches ready
        for the log, each with its header's fields; the index in the answers of each)."""
        plog = self.log
        producer_state = self.producer_state
        crc32c = checksum.crc32c  # (a module with __getattr__: its attributes are not cached)
        results: list[AppendResult] = []
        ready: list[PlainBatch] = []
        at: list[int] = []
        for batch in checked:
            if isinstance(batch, RecordValidationError):
                results.append(self._refused(batch))
                continue
            buffer, head = batch
            try:
                if head.producer_id != NO_PRODUCER_ID:
                    try:
                        duplicate = producer_state.check_append(head)
                    except ProducerStateError:
                        check_crc(batch)
                        raise
                    if duplicate is not None:
                        check_crc(batch)
                        log.info("%s-%d: duplicate batch of producer %d (seq %d-%d) at "
                                 "offsets %d-%d", self.topic, self.partition, head.producer_id,
                                 duplicate.first_seq, duplicate.last_seq,
                                 duplicate.first_offset, duplicate.last_offset)
                        results.append(AppendResult(_NO_ERROR, duplicate.first_offset,
                                                    duplicate.last_offset,
                                                    duplicate.timestamp_ms,
                                                    self.log_start_offset))
                        continue
                # batch_crc, inline (a call less per batch)
                if log_checks or crc32c(buffer[CRC_START:]) != head.crc:
                    plog.check_client_batch(buffer, head, now_ms)
            except Exception as exc:  # each as append_records_as_leader answers it
                results.append(self._refused(exc))
                continue
            at.append(len(results))
            results.append(_UNANSWERED)
            ready.append((buffer, head[1:]))  # (the position, 0, left out)
        return results, ready, at

    def _appended(self, head: BatchHeader, info: AppendInfo, active_base: int) -> AppendResult:
        """The producer state and flush flags after a client batch's append (alone or in a
        group), and its answer. ``active_base``: the active segment's base offset before the
        append, -1 where it cannot have rolled."""
        if head.producer_id >= 0:
            first_seq = head.base_sequence
            self.producer_state.update(
                head.producer_id, head.producer_epoch, first_seq,
                increment_sequence(first_seq, head.last_offset_delta),
                info.first_offset, info.last_offset, info.max_timestamp)
        if info.needs_flush:  # (always after a roll)
            self.needs_flush = True
            if active_base >= 0 and self.log.active_segment.base_offset != active_base:
                self.snapshot_due = True  # a segment rolled: snapshot the producer state
        return AppendResult(_NO_ERROR, info.first_offset, info.last_offset,
                            info.log_append_time, info.log_start_offset)

    def _refused(self, exc: Exception) -> AppendResult:
        """The answer ``append_records_as_leader`` gives for ``exc`` (logged as it logs it);
        anything else is raised again."""
        start = self.log_start_offset
        if isinstance(exc, RecordValidationError):
            log.info("%s-%d: produce refused (%s): %s", self.topic, self.partition,
                     exc.error_code.name, exc.message)
            return AppendResult(exc.error_code, log_start_offset=start,
                                error_message=exc.message, record_errors=exc.record_errors)
        if isinstance(exc, ProducerStateError):
            log.info("%s-%d: produce refused (%s): %s", self.topic, self.partition,
                     exc.error_code.name, exc)
            return AppendResult(exc.error_code, log_start_offset=start, error_message=str(exc))
        if isinstance(exc, StorageError):
            if not isinstance(exc, LogIOError | LogDirOfflineError):  # storage logs those
                log.warning("%s-%d: append failed (%s): %s", self.topic, self.partition,
                            exc.error_code.name, exc)
            return AppendResult(exc.error_code, log_start_offset=start, error_message=str(exc))
        raise exc

    # ------------------------------------------------------------ fetch

    def fetch_upper_bound(self, replica_id: int, isolation: IsolationLevel) -> int:
        if replica_id >= 0 and self.is_leader:
            return self.log_end_offset
        if isolation is _READ_COMMITTED:
            return self.last_stable_offset
        return int(self._high_watermark)  # self.high_watermark, without the property's call

    def read(self, fetch_offset: int, max_bytes: int, *, replica_id: int,
             isolation: IsolationLevel, min_one_message: bool,
             current_leader_epoch: int = UNDEFINED_EPOCH,
             follower_reads: bool = False) -> ReadResult:
        """Records from ``fetch_offset`` (a FileSlice, never copied), up to the bound.
        Followers read from the leader only; consumers too unless ``follower_reads``
        (KIP-392), and the debugging id -2 reads any replica, both up to this replica's HW."""
        log = self.log
        hw, lso, start = self.high_watermark, self.last_stable_offset, self.log_start_offset
        if log.offline:
            return ReadResult(ErrorCode.KAFKA_STORAGE_ERROR, hw, lso, start)
        if current_leader_epoch != UNDEFINED_EPOCH and current_leader_epoch != self.leader_epoch:
            return ReadResult(self.check_leader_epoch(current_leader_epoch), hw, lso, start)
        if not self.is_leader and (replica_id >= 0 or (
                replica_id == CONSUMER_REPLICA_ID and not follower_reads)):
            return ReadResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if fetch_offset < start or fetch_offset > log.log_end_offset:
            return ReadResult(ErrorCode.OFFSET_OUT_OF_RANGE, hw, lso, start)
        upper = self.fetch_upper_bound(replica_id, isolation)
        if fetch_offset >= upper:
            return ReadResult(_NO_ERROR, hw, lso, start)
        try:
            records = log.read(fetch_offset, max_bytes, upper, min_one_batch=min_one_message)
        except StorageError as exc:  # moved under us (retention, DeleteRecords, truncation)
            return ReadResult(exc.error_code, hw, lso, self.log_start_offset)
        return ReadResult(_NO_ERROR, hw, lso, start,
                          records if records.length > 0 else None)

    def bytes_available(self, fetch_offset: int, max_bytes: int, replica_id: int,
                        isolation: IsolationLevel) -> int:
        """How many bytes a read at ``fetch_offset`` would return now (DelayedFetch)."""
        records = self.records_available(fetch_offset, max_bytes, replica_id, isolation)
        return 0 if records is None else records.length

    def records_available(self, fetch_offset: int, max_bytes: int, replica_id: int,
                          isolation: IsolationLevel) -> FileSlice | None:
        """What a read at ``fetch_offset`` of up to ``max_bytes`` (at least one batch) would
        return now, up to the bound; None: nothing (or the read failed). Checks neither
        role, epoch nor offset range: ``read`` does, DelayedFetch before it calls this."""
        upper = self.fetch_upper_bound(replica_id, isolation)
        if fetch_offset >= upper or fetch_offset < self.log_start_offset:
            return None
        try:
            return self.log.read(fetch_offset, max_bytes, upper, min_one_batch=True)
        except StorageError:
            return None

    # ------------------------------------------------------------ offsets by time / epoch

    def _epoch_for(self, offset: int) -> int:
        epoch = self.log.leader_epoch_cache.epoch_for_offset(offset)
        return UNDEFINED_EPOCH if epoch is None else int(epoch)

    def fetch_offset_for_timestamp(
        self, timestamp: int, *, isolation: IsolationLevel, current_leader_epoch: int,
        replica_id: int,
    ) -> tuple[ErrorCode, int, int, int]:
        """ListOffsets for one partition: (error, timestamp, offset, leader epoch). Only the
        leader answers, except to the debugging replica id -2."""
        epoch_error = self.check_local_log(current_leader_epoch,
                                           require_leader=replica_id != DEBUGGING_REPLICA_ID)
        if epoch_error is not ErrorCode.NO_ERROR:
            return epoch_error, -1, -1, -1
        if replica_id == CONSUMER_REPLICA_ID:
            last_fetchable = self.fetch_upper_bound(replica_id, isolation)
        else:
            last_fetchable = self.log_end_offset
        if timestamp == LATEST_TIMESTAMP:
            return ErrorCode.NO_ERROR, -1, last_fetchable, self.leader_epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = self.log_start_offset
            return ErrorCode.NO_ERROR, -1, start, self._epoch_for(start)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return ErrorCode.NO_ERROR, -1, -1, -1
        if timestamp == MAX_TIMESTAMP:
            # KIP-734: the first record carrying the largest timestamp (the time index
            # knows the batch; a lookup by that timestamp finds the record in it)
            found: TimestampOffset | None = self.log.max_timestamp_and_offset()
            if found is not None and found.offset >= 0:
                found = self.log.offset_for_timestamp(found.timestamp) or found
        else:
            found = self.log.offset_for_timestamp(timestamp)
        if found is None or found.offset < 0:
            return ErrorCode.NO_ERROR, -1, -1, -1
        ts, offset = int(found.timestamp), int(found.offset)
        if offset >= last_fetchable:
            return ErrorCode.NO_ERROR, -1, -1, -1
        return ErrorCode.NO_ERROR, ts, offset, self._epoch_for(offset)

    def last_offset_for_leader_epoch(self, current_leader_epoch: int,
                                     leader_epoch: int) -> tuple[ErrorCode, int, int]:
        """OffsetForLeaderEpoch for one partition: (error, epoch, end offset); the leader's."""
        epoch_error = self.check_local_log(current_leader_epoch, require_leader=True)
        if epoch_error is not ErrorCode.NO_ERROR:
            return epoch_error, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        epoch, end_offset = self.log.end_offset_for_epoch(leader_epoch)
        return ErrorCode.NO_ERROR, int(epoch), int(end_offset)

    def delete_records(self, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords for one partition: (error, low watermark); on the leader only."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        target = self.high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if target < 0 or target > self.high_watermark:
            return ErrorCode.OFFSET_OUT_OF_RANGE, -1
        if not self.log.config.deletes:
            return ErrorCode.POLICY_VIOLATION, -1
        try:
            low_watermark = self.log.delete_records(target, self.high_watermark)
        except StorageError as exc:
            return exc.error_code, -1
        # Kafka's onLogStartOffsetIncremented: producers whose data is all gone are forgotten
        self.producer_state.remove_before(int(low_watermark))
        return ErrorCode.NO_ERROR, int(low_watermark)

    # ------------------------------------------------------------ log scans

    def batches_from(self, offset: int, chunk_bytes: int = 16 * 1024 * 1024) -> Iterator[RecordBatch]:
        """The log's batches from the one holding ``offset`` to the end, read in chunks of
        at most ``chunk_bytes`` (a bigger batch comes whole). For state rebuilds only."""
        position = max(offset, self.log_start_offset)
        for _ in range(1 << 40):  # bounded: each turn moves past at least one batch
            if position >= self.log_end_offset:
                return
            try:
                data = self.log.read(position, chunk_bytes, None,
                                     min_one_batch=True).read_bytes()
            except CorruptSegmentError as exc:  # logged once by the log; rebuild what is before
                log.warning("%s-%d: state rebuild stops at offset %d: %s", self.topic,
                            self.partition, position, exc)
                return
            if not data:
                return
            last = position
            for batch in iter_batches(data):
                last = batch.next_offset
                yield batch
            if last <= position:
                return
            position = last

"""The cluster's decisions on top of ``ControllerCore``: brokers come and go, controlled
shutdown, preferred (and unclean) leader election (Kafka's ``KafkaController``:
``processBrokerChange``, ``doControlledShutdown``, ``onReplicaElection``,
``checkAndTriggerAutoLeaderRebalance``).

Events, on the same queue and context as the core's:

- ``activate`` (becoming controller) adds, to the core's: replicas on brokers that are not
  live leave every ISR, as Kafka's replica state machine does at failover.
- ``BrokerChange``: ``/brokers/ids`` changed. New brokers get UpdateMetadata with every
  partition and LeaderAndIsr for the replicas they host (they start as what the state says:
  follower, or leader if they lead), offline partitions get a leader; the others learn of
  the new broker. A broker that left: the partitions it led get a new leader from the live
  ISR (offline election: never outside the ISR unless ``unclean.leader.election.enable``),
  it leaves every ISR (the last ISR member is kept, as Kafka keeps it, so that it may lead
  again when it returns; a partition left without a live leader has leader -1), and
  everyone hears of it. A broker whose registration's epoch changed (it restarted within a
  session timeout) counts as leaving and coming back.
- ``ControlledShutdown(broker, broker epoch)``: the broker is shutting down. Each partition
  it leads (with more than one replica) gets a leader from the rest of the ISR; it leaves
  the ISR of partitions it follows and gets StopReplica (no delete) for them. The answer
  lists the partitions it still leads (none, when all moved): the broker retries until
  that is empty, or gives up after ``controlled.shutdown.max.retries``.
- ``ReplicaLeaderElection(type, partitions)`` (ElectLeaders, ``minikafka
  leader-election``): preferred (the first replica of the assignment, if live and in the
  ISR) or unclean (partitions without a live leader, from any live replica); per partition
  NONE, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE
  or UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers.
- ``AlterPartitionReceived`` (a leader's AlterPartition, Kafka's ``processAlterPartition``):
  the ISR it asks for is written if its leader epoch and partition epoch are current and
  every new member is live; per partition FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
  INELIGIBLE_REPLICA, ... as Kafka answers; everyone gets UpdateMetadata.
- ``ReassignmentsRequested`` / ``ReassignmentsListed`` (AlterPartitionReassignments,
  ListPartitionReassignments): partition reassignment, ``controller.reassignment``; an ISR
  change may complete one.
- ``BrokerLogDirFailure(brokers)`` (their ``/log_dir_event_notification`` znodes, Kafka's
  ``onBrokerLogDirFailure``): each of those brokers gets LeaderAndIsr with the current
  state of every replica it holds, to learn which are in a failed log dir.
- ``LeaderAndIsrResponseReceived`` (every LeaderAndIsr answer, Kafka's
  ``processLeaderAndIsrResponseReceived``): a partition answered KAFKA_STORAGE_ERROR is a
  replica in a failed log dir, NONE one that is online again; the context keeps them
  (``replicas_on_offline_dirs``, forgotten when the broker restarts or leaves). Newly
  offline replicas (``onReplicasBecomeOffline``): partitions they led get a leader from
  the rest of the ISR (offline election, per partition), then each leaves the ISR
  (OfflineReplica: the last member stays, a leader left without a successor becomes -1),
  its broker gets StopReplica (no delete) and everyone UpdateMetadata listing it offline.
- ``AutoPreferredReplicaLeaderElection``: every ``leader.imbalance.check.interval.seconds``
  (with ``auto.leader.rebalance.enable``), for each broker whose share of partitions it
  should lead but does not exceeds ``leader.imbalance.per.broker.percentage``, a preferred
  election of those partitions.

Every event is ignored while ``is_active()`` is false (the session that won the election
is gone): a controller that lost ZooKeeper does nothing more, and its writes would fail
the ``/controller_epoch`` check anyway.

Replication (followers fetching, a leader deciding its ISR and sending AlterPartition) is
the brokers' part: until it exists, nothing asks for an ISR to grow back.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from controller.channel import BrokerRegistration, ControllerChannel, ControlResponse
from controller.context import ControllerContext
from controller.core import DeletionsRequested, SentRequest
from controller.election import (
    ElectionOutcome,
    NotControllerError,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
)
from controller.leader_and_isr import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
)
from controller.reassignment import (
    ReassignmentCore,
    ReassignmentsListed,
    ReassignmentsRequested,
)
from controller.stats import ControllerState, ControllerStats
from controller.topic_store import TopicStore
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

ZERO_UUID: Final = uuid.UUID(int=0)
PREFERRED: Final = 0  # ElectLeaders election types
UNCLEAN: Final = 1

@dataclass(frozen=True, slots=True)
class BrokerChange:
    pass


@dataclass(frozen=True, slots=True)
class AutoPreferredReplicaLeaderElection:
    pass


@dataclass(frozen=True, slots=True)
class BrokerLogDirFailure:
    broker_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True, eq=False)
class LeaderAndIsrResponseReceived:
    broker_id: int
    response: LeaderAndIsrResponse | None  # None: no answer (broker gone, connection lost)


@dataclass(frozen=True, slots=True, eq=False)
class ControlledShutdown:
    broker_id: int
    broker_epoch: int
    result: asyncio.Future[tuple[ErrorCode, list[TopicPartition]]]


@dataclass(frozen=True, slots=True, eq=False)
class AlterPartitionReceived:
    request: AlterPartitionRequest
    version: int
    result: asyncio.Future[AlterPartitionResponse]


@dataclass(frozen=True, slots=True, eq=False)
class ReplicaLeaderElection:
    election_type: int
    partitions: frozenset[TopicPartition] | None  # None: every partition
    result: asyncio.Future[ElectionOutcome] | None = None


@dataclass(frozen=True, slots=True)
class UncleanLeaderElectionEnable:
    """The broker-level unclean.leader.election.enable was turned on (dynamically)."""


_EVENT_STATES: Final[dict[type, ControllerState]] = {
    UncleanLeaderElectionEnable: ControllerState.UNCLEAN_LEADER_ELECTION_ENABLE,
    BrokerChange: ControllerState.BROKER_CHANGE,
    ControlledShutdown: ControllerState.CONTROLLED_SHUTDOWN,
    ReplicaLeaderElection: ControllerState.MANUAL_LEADER_BALANCE,
    AutoPreferredReplicaLeaderElection: ControllerState.AUTO_LEADER_BALANCE,
    AlterPartitionReceived: ControllerState.ISR_CHANGE,
    ReassignmentsRequested: ControllerState.ALTER_PARTITION_REASSIGNMENT,
    ReassignmentsListed: ControllerState.LIST_PARTITION_REASSIGNMENT,
    BrokerLogDirFailure: ControllerState.LOG_DIR_CHANGE,
    LeaderAndIsrResponseReceived: ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED,
}


class ZkControllerCore(ReassignmentCore):
    def __init__(self, *, controller_id: int, controller_epoch: int, store: TopicStore,
                 channel: ControllerChannel, inter_broker_listener: str,
                 unclean_leader_election: bool = False,
                 read_brokers: Callable[[], Awaitable[dict[int, BrokerRegistration]]],
                 is_active: Callable[[], bool], imbalance_percentage: int = 10,
                 stats: ControllerStats | None = None) -> None:
        super().__init__(controller_id=controller_id, controller_epoch=controller_epoch,
                         store=store, channel=channel,
                         inter_broker_listener=inter_broker_listener,
                         unclean_leader_election=unclean_leader_election, stats=stats)
        self._read_brokers = read_brokers
        self._is_active = is_active
        self.imbalance_percentage = imbalance_percentage

    async def activate(self, live_brokers: Iterable[BrokerRegistration]) -> list[SentRequest]:
        """The core's failover; every live broker also hears of every live broker when there
        is no partition to tell it about (Kafka always sends that UpdateMetadata)."""
        sent = await super().activate(live_brokers)
        if not self.context.leadership:
            self._batch.add_update_metadata(self.context.live_brokers)
            sent += self._send()
        # Kafka's replica state machine at failover: replicas on brokers that are not live
        # leave the ISRs (OfflineReplica), as if their brokers had just failed.
        ctx = self.context
        offline = {b for tp in ctx.all_partitions() for b in ctx.replicas(tp)} - set(ctx.live_brokers)
        if offline:
            await self._remove_from_isr(offline, ctx.all_partitions())
        await self._maybe_complete_reassignments()  # resumed from the topic znodes
        return sent

    def state_of(self, event: object) -> ControllerState:
        state = _EVENT_STATES.get(type(event))
        return state if state is not None else super().state_of(event)

    async def process(self, event: object) -> None:
        if not self._is_active():
            _refuse(event)
            return
        if isinstance(event, BrokerChange):
            await self._on_broker_change()
        elif isinstance(event, ControlledShutdown):
            await self._on_controlled_shutdown(event)
        elif isinstance(event, ReplicaLeaderElection):
            outcome = await self._on_leader_election(event.election_type, event.partitions)
            if event.result is not None and not event.result.done():
                event.result.set_result(outcome)
        elif isinstance(event, AutoPreferredReplicaLeaderElection):
            await self._on_auto_rebalance()
        elif isinstance(event, UncleanLeaderElectionEnable):
            # Kafka's processUncleanLeaderElectionEnable: offline partitions may now take a
            # leader from outside their ISR.
            await self._elect_offline(self._offline_partitions())
        elif isinstance(event, AlterPartitionReceived):
            response = await self._on_alter_partition(event.request, event.version)
            if not event.result.done():
                event.result.set_result(response)
        elif isinstance(event, ReassignmentsRequested):
            await self._on_reassignments_requested(event)
        elif isinstance(event, ReassignmentsListed):
            self._on_reassignments_listed(event)
        elif isinstance(event, BrokerLogDirFailure):
            self._on_broker_log_dir_failure(event.broker_ids)
        elif isinstance(event, LeaderAndIsrResponseReceived):
            await self._on_leader_and_isr_response(event.broker_id, event.response)
        else:
            await super().process(event)

    # ------------------------------------------------------------ brokers

    async def _on_broker_change(self) -> None:
        ctx = self.context
        current = await self._read_brokers()
        live = ctx.live_brokers
        new = [current[i] for i in sorted(set(current) - set(live))]
        dead = sorted(set(live) - set(current))
        bounced = [current[i] for i in sorted(set(current) & set(live))
                   if current[i].epoch != live[i].epoch]
        if not (new or dead or bounced):
            return
        log.info("[Controller id=%d] Newly added brokers: %s, deleted brokers: %s, bounced "
                 "brokers: %s, all live brokers: %s", self.controller_id,
                 [b.broker_id for b in new], dead, [b.broker_id for b in bounced],
                 sorted(current))
        for broker in new:
            self.channel.add_broker(broker)
        for broker in bounced:
            self.channel.remove_broker(broker.broker_id)
            self.channel.add_broker(broker)
        for broker_id in dead:
            self.channel.remove_broker(broker_id)
        if new:
            for broker in new:
                live[broker.broker_id] = broker
            await self._on_broker_startup([b.broker_id for b in new])
        if bounced:
            ids = [b.broker_id for b in bounced]
            for broker_id in ids:
                del live[broker_id]
            await self._on_broker_failure(ids)
            for broker in bounced:
                live[broker.broker_id] = broker
            await self._on_broker_startup(ids)
        if dead:
            for broker_id in dead:
                del live[broker_id]
            await self._on_broker_failure(dead)

    async def _on_broker_startup(self, ids: list[int]) -> None:
        """Kafka's onBrokerStartup."""
        ctx = self.context
        ctx.shutting_down.difference_update(ids)
        for broker_id in ids:  # a restarted broker loaded its log dirs again
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        self._batch.add_update_metadata([b for b in ctx.live_brokers if b not in ids])
        self._send()
        self._batch.add_update_metadata(ids)  # even with no partitions: the live brokers
        for tp, state in ctx.leadership.items():
            self._batch.add_update_metadata(ids, tp, state, ctx.replicas(tp))
        self._send()
        for tp, state in ctx.leadership.items():
            hosts = [b for b in ctx.replicas(tp) if b in ids]
            if hosts and ctx.is_replica_online(state.leader_and_isr.leader):
                self._batch.add_leader_and_isr(hosts, tp, state, ctx.replicas(tp))
        self._send()
        await self._elect_offline(self._offline_partitions())
        await self._create_partitions([tp for tp in ctx.all_partitions()
                                       if tp not in ctx.leadership
                                       and tp.topic not in ctx.topics_to_delete])
        if ctx.topics_to_delete:
            self.resume_deletions(ids)  # halted on a replica of these brokers
            self.events.put(DeletionsRequested())  # deletions that waited for these brokers

    async def _on_broker_failure(self, ids: list[int]) -> None:
        """Kafka's onBrokerFailure: new leaders, then the brokers leave every ISR."""
        ctx = self.context
        ctx.shutting_down.difference_update(ids)
        for broker_id in ids:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        await self._elect_offline(self._offline_partitions())
        await self._remove_from_isr(set(ids), ctx.all_partitions())
        self._batch.add_update_metadata(ctx.live_brokers)  # at least the broker list changed
        self._send()

    def _offline_partitions(self) -> list[TopicPartition]:
        ctx = self.context
        return [tp for tp, s in ctx.leadership.items()
                if not ctx.is_replica_online(s.leader_and_isr.leader, tp)
                and tp.topic not in ctx.topics_to_delete]

    async def _remove_from_isr(self, brokers: set[int],
                               partitions: Iterable[TopicPartition]) -> None:
        """``brokers`` leave the ISR of each of ``partitions``."""
        await self._remove_replicas_from_isr({tp: brokers for tp in partitions})

    async def _remove_replicas_from_isr(self, replicas: Mapping[TopicPartition, Collection[int]]
                                        ) -> None:
        """Kafka's removeReplicasFromIsr (OfflineReplica): each partition's ``replicas``
        leave its ISR; one that leads loses the leadership (NO_LEADER); the last member of
        an ISR stays in it. The removed replicas get no LeaderAndIsr."""
        ctx = self.context
        updates: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, brokers in replicas.items():
            state = ctx.leadership.get(tp)
            if state is None or tp.topic in ctx.topics_to_delete:
                continue
            lai = state.leader_and_isr
            if not set(brokers).intersection(lai.isr) and lai.leader not in brokers:
                continue
            isr = lai.isr if len(lai.isr) == 1 else tuple(b for b in lai.isr if b not in brokers)
            if not isr:
                isr = lai.isr
            leader = NO_LEADER if lai.leader in brokers else lai.leader
            if leader == lai.leader and isr == lai.isr:
                continue
            updates[tp] = lai.new_leader_and_isr(leader, isr)
        await self._write_and_send(updates, exclude=replicas)

    async def _write_and_send(
        self, updates: Mapping[TopicPartition, LeaderAndIsr], *,
        exclude: Iterable[int] | Mapping[TopicPartition, Collection[int]] = (),
    ) -> set[TopicPartition]:
        """Write the states (version-checked), then LeaderAndIsr to the live replicas (but
        ``exclude``: brokers, or per partition) and UpdateMetadata to everyone. Returns
        the partitions written."""
        if not updates:
            return set()
        ctx = self.context
        per_partition = exclude if isinstance(exclude, Mapping) else None
        skip_all: Collection[int] = () if isinstance(exclude, Mapping) else set(exclude)
        written = await self.store.update_partition_states(
            {tp: LeaderIsrAndControllerEpoch(lai, self.controller_epoch)
             for tp, lai in updates.items()})
        for tp in written.failed:
            log.error("[Controller id=%d] the state of %s changed under us; not updated",
                      self.controller_id, tp)
        for tp, state in written.written.items():
            ctx.leadership[tp] = state
            skip = per_partition.get(tp, ()) if per_partition is not None else skip_all
            self._batch.add_leader_and_isr([b for b in ctx.live_replicas(tp) if b not in skip],
                                           tp, state, ctx.replicas(tp))
        self._send()
        return set(written.written)

    # ------------------------------------------------------------ failed log dirs

    def _send(self) -> list[SentRequest]:
        """Send the batch; every LeaderAndIsr answer comes back as an event (it tells
        which replicas are in a failed log dir)."""
        sent = super()._send()
        for broker_id, request, future in sent:
            if isinstance(request, LeaderAndIsrRequest):
                future.add_done_callback(self._on_leader_and_isr_future(broker_id))
        return sent

    def _on_leader_and_isr_future(
        self, broker_id: int,
    ) -> Callable[[asyncio.Future[ControlResponse | None]], None]:
        def done(future: asyncio.Future[ControlResponse | None]) -> None:
            response = (None if future.cancelled() or future.exception() is not None
                        else future.result())
            self.events.put(LeaderAndIsrResponseReceived(
                broker_id, response if isinstance(response, LeaderAndIsrResponse) else None))

        return done

    def _on_broker_log_dir_failure(self, broker_ids: tuple[int, ...]) -> None:
        """Kafka's onBrokerLogDirFailure: LeaderAndIsr with the current state of every
        replica on those brokers (OnlineReplica); the answers say which are offline."""
        ctx = self.context
        live = sorted(b for b in set(broker_ids) if b in ctx.live_brokers)
        log.info("[Controller id=%d] Handling log directory failure for brokers %s",
                 self.controller_id, ",".join(map(str, live)))
        for broker_id in live:
            for tp in ctx.partitions_on_broker(broker_id):
                state = ctx.leadership.get(tp)
                if state is not None and tp.topic not in ctx.topics_to_delete:
                    self._batch.add_leader_and_isr([broker_id], tp, state, ctx.replicas(tp))
        self._send()

    async def _on_leader_and_isr_response(self, broker_id: int,
                                          response: LeaderAndIsrResponse | None) -> None:
        """Kafka's processLeaderAndIsrResponseReceived (see the module docstring)."""
        ctx = self.context
        if response is None or broker_id not in ctx.live_brokers:
            return
        if response.error_code != ErrorCode.NO_ERROR:
            log.error("[Controller id=%d] Received error %s in LeaderAndIsr response from "
                      "broker %d", self.controller_id, ErrorCode(response.error_code).name,
                      broker_id)
            return
        offline: set[TopicPartition] = set()
        online: set[TopicPartition] = set()
        for tp, error in _partition_errors(response, ctx):
            if error == ErrorCode.KAFKA_STORAGE_ERROR:
                offline.add(tp)
            elif error == ErrorCode.NO_ERROR:
                online.add(tp)
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        current = (previous - online) | offline
        if current:
            ctx.replicas_on_offline_dirs[broker_id] = current
        else:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        new = current - previous
        if new:
            log.info("[Controller id=%d] Mark replicas %s on broker %d as offline",
                     self.controller_id, ",".join(str(tp) for tp in sorted(new)), broker_id)
            await self._on_replicas_offline(broker_id, new)

    async def _on_replicas_offline(self, broker_id: int, partitions: set[TopicPartition]) -> None:
        """Kafka's onReplicasBecomeOffline for the replicas of ``broker_id`` in a failed log
        dir: elect leaders where the leader is no longer online, then the replicas leave
        the ISRs (OfflineReplica) and everyone hears of it."""
        ctx = self.context
        await self._elect_offline(self._offline_partitions())
        kept = sorted(tp for tp in partitions if tp.topic not in ctx.topics_to_delete)
        for tp in kept:
            state = ctx.leadership.get(tp)
            if state is not None:
                self._batch.add_stop_replica([broker_id], tp, delete=False,
                                             leader_epoch=state.leader_and_isr.leader_epoch)
        self._send()
        await self._remove_replicas_from_isr({tp: (broker_id,) for tp in kept})
        for tp in kept:  # UpdateMetadata lists the replica as offline, changed or not
            state = ctx.leadership.get(tp)
            if state is not None:
                self._batch.add_update_metadata(ctx.live_brokers, tp, state, ctx.replicas(tp))
        self._send()

    # ------------------------------------------------------------ controlled shutdown

    async def _on_controlled_shutdown(self, event: ControlledShutdown) -> None:
        outcome = await self._controlled_shutdown(event.broker_id, event.broker_epoch)
        if not event.result.done():
            event.result.set_result(outcome)

    async def _controlled_shutdown(self, broker_id: int,
                                   broker_epoch: int) -> tuple[ErrorCode, list[TopicPartition]]:
        ctx = self.context
        log.info("[Controller id=%d] Shutting down broker %d", self.controller_id, broker_id)
        registration = ctx.live_brokers.get(broker_id)
        if registration is None:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch != -1 and broker_epoch < registration.epoch:
            return ErrorCode.STALE_BROKER_EPOCH, []
        ctx.shutting_down.add(broker_id)
        led: list[TopicPartition] = []
        followed: list[TopicPartition] = []
        for tp in ctx.partitions_on_broker(broker_id):
            state = ctx.leadership.get(tp)
            if state is None or len(ctx.replicas(tp)) < 2 or tp.topic in ctx.topics_to_delete:
                continue
            (led if state.leader_and_isr.leader == broker_id else followed).append(tp)
        updates: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in led:
            result = elect_controlled_shutdown(ctx.replicas(tp),
                                               ctx.leadership[tp].leader_and_isr,
                                               ctx.live_brokers, ctx.shutting_down)
            if result.leader_and_isr is not None:
                updates[tp] = result.leader_and_isr
        await self._write_and_send(updates)
        for tp in followed:
            self._batch.add_stop_replica([broker_id], tp, delete=False,
                                         leader_epoch=ctx.leadership[tp].leader_and_isr.leader_epoch)
        self._send()
        await self._remove_from_isr({broker_id}, followed)
        remaining = sorted(tp for tp in ctx.partitions_on_broker(broker_id)
                           if (s := ctx.leadership.get(tp)) is not None
                           and s.leader_and_isr.leader == broker_id)
        log.info("[Controller id=%d] Broker %d still leads %d partitions", self.controller_id,
                 broker_id, len(remaining))
        return ErrorCode.NO_ERROR, remaining

    # ------------------------------------------------------------ AlterPartition

    async def _on_alter_partition(self, request: AlterPartitionRequest,
                                  version: int) -> AlterPartitionResponse:
        """Kafka's tryProcessAlterPartition: a leader changes its partition's ISR."""
        ctx = self.context
        registration = ctx.live_brokers.get(request.broker_id)
        if registration is None or registration.epoch != request.broker_epoch:
            log.info("[Controller id=%d] Ignoring AlterPartition from broker %d: stale or "
                     "unknown broker epoch %d", self.controller_id, request.broker_id,
                     request.broker_epoch)
            return AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        by_id = {record.topic_id: name for name, record in ctx.topics.items()}
        errors: dict[TopicPartition, ErrorCode] = {}
        unknown_ids: list[AlterPartitionRequest.TopicData] = []
        proposed: dict[TopicPartition, LeaderAndIsr] = {}
        for topic in request.topics:
            name = by_id.get(topic.topic_id) if version > 1 else topic.topic_name
            if name is None:
                unknown_ids.append(topic)
                continue
            for p in topic.partitions:
                isr = ([b.broker_id for b in p.new_isr_with_epochs] if version >= 3
                       else list(p.new_isr))
                proposed[TopicPartition(name, p.partition_index)] = LeaderAndIsr(
                    request.broker_id, p.leader_epoch, tuple(isr),
                    LeaderRecoveryState(p.leader_recovery_state), p.partition_epoch)
        accepted: dict[TopicPartition, LeaderAndIsr] = {}
        current_states: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, new in proposed.items():
            state = ctx.leadership.get(tp)
            if state is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            current = state.leader_and_isr
            if (new.partition_epoch > current.partition_epoch
                    or new.leader_epoch > current.leader_epoch):
                errors[tp] = ErrorCode.NOT_CONTROLLER  # it knows a newer state than we do
            elif new.leader_epoch < current.leader_epoch:
                errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
            elif (new.leader, new.leader_epoch, new.isr, new.leader_recovery_state) == (
                    current.leader, current.leader_epoch, current.isr,
                    current.leader_recovery_state):
                current_states[tp] = current  # already so: answer the current state
            elif new.partition_epoch < current.partition_epoch:
                errors[tp] = ErrorCode.INVALID_UPDATE_VERSION
            elif (new.leader_recovery_state == LeaderRecoveryState.RECOVERING and len(new.isr) > 1) or (current.leader_recovery_state == LeaderRecoveryState.RECOVERED
                  and new.leader_recovery_state == LeaderRecoveryState.RECOVERING):
                errors[tp] = ErrorCode.INVALID_REQUEST
            elif set(new.isr) - set(ctx.live_brokers):
                errors[tp] = (ErrorCode.INELIGIBLE_REPLICA if version > 1
                              else ErrorCode.OPERATION_NOT_ATTEMPTED)
            else:
                accepted[tp] = new
        written = await self.store.update_partition_states(
            {tp: LeaderIsrAndControllerEpoch(lai, self.controller_epoch)
             for tp, lai in accepted.items()})
        for tp in written.failed:
            errors[tp] = ErrorCode.INVALID_UPDATE_VERSION
        for tp, state in written.written.items():
            ctx.leadership[tp] = state
            current_states[tp] = state.leader_and_isr
            self._batch.add_update_metadata(ctx.live_brokers, tp, state, ctx.replicas(tp))
        self._send()
        if written.written:
            log.info("[Controller id=%d] ISR of %s changed by broker %d", self.controller_id,
                     ", ".join(f"{tp}: {list(s.leader_and_isr.isr)}"
                               for tp, s in sorted(written.written.items())),
                     request.broker_id)
            await self._maybe_complete_reassignments(written.written)
        return _alter_partition_response(version, errors, current_states, ctx.topic_id,
                                         unknown_ids)

    # ------------------------------------------------------------ leader election

    async def _on_leader_election(self, election_type: int,
                                  partitions: frozenset[TopicPartition] | None) -> ElectionOutcome:
        ctx = self.context
        wanted = (frozenset(tp for tp in ctx.leadership if tp.topic not in ctx.topics_to_delete)
                  if partitions is None else partitions)
        outcome: ElectionOutcome = {}
        updates: dict[TopicPartition, LeaderAndIsr] = {}
        unclean_elected: set[TopicPartition] = set()
        for tp in sorted(wanted):
            state = ctx.leadership.get(tp)
            if state is None or tp.topic in ctx.topics_to_delete:
                outcome[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               "The partition does not exist.")
                continue
            lai, replicas = state.leader_and_isr, ctx.replicas(tp)
            if election_type == PREFERRED:
                if replicas and lai.leader == replicas[0]:
                    outcome[tp] = (ErrorCode.ELECTION_NOT_NEEDED,
                                   "Leader election not needed for topic partition.")
                    continue
                result = elect_preferred(replicas, lai, ctx.online_brokers_for(tp))
                error = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                message = (f"Failed to elect leader for partition {tp} under strategy "
                           "PreferredReplicaPartitionLeaderElectionStrategy")
            else:
                if ctx.is_replica_online(lai.leader, tp):
                    outcome[tp] = (ErrorCode.ELECTION_NOT_NEEDED,
                                   "Leader election not needed for topic partition.")
                    continue
                result = elect_offline(replicas, lai, ctx.online_brokers_for(tp), True)
                error = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                message = (f"Failed to elect leader for partition {tp} under strategy "
                           "OfflinePartitionLeaderElectionStrategy(true)")
            if result.leader_and_isr is None:
                outcome[tp] = (error, message)
            else:
                updates[tp] = result.leader_and_isr
                if result.unclean:
                    unclean_elected.add(tp)
        written = await self._write_and_send(updates)
        self.stats.unclean_leader_elections += len(unclean_elected & written)
        for tp in updates:
            outcome[tp] = ((ErrorCode.NO_ERROR, None) if tp in written else
                           (ErrorCode.UNKNOWN_SERVER_ERROR, "the partition state changed"))
        if updates:
            log.info("[Controller id=%d] %s leader election for %d partitions: %d elected",
                     self.controller_id, "Preferred" if election_type == PREFERRED else "Unclean",
                     len(updates), len(written))
        return outcome

    async def _on_auto_rebalance(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance."""
        ctx = self.context
        by_preferred: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in ctx.leadership:
            replicas = ctx.replicas(tp)
            if replicas and tp.topic not in ctx.topics_to_delete:
                by_preferred[replicas[0]].append(tp)
        candidates: set[TopicPartition] = set()
        for broker, partitions in sorted(by_preferred.items()):
            if not ctx.is_replica_online(broker):
                continue
            not_led = [tp for tp in partitions
                       if ctx.leadership[tp].leader_and_isr.leader != broker]
            ratio = len(not_led) / len(partitions)
            log.debug("[Controller id=%d] Leader imbalance ratio for broker %d is %.3f",
                      self.controller_id, broker, ratio)
            if ratio > self.imbalance_percentage / 100:
                candidates.update(tp for tp in not_led
                                  if broker in ctx.leadership[tp].leader_and_isr.isr)
        if candidates:
            log.info("[Controller id=%d] Starting replica leader election (PREFERRED) for "
                     "partitions %s triggered by AutoTriggered", self.controller_id,
                     ",".join(str(tp) for tp in sorted(candidates)))
            await self._on_leader_election(PREFERRED, frozenset(candidates))


def _alter_partition_response(version: int, errors: Mapping[TopicPartition, ErrorCode],
                              states: Mapping[TopicPartition, LeaderAndIsr],
                              topic_id: Callable[[str], uuid.UUID],
                              unknown_ids: list[AlterPartitionRequest.TopicData],
                              ) -> AlterPartitionResponse:
    _R = AlterPartitionResponse
    by_topic: dict[str, list[AlterPartitionResponse.PartitionData]] = defaultdict(list)
    for tp, error in errors.items():
        by_topic[tp.topic].append(_R.PartitionData(partition_index=tp.partition,
                                                   error_code=error))
    for tp, lai in states.items():
        by_topic[tp.topic].append(_R.PartitionData(
            partition_index=tp.partition, leader_id=lai.leader, leader_epoch=lai.leader_epoch,
            isr=list(lai.isr), leader_recovery_state=int(lai.leader_recovery_state),
            partition_epoch=lai.partition_epoch))
    topics = [_R.TopicData(topic_name="" if version > 1 else name,
                           topic_id=topic_id(name) if version > 1 else ZERO_UUID,
                           partitions=sorted(parts, key=lambda p: p.partition_index))
              for name, parts in sorted(by_topic.items())]
    topics += [_R.TopicData(topic_id=t.topic_id, partitions=[
        _R.PartitionData(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID)
        for p in t.partitions]) for t in unknown_ids]
    return AlterPartitionResponse(topics=topics)


def _partition_errors(response: LeaderAndIsrResponse, ctx: ControllerContext
                      ) -> list[tuple[TopicPartition, int]]:
    """(partition, error) of a LeaderAndIsr answer: by topic id (version 5 and later) or
    by name; partitions of unknown topic ids are left out."""
    if response.topics:
        names = {record.topic_id: name for name, record in ctx.topics.items()}
        return [(TopicPartition(name, p.partition_index), p.error_code)
                for t in response.topics if (name := names.get(t.topic_id)) is not None
                for p in t.partition_errors]
    return [(TopicPartition(p.topic_name, p.partition_index), p.error_code)
            for p in response.partition_errors]


def _refuse(event: object) -> None:
    """An inactive controller answers what waits for an answer: NOT_CONTROLLER."""
    if isinstance(event, ControlledShutdown) and not event.result.done():
        event.result.set_result((ErrorCode.NOT_CONTROLLER, []))
    elif isinstance(event, AlterPartitionReceived) and not event.result.done():
        event.result.set_result(AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER))
    elif (isinstance(event, ReplicaLeaderElection) and event.result is not None
          and not event.result.done()):
        event.result.set_exception(NotControllerError("this broker is not the controller"))

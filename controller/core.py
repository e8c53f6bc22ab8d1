"""The controller's decisions, the same on one node and in a cluster (Kafka's
``KafkaController`` with its partition state machine and topic deletion manager).

``ControllerCore`` reads and writes the topic store, keeps a ``ControllerContext``, and
tells brokers what to do only through a ``ControllerChannel``, in LeaderAndIsr,
UpdateMetadata and StopReplica requests (``ControlRequestBatch``). It never calls into a
broker. Who makes it active, and who the live brokers are, is the business of its two
owners: ``controller.local.LocalController`` (one node: always active, its own broker the
only live one) and the ZooKeeper controller (elected through ``/controller``, brokers from
``/brokers/ids``), which also feeds it broker changes.

What it does, all on its event task (``ControllerEventManager``):

- ``activate(live_brokers)`` (becoming the controller, Kafka's ``onControllerFailover``):
  load topics, partition states and pending deletions from the store; send UpdateMetadata
  with every known partition to every live broker, then LeaderAndIsr for every partition
  to its live replicas; elect leaders for partitions that have no state yet (new) or whose
  leader is not live (offline election, unclean only if ``unclean.leader.election.enable``);
  resume pending deletions.
- ``TopicsChanged`` / ``PartitionsChanged``: new topics and partitions get a leader (the
  first live replica, the ISR all live replicas, leader epoch 0), their states are created
  in the store, then LeaderAndIsr (is_new) goes to the replicas and UpdateMetadata to every
  live broker.
- ``DeletionsRequested``: each topic marked for deletion gets StopReplica(delete=true,
  leader epoch EPOCH_DURING_DELETE) on every replica; when every replica answered without
  error (``StopReplicaResponseReceived``), the topic is removed from the store and then
  UpdateMetadata with leader LEADER_DURING_DELETE makes every broker forget it, so an admin
  request that waits for the metadata cache sees a deletion that is complete (Kafka sends
  that UpdateMetadata first; sending it last means a topic of the same name can be created
  as soon as DeleteTopics answers). A topic with a replica on a broker that is not live
  waits for it (``DeletionsRequested`` again once brokers start). A replica whose broker
  answers an error, or no answer, becomes deletion-ineligible (Kafka's
  ReplicaDeletionIneligible); once no StopReplica of the topic is outstanding, its deletion
  halts, and resumes (StopReplica again to the replicas not deleted yet) when a broker
  holding an ineligible replica starts again (``resume_deletions``, Kafka's
  ``resumeDeletionForTopics``), or when the controller next starts.

A broker's error answer is logged at ERROR and not retried, as Kafka's controller does:
LeaderAndIsr (``_on_leader_and_isr_response``), UpdateMetadata, StopReplica (the deletion
waits). CLUSTER_AUTHORIZATION_FAILED is such an answer: the broker's authorizer does not
grant the controller's principal CLUSTER_ACTION on the cluster (make it a super user, or
add that ACL); the brokers then learn the state only with the controller's next change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from controller.channel import (
    BrokerRegistration,
    ControllerChannel,
    ControlRequest,
    ControlRequestBatch,
    ControlResponse,
)
from controller.context import ControllerContext
from controller.election import elect_new_partition, elect_offline
from controller.events import ControllerEventManager
from controller.leader_and_isr import (
    EPOCH_DURING_DELETE,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
)
from controller.stats import ControllerState, ControllerStats
from controller.topic_store import TopicStore
from protocol.errors import ErrorCode
from protocol.messages.stop_replica import StopReplicaResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

SentRequest = tuple[int, ControlRequest, "asyncio.Future[ControlResponse | None]"]

# A loop over the partitions of a decision yields the event loop every this many (a few ms
# of work at most): other requests are served meanwhile. Events are processed one at a
# time, so nothing else adds to the decision's batch or sends it in between.
YIELD_EVERY_PARTITIONS: Final = 256


@dataclass(frozen=True, slots=True)
class TopicsChanged:
    pass


@dataclass(frozen=True, slots=True)
class PartitionsChanged:
    topic: str


@dataclass(frozen=True, slots=True)
class DeletionsRequested:
    pass


@dataclass(frozen=True, slots=True, eq=False)
class StopReplicaResponseReceived:
    broker_id: int
    topics: frozenset[str]
    response: ControlResponse | None


class ControllerCore:
    def __init__(self, *, controller_id: int, controller_epoch: int, store: TopicStore,
                 channel: ControllerChannel, inter_broker_listener: str,
                 unclean_leader_election: bool = False,
                 stats: ControllerStats | None = None) -> None:
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self.store = store
        self.channel = channel
        self.unclean_leader_election = unclean_leader_election
        self.context = ControllerContext()
        self.stats = stats if stats is not None else ControllerStats()
        self.events = ControllerEventManager(self._process_timed)
        self._batch = ControlRequestBatch(controller_id, controller_epoch, inter_broker_listener)
        # topic -> replicas (partition, broker) whose StopReplica(delete) has not succeeded
        self._deleting: dict[str, set[tuple[TopicPartition, int]]] = {}
        # topic -> those of its replicas whose last StopReplica(delete) failed (ineligible)
        self._deletion_failed: dict[str, set[tuple[TopicPartition, int]]] = {}

    # ------------------------------------------------------------ becoming active

    async def activate(self, live_brokers: Iterable[BrokerRegistration]) -> list[SentRequest]:
        """Load the store and tell the live brokers everything (see the module docstring).
        Returns the requests sent; the caller may wait for their responses."""
        ctx = self.context
        for broker in live_brokers:
            ctx.live_brokers[broker.broker_id] = broker
            self.channel.add_broker(broker)
        ctx.topics = await self.store.topics()
        ctx.leadership = await self.store.partition_states(ctx.all_partitions())
        ctx.topics_to_delete = await self.store.topics_marked_for_deletion()
        log.info("[Controller id=%d epoch=%d] active: %d live brokers, %d topics, %d partitions"
                 " with a leader, %d topics to delete", self.controller_id,
                 self.controller_epoch, len(ctx.live_brokers), len(ctx.topics),
                 len(ctx.leadership), len(ctx.topics_to_delete))
        self._batch.add_update_metadata(ctx.live_brokers)  # the live brokers, even without topics
        for tp, state in ctx.leadership.items():
            self._batch.add_update_metadata(ctx.live_brokers, tp, state, ctx.replicas(tp))
        sent = self._send()
        for tp, state in ctx.leadership.items():
            if state.leader_and_isr.leader in ctx.live_brokers:
                self._batch.add_leader_and_isr(ctx.live_replicas(tp), tp, state,
                                               ctx.replicas(tp))
        sent += self._send()
        new = [tp for tp in ctx.all_partitions() if tp not in ctx.leadership]
        offline = [tp for tp, s in ctx.leadership.items()
                   if not ctx.is_replica_online(s.leader_and_isr.leader, tp)]
        sent += await self._create_partitions(new)
        sent += await self._elect_offline(offline)
        if ctx.topics_to_delete:
            self.events.put(DeletionsRequested())
        return sent

    # ------------------------------------------------------------ events

    async def _process_timed(self, event: object) -> None:
        """``process`` with the controller state set while it runs, and timed per state
        (Kafka's ControllerEventManager and its rate-and-time timers)."""
        stats = self.stats
        state = self.state_of(event)
        stats.state = state
        start = time.monotonic_ns()
        try:
            await self.process(event)
        finally:
            stats.state = ControllerState.IDLE
            stats.record_state(state, time.monotonic_ns() - start)

    def state_of(self, event: object) -> ControllerState:
        """Kafka's ControllerState of processing ``event``."""
        if isinstance(event, (TopicsChanged, PartitionsChanged)):
            return ControllerState.TOPIC_CHANGE
        if isinstance(event, (DeletionsRequested, StopReplicaResponseReceived)):
            return ControllerState.TOPIC_DELETION
        return ControllerState.IDLE

    async def process(self, event: object) -> None:
        if isinstance(event, TopicsChanged):
            await self._on_topics_changed()
        elif isinstance(event, PartitionsChanged):
            await self._on_partitions_changed(event.topic)
        elif isinstance(event, DeletionsRequested):
            await self._on_deletions_requested()
        elif isinstance(event, StopReplicaResponseReceived):
            await self._on_stop_replica_response(event)
        else:
            raise TypeError(f"unknown controller event {event!r}")

    async def _on_topics_changed(self) -> None:
        ctx = self.context
        # The names, then the assignments of the new topics only (Kafka's processTopicChange):
        # reading and decoding every topic's on each change costs the loop tens of ms at
        # thousands of partitions.
        names = await self.store.topic_names()
        for name in [n for n in ctx.topics if n not in names]:
            ctx.remove_topic(name)  # removed by someone else: forget it
        records = await self.store.topics([n for n in names if n not in ctx.topics])
        new = [name for name in records if name not in ctx.topics]
        partitions: list[TopicPartition] = []
        for name in sorted(new):
            ctx.topics[name] = records[name]
            partitions += records[name].partitions()
        if new:
            log.info("[Controller id=%d] new topics %s", self.controller_id, sorted(new))
        await self._create_partitions(partitions)

    async def _on_partitions_changed(self, topic: str) -> None:
        ctx = self.context
        record = (await self.store.topics([topic])).get(topic)
        old = ctx.topics.get(topic)
        if record is None or old is None:
            return
        ctx.topics[topic] = record
        added = [tp for tp in record.partitions() if tp.partition not in old.assignment]
        if added:
            log.info("[Controller id=%d] new partitions %s", self.controller_id,
                     [str(tp) for tp in added])
        await self._create_partitions(added)

    async def _on_deletions_requested(self) -> None:
        ctx = self.context
        marked = await self.store.topics_marked_for_deletion()
        for topic in sorted(marked):
            if topic in self._deleting:
                continue
            if topic not in ctx.topics:
                record = (await self.store.topics([topic])).get(topic)
                if record is None:
                    continue
                ctx.topics[topic] = record
            ctx.topics_to_delete.add(topic)
            self._start_deletion(topic)

    def _start_deletion(self, topic: str) -> None:
        ctx = self.context
        replicas = {(tp, b) for tp in ctx.partitions_of(topic) for b in ctx.replicas(tp)}
        offline = sorted({b for _, b in replicas if b not in ctx.live_brokers})
        if offline:
            log.warning("[Controller id=%d] deletion of %s waits: replicas on brokers %s are"
                        " not live", self.controller_id, topic, offline)
            return
        log.info("[Controller id=%d] deleting topic %s", self.controller_id, topic)
        self._deleting[topic] = replicas
        self._deletion_failed[topic] = set()
        self._send_stop_replicas(topic, replicas)

    def _send_stop_replicas(self, topic: str, replicas: set[tuple[TopicPartition, int]]) -> None:
        by_partition: dict[TopicPartition, list[int]] = {}
        for tp, broker_id in sorted(replicas):
            by_partition.setdefault(tp, []).append(broker_id)
        for tp, broker_ids in by_partition.items():
            self._batch.add_stop_replica(broker_ids, tp, delete=True,
                                         leader_epoch=EPOCH_DURING_DELETE)
        for broker_id, _request, future in self._send():
            future.add_done_callback(self._on_stop_replica_future(broker_id, topic))

    def resume_deletions(self, started: Iterable[int]) -> None:
        """Brokers ``started`` (again): a halted deletion with an ineligible replica on one of
        them is retried (StopReplica to its replicas not deleted yet, on live brokers)."""
        ctx = self.context
        started_ids = set(started)
        for topic in sorted(self._deleting):
            pending = self._deleting[topic]
            failed = self._deletion_failed.get(topic, set())
            if not failed or not pending <= failed:  # not halted: answers still outstanding
                continue
            if not any(b in started_ids for _, b in failed):
                continue
            retry = {(tp, b) for tp, b in pending if b in ctx.live_brokers}
            if not retry:
                continue
            log.info("[Controller id=%d] deletion of %s resumed: replicas %s on restarted "
                     "brokers", self.controller_id, topic, _replicas_text(retry))
            self._deletion_failed[topic] = failed - retry
            self._send_stop_replicas(topic, retry)

    def _on_stop_replica_future(
        self, broker_id: int, topic: str
    ) -> Callable[[asyncio.Future[ControlResponse | None]], None]:
        def done(future: asyncio.Future[ControlResponse | None]) -> None:
            failed = future.cancelled() or future.exception() is not None
            self.events.put(StopReplicaResponseReceived(
                broker_id, frozenset({topic}), None if failed else future.result()))

        return done

    async def _on_stop_replica_response(self, event: StopReplicaResponseReceived) -> None:
        response = event.response
        broker_id = event.broker_id
        for topic in event.topics:
            pending = self._deleting.get(topic)
            if pending is None:
                continue
            failed = self._deletion_failed.setdefault(topic, set())
            on_broker = {key for key in pending if key[1] == broker_id}
            if not isinstance(response, StopReplicaResponse):
                log.error("[Controller id=%d] no StopReplica answer from broker %d for %s",
                          self.controller_id, broker_id, topic)
                failed |= on_broker
            elif response.error_code != ErrorCode.NO_ERROR:
                log.error("[Controller id=%d] broker %d refused StopReplica for %s: %s",
                          self.controller_id, broker_id, topic,
                          ErrorCode(response.error_code).name)
                failed |= on_broker
            else:
                for pe in response.partition_errors:
                    if pe.topic_name != topic:
                        continue
                    key = (TopicPartition(pe.topic_name, pe.partition_index), broker_id)
                    if pe.error_code == ErrorCode.NO_ERROR:
                        pending.discard(key)
                        failed.discard(key)
                    else:
                        log.error("[Controller id=%d] broker %d could not delete %s: %s",
                                  self.controller_id, broker_id, key[0],
                                  ErrorCode(pe.error_code).name)
                        failed.add(key)
            if not pending:
                await self._complete_deletion(topic)
            elif pending <= failed:  # nothing outstanding: Kafka's "Halted deletion"
                log.warning("[Controller id=%d] Halted deletion of topic %s due to replica "
                            "deletion failure: replicas %s; retried when their brokers start "
                            "again", self.controller_id, topic, _replicas_text(failed))

    async def _complete_deletion(self, topic: str) -> None:
        ctx = self.context
        del self._deleting[topic]
        self._deletion_failed.pop(topic, None)
        partitions = ctx.partitions_of(topic)
        states = {tp: ctx.leadership.get(tp) for tp in partitions}
        replicas = {tp: ctx.replicas(tp) for tp in partitions}
        await self.store.delete_topic(topic)
        ctx.remove_topic(topic)
        for tp in partitions:
            state = states[tp]
            isr = () if state is None else state.leader_and_isr.isr
            self._batch.add_update_metadata(ctx.live_brokers, tp, LeaderIsrAndControllerEpoch(
                LeaderAndIsr.during_delete(isr), self.controller_epoch), replicas[tp])
        self._send()
        log.info("[Controller id=%d] deleted topic %s", self.controller_id, topic)

    # ------------------------------------------------------------ partition states

    async def _create_partitions(self, partitions: list[TopicPartition]) -> list[SentRequest]:
        """New partitions: elect, create their states, tell the replicas and everyone."""
        ctx = self.context
        if not partitions:
            return []
        online = [b for b in ctx.live_brokers if b not in ctx.shutting_down]
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for i, tp in enumerate(partitions, 1):
            if i % YIELD_EVERY_PARTITIONS == 0:
                await asyncio.sleep(0)
            result = elect_new_partition(ctx.replicas(tp), online)
            if result.leader_and_isr is None:
                log.error("[Controller id=%d] %s has no live replica among %s: it stays"
                          " offline", self.controller_id, tp, list(ctx.replicas(tp)))
                continue
            states[tp] = LeaderIsrAndControllerEpoch(result.leader_and_isr, self.controller_epoch)
        written = await self.store.create_partition_states(states)
        if written.failed:  # already created (a controller stopped half-way): use what is there
            existing = await self.store.partition_states(written.failed)
            written.written.update(existing)
        for i, (tp, state) in enumerate(written.written.items(), 1):
            if i % YIELD_EVERY_PARTITIONS == 0:
                await asyncio.sleep(0)
            ctx.leadership[tp] = state
            self._batch.add_leader_and_isr(ctx.live_replicas(tp), tp, state, ctx.replicas(tp),
                                           is_new=True)
        return self._send()

    async def _elect_offline(self, partitions: list[TopicPartition]) -> list[SentRequest]:
        ctx = self.context
        if not partitions:
            return []
        configs = await self.store.all_topic_configs()
        updates: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        unclean_elected: set[TopicPartition] = set()
        for tp in partitions:
            current = ctx.leadership[tp].leader_and_isr
            unclean = _flag(configs.get(tp.topic, {}), "unclean.leader.election.enable",
                            self.unclean_leader_election)
            result = elect_offline(ctx.replicas(tp), current, ctx.online_brokers_for(tp), unclean)
            if result.leader_and_isr is None:
                log.error("[Controller id=%d] no leader for %s: no live replica in the ISR %s",
                          self.controller_id, tp, list(current.isr))
                continue
            updates[tp] = LeaderIsrAndControllerEpoch(result.leader_and_isr,
                                                      self.controller_epoch)
            if result.unclean:
                unclean_elected.add(tp)
        written = await self.store.update_partition_states(updates)
        self.stats.unclean_leader_elections += len(unclean_elected & written.written.keys())
        for tp in written.failed:
            log.error("[Controller id=%d] the state of %s changed under us; not elected",
                      self.controller_id, tp)
        for tp, state in written.written.items():
            ctx.leadership[tp] = state
            self._batch.add_leader_and_isr(ctx.live_replicas(tp), tp, state, ctx.replicas(tp))
        return self._send()

    def _send(self) -> list[SentRequest]:
        sent = self._batch.send_all(self.channel, self.context.live_brokers,
                                    self.context.topic_id,
                                    self.context.replicas_on_offline_dirs)
        for broker_id, request, future in sent:
            if isinstance(request, UpdateMetadataRequest):
                future.add_done_callback(self._on_update_metadata_future(broker_id))
        return sent

    def _on_update_metadata_future(
        self, broker_id: int,
    ) -> Callable[[asyncio.Future[ControlResponse | None]], None]:
        """Kafka's processUpdateMetadataResponseReceived: an error (CLUSTER_AUTHORIZATION_FAILED
        when the broker does not grant the controller's principal CLUSTER_ACTION) is logged;
        the request is not sent again: the broker's cache catches up with the next change."""
        def done(future: asyncio.Future[ControlResponse | None]) -> None:
            if future.cancelled() or future.exception() is not None:
                return
            response = future.result()
            if (isinstance(response, UpdateMetadataResponse)
                    and response.error_code != ErrorCode.NO_ERROR):
                log.error("[Controller id=%d] Received error %s in UpdateMetadata response from "
                          "broker %d", self.controller_id, ErrorCode(response.error_code).name,
                          broker_id)

        return done

    async def close(self) -> None:
        await self.events.close()


def _flag(configs: Mapping[str, str], name: str, default: bool) -> bool:
    raw = configs.get(name)
    return default if raw is None else raw.strip().lower() == "true"


def _replicas_text(replicas: Iterable[tuple[TopicPartition, int]]) -> str:
    """Kafka's PartitionAndReplica form: ``[Topic=t,Partition=0,Replica=2]`` each."""
    return ",".join(f"[Topic={tp.topic},Partition={tp.partition},Replica={b}]"
                    for tp, b in sorted(replicas))

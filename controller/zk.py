"""``ZkController``: the ZooKeeper twin of ``controller.local.LocalController``.

Every broker of a cluster has one (Kafka's ``KafkaController`` in ``KafkaServer``). It owns
the broker's ZooKeeper side (``ZkBrokerSession``: session, cluster id, registration, the
election) and the topic store in Kafka's znodes (``ZkTopicStore``), which the broker's admin
requests write too. When the election makes this broker the controller, a
``ZkControllerCore`` is built for that tenure, with the epoch just won:

1. the topic store's writes are fenced with the epoch's ``/controller_epoch`` version;
2. the live brokers are read from ``/brokers/ids`` (and watched);
3. ``activate``: every live broker gets UpdateMetadata and LeaderAndIsr for what it hosts,
   new and offline partitions get leaders, pending deletions resume (the core);
4. ``/log_dir_event_notification`` is watched (``controller.zk_log_dir_events``): what is
   there is deleted first, then each notification written later becomes the core's
   ``BrokerLogDirFailure``;
5. with ``auto.leader.rebalance.enable``, a preferred-leader check every
   ``leader.imbalance.check.interval.seconds``, the first 5 s after becoming controller (as
   Kafka schedules it).

Resigning (another broker won, or the session expired) undoes it: the fence is lifted,
the core's event task stops, the channel forgets every broker. Requests from brokers
(ControlledShutdown, ElectLeaders) are queued as events of the current core and answered
NOT_CONTROLLER when there is none.

The broker side of a failed log dir is ``propagate_log_dir_event``: it writes this broker's
notification for whichever broker is the controller.

Topic store notifications and ``/brokers/ids`` changes become the core's events; the
session's own events (session changes, ``/controller``) stay on the session's queue. Both
run on the broker's event loop, so nothing here needs a lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Final

from controller import zk_data as zd
from controller.channel import BrokerEndpoint, BrokerRegistration, ControllerChannel
from controller.core import DeletionsRequested, PartitionsChanged, TopicsChanged
from controller.election import ElectionOutcome, NotControllerError
from controller.reassignment import (
    Reassignment,
    ReassignmentOutcome,
    ReassignmentsListed,
    ReassignmentsRequested,
)
from controller.stats import ControllerState, ControllerStats
from controller.zk_client import ZkClient, ZkWatchFired
from controller.zk_core import (
    AlterPartitionReceived,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    BrokerLogDirFailure,
    ControlledShutdown,
    ReplicaLeaderElection,
    UncleanLeaderElectionEnable,
    ZkControllerCore,
)
from controller.zk_election import ControllerEpoch
from controller.zk_log_dir_events import propagate_log_dir_event, take_log_dir_events
from controller.zk_session import ZkBrokerSession, ZkSettings
from controller.zk_store import ZkTopicStore
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FIRST_REBALANCE_DELAY_S: Final = 5.0
SECURITY_PROTOCOLS: Final = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


@dataclass(frozen=True, slots=True)
class ZkControllerSettings:
    """Broker properties the ZooKeeper controller uses (Kafka's names)."""

    broker_id: int
    zk: ZkSettings
    inter_broker_listener: str = "PLAINTEXT"
    unclean_leader_election: bool = False  # unclean.leader.election.enable
    auto_leader_rebalance: bool = True  # auto.leader.rebalance.enable
    imbalance_percentage: int = 10  # leader.imbalance.per.broker.percentage
    imbalance_check_interval_s: float = 300.0  # leader.imbalance.check.interval.seconds


def to_channel_registration(reg: zd.BrokerRegistration, epoch: int) -> BrokerRegistration:
    """A ``/brokers/ids/<id>`` registration as the controller's channel knows brokers."""
    return BrokerRegistration(
        reg.broker_id,
        tuple(BrokerEndpoint(e.listener_name, e.host, e.port,
                             SECURITY_PROTOCOLS.get(e.security_protocol, 0))
              for e in reg.endpoints),
        reg.rack, epoch)


async def read_live_brokers(zk: ZkClient, watch: Callable[..., None] | None = None
                            ) -> dict[int, BrokerRegistration]:
    """``/brokers/ids`` (children watched with ``watch``): id -> registration with its epoch."""
    ids = [int(i) for i in await zk.children(zd.BROKER_IDS, watch=watch) if i.isdigit()]
    found = await asyncio.gather(*(zk.get_or_none(zd.broker_path(i)) for i in ids))
    out: dict[int, BrokerRegistration] = {}
    for broker_id, item in zip(ids, found, strict=True):
        if item is None:  # gone between the listing and the read
            continue
        data, stat = item
        out[broker_id] = to_channel_registration(zd.BrokerRegistration.decode(broker_id, data),
                                                 stat.czxid)
    return out


class ZkController:
    """See the module docstring."""

    def __init__(self, settings: ZkControllerSettings,
                 registration: Callable[[], zd.BrokerRegistration],
                 channel: ControllerChannel) -> None:
        self.settings = settings
        self.channel = channel
        self.session = ZkBrokerSession(settings.zk, registration, on_elected=self._on_elected,
                                       on_resigned=self._on_resigned, handler=self._on_event,
                                       on_reconnected=self._on_reconnected)
        self._store: ZkTopicStore | None = None
        self._core: ZkControllerCore | None = None
        self._epoch_zk_version = -1  # /controller_epoch's version while this one is active
        self._rebalance: asyncio.Task[None] | None = None
        self.stats = ControllerStats()  # across tenures, as Kafka's ControllerStats

    # ------------------------------------------------------------ accessors

    @property
    def store(self) -> ZkTopicStore:
        if self._store is None:
            raise RuntimeError("ZooKeeper controller not connected")
        return self._store

    @property
    def is_active(self) -> bool:
        return self._core is not None and self.session.is_controller

    @property
    def core(self) -> ZkControllerCore | None:
        return self._core

    @property
    def controller_epoch(self) -> int:
        return self._core.controller_epoch if self._core is not None else -1

    @property
    def broker_epoch(self) -> int:
        return self.session.broker_epoch

    # What the controller metrics read (Kafka's KafkaController gauges); 0 unless active.

    @property
    def state(self) -> int:
        return int(self.stats.state)

    @property
    def global_topic_count(self) -> int:
        core = self._core
        return len(core.context.topics) if core is not None and self.is_active else 0

    @property
    def global_partition_count(self) -> int:
        core = self._core
        if core is None or not self.is_active:
            return 0
        return sum(t.num_partitions for t in core.context.topics.values())

    @property
    def offline_partitions_count(self) -> int:
        core = self._core
        if core is None or not self.is_active:
            return 0
        ctx = core.context
        return sum(1 for tp in ctx.all_partitions()
                   if tp not in ctx.leadership
                   or not ctx.is_replica_online(ctx.leadership[tp].leader_and_isr.leader, tp))

    @property
    def preferred_replica_imbalance_count(self) -> int:
        """Partitions led by another replica than their first (topics being deleted left
        out, as Kafka's ``preferredReplicaImbalanceCount``)."""
        core = self._core
        if core is None or not self.is_active:
            return 0
        ctx = core.context
        count = 0
        for tp, state in ctx.leadership.items():
            if tp.topic in ctx.topics_to_delete:
                continue
            replicas = ctx.replicas(tp)
            count += bool(replicas) and state.leader_and_isr.leader != replicas[0]
        return count

    # ------------------------------------------------------------ life cycle

    async def connect(self, stored_cluster_id: str | None, meta_path: str,
                      proposed_cluster_id: str) -> str:
        """The session and the cluster id (before the broker loads its logs)."""
        cluster_id = await self.session.connect(stored_cluster_id, meta_path,
                                                proposed_cluster_id)
        self._store = ZkTopicStore(self.session.zk)
        self._store.watch(self)
        return cluster_id

    async def startup(self) -> None:
        """Register the broker (its listeners are bound) and join the election."""
        await self.session.register()
        await self.session.elect()

    async def shutdown(self) -> None:
        """Resign if active, end the session (the registration goes at once)."""
        if self._core is not None:
            await self._on_resigned()
        if self._store is not None:
            await self._store.close()
        await self.session.stop()
        await self.channel.close()

    async def propagate_log_dir_event(self) -> None:
        """Tell the controller that a log dir of this broker failed (Kafka's
        ``propagateLogDirEvent``)."""
        path = await propagate_log_dir_event(self.session.zk, self.settings.broker_id)
        log.info("Wrote log dir failure notification %s for broker %d", path,
                 self.settings.broker_id)

    # ------------------------------------------------------------ requests from brokers

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int
                                  ) -> tuple[ErrorCode, list[TopicPartition]]:
        core = self._core
        if core is None or not self.is_active:
            return ErrorCode.NOT_CONTROLLER, []
        future: asyncio.Future[tuple[ErrorCode, list[TopicPartition]]] = (
            asyncio.get_running_loop().create_future())
        core.events.put(ControlledShutdown(broker_id, broker_epoch, future))
        return await future

    async def elect_leaders(self, election_type: int,
                            partitions: frozenset[TopicPartition] | None) -> ElectionOutcome:
        """NotControllerError when this broker is not the controller."""
        core = self._core
        if core is None or not self.is_active:
            raise NotControllerError("this broker is not the controller")
        future: asyncio.Future[ElectionOutcome] = asyncio.get_running_loop().create_future()
        core.events.put(ReplicaLeaderElection(election_type, partitions, future))
        return await future

    async def alter_reassignments(self, targets: Mapping[TopicPartition, tuple[int, ...] | None]
                                  ) -> ReassignmentOutcome:
        """AlterPartitionReassignments; NotControllerError when this broker is not the
        controller."""
        core = self._core
        if core is None or not self.is_active:
            raise NotControllerError("this broker is not the controller")
        future: asyncio.Future[ReassignmentOutcome] = asyncio.get_running_loop().create_future()
        core.events.put(ReassignmentsRequested(targets, future))
        return await future

    async def list_reassignments(self, partitions: frozenset[TopicPartition] | None
                                 ) -> dict[TopicPartition, Reassignment]:
        """ListPartitionReassignments; NotControllerError as above."""
        core = self._core
        if core is None or not self.is_active:
            raise NotControllerError("this broker is not the controller")
        future: asyncio.Future[dict[TopicPartition, Reassignment]] = (
            asyncio.get_running_loop().create_future())
        core.events.put(ReassignmentsListed(partitions, future))
        return await future

    async def alter_partition(self, request: AlterPartitionRequest,
                              version: int) -> AlterPartitionResponse:
        core = self._core
        if core is None or not self.is_active:
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
        future: asyncio.Future[AlterPartitionResponse] = (
            asyncio.get_running_loop().create_future())
        core.events.put(AlterPartitionReceived(request, version, future))
        return await future

    # ------------------------------------------------------------ election

    async def _on_elected(self, epoch: ControllerEpoch) -> None:
        """Kafka's onControllerFailover."""
        self.stats.state = ControllerState.CONTROLLER_CHANGE
        start = time.monotonic_ns()
        try:
            await self._failover(epoch)
        finally:
            self.stats.state = ControllerState.IDLE
            self.stats.record_state(ControllerState.CONTROLLER_CHANGE,
                                    time.monotonic_ns() - start)

    async def _failover(self, epoch: ControllerEpoch) -> None:
        store = self.store
        zk = self.session.zk
        store.fence(epoch.zk_version)
        s = self.settings
        core = ZkControllerCore(
            controller_id=s.broker_id, controller_epoch=epoch.epoch, store=store,
            channel=self.channel, inter_broker_listener=s.inter_broker_listener,
            unclean_leader_election=s.unclean_leader_election,
            read_brokers=lambda: read_live_brokers(zk, zk.watch("brokers")),
            is_active=lambda: self.session.is_controller and self._core is core,
            imbalance_percentage=s.imbalance_percentage, stats=self.stats)
        self._core = core
        self._epoch_zk_version = epoch.zk_version
        stale = await take_log_dir_events(zk, zk.watch("log_dir_events"), epoch.zk_version)
        if stale:
            log.info("[Controller id=%d] Deleted log dir event notifications of brokers %s "
                     "(the failover's LeaderAndIsr finds their offline replicas)",
                     s.broker_id, stale)
        live = await read_live_brokers(zk, zk.watch("brokers"))
        log.info("[Controller id=%d] Controller %d epoch %d: %d live brokers %s",
                 s.broker_id, s.broker_id, epoch.epoch, len(live), sorted(live))
        await core.activate(live.values())
        core.events.start()
        if s.auto_leader_rebalance:
            self._rebalance = asyncio.get_running_loop().create_task(
                self._rebalance_loop(core), name="controller-auto-rebalance")

    async def _on_resigned(self) -> None:
        """Kafka's onControllerResignation."""
        core, self._core = self._core, None
        if self._store is not None:
            self._store.fence(None)
        if self._rebalance is not None:
            self._rebalance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rebalance
            self._rebalance = None
        if core is not None:
            await core.close()
            for broker_id in list(core.context.live_brokers):
                self.channel.remove_broker(broker_id)
            log.info("[Controller id=%d] Resigned as the controller (epoch %d)",
                     self.settings.broker_id, core.controller_epoch)

    async def _rebalance_loop(self, core: ZkControllerCore) -> None:
        delay = FIRST_REBALANCE_DELAY_S
        while True:
            await asyncio.sleep(delay)
            core.events.put(AutoPreferredReplicaLeaderElection())
            delay = self.settings.imbalance_check_interval_s

    def set_unclean_leader_election(self, enabled: bool) -> None:
        """The broker-level unclean.leader.election.enable changed (a dynamic broker config):
        this controller, and any later one here, elects with it; turned on, offline
        partitions are elected again at once (Kafka's UncleanLeaderElectionEnable event)."""
        was = self.settings.unclean_leader_election
        self.settings = replace(self.settings, unclean_leader_election=enabled)
        core = self._core
        if core is None:
            return
        core.unclean_leader_election = enabled
        if enabled and not was:
            core.events.put(UncleanLeaderElectionEnable())

    # ------------------------------------------------------------ events

    async def _on_event(self, event: object) -> None:
        """The session's queue hands over what is not its own: ``/brokers/ids`` changes."""
        if not isinstance(event, ZkWatchFired) or self._core is None or not self.is_active:
            return
        core = self._core
        if event.kind == "brokers":
            core.events.put(BrokerChange())
        elif event.kind == "log_dir_events":
            zk = self.session.zk
            brokers = await take_log_dir_events(zk, zk.watch("log_dir_events"),
                                                self._epoch_zk_version)
            if brokers and core is self._core:
                core.events.put(BrokerLogDirFailure(tuple(brokers)))

    def _on_reconnected(self) -> None:
        """The session reconnected: kazoo dropped the ``/brokers/ids`` watch, and a change
        fired while suspended was refused; reconcile (re-reading sets the watch again)."""
        if self._core is not None:
            for event in (BrokerChange(), TopicsChanged(), DeletionsRequested()):
                self._core.events.put(event)
            self.session.events.put(ZkWatchFired("log_dir_events"))

    # TopicStoreWatcher: notifications become the current core's events.

    def on_topics_changed(self) -> None:
        if self._core is not None:
            self._core.events.put(TopicsChanged())

    def on_partitions_changed(self, topic: str) -> None:
        if self._core is not None:
            self._core.events.put(PartitionsChanged(topic))

    def on_deletions_requested(self) -> None:
        if self._core is not None:
            self._core.events.put(DeletionsRequested())

    def on_configs_changed(self, topic: str) -> None:
        pass  # brokers apply configs; the controller reads them when it elects


"""How the controller speaks to brokers: LeaderAndIsr, UpdateMetadata, StopReplica only.

``ControllerChannel`` (Kafka's ``ControllerChannelManager``) keeps one FIFO per live
broker: ``send`` queues a request for one broker and returns a future of its response
(None when the broker was removed or could not be reached before the request went out).
Requests to one broker are delivered in the order sent; the controller never waits on one
broker to talk to another. Two implementations:

- ``controller.local.InProcessChannel``: delivers to a broker in the same process (the
  request is encoded and decoded at its version on the way, as on the wire);
- a network channel over the project's client (a cluster): the same requests on a
  connection per broker, to the broker's inter-broker listener.

``ControlRequestBatch`` (Kafka's ``ControllerBrokerRequestBatch``) gathers one controller
decision into at most one request of each kind per broker -- LeaderAndIsr to the replicas
of the partitions that changed, UpdateMetadata to every live broker, StopReplica to the
replicas being stopped -- and sends them, LeaderAndIsr and StopReplica before
UpdateMetadata, as Kafka does. Every request carries the controller id and epoch and the
receiving broker's epoch, which the broker checks (STALE_CONTROLLER_EPOCH,
STALE_BROKER_EPOCH).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeAlias

from controller.leader_and_isr import LeaderIsrAndControllerEpoch
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.topic_partition import TopicPartition

# The versions the controller sends (Kafka 3.9's with inter.broker.protocol.version 3.9).
LEADER_AND_ISR_VERSION: Final = 7
UPDATE_METADATA_VERSION: Final = 8
STOP_REPLICA_VERSION: Final = 4

ControlRequest: TypeAlias = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
ControlResponse: TypeAlias = LeaderAndIsrResponse | UpdateMetadataResponse | StopReplicaResponse

_LaiR = LeaderAndIsrRequest
_UmR = UpdateMetadataRequest
_SrR = StopReplicaRequest


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    listener: str
    host: str
    port: int
    security_protocol: int = 0  # 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker as the controller knows it (``/brokers/ids/<id>`` in ZooKeeper).

    ``epoch`` is the broker epoch (the registration znode's czxid in a cluster): it goes
    in every request to that broker, which refuses requests meant for an older epoch."""

    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    epoch: int = -1

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        for e in self.endpoints:
            if e.listener == listener:
                return e
        return None


class ControllerChannel(Protocol):
    def add_broker(self, broker: BrokerRegistration) -> None: ...

    def remove_broker(self, broker_id: int) -> None:
        """Drop the broker's queue; its queued requests resolve to None."""
        ...

    def send(self, broker_id: int,
             request: ControlRequest) -> asyncio.Future[ControlResponse | None]: ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class _PartitionUpdate:
    tp: TopicPartition
    state: LeaderIsrAndControllerEpoch
    replicas: tuple[int, ...]
    is_new: bool = False


@dataclass(slots=True)
class ControlRequestBatch:
    """One controller decision's requests; ``send_all`` empties it."""

    controller_id: int
    controller_epoch: int
    inter_broker_listener: str
    leader_and_isr: dict[int, dict[TopicPartition, _PartitionUpdate]] = field(default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: dict[TopicPartition, _PartitionUpdate] = field(default_factory=dict)
    stop_replica: dict[int, dict[TopicPartition, tuple[int, bool]]] = field(default_factory=dict)

    def add_leader_and_isr(self, brokers: Iterable[int], tp: TopicPartition,
                           state: LeaderIsrAndControllerEpoch, replicas: Iterable[int],
                           *, is_new: bool = False) -> None:
        """LeaderAndIsr for ``tp`` to ``brokers``; UpdateMetadata for it to every broker."""
        update = _PartitionUpdate(tp, state, tuple(replicas), is_new)
        for broker in brokers:
            self.leader_and_isr.setdefault(broker, {})[tp] = update
        self.update_metadata_partitions[tp] = update

    def add_update_metadata(self, brokers: Iterable[int], tp: TopicPartition | None = None,
                            state: LeaderIsrAndControllerEpoch | None = None,
                            replicas: Iterable[int] = ()) -> None:
        """UpdateMetadata to ``brokers`` (with ``tp``'s state, if given)."""
        self.update_metadata_brokers.update(brokers)
        if tp is not None and state is not None:
            self.update_metadata_partitions[tp] = _PartitionUpdate(tp, state, tuple(replicas))

    def add_stop_replica(self, brokers: Iterable[int], tp: TopicPartition, *,
                         delete: bool, leader_epoch: int) -> None:
        for broker in brokers:
            self.stop_replica.setdefault(broker, {})[tp] = (leader_epoch, delete)

    def send_all(self, channel: ControllerChannel, live: Mapping[int, BrokerRegistration],
                 topic_ids: Callable[[str], uuid.UUID],
                 offline_dirs: Mapping[int, Collection[TopicPartition]] | None = None,
                 ) -> list[tuple[int, ControlRequest, asyncio.Future[ControlResponse | None]]]:
        """Send every gathered request to the live brokers it names; returns (broker,
        request, response future) for each request sent. The batch is empty after.
        UpdateMetadata lists as offline the replicas on brokers that are not live and
        those in ``offline_dirs`` (broker -> partitions in its failed log dirs)."""
        sent: list[tuple[int, ControlRequest, asyncio.Future[ControlResponse | None]]] = []

        def send(broker_id: int, request: ControlRequest) -> None:
            sent.append((broker_id, request, channel.send(broker_id, request)))

        # A partition's update is the same in each of its replicas' LeaderAndIsr (one
        # ``_PartitionUpdate`` object): its state is built once and shared, read-only, by
        # the requests that carry it. Keyed by the update's id (the batch holds them).
        lai_states: dict[int, _LaiR.LeaderAndIsrPartitionState] = {}
        for broker_id, updates in sorted(self.leader_and_isr.items()):
            target = live.get(broker_id)
            if target is not None:
                send(broker_id, self._leader_and_isr(target, updates.values(), live, topic_ids,
                                                     lai_states))
        for broker_id, stops in sorted(self.stop_replica.items()):
            target = live.get(broker_id)
            if target is not None:
                send(broker_id, self._stop_replica(target, stops))
        if self.update_metadata_partitions:
            self.update_metadata_brokers.update(live)
        # Every broker gets the same UpdateMetadata but for its broker epoch: its topics and
        # brokers are built once (thousands of partitions) and shared, read-only.
        body: tuple[list[_UmR.UpdateMetadataTopicState], list[_UmR.UpdateMetadataBroker]] | None
        body = None
        for broker_id in sorted(self.update_metadata_brokers):
            target = live.get(broker_id)
            if target is not None:
                if body is None:
                    body = self._update_metadata_body(live, topic_ids, offline_dirs or {})
                send(broker_id, UpdateMetadataRequest(
                    controller_id=self.controller_id, controller_epoch=self.controller_epoch,
                    broker_epoch=target.epoch, topic_states=body[0], live_brokers=body[1]))
        self.leader_and_isr.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()
        self.stop_replica.clear()
        return sent

    # ------------------------------------------------------------ request bodies

    def _leader_and_isr(self, target: BrokerRegistration, updates: Iterable[_PartitionUpdate],
                        live: Mapping[int, BrokerRegistration],
                        topic_ids: Callable[[str], uuid.UUID],
                        built: dict[int, _LaiR.LeaderAndIsrPartitionState],
                        ) -> LeaderAndIsrRequest:
        """``built``: the partition states made for other brokers' requests of this batch
        (taken from and added to)."""
        by_topic: dict[str, list[_LaiR.LeaderAndIsrPartitionState]] = {}
        leaders: set[int] = set()
        for u in updates:
            lai = u.state.leader_and_isr
            leaders.add(lai.leader)
            state = built.get(id(u))
            if state is None:
                state = built[id(u)] = _LaiR.LeaderAndIsrPartitionState(
                    topic_name=u.tp.topic, partition_index=u.tp.partition,
                    controller_epoch=u.state.controller_epoch, leader=lai.leader,
                    leader_epoch=lai.leader_epoch, isr=list(lai.isr),
                    partition_epoch=lai.partition_epoch, replicas=list(u.replicas),
                    adding_replicas=[], removing_replicas=[], is_new=u.is_new,
                    leader_recovery_state=int(lai.leader_recovery_state))
            by_topic.setdefault(u.tp.topic, []).append(state)
        live_leaders = []
        for leader in sorted(leaders):
            broker = live.get(leader)
            endpoint = None if broker is None else broker.endpoint(self.inter_broker_listener)
            if endpoint is not None:
                live_leaders.append(_LaiR.LeaderAndIsrLiveLeader(
                    broker_id=leader, host_name=endpoint.host, port=endpoint.port))
        return LeaderAndIsrRequest(
            controller_id=self.controller_id, controller_epoch=self.controller_epoch,
            broker_epoch=target.epoch, type=0,
            topic_states=[_LaiR.LeaderAndIsrTopicState(topic_name=t, topic_id=topic_ids(t),
                                                       partition_states=states)
                          for t, states in sorted(by_topic.items())],
            live_leaders=live_leaders)

    def _update_metadata_body(
        self, live: Mapping[int, BrokerRegistration], topic_ids: Callable[[str], uuid.UUID],
        offline_dirs: Mapping[int, Collection[TopicPartition]],
    ) -> tuple[list[_UmR.UpdateMetadataTopicState], list[_UmR.UpdateMetadataBroker]]:
        """An UpdateMetadata's topic states and live brokers (the same for every broker)."""
        by_topic: dict[str, list[_UmR.UpdateMetadataPartitionState]] = {}
        for u in self.update_metadata_partitions.values():
            lai = u.state.leader_and_isr
            offline = [r for r in u.replicas
                       if r not in live or u.tp in offline_dirs.get(r, ())]
            by_topic.setdefault(u.tp.topic, []).append(_UmR.UpdateMetadataPartitionState(
                topic_name=u.tp.topic, partition_index=u.tp.partition,
                controller_epoch=u.state.controller_epoch, leader=lai.leader,
                leader_epoch=lai.leader_epoch, isr=list(lai.isr),
                zk_version=lai.partition_epoch, replicas=list(u.replicas),
                offline_replicas=offline))
        topic_states = [_UmR.UpdateMetadataTopicState(topic_name=t, topic_id=topic_ids(t),
                                                      partition_states=states)
                        for t, states in sorted(by_topic.items())]
        live_brokers = [_UmR.UpdateMetadataBroker(
            id=b.broker_id, rack=b.rack,
            endpoints=[_UmR.UpdateMetadataEndpoint(port=e.port, host=e.host,
                                                   listener=e.listener,
                                                   security_protocol=e.security_protocol)
                       for e in b.endpoints])
            for b in (live[i] for i in sorted(live))]
        return topic_states, live_brokers

    def _stop_replica(self, target: BrokerRegistration,
                      stops: Mapping[TopicPartition, tuple[int, bool]]) -> StopReplicaRequest:
        by_topic: dict[str, list[_SrR.StopReplicaPartitionState]] = {}
        for tp, (leader_epoch, delete) in stops.items():
            by_topic.setdefault(tp.topic, []).append(_SrR.StopReplicaPartitionState(
                partition_index=tp.partition, leader_epoch=leader_epoch,
                delete_partition=delete))
        return StopReplicaRequest(
            controller_id=self.controller_id, controller_epoch=self.controller_epoch,
            broker_epoch=target.epoch,
            topic_states=[_SrR.StopReplicaTopicState(topic_name=t, partition_states=states)
                          for t, states in sorted(by_topic.items())])

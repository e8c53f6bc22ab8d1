"""controller.zk.ZkController on a real ZooKeeper: three brokers' controllers in one process,
each reaching the brokers through an in-process channel (requests pass their wire codec).

The "brokers" here are receivers that keep a real ``MetadataCache`` from the UpdateMetadata
they get and the last LeaderAndIsr state per partition, and refuse a controller epoch older
than one they saw (STALE_CONTROLLER_EPOCH), as brokers do. What is checked is the
controller's side: election, epochs, the state znodes, who is told what.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from broker.metadata_cache import MetadataCache
from controller import zk_data as zd
from controller.channel import ControlRequest
from controller.local import InProcessChannel
from controller.topic_store import TopicRecord
from controller.zk import ZkController, ZkControllerSettings
from controller.zk_core import PREFERRED, UNCLEAN
from controller.zk_session import ZkSettings
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.stop_replica import StopReplicaResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.topic_partition import TopicPartition
from tests.cluster.zk_support import expire_session

pytestmark = pytest.mark.timeout(120)
BROKER_IDS = (1, 2, 3)

Response = LeaderAndIsrResponse | UpdateMetadataResponse | StopReplicaResponse


class Receiver:
    """A broker's side of the three control APIs, as far as these tests need."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.cache = MetadataCache(broker_id)
        self.leader_and_isr: dict[TopicPartition, LeaderAndIsrRequest.LeaderAndIsrPartitionState] = {}
        self.stopped: list[TopicPartition] = []
        self.controller_epoch = 0
        self.refused = 0

    async def __call__(self, request: ControlRequest) -> Response:
        if request.controller_epoch < self.controller_epoch:
            self.refused += 1
            stale = ErrorCode.STALE_CONTROLLER_EPOCH
            if isinstance(request, UpdateMetadataRequest):
                return UpdateMetadataResponse(error_code=stale)
            if isinstance(request, LeaderAndIsrRequest):
                return LeaderAndIsrResponse(error_code=stale)
            return StopReplicaResponse(error_code=stale)
        self.controller_epoch = request.controller_epoch
        if isinstance(request, UpdateMetadataRequest):
            self.cache.update_metadata(request)
            return UpdateMetadataResponse()
        if isinstance(request, LeaderAndIsrRequest):
            for topic in request.topic_states:
                for p in topic.partition_states:
                    self.leader_and_isr[TopicPartition(topic.topic_name, p.partition_index)] = p
            return LeaderAndIsrResponse()
        for topic in request.topic_states:
            for p in topic.partition_states:
                self.stopped.append(TopicPartition(topic.topic_name, p.partition_index))
        return StopReplicaResponse(partition_errors=[
            StopReplicaResponse.StopReplicaPartitionError(t.topic_name, p.partition_index, 0)
            for t in request.topic_states for p in t.partition_states])

    def leader(self, tp: TopicPartition) -> int | None:
        info = self.cache.partition_info(tp.topic, tp.partition)
        return None if info is None else info.leader


class Cluster:
    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.receivers = {i: Receiver(i) for i in BROKER_IDS}
        self.controllers: dict[int, ZkController] = {}

    async def start(self, broker_id: int, **settings: object) -> ZkController:
        channel = InProcessChannel()
        for i, receiver in self.receivers.items():
            channel.register_handler(i, receiver)
        controller = ZkController(
            ZkControllerSettings(broker_id, ZkSettings(self.connect, session_timeout_ms=6000),
                                 **settings),  # type: ignore[arg-type]
            lambda: zd.BrokerRegistration(
                broker_id, (zd.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),),
                int(time.time() * 1000), rack=f"r{broker_id}"),
            channel)
        await controller.connect(None, "meta.properties", "cluster-a")
        await controller.startup()
        self.controllers[broker_id] = controller
        return controller

    def active(self) -> list[int]:
        return [i for i, c in self.controllers.items() if c.is_active]

    async def wait_active(self, exclude: int | None = None) -> ZkController:
        def one() -> bool:
            active = [i for i in self.active() if i != exclude]
            return len(active) == 1
        await wait_for(one, "one active controller")
        (broker_id,) = [i for i in self.active() if i != exclude]
        return self.controllers[broker_id]

    async def stop(self, broker_id: int) -> None:
        await self.controllers.pop(broker_id).shutdown()


@pytest.fixture
async def cluster(zk_connect: str) -> AsyncIterator[Cluster]:
    c = Cluster(zk_connect)
    yield c
    for broker_id in list(c.controllers):
        await c.stop(broker_id)


async def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


TOPIC = "orders"
PARTITIONS = {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}


async def create_topic(controller: ZkController) -> None:
    await controller.store.create_topic(TopicRecord(TOPIC, uuid.uuid4(), PARTITIONS), {})


def leaders_everywhere(cluster: Cluster, expected: dict[int, int]) -> bool:
    return all(r.leader(TopicPartition(TOPIC, p)) == leader
               for r in cluster.receivers.values() if r.broker_id in cluster.controllers
               for p, leader in expected.items())


async def test_election_topic_creation_and_metadata(cluster: Cluster) -> None:
    for i in BROKER_IDS:
        await cluster.start(i)
    controller = await cluster.wait_active()
    assert controller.controller_epoch == 1
    await wait_for(lambda: all(sorted(b.broker_id for b in r.cache.alive_brokers()) == [1, 2, 3]
                               for r in cluster.receivers.values()),
                   "every broker to know every broker")
    await create_topic(cluster.controllers[1])  # any broker writes the topic
    await wait_for(lambda: leaders_everywhere(cluster, {0: 1, 1: 2, 2: 3}), "leaders")
    for receiver in cluster.receivers.values():
        for p, replicas in PARTITIONS.items():
            state = receiver.leader_and_isr[TopicPartition(TOPIC, p)]
            assert (state.leader, state.leader_epoch, state.isr, state.replicas) == (
                replicas[0], 0, list(replicas), list(replicas))
            assert receiver.cache.controller_id == controller.settings.broker_id
    states = await controller.store.partition_states(
        [TopicPartition(TOPIC, p) for p in PARTITIONS])
    assert {tp.partition: (s.leader_and_isr.leader, s.controller_epoch)
            for tp, s in states.items()} == {0: (1, 1), 1: (2, 1), 2: (3, 1)}


async def test_broker_loss_return_and_elections(cluster: Cluster) -> None:
    for i in BROKER_IDS:
        await cluster.start(i)
    controller = await cluster.wait_active()
    await create_topic(controller)
    await wait_for(lambda: leaders_everywhere(cluster, {0: 1, 1: 2, 2: 3}), "leaders")
    # Lose a broker that is not the controller (its session ends).
    lost = next(i for i in BROKER_IDS if i != controller.settings.broker_id)
    await cluster.stop(lost)
    moved = {p: next(r for r in replicas if r != lost)
             for p, replicas in PARTITIONS.items() if replicas[0] == lost}
    expected = {p: replicas[0] for p, replicas in PARTITIONS.items()} | moved
    await wait_for(lambda: leaders_everywhere(cluster, expected), "new leaders from the ISR")
    states = await controller.store.partition_states(
        [TopicPartition(TOPIC, p) for p in PARTITIONS])
    for state in states.values():
        lai = state.leader_and_isr
        assert lost not in lai.isr  # it left every ISR
        assert lai.leader_epoch == 1  # one change each: a new leader, or a smaller ISR
    # It comes back: it hears of everything and follows; it is not in the ISR (nothing
    # brings it back before replication exists), so a preferred election cannot pick it.
    await cluster.start(lost)
    receiver = cluster.receivers[lost]
    (p_moved,) = moved
    # Kafka's order on a broker's return: UpdateMetadata first, then LeaderAndIsr for the
    # replicas it hosts; wait for both to have arrived.
    moved_tp = TopicPartition(TOPIC, p_moved)

    def learned() -> bool:
        lai = receiver.leader_and_isr.get(moved_tp)
        return (receiver.leader(moved_tp) == moved[p_moved]
                and lai is not None and lai.leader == moved[p_moved])

    await wait_for(learned, "the returning broker to learn the leaders")
    outcome = await controller.elect_leaders(PREFERRED, None)
    assert outcome[TopicPartition(TOPIC, p_moved)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert {outcome[TopicPartition(TOPIC, p)][0] for p in PARTITIONS if p != p_moved} == {
        ErrorCode.ELECTION_NOT_NEEDED}
    # What replication will do once the returning broker has caught up: its leader asks
    # for it to rejoin the ISR (AlterPartition). Then the preferred election moves back.
    tp = TopicPartition(TOPIC, p_moved)
    state = (await controller.store.partition_states([tp]))[tp].leader_and_isr
    leader_id = moved[p_moved]
    leader_epoch = cluster.controllers[leader_id].broker_epoch
    grown = sorted({*state.isr, lost})

    def alter(isr: list[int], *, broker_epoch: int = leader_epoch, epoch: int = state.leader_epoch,
              partition_epoch: int = state.partition_epoch) -> AlterPartitionRequest:
        return AlterPartitionRequest(broker_id=leader_id, broker_epoch=broker_epoch, topics=[
            AlterPartitionRequest.TopicData(topic_name=TOPIC, partitions=[
                AlterPartitionRequest.PartitionData(
                    partition_index=p_moved, leader_epoch=epoch, new_isr=isr,
                    partition_epoch=partition_epoch)])])

    def result(response: AlterPartitionResponse) -> tuple[int, int, list[int]]:
        (topic,) = response.topics
        (part,) = topic.partitions
        return part.error_code, part.partition_epoch, part.isr

    stale = await controller.alter_partition(alter(grown, broker_epoch=leader_epoch - 1), 1)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    fenced = await controller.alter_partition(alter(grown, epoch=state.leader_epoch - 1), 1)
    assert result(fenced)[0] == ErrorCode.FENCED_LEADER_EPOCH
    ineligible = await controller.alter_partition(alter([*grown, 99]), 1)
    assert result(ineligible)[0] == ErrorCode.OPERATION_NOT_ATTEMPTED
    ok = await controller.alter_partition(alter(grown), 1)
    assert result(ok) == (ErrorCode.NO_ERROR, state.partition_epoch + 1, grown)
    again = await controller.alter_partition(alter(grown), 1)  # a retry: the current state
    assert result(again) == (ErrorCode.NO_ERROR, state.partition_epoch + 1, grown)
    conflict = await controller.alter_partition(alter(list(state.isr)), 1)  # stale version
    assert result(conflict)[0] == ErrorCode.INVALID_UPDATE_VERSION
    back = await controller.elect_leaders(PREFERRED, frozenset({tp}))
    assert back == {tp: (ErrorCode.NO_ERROR, None)}
    await wait_for(lambda: leaders_everywhere(cluster, {p: r[0] for p, r in PARTITIONS.items()}),
                   "the preferred leaders back")
    unclean = await controller.elect_leaders(UNCLEAN, frozenset({TopicPartition(TOPIC, 0)}))
    assert unclean[TopicPartition(TOPIC, 0)][0] == ErrorCode.ELECTION_NOT_NEEDED
    missing = await controller.elect_leaders(PREFERRED, frozenset({TopicPartition("nope", 0)}))
    assert missing[TopicPartition("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_controlled_shutdown_moves_leadership_first(cluster: Cluster) -> None:
    for i in BROKER_IDS:
        await cluster.start(i)
    controller = await cluster.wait_active()
    await create_topic(controller)
    await wait_for(lambda: leaders_everywhere(cluster, {0: 1, 1: 2, 2: 3}), "leaders")
    leaving = next(i for i in BROKER_IDS if i != controller.settings.broker_id)
    epoch = cluster.controllers[leaving].broker_epoch
    error, remaining = await controller.controlled_shutdown(leaving, epoch - 1)
    assert (error, remaining) == (ErrorCode.STALE_BROKER_EPOCH, [])
    error, remaining = await controller.controlled_shutdown(leaving, epoch)
    assert (error, remaining) == (ErrorCode.NO_ERROR, [])
    led_before = [p for p, r in PARTITIONS.items() if r[0] == leaving]
    states = await controller.store.partition_states(
        [TopicPartition(TOPIC, p) for p in PARTITIONS])
    for state in states.values():
        assert state.leader_and_isr.leader != leaving and leaving not in state.leader_and_isr.isr
    # The partitions it followed were stopped on it (not deleted). StopReplica goes out as
    # Kafka sends it, without waiting for the answer, so it may land after the reply.
    followed = sorted(TopicPartition(TOPIC, p) for p in PARTITIONS if p not in led_before)
    await wait_for(lambda: len(cluster.receivers[leaving].stopped) >= len(followed),
                   "StopReplica for the followed partitions")
    assert sorted(cluster.receivers[leaving].stopped) == followed
    other = next(i for i in BROKER_IDS if i not in (leaving, controller.settings.broker_id))
    assert await cluster.controllers[other].controlled_shutdown(other, 0) == (
        ErrorCode.NOT_CONTROLLER, [])


async def test_controller_failover_fences_the_old_epoch(cluster: Cluster) -> None:
    for i in BROKER_IDS:
        await cluster.start(i)
    old = await cluster.wait_active()
    await create_topic(old)
    await wait_for(lambda: leaders_everywhere(cluster, {0: 1, 1: 2, 2: 3}), "leaders")
    old_id = old.settings.broker_id
    await asyncio.to_thread(expire_session, old.session.zk._kazoo)
    assert not old.is_active  # at once
    new = await cluster.wait_active(exclude=old_id)
    assert new.controller_epoch == 2
    # Everyone hears from the new controller (its failover resends the metadata).
    await wait_for(lambda: all(r.controller_epoch == 2 for r in cluster.receivers.values()),
                   "every broker to see epoch 2")
    await wait_for(lambda: all(r.cache.controller_id == new.settings.broker_id
                               for r in cluster.receivers.values()),
                   "every broker to know the new controller")
    # The old controller came back as a follower of the election, without a core.
    await wait_for(lambda: old.core is None and old.session.broker_epoch > 0
                   and old.session.election.active_controller_id == new.settings.broker_id,
                   "the old controller to resign and follow")
    assert (await old.controlled_shutdown(old_id, old.broker_epoch))[0] == ErrorCode.NOT_CONTROLLER

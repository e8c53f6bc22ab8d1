"""controller.local: the single-node controller's requests, as a broker receives them
through the in-process channel (decoded from their wire encoding), and what it stores."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from controller.channel import BrokerEndpoint, BrokerRegistration, ControlRequest
from controller.leader_and_isr import EPOCH_DURING_DELETE, LEADER_DURING_DELETE
from controller.local import LOCAL_CONTROLLER_EPOCH, InProcessChannel, LocalController
from controller.local_store import LocalTopicStore
from controller.topic_store import TopicRecord
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.topic_partition import TopicPartition

pytestmark = pytest.mark.timeout(20)
BROKER = BrokerRegistration(3, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092),), "r1", 42)


class Receiver:
    """Answers like a broker that accepts everything, and remembers what it got."""

    def __init__(self) -> None:
        self.got: list[ControlRequest] = []
        self.at_startup: list[ControlRequest] = []
        self.changed = asyncio.Event()

    async def __call__(self, request: ControlRequest) -> (
            LeaderAndIsrResponse | UpdateMetadataResponse | StopReplicaResponse):
        self.got.append(request)
        self.changed.set()
        if isinstance(request, StopReplicaRequest):
            return StopReplicaResponse(partition_errors=[
                StopReplicaResponse.StopReplicaPartitionError(t.topic_name, p.partition_index, 0)
                for t in request.topic_states for p in t.partition_states])
        if isinstance(request, LeaderAndIsrRequest):
            return LeaderAndIsrResponse()
        return UpdateMetadataResponse()

    async def wait_for(self, kind: type, count: int) -> list[ControlRequest]:
        for _ in range(200):
            found = [r for r in self.got if isinstance(r, kind)]
            if len(found) >= count:
                return found
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 5)
        raise AssertionError(f"no {count} {kind.__name__}")


async def start(tmp_path: Path) -> tuple[LocalController, LocalTopicStore, Receiver]:
    store = LocalTopicStore.load(tmp_path, BROKER.broker_id)
    channel = InProcessChannel()
    receiver = Receiver()
    channel.register_handler(BROKER.broker_id, receiver)
    controller = LocalController(broker=BROKER, store=store, channel=channel,
                                 inter_broker_listener="PLAINTEXT")
    await controller.startup()
    receiver.at_startup, receiver.got = receiver.got, []
    return controller, store, receiver


async def test_new_topic_is_elected_stored_and_announced(tmp_path: Path) -> None:
    controller, store, receiver = await start(tmp_path)
    (first,) = receiver.at_startup  # an empty cluster: its live brokers
    assert isinstance(first, UpdateMetadataRequest) and not first.topic_states
    assert [b.id for b in first.live_brokers] == [3]
    topic_id = uuid.uuid4()
    await store.create_topic(TopicRecord("t", topic_id, {0: (3,), 1: (3,)}), {})
    (lai,) = await receiver.wait_for(LeaderAndIsrRequest, 1)
    (um,) = await receiver.wait_for(UpdateMetadataRequest, 1)
    assert receiver.got.index(lai) < receiver.got.index(um)
    assert isinstance(lai, LeaderAndIsrRequest) and isinstance(um, UpdateMetadataRequest)
    assert (lai.controller_id, lai.controller_epoch, lai.broker_epoch) == (
        3, LOCAL_CONTROLLER_EPOCH, 42)
    (topic,) = lai.topic_states
    assert topic.topic_name == "t" and topic.topic_id == topic_id
    assert [(s.partition_index, s.leader, s.leader_epoch, s.isr, s.replicas, s.is_new)
            for s in topic.partition_states] == [(0, 3, 0, [3], [3], True),
                                                 (1, 3, 0, [3], [3], True)]
    assert [(b.broker_id, b.host_name, b.port) for b in lai.live_leaders] == [
        (3, "127.0.0.1", 9092)]
    assert [(b.id, b.rack, [(e.listener, e.port) for e in b.endpoints])
            for b in um.live_brokers] == [(3, "r1", [("PLAINTEXT", 9092)])]
    (umt,) = um.topic_states
    assert umt.topic_id == topic_id and len(umt.partition_states) == 2
    states = await store.partition_states([TopicPartition("t", 0), TopicPartition("t", 1)])
    assert {tp: (s.leader_and_isr.leader, s.leader_and_isr.leader_epoch, s.controller_epoch)
            for tp, s in states.items()} == {("t", 0): (3, 0, 1), ("t", 1): (3, 0, 1)}
    await controller.shutdown()


async def test_restart_resends_state_without_new_epochs(tmp_path: Path) -> None:
    controller, store, receiver = await start(tmp_path)
    await store.create_topic(TopicRecord("t", uuid.uuid4(), {0: (3,)}), {})
    await receiver.wait_for(UpdateMetadataRequest, 1)
    await controller.shutdown()
    again, _store, receiver2 = await start(tmp_path)
    kinds = [type(r).__name__ for r in receiver2.at_startup]
    # As Kafka's failover: everything in UpdateMetadata, then LeaderAndIsr to the replicas
    # (with its own UpdateMetadata, as every LeaderAndIsr batch has).
    assert kinds == ["UpdateMetadataRequest", "LeaderAndIsrRequest", "UpdateMetadataRequest"]
    lai = receiver2.at_startup[1]
    assert isinstance(lai, LeaderAndIsrRequest)
    state = lai.topic_states[0].partition_states[0]
    assert (state.leader, state.leader_epoch, state.is_new) == (3, 0, False)
    await again.shutdown()


async def test_partition_increase_and_deletion(tmp_path: Path) -> None:
    controller, store, receiver = await start(tmp_path)
    record = TopicRecord("t", uuid.uuid4(), {0: (3,)})
    await store.create_topic(record, {})
    await receiver.wait_for(UpdateMetadataRequest, 1)
    await store.set_assignment(TopicRecord("t", record.topic_id, {0: (3,), 1: (3,)}))
    lais = await receiver.wait_for(LeaderAndIsrRequest, 2)
    assert isinstance(lais[1], LeaderAndIsrRequest)
    assert [s.partition_index for s in lais[1].topic_states[0].partition_states] == [1]
    await receiver.wait_for(UpdateMetadataRequest, 2)
    await store.mark_for_deletion("t")
    (stop,) = await receiver.wait_for(StopReplicaRequest, 1)
    assert isinstance(stop, StopReplicaRequest)
    assert [(p.partition_index, p.leader_epoch, p.delete_partition)
            for p in stop.topic_states[0].partition_states] == [
        (0, EPOCH_DURING_DELETE, True), (1, EPOCH_DURING_DELETE, True)]
    ums = await receiver.wait_for(UpdateMetadataRequest, 3)
    gone = ums[2]
    assert isinstance(gone, UpdateMetadataRequest)
    assert {s.leader for s in gone.topic_states[0].partition_states} == {LEADER_DURING_DELETE}
    assert await store.topic_names() == set()  # removed before the brokers were told
    await controller.shutdown()


@pytest.mark.broker_errors(r"broker 3 refused StopReplica for t: STALE_CONTROLLER_EPOCH")
async def test_failed_stop_replica_keeps_the_topic_marked(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    controller, store, receiver = await start(tmp_path)
    await store.create_topic(TopicRecord("t", uuid.uuid4(), {0: (3,)}), {})
    await receiver.wait_for(UpdateMetadataRequest, 1)

    async def refuse(request: ControlRequest) -> StopReplicaResponse:
        receiver.got.append(request)
        receiver.changed.set()
        return StopReplicaResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH)

    controller.channel.register_handler(3, refuse)
    await store.mark_for_deletion("t")
    await receiver.wait_for(StopReplicaRequest, 1)
    # The refusal reaches the controller once its answer is decoded (in a worker thread).
    for _ in range(500):
        if "refused StopReplica for t" in caplog.text:
            break
        await asyncio.sleep(0.01)
    await controller.core.events.wait_idle()
    assert await store.topics_marked_for_deletion() == {"t"}
    await controller.shutdown()


async def test_wire_round_trips_of_a_big_request_leave_the_loop_free() -> None:
    """The in-process channel encodes and decodes each request (as the wire would carry it)
    in a worker thread: an UpdateMetadata of 20,000 partitions takes a long time there, and
    a task on the loop keeps waking meanwhile, its longest stretch of loop CPU far below
    the round trip's. Before, the round trip ran on the loop in one go."""
    from controller.local import _wire

    request = UpdateMetadataRequest(controller_id=3, controller_epoch=1, broker_epoch=42,
                                    topic_states=[
        UpdateMetadataRequest.UpdateMetadataTopicState(
            topic_name=f"t{t}", topic_id=uuid.uuid4(), partition_states=[
                UpdateMetadataRequest.UpdateMetadataPartitionState(
                    topic_name=f"t{t}", partition_index=p, controller_epoch=1, leader=3,
                    leader_epoch=0, isr=[3], zk_version=0, replicas=[3], offline_replicas=[])
                for p in range(1000)])
        for t in range(20)])
    cpu0 = time.thread_time()
    _wire(request)
    wire_cpu_s = time.thread_time() - cpu0
    channel = InProcessChannel()
    receiver = Receiver()
    channel.register_handler(BROKER.broker_id, receiver)
    channel.add_broker(BROKER)
    longest_cpu_s = 0.0
    wakeups = 0

    async def ticker() -> None:
        nonlocal longest_cpu_s, wakeups
        while True:
            cpu = time.thread_time()
            await asyncio.sleep(0.001)
            wakeups += 1
            longest_cpu_s = max(longest_cpu_s, time.thread_time() - cpu)

    task = asyncio.get_running_loop().create_task(ticker())
    await asyncio.sleep(0)
    try:
        response = await asyncio.wait_for(channel.send(BROKER.broker_id, request), 15)
    finally:
        task.cancel()
        await channel.close()
    assert isinstance(response, UpdateMetadataResponse)
    (got,) = receiver.got
    assert got == _wire(request)  # as decoded from its encoding
    assert wakeups >= 5
    assert longest_cpu_s < wire_cpu_s / 4, (
        f"the loop ran {longest_cpu_s * 1000:.1f} ms without a break; the round trip takes "
        f"{wire_cpu_s * 1000:.1f} ms")

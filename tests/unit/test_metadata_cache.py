"""broker.metadata_cache: filled only by UpdateMetadata requests (built by the controller's
request batch and passed through the wire codec at the versions brokers accept)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from broker.metadata_cache import MetadataCache
from controller.channel import BrokerEndpoint, BrokerRegistration, ControlRequestBatch
from controller.leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.topic_partition import TopicPartition

T1, T2 = uuid.uuid4(), uuid.uuid4()
IDS = {"orders": T1, "logs": T2}


def broker(i: int, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(i, (BrokerEndpoint("PLAINTEXT", f"h{i}", 9000 + i),), rack, 7)


def state(leader: int, epoch: int, isr: tuple[int, ...]) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, isr, partition_epoch=3), 5)


def update(live: list[BrokerRegistration],
           partitions: dict[TopicPartition, tuple[LeaderIsrAndControllerEpoch, tuple[int, ...]]],
           version: int = 8, ids: dict[str, uuid.UUID] = IDS) -> UpdateMetadataRequest:
    batch = ControlRequestBatch(controller_id=1, controller_epoch=5,
                                inter_broker_listener="PLAINTEXT")
    by_id = {b.broker_id: b for b in live}
    for tp, (s, replicas) in partitions.items():
        batch.add_update_metadata(by_id, tp, s, replicas)
    if not partitions:
        batch.add_update_metadata(by_id)
    requests: list[UpdateMetadataRequest] = []

    class Capture:
        def send(self, broker_id: int, request: object) -> object:
            if broker_id == 0 and isinstance(request, UpdateMetadataRequest):
                requests.append(request)
            return None

    batch.send_all(Capture(), by_id, lambda t: ids.get(t, uuid.UUID(int=0)))  # type: ignore[arg-type]
    (request,) = requests
    return UpdateMetadataRequest.decode(request.encode(version), version)


@pytest.mark.parametrize("version", [7, 8])
def test_update_fills_brokers_partitions_and_ids(version: int) -> None:
    cache = MetadataCache(broker_id=0)
    live = [broker(0, "r0"), broker(1, "r1")]
    deleted = cache.update_metadata(update(live, {
        TopicPartition("orders", 0): (state(1, 4, (1, 0)), (1, 0, 2)),
        TopicPartition("orders", 1): (state(0, 2, (0,)), (0, 1)),
        TopicPartition("logs", 0): (state(0, 0, (0,)), (0,)),
    }, version))
    assert deleted == []
    assert cache.controller_id == 1
    assert [b.broker_id for b in cache.alive_brokers()] == [0, 1]
    b1 = cache.alive_broker(1)
    assert b1 is not None and b1.rack == "r1"
    assert b1.endpoint("PLAINTEXT") == BrokerEndpoint("PLAINTEXT", "h1", 9001, 0)
    assert cache.topic_names() == ["logs", "orders"]
    info = cache.partition_info("orders", 0)
    assert info is not None
    assert (info.leader, info.leader_epoch, info.isr, info.replicas, info.offline_replicas,
            info.zk_version, info.controller_epoch) == (1, 4, (1, 0), (1, 0, 2), (2,), 3, 5)
    assert cache.num_partitions("orders") == 2 and cache.contains(("orders", 1))
    assert not cache.contains(("orders", 2)) and not cache.contains_topic("nope")
    assert cache.topic_id("orders") == T1 and cache.topic_name(T2) == "logs"
    assert cache.topic_id("nope") == uuid.UUID(int=0)
    endpoint = cache.leader_endpoint("orders", 0, "PLAINTEXT")
    assert endpoint is not None and endpoint.port == 9001


def test_updates_are_incremental_and_brokers_replaced() -> None:
    cache = MetadataCache(broker_id=0)
    cache.update_metadata(update([broker(0), broker(1)], {
        TopicPartition("orders", 0): (state(1, 4, (1, 0)), (1, 0)),
        TopicPartition("orders", 1): (state(0, 2, (0,)), (0, 1)),
    }))
    before = cache.snapshot()
    cache.update_metadata(update([broker(0)], {
        TopicPartition("orders", 0): (state(0, 5, (0,)), (1, 0)),
    }))
    moved = cache.partition_info("orders", 0)
    kept = cache.partition_info("orders", 1)
    assert moved is not None and (moved.leader, moved.leader_epoch) == (0, 5)
    assert moved.offline_replicas == (1,)
    assert kept is not None and kept.leader_epoch == 2
    assert not cache.has_alive_broker(1)
    # A snapshot taken before is unchanged.
    assert before.partitions["orders"][0].leader == 1 and 1 in before.brokers


def test_leader_during_delete_removes_partitions_and_topic() -> None:
    cache = MetadataCache(broker_id=0)
    tps = {TopicPartition("orders", p): (state(0, 0, (0,)), (0,)) for p in range(2)}
    cache.update_metadata(update([broker(0)], tps))
    gone = LeaderIsrAndControllerEpoch(LeaderAndIsr.during_delete((0,)), 5)
    deleted = cache.update_metadata(update([broker(0)], {
        TopicPartition("orders", 0): (gone, (0,)), TopicPartition("orders", 1): (gone, (0,))}))
    assert sorted(deleted) == [("orders", 0), ("orders", 1)]
    assert not cache.contains_topic("orders") and cache.topic_name(T1) is None
    assert cache.topic_id("orders") == uuid.UUID(int=0)


def test_only_brokers_update_keeps_partitions() -> None:
    cache = MetadataCache(broker_id=0)
    cache.update_metadata(update([broker(0)], {
        TopicPartition("orders", 0): (state(0, 0, (0,)), (0,))}))
    cache.update_metadata(update([broker(0), broker(2)], {}))
    assert cache.contains(("orders", 0)) and cache.has_alive_broker(2)


async def test_off_loop_update_builds_in_a_thread_what_the_loop_would(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A large UpdateMetadata applied off the loop: the snapshot is built in a worker thread,
    and it, the deleted partitions and every lookup equal those of the same requests applied
    on the loop (new topics, an update to some of their partitions, a topic deleted)."""
    from broker import metadata_cache

    built_on: list[int] = []
    build = metadata_cache.updated_snapshot

    def spied(old: Any, request: UpdateMetadataRequest) -> Any:
        built_on.append(threading.get_ident())
        return build(old, request)

    monkeypatch.setattr(metadata_cache, "updated_snapshot", spied)
    live = [broker(0), broker(1)]
    requests = [
        update(live, {TopicPartition(t, p): (state(p % 2, 0, (0, 1)), (0, 1))
                      for t in ("orders", "logs") for p in range(600)}),
        update(live, {TopicPartition("orders", p): (state(1, 1, (1,)), (1, 0))
                      for p in range(0, 600, 3)}),
        update(live, {TopicPartition("logs", p): (LeaderIsrAndControllerEpoch(
            LeaderAndIsr.during_delete((0, 1)), 5), (0, 1)) for p in range(600)}),
    ]
    on_loop, off_loop = MetadataCache(broker_id=0), MetadataCache(broker_id=0)
    for request in requests:
        built_on.clear()
        deleted = on_loop.update_metadata(request)
        assert built_on == [threading.get_ident()]
        assert await off_loop.update_metadata_off_loop(request) == deleted
        assert built_on[1] != threading.get_ident()
        assert off_loop.snapshot() == on_loop.snapshot()
    assert deleted == [TopicPartition("logs", p) for p in range(600)]
    assert off_loop.topic_names() == ["orders"] and off_loop.topic_id("logs") == uuid.UUID(int=0)
    info = off_loop.partition_info("orders", 3)
    assert info is not None and (info.leader, info.leader_epoch, info.isr) == (1, 1, (1,))

"""controller.zk_store.ZkTopicStore on a real ZooKeeper: the TopicStore contract, Kafka's
znodes, the controller's fencing, and watches across two brokers' stores."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from controller import zk_data as zd
from controller.leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch
from controller.topic_store import NoSuchTopicError, TopicExistsError, TopicRecord
from controller.zk_client import ControllerMovedError, ZkClient
from controller.zk_registration import create_top_level_paths
from controller.zk_store import ZkTopicStore
from protocol.topic_partition import TopicPartition
from tests.cluster.conftest import KazooFactory

pytestmark = pytest.mark.timeout(120)


class Recorder:
    """A TopicStoreWatcher that writes down what it hears."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, str | None]] = []

    def on_topics_changed(self) -> None:
        self.heard.append(("topics", None))

    def on_partitions_changed(self, topic: str) -> None:
        self.heard.append(("partitions", topic))

    def on_deletions_requested(self) -> None:
        self.heard.append(("deletions", None))

    def on_configs_changed(self, topic: str) -> None:
        self.heard.append(("configs", topic))


@pytest.fixture
async def stores(zk_connect: str) -> AsyncIterator[Callable[[], asyncio.Future[ZkTopicStore]]]:
    opened: list[tuple[ZkClient, ZkTopicStore]] = []

    async def make() -> ZkTopicStore:
        zk = await ZkClient.connect(zk_connect, session_timeout_ms=6000)
        await create_top_level_paths(zk)
        store = ZkTopicStore(zk)
        opened.append((zk, store))
        return store

    yield make  # type: ignore[misc]
    for zk, store in opened:
        await store.close()
        await zk.close()


async def wait_heard(recorder: Recorder, item: tuple[str, str | None],
                     timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while item not in recorder.heard:
        assert time.monotonic() < deadline, f"never heard {item}; heard {recorder.heard}"
        await asyncio.sleep(0.02)


def state(leader: int, isr: tuple[int, ...], *, epoch: int = 0, partition_epoch: int = 0,
          controller_epoch: int = 1) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(
        LeaderAndIsr(leader, epoch, isr, partition_epoch=partition_epoch), controller_epoch)


async def test_topics_and_configs(stores: Callable[..., ZkTopicStore], zk_connect: str,
                                  kazoo_factory: KazooFactory) -> None:
    store = await stores()
    topic_id = uuid.uuid4()
    record = TopicRecord("orders", topic_id, {0: (1, 2), 1: (2, 3), 2: (3, 1)})
    await store.create_topic(record, {"retention.ms": "1000"})
    assert await store.topic_names() == {"orders"}
    assert await store.topics() == {"orders": record}
    assert await store.topics(["orders", "nope"]) == {"orders": record}
    assert await store.topic_configs("orders") == {"retention.ms": "1000"}
    with pytest.raises(TopicExistsError, match="already exists"):
        await store.create_topic(TopicRecord("orders", uuid.uuid4(), {0: (1,)}), {"a": "b"})
    assert await store.topic_configs("orders") == {"retention.ms": "1000"}  # not overwritten

    zk = kazoo_factory(zk_connect)
    body = zd.TopicAssignment.decode("orders", zk.get(zd.topic_path("orders"))[0])
    assert body == zd.TopicAssignment.of({0: [1, 2], 1: [2, 3], 2: [3, 1]}, topic_id)
    # A topic without overrides still gets its (empty) config znode, as in Kafka.
    await store.create_topic(TopicRecord("plain", uuid.uuid4(), {0: (1,)}), {})
    assert zd.decode_entity_config(zk.get(zd.topic_config_path("plain"))[0]) == {}
    assert await store.all_topic_configs() == {"orders": {"retention.ms": "1000"}, "plain": {}}

    grown = TopicRecord("orders", topic_id, {**record.assignment, 3: (1, 2)})
    await store.set_assignment(grown)
    assert (await store.topics(["orders"]))["orders"] == grown
    with pytest.raises(NoSuchTopicError):
        await store.set_assignment(TopicRecord("nope", uuid.uuid4(), {0: (1,)}))

    await store.set_topic_configs("orders", {"cleanup.policy": "compact"})
    assert await store.topic_configs("orders") == {"cleanup.policy": "compact"}
    (change,) = zk.get_children(zd.CONFIG_CHANGES)
    assert zd.decode_config_change(zk.get(f"{zd.CONFIG_CHANGES}/{change}")[0]) == \
        ("topics", "orders")
    with pytest.raises(NoSuchTopicError):
        await store.set_topic_configs("nope", {})

    await store.mark_for_deletion("orders")
    await store.mark_for_deletion("orders")  # idempotent
    assert await store.topics_marked_for_deletion() == {"orders"}
    assert zk.get(zd.delete_topic_path("orders"))[0] is None
    with pytest.raises(TopicExistsError, match="marked for deletion"):
        await store.create_topic(TopicRecord("orders", uuid.uuid4(), {0: (1,)}), {})
    with pytest.raises(NoSuchTopicError):
        await store.mark_for_deletion("nope")


async def test_partition_states_and_the_controller_fence(stores: Callable[..., ZkTopicStore],
                                                         zk_connect: str,
                                                         kazoo_factory: KazooFactory) -> None:
    store = await stores()
    await store.create_topic(TopicRecord("t", uuid.uuid4(), {0: (1, 2), 1: (2, 1)}), {})
    zk = kazoo_factory(zk_connect)
    zk.create(zd.CONTROLLER_EPOCH, b"1")
    zk.set(zd.CONTROLLER_EPOCH, b"1")  # version 1
    store.fence(1)
    t0, t1, gone = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("x", 0)
    result = await store.create_partition_states({t0: state(1, (1, 2)), t1: state(2, (2, 1)),
                                                  gone: state(1, (1,))})
    assert set(result.written) == {t0, t1} and result.failed == {gone}
    assert zk.get(zd.topic_partitions_path("t"))[0] is None  # parents with no data
    assert zk.get(zd.partition_path(t0))[0] is None
    assert zd.PartitionState.decode(zk.get(zd.partition_state_path(t0))[0]) == \
        zd.PartitionState(1, 0, (1, 2), 1)
    again = await store.create_partition_states({t0: state(2, (2,))})
    assert again.failed == {t0}

    states = await store.partition_states([t0, t1, gone])
    assert set(states) == {t0, t1} and states[t0].leader_and_isr.partition_epoch == 0
    moved = state(2, (2,), epoch=1, partition_epoch=0)
    stale = state(1, (1,), epoch=1, partition_epoch=5)
    result = await store.update_partition_states({t0: moved, t1: stale})
    assert result.failed == {t1}
    assert result.written[t0].leader_and_isr.partition_epoch == 1  # the znode's new version
    assert (await store.partition_states([t0]))[t0] == result.written[t0]

    # A newer controller bumps /controller_epoch: this store's writes are refused.
    zk.set(zd.CONTROLLER_EPOCH, b"2")
    with pytest.raises(ControllerMovedError):
        await store.update_partition_states({t0: result.written[t0]})
    with pytest.raises(ControllerMovedError):
        await store.delete_topic("t")
    store.fence(2)
    await store.delete_topic("t")
    assert zk.exists(zd.topic_path("t")) is None
    assert zk.exists(zd.topic_config_path("t")) is None
    assert await store.topic_names() == set()


async def test_delete_topic_with_many_partitions(stores: Callable[..., ZkTopicStore]) -> None:
    store = await stores()
    n = 600  # more ops than one transaction carries
    await store.create_topic(TopicRecord("big", uuid.uuid4(), {p: (1,) for p in range(n)}), {})
    result = await store.create_partition_states(
        {TopicPartition("big", p): state(1, (1,)) for p in range(n)})
    assert len(result.written) == n
    await store.mark_for_deletion("big")
    await store.delete_topic("big")
    assert await store.topic_names() == set()
    assert await store.topics_marked_for_deletion() == set()


async def test_watches_across_brokers(stores: Callable[..., ZkTopicStore]) -> None:
    writer, watched = await stores(), await stores()
    recorder = Recorder()
    await writer.create_topic(TopicRecord("old", uuid.uuid4(), {0: (1,)}), {})
    watched.watch(recorder)
    await asyncio.sleep(0.2)  # armed
    assert recorder.heard == []  # nothing replayed at start-up

    await writer.create_topic(TopicRecord("new", uuid.uuid4(), {0: (1,)}), {})
    await wait_heard(recorder, ("topics", None))
    await writer.set_assignment(TopicRecord("new", uuid.uuid4(), {0: (1,), 1: (1,)}))
    await wait_heard(recorder, ("partitions", "new"))  # a topic created after watch()
    await writer.set_assignment(TopicRecord("old", uuid.uuid4(), {0: (1,), 1: (1,)}))
    await wait_heard(recorder, ("partitions", "old"))
    await writer.set_topic_configs("old", {"retention.ms": "5"})
    await wait_heard(recorder, ("configs", "old"))
    await writer.mark_for_deletion("old")
    await wait_heard(recorder, ("deletions", None))
    # Re-armed each time: a second change of each kind is heard too.
    recorder.heard.clear()
    await writer.set_topic_configs("new", {"retention.ms": "6"})
    await writer.mark_for_deletion("new")
    await writer.create_topic(TopicRecord("third", uuid.uuid4(), {0: (1,)}), {})
    for item in (("configs", "new"), ("deletions", None), ("topics", None)):
        await wait_heard(recorder, item)

"""controller.local_store.LocalTopicStore: durable on disk, atomic writes, version-checked
partition states, version 1 files upgraded, watchers told after the write is durable."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from controller.leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch
from controller.local_store import STORE_FILE, LocalTopicStore, TopicStoreLoadError
from controller.topic_store import NoSuchTopicError, TopicExistsError, TopicRecord
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

pytestmark = pytest.mark.timeout(10)


def record(name: str, partitions: int = 1, replicas: tuple[int, ...] = (0,)) -> TopicRecord:
    return TopicRecord(name, uuid.uuid4(), {p: replicas for p in range(partitions)})


class Watcher:
    def __init__(self, store: LocalTopicStore) -> None:
        self.store = store
        self.events: list[tuple[str, ...]] = []

    def _durable(self) -> bool:
        reread = LocalTopicStore.load(self.store.path.parent, 0)
        return reread._topics == self.store._topics

    def on_topics_changed(self) -> None:
        self.events.append(("topics", str(self._durable())))

    def on_partitions_changed(self, topic: str) -> None:
        self.events.append(("partitions", topic))

    def on_deletions_requested(self) -> None:
        self.events.append(("deletions",))

    def on_configs_changed(self, topic: str) -> None:
        self.events.append(("configs", topic))


async def test_create_is_durable_and_reloads_identically(tmp_path: Path) -> None:
    store = LocalTopicStore.load(tmp_path, 0)
    watcher = Watcher(store)
    store.watch(watcher)
    orders = record("orders", 3)
    await store.create_topic(orders, {"retention.ms": "1000", "cleanup.policy": "compact"})
    assert watcher.events == [("topics", "True")]
    again = LocalTopicStore.load(tmp_path, 0)
    assert await again.topic_names() == {"orders"}
    assert (await again.topics())["orders"] == orders
    assert await again.topic_configs("orders") == {"retention.ms": "1000",
                                                    "cleanup.policy": "compact"}
    assert await again.topic_configs("other") == {}
    with pytest.raises(TopicExistsError) as info:
        await again.create_topic(record("orders"), {})
    assert info.value.error_code == ErrorCode.TOPIC_ALREADY_EXISTS


async def test_assignment_configs_and_deletion(tmp_path: Path) -> None:
    store = LocalTopicStore.load(tmp_path, 0)
    watcher = Watcher(store)
    store.watch(watcher)
    a = record("a")
    await store.create_topic(a, {})
    grown = TopicRecord("a", a.topic_id, {0: (0,), 1: (0,), 2: (0,)})
    await store.set_assignment(grown)
    await store.set_topic_configs("a", {"retention.bytes": "100"})
    await store.mark_for_deletion("a")
    await store.mark_for_deletion("a")  # idempotent: one notification
    assert watcher.events[1:] == [("partitions", "a"), ("configs", "a"), ("deletions",)]
    again = LocalTopicStore.load(tmp_path, 0)
    assert (await again.topics(["a", "b"])) == {"a": grown}
    assert await again.all_topic_configs() == {"a": {"retention.bytes": "100"}}
    assert await again.topics_marked_for_deletion() == {"a"}
    with pytest.raises(TopicExistsError, match="marked for deletion"):
        await again.create_topic(record("a"), {})
    await again.delete_topic("a")
    assert await LocalTopicStore.load(tmp_path, 0).topic_names() == set()
    for call in (again.set_topic_configs("a", {}), again.mark_for_deletion("a"),
                 again.set_assignment(grown)):
        with pytest.raises(NoSuchTopicError) as info:
            await call
        assert info.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_partition_states_are_version_checked(tmp_path: Path) -> None:
    store = LocalTopicStore.load(tmp_path, 0)
    await store.create_topic(record("t", 2), {})
    t0, t1, u0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
    first = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(0, [0]), 1)
    created = await store.create_partition_states({t0: first, t1: first, u0: first})
    assert created.failed == {u0}  # no such topic
    assert created.written[t0].leader_and_isr.partition_epoch == 0
    again = await store.create_partition_states({t0: first})
    assert again.failed == {t0} and not again.written
    bumped = LeaderIsrAndControllerEpoch(created.written[t0].leader_and_isr.new_epoch(), 1)
    result = await store.update_partition_states({t0: bumped})
    assert result.written[t0].leader_and_isr.partition_epoch == 1
    assert result.written[t0].leader_and_isr.leader_epoch == 1
    stale = await store.update_partition_states({t0: bumped})  # expects version 0, it is 1
    assert stale.failed == {t0} and not stale.written
    reread = await LocalTopicStore.load(tmp_path, 0).partition_states([t0, t1, u0])
    assert reread == {t0: result.written[t0], t1: created.written[t1]}
    await store.delete_topic("t")
    assert await LocalTopicStore.load(tmp_path, 0).partition_states([t0, t1]) == {}


async def test_version_1_file_loads_with_this_broker_as_replica(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    (tmp_path / STORE_FILE).write_text(json.dumps({"version": 1, "topics": [
        {"name": "old", "topic_id": str(topic_id), "num_partitions": 2,
         "replication_factor": 1, "configs": {"retention.ms": "5"}}]}))
    store = LocalTopicStore.load(tmp_path, 7)
    assert (await store.topics())["old"] == TopicRecord("old", topic_id, {0: (7,), 1: (7,)})
    assert await store.topic_configs("old") == {"retention.ms": "5"}
    assert await store.partition_states([TopicPartition("old", 0)]) == {}
    await store.set_topic_configs("old", {})
    assert json.loads((tmp_path / STORE_FILE).read_text())["version"] == 2


async def test_leftover_tmp_is_ignored_and_corrupt_file_fails_loudly(tmp_path: Path) -> None:
    store = LocalTopicStore.load(tmp_path, 0)
    await store.create_topic(record("keep"), {})
    (tmp_path / (STORE_FILE + ".tmp")).write_bytes(b'{"version": 2, "topi')
    assert await LocalTopicStore.load(tmp_path, 0).topic_names() == {"keep"}
    assert not (tmp_path / (STORE_FILE + ".tmp")).exists()
    rf2 = {"version": 1, "topics": [{"name": "x", "topic_id": str(uuid.uuid4()),
                                     "num_partitions": 1, "replication_factor": 2, "configs": {}}]}
    for bad in ('{"version": 2, "topics": [{"name": 1}]}', "[]", '{"version": 9, "topics": []}',
                json.dumps(rf2)):
        (tmp_path / STORE_FILE).write_text(bad)
        with pytest.raises(TopicStoreLoadError, match=STORE_FILE):
            LocalTopicStore.load(tmp_path, 0)
    (tmp_path / STORE_FILE).write_text(json.dumps({"version": 2, "topics": []}))
    assert await LocalTopicStore.load(tmp_path, 0).topic_names() == set()

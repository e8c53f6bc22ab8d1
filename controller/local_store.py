"""``LocalTopicStore``: the topic store of a single node, one JSON file in the log dir.

``<log.dir>/minikafka-topics.json`` holds what ZooKeeper holds for a Kafka cluster
(``controller.topic_store`` has the map)::

    {"version": 2,
     "topics": [{"name": "t", "topic_id": "<uuid4>", "configs": {"retention.ms": "1000"},
                 "marked_for_deletion": false,
                 "partitions": [{"partition": 0, "replicas": [0],
                                 "state": {"leader": 0, "leader_epoch": 0, "isr": [0],
                                           "leader_recovery_state": 0,
                                           "partition_epoch": 0, "controller_epoch": 1}}]}]}

``state`` is null until the controller first elects the partition's leader. A version 1
file (``num_partitions``, ``replication_factor``, ``configs`` per topic; written before
partition states were kept) loads as topics whose replicas are all this broker and whose
partitions have no state yet; the next write upgrades the file.

Writes are atomic: the whole file goes to ``minikafka-topics.json.tmp``, is fsynced, renamed
over the old file and the directory is fsynced (in a worker thread), so a crash leaves
either the old or the new store, never a torn one; the in-memory view changes only after
the rename; a write that fails (full or failing disk) changes nothing and raises
``TopicStoreError`` (KAFKA_STORAGE_ERROR), except a failed directory fsync after the rename,
which keeps the new state it wrote. A file that does not parse fails start-up with ``TopicStoreLoadError`` naming
it (it is never silently dropped). Watchers hear of a change after it is durable.

Thread-safety: the event loop that calls it; writes are serialized by an asyncio lock.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from controller.leader_and_isr import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
)
from controller.topic_store import (
    NoSuchTopicError,
    StateWriteResult,
    TopicExistsError,
    TopicRecord,
    TopicStoreError,
    TopicStoreWatcher,
)
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from storage.checkpoints import DirSyncError, atomic_write_bytes

STORE_FILE: Final = "minikafka-topics.json"
FORMAT_VERSION: Final = 2
MAX_STORE_BYTES: Final = 64 * 1024 * 1024
MAX_WATCHERS: Final = 16


class TopicStoreLoadError(RuntimeError):
    """The store file exists but cannot be read: start-up must stop."""


@dataclass(frozen=True, slots=True)
class _Topic:
    record: TopicRecord
    configs: Mapping[str, str] = field(default_factory=dict)
    marked_for_deletion: bool = False


class LocalTopicStore:
    """See the module docstring."""

    def __init__(self, path: Path, topics: Iterable[_Topic] = (),
                 states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch] | None = None
                 ) -> None:
        self._path = path
        self._topics: dict[str, _Topic] = {t.record.name: t for t in topics}
        self._states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = dict(states or {})
        self._watchers: list[TopicStoreWatcher] = []
        self._lock = asyncio.Lock()

    @classmethod
    def load(cls, log_dir: Path, broker_id: int) -> LocalTopicStore:
        """Read ``<log_dir>/minikafka-topics.json`` (absent: no topics yet). ``broker_id``
        owns every replica of a version 1 file's topics."""
        path = Path(log_dir) / STORE_FILE
        tmp = path.with_name(STORE_FILE + ".tmp")
        if tmp.exists():  # a write that crashed before its rename: the old file stands
            tmp.unlink()
        if not path.exists():
            return cls(path)
        try:
            size_bytes = path.stat().st_size
            if size_bytes > MAX_STORE_BYTES:
                raise ValueError(f"file is {size_bytes} bytes, over {MAX_STORE_BYTES}")
            doc = json.loads(path.read_text(encoding="utf-8"))
            topics, states = _from_json(doc, broker_id)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TopicStoreLoadError(f"cannot read topic store {path}: {exc}") from exc
        return cls(path, topics, states)

    @property
    def path(self) -> Path:
        return self._path

    def watch(self, watcher: TopicStoreWatcher) -> None:
        if len(self._watchers) >= MAX_WATCHERS:
            raise RuntimeError(f"more than {MAX_WATCHERS} topic store watchers")
        self._watchers.append(watcher)

    # ------------------------------------------------------------ reads

    async def topic_names(self) -> set[str]:
        return set(self._topics)

    async def topics(self, names: Iterable[str] | None = None) -> dict[str, TopicRecord]:
        if names is None:
            return {n: t.record for n, t in self._topics.items()}
        return {n: self._topics[n].record for n in names if n in self._topics}

    async def topic_configs(self, name: str) -> dict[str, str]:
        topic = self._topics.get(name)
        return {} if topic is None else dict(topic.configs)

    async def all_topic_configs(self) -> dict[str, dict[str, str]]:
        return {n: dict(t.configs) for n, t in self._topics.items()}

    async def topics_marked_for_deletion(self) -> set[str]:
        return {n for n, t in self._topics.items() if t.marked_for_deletion}

    async def partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        return {tp: self._states[tp] for tp in partitions if tp in self._states}

    # ------------------------------------------------------------ writes

    async def create_topic(self, record: TopicRecord, configs: Mapping[str, str]) -> None:
        async with self._lock:
            existing = self._topics.get(record.name)
            if existing is not None:
                raise TopicExistsError(record.name,
                                       marked_for_deletion=existing.marked_for_deletion)
            topics = {**self._topics, record.name: _Topic(record, dict(configs))}
            await self._commit(topics, self._states)
        self._notify(lambda w: w.on_topics_changed())

    async def set_assignment(self, record: TopicRecord) -> None:
        async with self._lock:
            current = self._require(record.name)
            topics = {**self._topics, record.name: replace(current, record=record)}
            await self._commit(topics, self._states)
        self._notify(lambda w: w.on_partitions_changed(record.name))

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        async with self._lock:
            current = self._require(name)
            topics = {**self._topics, name: replace(current, configs=dict(configs))}
            await self._commit(topics, self._states)
        self._notify(lambda w: w.on_configs_changed(name))

    async def mark_for_deletion(self, name: str) -> None:
        async with self._lock:
            current = self._require(name)
            if current.marked_for_deletion:
                return
            topics = {**self._topics, name: replace(current, marked_for_deletion=True)}
            await self._commit(topics, self._states)
        self._notify(lambda w: w.on_deletions_requested())

    async def delete_topic(self, name: str) -> None:
        async with self._lock:
            if name not in self._topics:
                return
            topics = {n: t for n, t in self._topics.items() if n != name}
            states = {tp: s for tp, s in self._states.items() if tp.topic != name}
            await self._commit(topics, states)
        self._notify(lambda w: w.on_topics_changed())

    async def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> StateWriteResult:
        async with self._lock:
            written: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
            failed: set[TopicPartition] = set()
            for tp, state in states.items():
                if tp in self._states or tp.topic not in self._topics:
                    failed.add(tp)
                else:
                    written[tp] = _with_version(state, 0)
            if written:
                await self._commit(self._topics, {**self._states, **written})
            return StateWriteResult(written, failed)

    async def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> StateWriteResult:
        async with self._lock:
            written: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
            failed: set[TopicPartition] = set()
            for tp, state in states.items():
                stored = self._states.get(tp)
                expected = state.leader_and_isr.partition_epoch
                if stored is None or stored.leader_and_isr.partition_epoch != expected:
                    failed.add(tp)
                else:
                    written[tp] = _with_version(state, expected + 1)
            if written:
                await self._commit(self._topics, {**self._states, **written})
            return StateWriteResult(written, failed)

    # ------------------------------------------------------------ internals

    def _require(self, name: str) -> _Topic:
        topic = self._topics.get(name)
        if topic is None:
            raise NoSuchTopicError(name)
        return topic

    def _notify(self, call: Any) -> None:
        for watcher in list(self._watchers):
            call(watcher)

    async def _commit(self, topics: dict[str, _Topic],
                      states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]) -> None:
        """Write the new state durably (worker thread), then make it the visible one."""
        data = json.dumps(_to_json(topics, states), indent=1, sort_keys=True).encode("utf-8")
        try:
            await asyncio.to_thread(_write_atomically, self._path, data)
        except DirSyncError as exc:  # the new file is in place: so is the new state
            self._topics = topics
            self._states = dict(states)
            raise TopicStoreError(ErrorCode.KAFKA_STORAGE_ERROR,
                                  f"Cannot sync the topic store {self._path}: {exc}") from exc
        except OSError as exc:  # the old file stands (temp file removed): nothing changed
            raise TopicStoreError(ErrorCode.KAFKA_STORAGE_ERROR,
                                  f"Cannot write the topic store {self._path}: {exc}") from exc
        self._topics = topics
        self._states = dict(states)


def _with_version(state: LeaderIsrAndControllerEpoch,
                  version: int) -> LeaderIsrAndControllerEpoch:
    return replace(state, leader_and_isr=state.leader_and_isr.with_partition_epoch(version))


def _write_atomically(path: Path, data: bytes) -> None:
    """Temp file, fsync, rename, fsync dir (storage's writer: a failure before the rename
    removes the temp file and leaves the old store; a full disk is an OSError here)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data)


# ---------------------------------------------------------------- file format

def _to_json(topics: Mapping[str, _Topic],
             states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]) -> dict[str, Any]:
    out = []
    for name in sorted(topics):
        t = topics[name]
        partitions = []
        for p in sorted(t.record.assignment):
            state = states.get(TopicPartition(name, p))
            partitions.append({"partition": p, "replicas": list(t.record.assignment[p]),
                               "state": None if state is None else _state_to_json(state)})
        out.append({"name": name, "topic_id": str(t.record.topic_id), "configs": dict(t.configs),
                    "marked_for_deletion": t.marked_for_deletion, "partitions": partitions})
    return {"version": FORMAT_VERSION, "topics": out}


def _state_to_json(state: LeaderIsrAndControllerEpoch) -> dict[str, Any]:
    lai = state.leader_and_isr
    return {"leader": lai.leader, "leader_epoch": lai.leader_epoch, "isr": list(lai.isr),
            "leader_recovery_state": int(lai.leader_recovery_state),
            "partition_epoch": lai.partition_epoch, "controller_epoch": state.controller_epoch}


def _from_json(doc: Any, broker_id: int) -> tuple[list[_Topic],
                                                  dict[TopicPartition, LeaderIsrAndControllerEpoch]]:
    if not isinstance(doc, dict) or doc.get("version") not in (1, FORMAT_VERSION):
        raise ValueError(f"expected an object with \"version\": 1 or {FORMAT_VERSION}")
    items = doc.get("topics")
    if not isinstance(items, list):
        raise ValueError("\"topics\" must be a list")
    topics: list[_Topic] = []
    states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("topic entry must be an object")
        name, topic_id, configs = item["name"], uuid.UUID(item["topic_id"]), item["configs"]
        if not isinstance(name, str):
            raise ValueError(f"bad topic name {name!r}")
        if not isinstance(configs, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in configs.items()
        ):
            raise ValueError(f"bad configs for topic {name!r}")
        if doc["version"] == 1:
            assignment = _v1_assignment(item, broker_id)
            deleting = False
        else:
            assignment = {}
            for part in item["partitions"]:
                p, replicas = part["partition"], part["replicas"]
                if not isinstance(p, int) or p < 0 or not _int_list(replicas) or not replicas:
                    raise ValueError(f"bad partition entry {part!r} of topic {name!r}")
                assignment[p] = tuple(replicas)
                if part.get("state") is not None:
                    states[TopicPartition(name, p)] = _state_from_json(part["state"])
            deleting = bool(item.get("marked_for_deletion", False))
        if sorted(assignment) != list(range(len(assignment))) or not assignment:
            raise ValueError(f"partitions of topic {name!r} are not 0..n-1")
        topics.append(_Topic(TopicRecord(name, topic_id, assignment), dict(configs), deleting))
    return topics, states


def _v1_assignment(item: dict[str, Any], broker_id: int) -> dict[int, tuple[int, ...]]:
    parts, rf = item["num_partitions"], item["replication_factor"]
    if not isinstance(parts, int) or not isinstance(rf, int) or parts <= 0 or rf != 1:
        raise ValueError(f"bad partition count or replication factor for topic "
                         f"{item['name']!r}")
    return {p: (broker_id,) for p in range(parts)}


def _state_from_json(raw: Any) -> LeaderIsrAndControllerEpoch:
    if not isinstance(raw, dict) or not _int_list(raw["isr"]):
        raise ValueError(f"bad partition state {raw!r}")
    fields = ("leader", "leader_epoch", "leader_recovery_state", "partition_epoch",
              "controller_epoch")
    if not all(isinstance(raw[f], int) for f in fields):
        raise ValueError(f"bad partition state {raw!r}")
    lai = LeaderAndIsr(raw["leader"], raw["leader_epoch"], tuple(raw["isr"]),
                       LeaderRecoveryState(raw["leader_recovery_state"]), raw["partition_epoch"])
    return LeaderIsrAndControllerEpoch(lai, raw["controller_epoch"])


def _int_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) for v in value)

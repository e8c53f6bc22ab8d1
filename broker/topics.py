"""TopicRegistry: the single node's durable topic metadata, kept in the log dir.

What ZooKeeper holds for a Kafka cluster (``/brokers/topics/<t>`` and ``/config/topics/<t>``)
this broker keeps in one JSON file, ``<log.dir>/minikafka-topics.json``::

    {"version": 1,
     "topics": [{"name": "t", "topic_id": "<uuid4>", "num_partitions": 3,
                 "replication_factor": 1, "configs": {"retention.ms": "1000"}}]}

Writes are atomic: the whole file goes to ``minikafka-topics.json.tmp``, is fsynced,
renamed over the old file and the directory is fsynced, so a crash leaves either the old or
the new registry, never a torn one. A registry file that does not parse fails start-up
with ``TopicRegistryError`` naming the file (it is never silently dropped).

Thread-safety: every method takes the registry's lock; TopicInfo values are immutable
snapshots (their ``configs`` dict is a private copy).

Errors for bad requests are ``TopicError(code, message)`` carrying Kafka's error code
(INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION).
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from broker import topic_config
from protocol.errors import ErrorCode
from storage.config import LogConfig
from storage.errors import LogConfigError

if TYPE_CHECKING:
    from broker.config import BrokerConfig

REGISTRY_FILE: Final = "minikafka-topics.json"
FORMAT_VERSION: Final = 1
MAX_TOPIC_NAME_LENGTH: Final = 249  # Kafka's Topic.MAX_NAME_LENGTH
MAX_PARTITIONS: Final = 10_000  # a bound of ours: one node, one file handle set per partition
MAX_REGISTRY_BYTES: Final = 64 * 1024 * 1024
_LEGAL_NAME: Final = re.compile(r"[a-zA-Z0-9._-]+")
# Internal topics Kafka creates itself; they are hidden from auto-creation rules.
INTERNAL_TOPICS: Final = frozenset({"__consumer_offsets", "__transaction_state"})


class TopicError(Exception):
    """A request the registry refuses, with the Kafka error code to answer."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class TopicRegistryError(RuntimeError):
    """The registry file exists but cannot be read: start-up must stop."""


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


def validate_topic_name(name: str) -> None:
    """Kafka's org.apache.kafka.common.internals.Topic.validate: INVALID_TOPIC_EXCEPTION."""
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise TopicError(
            ErrorCode.INVALID_TOPIC,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters,"
            f" topic name: {name}",
        )
    if not _LEGAL_NAME.fullmatch(name):
        raise TopicError(
            ErrorCode.INVALID_TOPIC,
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII"
            " alphanumerics, '.', '_' and '-'",
        )


def _collision_key(name: str) -> str:
    """Kafka's Topic.unifyCollisionChars: '.' and '_' collide in metric names."""
    return name.replace(".", "_")


def validate_partitions(num_partitions: int) -> None:
    if num_partitions <= 0:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if num_partitions > MAX_PARTITIONS:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"Number of partitions {num_partitions} exceeds this broker's limit of {MAX_PARTITIONS}.",
        )


def validate_replication_factor(replication_factor: int, live_brokers: int = 1) -> None:
    if replication_factor <= 0:
        raise TopicError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    if replication_factor > live_brokers:
        raise TopicError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {live_brokers}.",
        )


def validate_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Kafka's checks (names, types, ranges), then storage's LogConfig: INVALID_CONFIG."""
    try:
        clean = topic_config.validate_all(configs)
        LogConfig.from_properties(clean)
    except (topic_config.TopicConfigError, LogConfigError) as exc:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    return clean


def log_config_resolver(
    broker_config: BrokerConfig, registry: TopicRegistry
) -> Callable[[str], LogConfig]:
    """``topic -> LogConfig`` for storage's LogManager (``config_for=``): a registered topic's
    config, or the broker defaults for a log no topic owns."""

    def config_for(topic: str) -> LogConfig:
        info = registry.get(topic) or TopicInfo(topic, uuid.UUID(int=0), 1, 1, {})
        return log_config_for(broker_config, info)

    return config_for


def log_config_for(broker_config: BrokerConfig, info: TopicInfo) -> LogConfig:
    """The topic's LogConfig: its overrides over the broker's log.* properties over
    Kafka's defaults (the same resolution DescribeConfigs reports)."""
    explicit = dict(broker_config.explicit)
    props = {
        name: topic_config.resolve(name, info.configs, explicit).value
        for name in topic_config.TOPIC_CONFIGS
    }
    return LogConfig.from_properties(props)


class TopicRegistry:
    """Topics by name and by id; every change is written to disk before it is visible."""

    def __init__(self, path: Path, topics: Iterable[TopicInfo] = ()) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._by_name: dict[str, TopicInfo] = {t.name: t for t in topics}
        self._by_id: dict[uuid.UUID, TopicInfo] = {t.topic_id: t for t in self._by_name.values()}

    @classmethod
    def load(cls, log_dir: Path) -> TopicRegistry:
        """Read ``<log_dir>/minikafka-topics.json`` (absent: no topics yet)."""
        path = Path(log_dir) / REGISTRY_FILE
        tmp = path.with_name(REGISTRY_FILE + ".tmp")
        if tmp.exists():  # a write that crashed before its rename: the old file stands
            tmp.unlink()
        if not path.exists():
            return cls(path)
        try:
            size_bytes = path.stat().st_size
            if size_bytes > MAX_REGISTRY_BYTES:
                raise ValueError(f"file is {size_bytes} bytes, over {MAX_REGISTRY_BYTES}")
            doc = json.loads(path.read_text(encoding="utf-8"))
            topics = [_topic_from_json(item) for item in _topics_list(doc)]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TopicRegistryError(f"cannot read topic registry {path}: {exc}") from exc
        return cls(path, topics)

    @property
    def path(self) -> Path:
        return self._path

    def get(self, name: str) -> TopicInfo | None:
        with self._lock:
            return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        with self._lock:
            return self._by_id.get(topic_id)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._by_name)

    def all(self) -> list[TopicInfo]:
        with self._lock:
            return [self._by_name[n] for n in sorted(self._by_name)]

    def check_create(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str | None]
    ) -> dict[str, str]:
        """Every check ``create`` makes, without creating (CreateTopics validate_only)."""
        validate_topic_name(name)
        with self._lock:
            if name in self._by_name:
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            key = _collision_key(name)
            for other in self._by_name:
                if _collision_key(other) == key:
                    raise TopicError(
                        ErrorCode.INVALID_TOPIC,
                        f"Topic '{name}' collides with existing topic: {other}",
                    )
        validate_partitions(num_partitions)
        validate_replication_factor(replication_factor)
        return validate_configs(configs)

    def create(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None] | None = None,
    ) -> TopicInfo:
        """Register a new topic with a fresh topic id (uuid4); durable on return."""
        clean = self.check_create(name, num_partitions, replication_factor, configs or {})
        with self._lock:
            if name in self._by_name:  # lost a race with a concurrent create
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            topic_id = uuid.uuid4()
            while topic_id in self._by_id or topic_id.int == 0:
                topic_id = uuid.uuid4()
            info = TopicInfo(name, topic_id, num_partitions, replication_factor, clean)
            self._commit({**self._by_name, name: info})
            return info

    def delete(self, name: str) -> TopicInfo:
        """Forget a topic (the caller deletes its partition logs); durable on return."""
        with self._lock:
            info = self._by_name.get(name)
            if info is None:
                raise TopicError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "This server does not host this topic-partition.",
                )
            self._commit({n: t for n, t in self._by_name.items() if n != name})
            return info

    def add_partitions(self, name: str, total: int) -> TopicInfo:
        """Grow ``name`` to ``total`` partitions (CreatePartitions); never shrinks."""
        with self._lock:
            info = self._require(name)
            self._check_new_total(info, total)
            new = TopicInfo(name, info.topic_id, total, info.replication_factor, dict(info.configs))
            self._commit({**self._by_name, name: new})
            return new

    def check_add_partitions(self, name: str, total: int) -> TopicInfo:
        with self._lock:
            info = self._require(name)
            self._check_new_total(info, total)
            return info

    def set_configs(self, name: str, configs: Mapping[str, str | None]) -> TopicInfo:
        """Replace ``name``'s whole set of overrides (AlterConfigs semantics)."""
        clean = validate_configs(configs)
        with self._lock:
            info = self._require(name)
            new = TopicInfo(name, info.topic_id, info.num_partitions, info.replication_factor, clean)
            self._commit({**self._by_name, name: new})
            return new

    def _require(self, name: str) -> TopicInfo:
        info = self._by_name.get(name)
        if info is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        return info

    @staticmethod
    def _check_new_total(info: TopicInfo, total: int) -> None:
        if total < info.num_partitions:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {info.num_partitions} partitions, which is higher than"
                f" the requested {total}.",
            )
        if total == info.num_partitions:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic already has {info.num_partitions} partitions.",
            )
        validate_partitions(total)

    def _commit(self, topics: dict[str, TopicInfo]) -> None:
        """Write ``topics`` atomically, then make them the visible state (lock held)."""
        doc = {
            "version": FORMAT_VERSION,
            "topics": [_topic_to_json(topics[n]) for n in sorted(topics)],
        }
        data = json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")
        tmp = self._path.with_name(REGISTRY_FILE + ".tmp")
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._by_name = topics
        self._by_id = {t.topic_id: t for t in topics.values()}


def _topics_list(doc: Any) -> list[Any]:
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"expected an object with \"version\": {FORMAT_VERSION}")
    topics = doc.get("topics")
    if not isinstance(topics, list):
        raise ValueError("\"topics\" must be a list")
    return topics


def _topic_to_json(info: TopicInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "topic_id": str(info.topic_id),
        "num_partitions": info.num_partitions,
        "replication_factor": info.replication_factor,
        "configs": dict(info.configs),
    }


def _topic_from_json(item: Any) -> TopicInfo:
    if not isinstance(item, dict):
        raise ValueError("topic entry must be an object")
    name, parts, rf, configs = (
        item["name"], item["num_partitions"], item["replication_factor"], item["configs"]
    )
    if not isinstance(name, str) or not isinstance(parts, int) or not isinstance(rf, int):
        raise ValueError(f"bad topic entry {item!r}")
    if not isinstance(configs, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in configs.items()
    ):
        raise ValueError(f"bad configs for topic {name!r}")
    if parts <= 0 or rf <= 0:
        raise ValueError(f"bad partition count or replication factor for topic {name!r}")
    return TopicInfo(name, uuid.UUID(item["topic_id"]), parts, rf, dict(configs))

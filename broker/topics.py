"""Topic rules the admin requests share: names, partition counts, replication factors,
configs, and a topic's effective ``LogConfig``.

The topics themselves live in the topic store (``controller.topic_store``); the broker
learns about them from its metadata cache. Errors for bad requests are
``TopicError(error_code, message)`` carrying Kafka's error code (INVALID_TOPIC_EXCEPTION,
TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG,
UNKNOWN_TOPIC_OR_PARTITION, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from broker import topic_config
from protocol.errors import ErrorCode
from storage.config import LogConfig
from storage.errors import LogConfigError

if TYPE_CHECKING:
    from broker.config import BrokerConfig

MAX_TOPIC_NAME_LENGTH: Final = 249  # Kafka's Topic.MAX_NAME_LENGTH
MAX_PARTITIONS: Final = 10_000  # a bound of ours: one node, one file handle set per partition
_LEGAL_NAME: Final = re.compile(r"[a-zA-Z0-9._-]+")
# Internal topics Kafka creates itself; they are hidden from auto-creation rules.
INTERNAL_TOPICS: Final = frozenset({"__consumer_offsets", "__transaction_state"})


class TopicError(Exception):
    """An admin request refused, with the Kafka error code to answer."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


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
    except LogConfigError as exc:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    return clean


def log_config_for(broker_config: BrokerConfig, overrides: Mapping[str, str],
                   dynamic: Mapping[str, str] | None = None) -> LogConfig:
    """A topic's LogConfig: its overrides over the broker's log.* properties (the dynamic
    log defaults in force, ``dynamic``, over server.properties) over Kafka's defaults (the
    same resolution DescribeConfigs reports)."""
    explicit = {**broker_config.explicit, **(dynamic or {})}
    props = {
        name: topic_config.resolve(name, overrides, explicit).value
        for name in topic_config.TOPIC_CONFIGS
    }
    return LogConfig.from_properties(props)


def collision(name: str, existing: Iterable[str]) -> str | None:
    """An existing topic whose name collides with ``name`` in metric names ('.' vs '_',
    Kafka's ``Topic.hasCollision``), if any."""
    key = _collision_key(name)
    for other in existing:
        if other != name and _collision_key(other) == key:
            return other
    return None

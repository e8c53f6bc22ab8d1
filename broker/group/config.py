"""The group coordinator's settings, by Kafka's property names and defaults.

| property                              | field                          | Kafka default        |
|---------------------------------------|--------------------------------|----------------------|
| group.min.session.timeout.ms          | min_session_timeout_ms         | 6000                 |
| group.max.session.timeout.ms          | max_session_timeout_ms         | 1800000 (30 min)     |
| group.initial.rebalance.delay.ms      | initial_rebalance_delay_ms     | 3000                 |
| group.max.size                        | max_size                       | 2147483647           |
| offsets.topic.num.partitions          | offsets_topic_num_partitions   | 50                   |
| offsets.topic.replication.factor      | offsets_topic_replication_factor | 3                  |
| offsets.topic.segment.bytes           | offsets_topic_segment_bytes    | 104857600            |
| offsets.retention.minutes             | offsets_retention_minutes      | 10080 (7 days)       |
| offsets.retention.check.interval.ms   | offsets_retention_check_interval_ms | 600000          |
| offset.metadata.max.bytes             | offset_metadata_max_bytes      | 4096                 |
| offsets.commit.timeout.ms             | offsets_commit_timeout_ms      | 5000                 |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Final

INT32_MAX: Final = 2**31 - 1

# Kafka property name -> GroupConfig field.
PROPERTY_FIELDS: Final[dict[str, str]] = {
    "group.min.session.timeout.ms": "min_session_timeout_ms",
    "group.max.session.timeout.ms": "max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
    "group.max.size": "max_size",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "offsets.topic.replication.factor": "offsets_topic_replication_factor",
    "offsets.topic.segment.bytes": "offsets_topic_segment_bytes",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "offsets.commit.timeout.ms": "offsets_commit_timeout_ms",
}


class GroupConfigError(ValueError):
    """An invalid group coordinator setting; the message names the Kafka property."""


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = INT32_MAX
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104_857_600
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    offsets_commit_timeout_ms: int = 5000

    def __post_init__(self) -> None:
        names = {v: k for k, v in PROPERTY_FIELDS.items()}
        minimums = {
            "min_session_timeout_ms": 0,
            "max_session_timeout_ms": 0,
            "initial_rebalance_delay_ms": 0,
            "max_size": 1,
            "offsets_topic_num_partitions": 1,
            "offsets_topic_replication_factor": 1,
            "offsets_topic_segment_bytes": 1,
            "offsets_retention_minutes": 1,
            "offsets_retention_check_interval_ms": 1,
            "offset_metadata_max_bytes": 0,
            "offsets_commit_timeout_ms": 1,
        }
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise GroupConfigError(f"{names[name]} must be an integer >= {minimum}, got {value!r}")
        if self.max_session_timeout_ms < self.min_session_timeout_ms:
            raise GroupConfigError(
                "group.max.session.timeout.ms must be >= group.min.session.timeout.ms"
            )

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> GroupConfig:
        """Build from Kafka-named properties; names this class does not own are ignored."""
        kwargs: dict[str, int] = {}
        for prop, field_name in PROPERTY_FIELDS.items():
            if prop not in props:
                continue
            raw = props[prop]
            try:
                kwargs[field_name] = int(str(raw))
            except ValueError:
                raise GroupConfigError(f"{prop} must be an integer, got {raw!r}") from None
        return cls(**kwargs)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

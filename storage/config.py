"""``LogConfig``: the topic-level settings storage honours, by Kafka's names and defaults.

``LogConfig.from_properties({"segment.bytes": "1048576", ...})`` validates names and values
like Kafka's ``LogConfig.validate``: an unknown name or a bad value raises
``LogConfigError`` (INVALID_CONFIG) naming the property. Names storage does not act on
(throttled replicas, tiered storage, compression levels, ...) are accepted and kept in
``other`` so a topic's full config round-trips.

=================================  ===================  ===========================
property                           default              check
=================================  ===================  ===========================
segment.bytes                      1073741824 (1 GiB)   >= 14
segment.ms                         604800000 (7 d)      >= 1
segment.jitter.ms                  0                    >= 0
segment.index.bytes                10485760 (10 MiB)    >= 4
index.interval.bytes               4096                 >= 0
retention.ms                       604800000 (7 d)      >= -1 (-1 = unlimited)
retention.bytes                    -1 (unlimited)       any long
flush.messages                     9223372036854775807  >= 1 (0 accepted as 1)
flush.ms                           9223372036854775807  >= 0
cleanup.policy                     delete               list of delete, compact
message.timestamp.type             CreateTime           CreateTime, LogAppendTime
message.timestamp.before.max.ms    9223372036854775807  >= 0
message.timestamp.after.max.ms     9223372036854775807  >= 0
file.delete.delay.ms               60000                >= 0
min.insync.replicas                1                    >= 1
max.message.bytes                  1048588              >= 0
delete.retention.ms                86400000 (1 d)       >= 0
min.compaction.lag.ms              0                    >= 0
max.compaction.lag.ms              9223372036854775807  >= 1
min.cleanable.dirty.ratio          0.5                  0..1
unclean.leader.election.enable     false                true, false
compression.type                   producer             uncompressed, zstd, lz4,
                                                        snappy, gzip, producer
preallocate                        false                true, false
=================================  ===================  ===========================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from storage.errors import LogConfigError
from storage.offsets import LONG_MAX

INT_MAX = 2**31 - 1

# Topic configs Kafka 3.9 accepts that storage keeps but does not act on.
_PASSTHROUGH_NAMES = frozenset(
    {
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.difference.max.ms",
        "remote.storage.enable",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
    }
)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """A topic's log settings (Kafka's topic-level names, with dots as underscores)."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    cleanup_policy: tuple[str, ...] = ("delete",)
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60_000
    min_insync_replicas: int = 1
    max_message_bytes: int = 1048588
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    preallocate: bool = False
    other: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        for spec in _SPECS.values():
            spec.check(getattr(self, spec.attr))

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def deletes(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        return "compact" in self.cleanup_policy

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Build a config from Kafka property strings, over ``base`` (default: Kafka's)."""
        changes: dict[str, Any] = {}
        other = dict(base.other) if base is not None else {}
        for name, raw in props.items():
            spec = _SPECS.get(name)
            if spec is not None:
                changes[spec.attr] = spec.parse(raw)
            elif name in _PASSTHROUGH_NAMES:
                other[name] = str(raw)
            else:
                raise LogConfigError(f"Unknown topic config name: {name}")
        changes["other"] = other
        return dataclasses.replace(base if base is not None else cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        """Every setting as Kafka property strings (inverse of ``from_properties``)."""
        out = {name: spec.format(getattr(self, spec.attr)) for name, spec in _SPECS.items()}
        out.update(self.other)
        return out


@dataclass(frozen=True, slots=True)
class _Spec:
    name: str
    kind: str  # "long" | "int" | "bool" | "double" | "choice" | "list"
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")

    def parse(self, raw: str) -> Any:
        text = str(raw).strip()
        value: Any
        if self.kind in ("long", "int"):
            try:
                value = int(text)
            except ValueError:
                raise LogConfigError(
                    f"Invalid value {raw!r} for configuration {self.name}: not a number"
                ) from None
            if self.name == "flush.messages" and value == 0:
                value = 1  # Kafka treats 0 like 1 (flush every message)
        elif self.kind == "double":
            try:
                value = float(text)
            except ValueError:
                raise LogConfigError(
                    f"Invalid value {raw!r} for configuration {self.name}: not a number"
                ) from None
        elif self.kind == "bool":
            if text.lower() not in ("true", "false"):
                raise LogConfigError(
                    f"Invalid value {raw!r} for configuration {self.name}: must be true or false"
                )
            value = text.lower() == "true"
        elif self.kind == "list":
            value = tuple(sorted({p.strip() for p in text.split(",") if p.strip()}))
        else:
            value = text
        self.check(value)
        return value

    def check(self, value: Any) -> None:
        bad = f"Invalid value {value!r} for configuration {self.name}"
        if self.kind in ("long", "int", "double"):
            limit = LONG_MAX if self.kind == "long" else INT_MAX
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise LogConfigError(f"{bad}: not a number")
            if self.kind != "double" and not -limit - 1 <= value <= limit:
                raise LogConfigError(f"{bad}: out of range for a {self.kind}")
            if self.low is not None and value < self.low:
                raise LogConfigError(f"{bad}: Value must be at least {self.low:g}")
            if self.high is not None and value > self.high:
                raise LogConfigError(f"{bad}: Value must be no more than {self.high:g}")
        elif self.kind == "bool":
            if not isinstance(value, bool):
                raise LogConfigError(f"{bad}: must be true or false")
        elif self.kind == "list":
            if not value or any(v not in self.choices for v in value):
                raise LogConfigError(f"{bad}: must be a list of {', '.join(self.choices)}")
        elif value not in self.choices:
            raise LogConfigError(f"{bad}: String must be one of: {', '.join(self.choices)}")

    def format(self, value: Any) -> str:
        if self.kind == "bool":
            return "true" if value else "false"
        if self.kind == "list":
            return ",".join(value)
        return str(value)


_SPECS: dict[str, _Spec] = {
    s.name: s
    for s in (
        _Spec("segment.bytes", "int", low=14),
        _Spec("segment.ms", "long", low=1),
        _Spec("segment.jitter.ms", "long", low=0),
        _Spec("segment.index.bytes", "int", low=4),
        _Spec("index.interval.bytes", "int", low=0),
        _Spec("retention.ms", "long", low=-1),
        _Spec("retention.bytes", "long"),
        _Spec("flush.messages", "long", low=1),
        _Spec("flush.ms", "long", low=0),
        _Spec("cleanup.policy", "list", choices=("compact", "delete")),
        _Spec("message.timestamp.type", "choice", choices=("CreateTime", "LogAppendTime")),
        _Spec("message.timestamp.before.max.ms", "long", low=0),
        _Spec("message.timestamp.after.max.ms", "long", low=0),
        _Spec("file.delete.delay.ms", "long", low=0),
        _Spec("min.insync.replicas", "int", low=1),
        _Spec("max.message.bytes", "int", low=0),
        _Spec("delete.retention.ms", "long", low=0),
        _Spec("min.compaction.lag.ms", "long", low=0),
        _Spec("max.compaction.lag.ms", "long", low=1),
        _Spec("min.cleanable.dirty.ratio", "double", low=0, high=1),
        _Spec("unclean.leader.election.enable", "bool"),
        _Spec(
            "compression.type",
            "choice",
            choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        _Spec("preallocate", "bool"),
    )
}

KNOWN_TOPIC_CONFIGS = frozenset(_SPECS) | _PASSTHROUGH_NAMES

"""Kafka's topic configs, one table, and ``LogConfig``, the settings storage honours.

``TOPIC_CONFIGS`` mirrors Kafka 3.9's topic ``LogConfig`` definitions: every name a client
may send in CreateTopics / AlterConfigs / IncrementalAlterConfigs, its type (the
``ConfigType`` DescribeConfigs v3+ reports), Kafka's default, its validator, and the broker
properties that supply the value when a topic has no override (``log.retention.ms``,
``log.retention.hours``, ...; Kafka's ``ServerTopicConfigSynonyms``, highest priority
first). ``validate`` checks one name and value as Kafka does (parse as
``ConfigDef.parseType``, then the validator) with Kafka's messages; a bad name or value
raises ``LogConfigError`` (INVALID_CONFIG). The broker reports configs from this table
(``broker.topic_config``: sources and synonyms) and keeps values as the strings clients
sent, as Kafka stores them.

``LogConfig.from_properties({"segment.bytes": "1048576", ...})`` validates through the
same table and keeps the typed values storage acts on; names it does not act on
(throttled replicas, tiered storage, compression levels, ...) are kept in ``other`` so a
topic's full config round-trips.

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
import enum
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from storage.errors import LogConfigError
from storage.offsets import LONG_MAX

INT_MAX = 2**31 - 1
SHORT_MAX = 2**15 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ ``ConfigType`` (org.apache.kafka.clients.admin.ConfigEntry.ConfigType)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9



ConfigValue = bool | int | float | str | list[str]


@dataclass(frozen=True, slots=True)
class BrokerSynonym:
    """A broker property that supplies a topic config's value; ``factor_ms`` converts units
    (``log.retention.hours`` -> ``retention.ms`` multiplies by 3,600,000)."""

    name: str
    default: str | None
    factor_ms: int = 1


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: str
    synonyms: tuple[BrokerSynonym, ...]
    check: Callable[[ConfigValue], str | None] | None = None  # returns a complaint or None

    @property
    def attr(self) -> str | None:
        """The ``LogConfig`` field storage acts on, or None (kept in ``LogConfig.other``)."""
        attr = self.name.replace(".", "_")
        return attr if attr in _LOG_CONFIG_FIELDS else None


def _at_least(low: float) -> Callable[[ConfigValue], str | None]:
    def check(value: ConfigValue) -> str | None:
        assert isinstance(value, int | float)
        return None if value >= low else f"Value must be at least {low:g}"

    return check


def _between(low: float, high: float) -> Callable[[ConfigValue], str | None]:
    def check(value: ConfigValue) -> str | None:
        assert isinstance(value, int | float)
        return None if low <= value <= high else f"Value must be between {low:g} and {high:g}"

    return check


def _one_of(*allowed: str) -> Callable[[ConfigValue], str | None]:
    def check(value: ConfigValue) -> str | None:
        return None if value in allowed else f"String must be one of: {', '.join(allowed)}"

    return check


def _list_of(*allowed: str) -> Callable[[ConfigValue], str | None]:
    def check(value: ConfigValue) -> str | None:
        assert isinstance(value, list | tuple)
        if not value:
            return "Configured value must not be empty"
        bad = [v for v in value if v not in allowed]
        return f"Invalid value(s) {bad}: must be one of {list(allowed)}" if bad else None

    return check


def _gzip_level(value: ConfigValue) -> str | None:
    assert isinstance(value, int)
    return None if value == -1 or 1 <= value <= 9 else "Value must be -1 or between 1 and 9"


def _throttled_replicas(value: ConfigValue) -> str | None:
    assert isinstance(value, list | tuple)
    if list(value) == ["*"] or not value:
        return None
    for item in value:
        parts = item.split(":")
        if len(parts) != 2 or not (parts[0].isdigit() and parts[1].isdigit()):
            return "must be the literal '*' or a list of replicas in the form partitionId:brokerId"
    return None


def _false_only(value: ConfigValue) -> str | None:
    return "Tiered storage is not enabled on this broker" if value is True else None


def _d(
    name: str,
    type_: ConfigType,
    default: str,
    *synonyms: BrokerSynonym,
    check: Callable[[ConfigValue], str | None] | None = None,
) -> TopicConfigDef:
    return TopicConfigDef(name, type_, default, synonyms, check)


_S = BrokerSynonym
_T = ConfigType
_LONG_MAX_S = str(LONG_MAX)

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        _d("cleanup.policy", _T.LIST, "delete", _S("log.cleanup.policy", "delete"),
           check=_list_of("delete", "compact")),
        _d("compression.type", _T.STRING, "producer", _S("compression.type", "producer"),
           check=_one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        _d("compression.gzip.level", _T.INT, "-1", _S("compression.gzip.level", "-1"),
           check=_gzip_level),
        _d("compression.lz4.level", _T.INT, "9", _S("compression.lz4.level", "9"),
           check=_between(1, 17)),
        _d("compression.zstd.level", _T.INT, "3", _S("compression.zstd.level", "3"),
           check=_between(-131072, 22)),
        _d("delete.retention.ms", _T.LONG, "86400000",
           _S("log.cleaner.delete.retention.ms", "86400000"), check=_at_least(0)),
        _d("file.delete.delay.ms", _T.LONG, "60000",
           _S("log.segment.delete.delay.ms", "60000"), check=_at_least(0)),
        _d("flush.messages", _T.LONG, _LONG_MAX_S,
           _S("log.flush.interval.messages", _LONG_MAX_S), check=_at_least(1)),
        _d("flush.ms", _T.LONG, _LONG_MAX_S, _S("log.flush.interval.ms", None),
           _S("log.flush.scheduler.interval.ms", _LONG_MAX_S), check=_at_least(0)),
        _d("follower.replication.throttled.replicas", _T.LIST, "",
           _S("follower.replication.throttled.replicas", ""), check=_throttled_replicas),
        _d("index.interval.bytes", _T.INT, "4096", _S("log.index.interval.bytes", "4096"),
           check=_at_least(0)),
        _d("leader.replication.throttled.replicas", _T.LIST, "",
           _S("leader.replication.throttled.replicas", ""), check=_throttled_replicas),
        _d("local.retention.bytes", _T.LONG, "-2", _S("log.local.retention.bytes", "-2"),
           check=_at_least(-2)),
        _d("local.retention.ms", _T.LONG, "-2", _S("log.local.retention.ms", "-2"),
           check=_at_least(-2)),
        _d("max.compaction.lag.ms", _T.LONG, _LONG_MAX_S,
           _S("log.cleaner.max.compaction.lag.ms", _LONG_MAX_S), check=_at_least(1)),
        _d("max.message.bytes", _T.INT, "1048588", _S("message.max.bytes", "1048588"),
           check=_at_least(0)),
        _d("message.downconversion.enable", _T.BOOLEAN, "true",
           _S("log.message.downconversion.enable", "true")),
        _d("message.format.version", _T.STRING, "3.0-IV1",
           _S("log.message.format.version", "3.0-IV1")),
        _d("message.timestamp.after.max.ms", _T.LONG, _LONG_MAX_S,
           _S("log.message.timestamp.after.max.ms", _LONG_MAX_S), check=_at_least(0)),
        _d("message.timestamp.before.max.ms", _T.LONG, _LONG_MAX_S,
           _S("log.message.timestamp.before.max.ms", _LONG_MAX_S), check=_at_least(0)),
        _d("message.timestamp.difference.max.ms", _T.LONG, _LONG_MAX_S,
           _S("log.message.timestamp.difference.max.ms", _LONG_MAX_S), check=_at_least(0)),
        _d("message.timestamp.type", _T.STRING, "CreateTime",
           _S("log.message.timestamp.type", "CreateTime"),
           check=_one_of("CreateTime", "LogAppendTime")),
        _d("min.cleanable.dirty.ratio", _T.DOUBLE, "0.5",
           _S("log.cleaner.min.cleanable.ratio", "0.5"), check=_between(0, 1)),
        _d("min.compaction.lag.ms", _T.LONG, "0",
           _S("log.cleaner.min.compaction.lag.ms", "0"), check=_at_least(0)),
        _d("min.insync.replicas", _T.INT, "1", _S("min.insync.replicas", "1"),
           check=_at_least(1)),
        _d("preallocate", _T.BOOLEAN, "false", _S("log.preallocate", "false")),
        _d("remote.storage.enable", _T.BOOLEAN, "false", check=_false_only),
        _d("remote.log.copy.disable", _T.BOOLEAN, "false"),
        _d("remote.log.delete.on.disable", _T.BOOLEAN, "false"),
        _d("retention.bytes", _T.LONG, "-1", _S("log.retention.bytes", "-1")),
        _d("retention.ms", _T.LONG, "604800000", _S("log.retention.ms", None),
           _S("log.retention.minutes", None, 60_000),
           _S("log.retention.hours", "168", 3_600_000), check=_at_least(-1)),
        _d("segment.bytes", _T.INT, "1073741824", _S("log.segment.bytes", "1073741824"),
           check=_at_least(14)),
        _d("segment.index.bytes", _T.INT, "10485760",
           _S("log.index.size.max.bytes", "10485760"), check=_at_least(4)),
        _d("segment.jitter.ms", _T.LONG, "0", _S("log.roll.jitter.ms", None),
           _S("log.roll.jitter.hours", "0", 3_600_000), check=_at_least(0)),
        _d("segment.ms", _T.LONG, "604800000", _S("log.roll.ms", None),
           _S("log.roll.hours", "168", 3_600_000), check=_at_least(1)),
        _d("unclean.leader.election.enable", _T.BOOLEAN, "false",
           _S("unclean.leader.election.enable", "false")),
    )
}


def parse(definition: TopicConfigDef, raw: str) -> ConfigValue:
    """Parse ``raw`` as Kafka's ConfigDef.parseType does; raise LogConfigError if invalid."""
    text = raw.strip()
    t = definition.type
    try:
        if t is ConfigType.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ValueError("Expected value to be either true or false")
            return text.lower() == "true"
        if t in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
            if not _INTEGER.fullmatch(text):
                raise ValueError(f"Not a number of type {t.name}")
            number = int(text, 10)
            limit = INT_MAX if t is ConfigType.INT else (SHORT_MAX if t is ConfigType.SHORT else LONG_MAX)
            if not -limit - 1 <= number <= limit:
                raise ValueError(f"Not a number of type {t.name}")
            return number
        if t is ConfigType.DOUBLE:
            try:
                if "_" in text:  # Python accepts 1_0.5, Java's Double.parseDouble does not
                    raise ValueError
                real = float(text)
            except ValueError:
                raise ValueError("Not a number of type DOUBLE") from None
            if math.isnan(real) or math.isinf(real):
                raise ValueError("Not a number of type DOUBLE")
            return real
        if t is ConfigType.LIST:
            return [item.strip() for item in text.split(",")] if text else []
        return text
    except ValueError as exc:
        raise LogConfigError(
            f"Invalid value {raw} for configuration {definition.name}: {exc}"
        ) from None


def validate(name: str, raw: str | None) -> ConfigValue:
    """Check one topic config ``name=raw`` as Kafka does on CreateTopics / AlterConfigs."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise LogConfigError(f"Unknown topic config name: {name}")
    if raw is None:
        raise LogConfigError(f"Null value not supported for topic configs: {name}")
    value = parse(definition, raw)
    complaint = definition.check(value) if definition.check is not None else None
    if complaint is not None:
        raise LogConfigError(f"Invalid value {raw} for configuration {name}: {complaint}")
    return value


def validate_all(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Validate a whole set of overrides; return it with the values as given."""
    out: dict[str, str] = {}
    for name, raw in configs.items():
        validate(name, raw)
        assert raw is not None
        out[name] = raw
    return out


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
        for definition in _ACTED_ON:
            assert definition.attr is not None
            _check_typed(definition, getattr(self, definition.attr))

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
            value = validate(name, raw)
            attr = TOPIC_CONFIGS[name].attr
            if attr is None:
                other[name] = str(raw)
            else:
                changes[attr] = tuple(sorted(set(value))) if isinstance(value, list) else value
        changes["other"] = other
        return dataclasses.replace(base if base is not None else cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        """Every setting as Kafka property strings (inverse of ``from_properties``)."""
        out = {}
        for definition in _ACTED_ON:
            assert definition.attr is not None
            out[definition.name] = _format(getattr(self, definition.attr))
        out.update(self.other)
        return out

_LOG_CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(LogConfig)) - {"other"}
_ACTED_ON = tuple(d for d in TOPIC_CONFIGS.values() if d.attr is not None)
KNOWN_TOPIC_CONFIGS = frozenset(TOPIC_CONFIGS)
_TYPE_LIMITS = {ConfigType.INT: INT_MAX, ConfigType.LONG: LONG_MAX, ConfigType.SHORT: SHORT_MAX}


def _check_typed(definition: TopicConfigDef, value: Any) -> None:
    """A ``LogConfig`` field's value against its definition (built directly, not parsed)."""
    bad = f"Invalid value {value!r} for configuration {definition.name}"
    t = definition.type
    limit = _TYPE_LIMITS.get(t)
    if limit is not None:
        if isinstance(value, bool) or not isinstance(value, int) or not -limit - 1 <= value <= limit:
            raise LogConfigError(f"{bad}: Not a number of type {t.name}")
    elif t is ConfigType.DOUBLE:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise LogConfigError(f"{bad}: Not a number of type DOUBLE")
    elif t is ConfigType.BOOLEAN:
        if not isinstance(value, bool):
            raise LogConfigError(f"{bad}: Expected value to be either true or false")
    elif t is ConfigType.LIST:
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise LogConfigError(f"{bad}: Expected a list of strings")
    elif not isinstance(value, str):
        raise LogConfigError(f"{bad}: Expected a string")
    complaint = definition.check(value) if definition.check is not None else None
    if complaint is not None:
        raise LogConfigError(f"{bad}: {complaint}")


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(value)
    return str(value)

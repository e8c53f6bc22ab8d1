"""Kafka's topic-level configs: names, types, defaults, validation and broker synonyms.

The table mirrors Kafka 3.9's ``TopicConfig`` / ``LogConfig`` definitions: every name a
client may send in CreateTopics / AlterConfigs / IncrementalAlterConfigs, the value type
DescribeConfigs v3+ reports (``ConfigType``), Kafka's default, the validator, and the
broker properties (``log.retention.ms``, ``log.retention.hours``, ...) that supply the
value when the topic has no override ("synonyms", highest priority first).

A bad name or value raises ``TopicConfigError`` (Kafka answers INVALID_CONFIG). Values are
kept as the strings the client sent (after validation), exactly as Kafka stores them in
``/config/topics/<t>``; ``parse`` turns one into its typed value.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

LONG_MAX = 2**63 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")
INT_MAX = 2**31 - 1


class TopicConfigError(ValueError):
    """A topic config name or value Kafka would refuse (error INVALID_CONFIG)."""


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


class ConfigSource(enum.IntEnum):
    """DescribeConfigs v1+ ``ConfigSource`` (DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


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
        assert isinstance(value, list)
        if not value:
            return "Configured value must not be empty"
        bad = [v for v in value if v not in allowed]
        return f"Invalid value(s) {bad}: must be one of {list(allowed)}" if bad else None

    return check


def _gzip_level(value: ConfigValue) -> str | None:
    assert isinstance(value, int)
    return None if value == -1 or 1 <= value <= 9 else "Value must be -1 or between 1 and 9"


def _throttled_replicas(value: ConfigValue) -> str | None:
    assert isinstance(value, list)
    if value == ["*"] or not value:
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
    """Parse ``raw`` as Kafka's ConfigDef.parseType does; raise TopicConfigError if invalid."""
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
            limit = INT_MAX if t is ConfigType.INT else (2**15 - 1 if t is ConfigType.SHORT else LONG_MAX)
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
        raise TopicConfigError(
            f"Invalid value {raw} for configuration {definition.name}: {exc}"
        ) from None


def validate(name: str, raw: str | None) -> ConfigValue:
    """Check one topic config ``name=raw`` as Kafka does on CreateTopics / AlterConfigs."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise TopicConfigError(f"Unknown topic config name: {name}")
    if raw is None:
        raise TopicConfigError(f"Null value not supported for topic configs: {name}")
    value = parse(definition, raw)
    complaint = definition.check(value) if definition.check is not None else None
    if complaint is not None:
        raise TopicConfigError(f"Invalid value {raw} for configuration {name}: {complaint}")
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
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """One topic config as DescribeConfigs reports it."""

    name: str
    value: str
    source: ConfigSource
    type: ConfigType
    synonyms: tuple[Synonym, ...]


def resolve(
    name: str, overrides: Mapping[str, str], broker_props: Mapping[str, str]
) -> ResolvedConfig:
    """The effective value of topic config ``name``: the topic override if any, else the
    first broker synonym set in the broker's properties (``broker_props``: only the
    properties set explicitly), else Kafka's default. Synonyms are listed in that order."""
    definition = TOPIC_CONFIGS[name]
    synonyms: list[Synonym] = []
    value: str | None = None
    source = ConfigSource.DEFAULT_CONFIG
    if name in overrides:
        value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        synonyms.append(Synonym(name, value, source))
    for syn in definition.synonyms:
        if syn.name in broker_props:
            raw = broker_props[syn.name]
            synonyms.append(Synonym(syn.name, raw, ConfigSource.STATIC_BROKER_CONFIG))
            if value is None:
                value, source = _convert(raw, syn.factor_ms), ConfigSource.STATIC_BROKER_CONFIG
        elif syn.default is not None:
            synonyms.append(Synonym(syn.name, syn.default, ConfigSource.DEFAULT_CONFIG))
            if value is None:
                value = _convert(syn.default, syn.factor_ms)
    if value is None:
        value = definition.default
    return ResolvedConfig(name, value, source, definition.type, tuple(synonyms))


def _convert(raw: str, factor_ms: int) -> str:
    if factor_ms == 1:
        return raw
    try:
        return str(int(raw.strip()) * factor_ms)
    except ValueError:
        return raw


def effective_values(
    overrides: Mapping[str, str], broker_props: Mapping[str, str]
) -> dict[str, ConfigValue]:
    """Every topic config's effective typed value (what the log must obey)."""
    out: dict[str, ConfigValue] = {}
    for name, definition in TOPIC_CONFIGS.items():
        raw = resolve(name, overrides, broker_props).value
        try:
            out[name] = parse(definition, raw)
        except TopicConfigError:
            out[name] = parse(definition, definition.default)
    return out

"""Topic configs as DescribeConfigs reports them: each one's source and synonyms.

The table of Kafka's topic configs (names, types, defaults, validators, broker synonyms)
lives in storage, with the ``LogConfig`` it builds (``storage.config``); it is re-exported
here for the broker's admin code. This module adds what only the broker needs: where a
topic's effective value comes from (``ConfigSource``: the topic override, a broker
property set explicitly, or Kafka's default) and the synonyms DescribeConfigs lists.
A bad name or value raises ``TopicConfigError`` (storage's ``LogConfigError``: Kafka
answers INVALID_CONFIG).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.config_codes import ConfigSource
from storage.config import (
    TOPIC_CONFIGS,
    BrokerSynonym,
    ConfigType,
    ConfigValue,
    TopicConfigDef,
    parse,
    validate,
    validate_all,
)
from storage.errors import LogConfigError

# The one table (storage.config), re-exported for the broker's admin code.
__all__ = [
    "TOPIC_CONFIGS", "BrokerSynonym", "ConfigSource", "ConfigType", "ConfigValue",
    "ResolvedConfig", "Synonym", "TopicConfigDef", "TopicConfigError", "effective_values",
    "parse", "resolve", "validate", "validate_all",
]

TopicConfigError = LogConfigError  # a bad topic config name or value (INVALID_CONFIG)


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
    name: str, overrides: Mapping[str, str], broker_props: Mapping[str, str], *,
    dynamic_broker: Mapping[str, str] | None = None,
    dynamic_default: Mapping[str, str] | None = None,
) -> ResolvedConfig:
    """The effective value of topic config ``name``: the topic override if any, else the
    first broker synonym that is set -- at the first level that sets it: this broker's
    dynamic configs (``dynamic_broker``), the cluster-wide dynamic defaults
    (``dynamic_default``), the broker's properties (``broker_props``: only the properties
    set explicitly) -- else Kafka's default. Synonyms are listed as Kafka's ConfigHelper
    lists them: by level (dynamic broker, dynamic default, static, Kafka's default), each
    level in synonym order; the broker's from its first one named as the config's own
    broker property on."""
    definition = TOPIC_CONFIGS[name]
    levels = ((dynamic_broker or {}, ConfigSource.DYNAMIC_BROKER_CONFIG),
              (dynamic_default or {}, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
              (broker_props, ConfigSource.STATIC_BROKER_CONFIG))
    synonyms: list[Synonym] = []
    value: str | None = None
    source = ConfigSource.DEFAULT_CONFIG
    if name in overrides:
        value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        synonyms.append(Synonym(name, value, source))
    for syn in definition.synonyms:
        if value is not None:
            break
        for props, level in levels:
            if syn.name in props:
                value, source = _convert(props[syn.name], syn.factor_ms), level
                break
        else:
            if syn.default is not None:
                value = _convert(syn.default, syn.factor_ms)
    from_broker = [Synonym(syn.name, props[syn.name], level)
                   for props, level in levels for syn in definition.synonyms
                   if syn.name in props]
    from_broker += [Synonym(syn.name, syn.default, ConfigSource.DEFAULT_CONFIG)
                    for syn in definition.synonyms if syn.default is not None]
    # Kafka lists the broker synonyms only from the first one named as the config's own
    # broker property (ConfigHelper drops those before it): retention.ms with just the
    # default log.retention.hours=168 lists no broker synonym at all.
    while from_broker and from_broker[0].name != definition.synonyms[0].name:
        from_broker.pop(0)
    synonyms += from_broker
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
        except LogConfigError:
            out[name] = parse(definition, definition.default)
    return out

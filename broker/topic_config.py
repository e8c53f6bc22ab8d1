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
    name: str, overrides: Mapping[str, str], broker_props: Mapping[str, str]
) -> ResolvedConfig:
    """The effective value of topic config ``name``: the topic override if any, else the
    first broker synonym set in the broker's properties (``broker_props``: only the
    properties set explicitly), else Kafka's default. Synonyms are listed in that order,
    the broker's from its first one named as the config's own broker property (Kafka's)."""
    definition = TOPIC_CONFIGS[name]
    synonyms: list[Synonym] = []
    value: str | None = None
    source = ConfigSource.DEFAULT_CONFIG
    if name in overrides:
        value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        synonyms.append(Synonym(name, value, source))
    from_broker: list[Synonym] = []
    for syn in definition.synonyms:
        if syn.name in broker_props:
            raw = broker_props[syn.name]
            from_broker.append(Synonym(syn.name, raw, ConfigSource.STATIC_BROKER_CONFIG))
            if value is None:
                value, source = _convert(raw, syn.factor_ms), ConfigSource.STATIC_BROKER_CONFIG
        elif syn.default is not None:
            from_broker.append(Synonym(syn.name, syn.default, ConfigSource.DEFAULT_CONFIG))
            if value is None:
                value = _convert(syn.default, syn.factor_ms)
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

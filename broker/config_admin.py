"""Describing and altering configs of resources (DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs share this).

Resource types (``ConfigResource.Type``): TOPIC = 2, BROKER = 4, BROKER_LOGGER = 8; the
others are answered INVALID_REQUEST. Topic configs are Kafka's topic-level names
(broker.topic_config); a topic's value comes from its override (DYNAMIC_TOPIC_CONFIG),
else the broker's explicitly set synonym (STATIC_BROKER_CONFIG), else Kafka's default
(DEFAULT_CONFIG); a broker synonym may also be set dynamically (DYNAMIC_BROKER_CONFIG,
DYNAMIC_DEFAULT_BROKER_CONFIG, which win over the static one). Broker configs
(``broker.dynamic_broker_config``): the replica throttling rates, ``num.io.threads``, the
broker-level log defaults and the log cleaner's settings are dynamic, per broker (resource name the broker id,
DYNAMIC_BROKER_CONFIG) and cluster-wide (resource name "", DYNAMIC_DEFAULT_BROKER_CONFIG);
altering any other property is INVALID_CONFIG ("Cannot update these configs dynamically"),
as Kafka answers for a non-dynamic property.

Incremental operations (``AlterConfigOp.OpType``): SET = 0, DELETE = 1, APPEND = 2,
SUBTRACT = 3; APPEND/SUBTRACT only for LIST configs (INVALID_CONFIG otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker import topic_config
from broker.config import PROPERTIES, PropType
from broker.dynamic_broker_config import DYNAMIC_PROPERTIES, DynamicConfigError
from broker.topic_config import ConfigSource, ConfigType, Synonym
from broker.topics import TopicError, validate_configs, validate_topic_name
from protocol.config_codes import AlterConfigOpType, ConfigResourceType
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.admin_manager import AdminManager


# Kafka's codes (protocol.config_codes) by the names this module and its handlers use.
ResourceType = ConfigResourceType
OpType = AlterConfigOpType


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[Synonym, ...]


def _resource_error(code: ErrorCode, message: str) -> TopicError:
    return TopicError(code, message)


async def require_topic(admin: AdminManager, name: str, *, message: str) -> dict[str, str]:
    """The topic's config overrides; UNKNOWN_TOPIC_OR_PARTITION with ``message`` when the
    metadata cache does not know it."""
    validate_topic_name(name)
    if not admin.metadata_cache.contains_topic(name):
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message)
    return await admin.topic_overrides(name)


def require_this_broker(admin: AdminManager, name: str) -> None:
    """A BROKER resource names this broker's id ("" for the cluster-wide defaults is
    handled by the callers)."""
    expected = admin.config.broker_id
    try:
        given = int(name)
    except ValueError:
        raise _resource_error(ErrorCode.INVALID_REQUEST,
                              f"Broker id must be an integer, but it is: {name}") from None
    if given != expected:
        raise _resource_error(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {expected} or empty string, but received {name}")


async def describe_topic(admin: AdminManager, name: str,
                         keys: Sequence[str] | None) -> list[ConfigEntry]:
    # Kafka's ConfigHelper answers an unknown topic with the code alone (message "").
    overrides = await require_topic(admin, name, message="")
    wanted = set(keys) if keys is not None else None
    return [
        ConfigEntry(c.name, c.value, c.source, c.type, False, False, c.synonyms)
        for c in admin.topic_configs(overrides)
        if wanted is None or c.name in wanted
    ]


_PROP_TYPES: dict[PropType, ConfigType] = {
    PropType.BOOLEAN: ConfigType.BOOLEAN, PropType.INT: ConfigType.INT,
    PropType.SHORT: ConfigType.SHORT, PropType.LONG: ConfigType.LONG,
    PropType.DOUBLE: ConfigType.DOUBLE, PropType.STRING: ConfigType.STRING,
    PropType.LIST: ConfigType.LIST, PropType.PASSWORD: ConfigType.PASSWORD,
    PropType.CLASS: ConfigType.CLASS,
}


def describe_broker(admin: AdminManager, name: str,
                    keys: Sequence[str] | None) -> list[ConfigEntry]:
    """Resource "": the cluster-wide dynamic defaults that are set, each with only its
    DYNAMIC_DEFAULT_BROKER_CONFIG synonym (Kafka's answer). A broker id: every property, its
    value from the first level that sets it -- this broker's dynamic value
    (DYNAMIC_BROKER_CONFIG), the cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG), the
    server.properties value (STATIC_BROKER_CONFIG), Kafka's default (DEFAULT_CONFIG) -- and,
    for a dynamic property set dynamically, every level as synonyms in that order."""
    wanted = set(keys) if keys is not None else None
    dynamic = admin.dynamic_broker_config
    if name == "":
        defaults = {} if dynamic is None else dynamic.defaults
        return [
            ConfigEntry(n, v, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                        _PROP_TYPES[PROPERTIES[n].type], False, False,
                        (Synonym(n, v, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),))
            for n, v in sorted(defaults.items()) if wanted is None or n in wanted]
    require_this_broker(admin, name)
    explicit = admin.explicit_broker_props()
    mine = {} if dynamic is None else dynamic.overrides
    cluster = {} if dynamic is None else dynamic.defaults
    out = []
    for prop_name in sorted(PROPERTIES):
        if wanted is not None and prop_name not in wanted:
            continue
        prop = PROPERTIES[prop_name]
        sensitive = prop.type is PropType.PASSWORD
        read_only = dynamic is None or prop_name not in DYNAMIC_PROPERTIES
        if prop_name in mine or prop_name in cluster:  # set dynamically: every level
            synonyms = [Synonym(prop_name, levels[prop_name], source) for levels, source in (
                (mine, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (cluster, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                (explicit, ConfigSource.STATIC_BROKER_CONFIG)) if prop_name in levels]
            synonyms.append(Synonym(prop_name, prop.default, ConfigSource.DEFAULT_CONFIG))
            out.append(ConfigEntry(prop_name, synonyms[0].value, synonyms[0].source,
                                   _PROP_TYPES[prop.type], read_only, sensitive,
                                   tuple(synonyms)))
            continue
        if prop_name in explicit:
            value: str | None = explicit[prop_name]
            source = ConfigSource.STATIC_BROKER_CONFIG
        else:
            value, source = prop.default, ConfigSource.DEFAULT_CONFIG
        if sensitive:
            value = None
        out.append(ConfigEntry(prop_name, value, source, _PROP_TYPES[prop.type], read_only,
                               sensitive,
                               (Synonym(prop_name, value, source),)))
    return out


def check_unique_keys(names: Sequence[str]) -> None:
    if len(set(names)) != len(names):
        raise TopicError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")


def refuse_broker_changes(names: Sequence[str]) -> None:
    if names:
        raise TopicError(ErrorCode.INVALID_CONFIG,
                         f"Cannot update these configs dynamically: {sorted(set(names))}")


def incremental_overrides(
    overrides: Mapping[str, str], ops: Sequence[tuple[str, int, str | None]],
    broker_props: Mapping[str, str], *, broker: bool = False,
) -> dict[str, str | None]:
    """The resource's new override set after applying (name, op, value) operations: a
    topic's overrides, or (``broker``) one level of dynamic broker configs. APPEND and
    SUBTRACT start from the override, else -- for a topic -- the value the broker gives it
    (``broker_props``), or -- for a broker -- Kafka's default (ConfigAdminManager's)."""
    new: dict[str, str | None] = dict(overrides)
    for name, op, value in ops:
        try:
            kind = OpType(op)
        except ValueError:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation {op}") from None
        if kind is OpType.SET:
            new[name] = value
        elif kind is OpType.DELETE:
            new.pop(name, None)
        else:
            current = new.get(name)
            base = (_broker_list_base(name, kind) if broker
                    else _topic_list_base(name, kind, broker_props))
            if current is None:
                current = base
            items = [v.strip() for v in current.split(",") if v.strip()]
            given = [v.strip() for v in (value or "").split(",") if v.strip()]
            if kind is OpType.APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            new[name] = ",".join(items)
    return new


def _not_a_list(kind: OpType, name: str) -> TopicError:
    return TopicError(ErrorCode.INVALID_CONFIG,
                      f"Config value {kind.name.lower()} is not allowed for config key: {name}")


def _topic_list_base(name: str, kind: OpType, broker_props: Mapping[str, str]) -> str:
    definition = topic_config.TOPIC_CONFIGS.get(name)
    if definition is None:
        raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    if definition.type is not ConfigType.LIST:
        raise _not_a_list(kind, name)
    return topic_config.resolve(name, {}, broker_props).value


def _broker_list_base(name: str, kind: OpType) -> str:
    prop = PROPERTIES.get(name)
    if prop is None:
        raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {name}")
    if prop.type is not PropType.LIST:
        raise _not_a_list(kind, name)
    return prop.default or ""


async def apply_topic_configs(
    admin: AdminManager, name: str, overrides: Mapping[str, str | None], validate_only: bool
) -> None:
    """Validate the whole new override set; unless validate_only, store and apply it."""
    validate_configs(overrides)
    if not validate_only:
        await admin.set_topic_configs(name, overrides)


async def alter_resource(
    admin: AdminManager,
    resource_type: int,
    resource_name: str,
    names: Sequence[str],
    topic_overrides: Callable[[Mapping[str, str]], Mapping[str, str | None]],
    *,
    named_twice: bool,
    validate_only: bool,
) -> None:
    """One resource of AlterConfigs or IncrementalAlterConfigs, checked in this order: named
    twice in the request or a key twice -> INVALID_REQUEST; TOPIC: unknown topic ->
    UNKNOWN_TOPIC_OR_PARTITION, else the new override set (``topic_overrides(current)``, the
    one thing the two APIs do differently) validated whole and, unless ``validate_only``,
    stored; BROKER: this broker's id or "" (the cluster-wide defaults), dynamic properties
    only; any other type -> INVALID_REQUEST.
    Raises ``TopicError`` with Kafka's code."""
    if named_twice:
        raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate resource in request")
    check_unique_keys(names)
    if resource_type == ResourceType.TOPIC:
        current = await require_topic(admin, resource_name,
                                      message=f"The topic '{resource_name}' does not exist.")
        await apply_topic_configs(admin, resource_name, topic_overrides(current), validate_only)
    elif resource_type == ResourceType.BROKER:
        if resource_name != "":
            require_this_broker(admin, resource_name)
        dynamic = admin.dynamic_broker_config
        if dynamic is None:
            refuse_broker_changes(names)
            return
        refuse_broker_changes([n for n in names if n not in DYNAMIC_PROPERTIES])
        current = dynamic.overrides if resource_name != "" else dynamic.defaults
        try:
            await dynamic.alter(resource_name, topic_overrides(current),
                                validate_only=validate_only)
        except DynamicConfigError as exc:
            raise TopicError(exc.error_code, exc.message) from None
    else:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")

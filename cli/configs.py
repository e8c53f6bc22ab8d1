"""``minikafka configs``: describe and alter topic, broker, broker-logger and group configs,
like Kafka's ``kafka-configs.sh`` (same flags, same output).

    minikafka configs --bootstrap-server H:P --describe [--all]
        (--entity-type topics|brokers|broker-loggers|groups [--entity-name N | --entity-default]
         | --topic T | --broker B | --broker-defaults | --broker-logger B | --group G)
    minikafka configs --bootstrap-server H:P --alter <entity as above>
        [--add-config 'k1=v1,k2=[v1,v2]'] [--add-config-file FILE] [--delete-config k1,k2]

Describe prints, per entity, ``Dynamic configs for topic t are:`` (``All configs`` with
--all; ``Default configs for brokers in the cluster are:`` for the broker defaults) and one
line per config, sorted by name: ``  name=value sensitive=false synonyms={SOURCE:name=value,
...}``. Without --all only the entity's own dynamic configs are listed (Kafka filters by
config source the same way). Without a name, every topic (or broker, then the defaults, or
group) is described. Alter uses IncrementalAlterConfigs (SET and DELETE; deleting a config
that is not set fails with ``Invalid config(s): k``) and prints ``Completed updating config
for topic t.``. Users and client ids (quotas, SCRAM credentials) are handled by
``cli.configs_users``; ips and client-metrics are not supported. Errors go to stderr; exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from typing import Final, TextIO

from cli import configs_users
from cli.common import add_connection_args, client_config, read_properties, tool_config
from cli.configs_users import parse_config_list as parse_config_list
from client import Admin, AlterOp, ClientError, ConfigSource, Groups, KafkaClient, ResourceType
from client.admin import ConfigEntry

DEFAULT_TIMEOUT_MS: Final = 30_000
# entity type -> (resource type, the source of its own dynamic configs; None: no filter)
ENTITY_TYPES: Final = {
    "topics": (ResourceType.TOPIC, ConfigSource.DYNAMIC_TOPIC_CONFIG),
    "brokers": (ResourceType.BROKER, ConfigSource.DYNAMIC_BROKER_CONFIG),
    "broker-loggers": (ResourceType.BROKER_LOGGER, None),
    "groups": (ResourceType.GROUP, ConfigSource.DYNAMIC_GROUP_CONFIG),
}
USERS_AND_CLIENTS: Final = ("users", "clients")  # cli.configs_users
LATER: Final = ("ips", "client-metrics")
_SPLIT_OUTSIDE_BRACKETS: Final = re.compile(r",(?=[^\]]*(?:\[|$))")


class UsageError(ValueError):
    """Bad flags (Kafka's IllegalArgumentException: the message alone on stderr)."""


def parse_add_config(text: str) -> dict[str, str]:
    """``k1=v1,k2=[v1,v2]`` -> ``{k1: v1, k2: "v1,v2"}`` (commas inside [] stay in the value)."""
    out: dict[str, str] = {}
    for pair in _SPLIT_OUTSIDE_BRACKETS.split(text):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError('Invalid entity config: all configs to be added must be in the format "key=val".')
        out[key.strip()] = value.replace("[", "").replace("]", "").strip()
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="minikafka configs",
        description="Describe and alter configs of topics, brokers, broker loggers and groups.")
    add_connection_args(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="list configs for the given entity")
    action.add_argument("--alter", action="store_true", help="alter the configs of the entity")
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only dynamic ones")
    p.add_argument("--entity-type", choices=[*ENTITY_TYPES, *LATER], help="the kind of entity "
                   "(users and clients: see minikafka configs --entity-type users --help)")
    p.add_argument("--entity-name", help="the topic name, broker id or group id")
    p.add_argument("--entity-default", action="store_true", help="the defaults of all brokers")
    p.add_argument("--topic", help="the topic (same as --entity-type topics --entity-name)")
    p.add_argument("--broker", help="the broker id (same as --entity-type brokers --entity-name)")
    p.add_argument("--broker-defaults", action="store_true", help="the config defaults for all brokers")
    p.add_argument("--broker-logger", help="the broker id whose logger configs to use")
    p.add_argument("--group", help="the group id (same as --entity-type groups --entity-name)")
    p.add_argument("--add-config", metavar="k1=v1,k2=[v1,v2]",
                   help="configs to set; [] groups values that contain commas")
    p.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to set")
    p.add_argument("--delete-config", metavar="k1,k2", help="configs to remove")
    p.add_argument("--force", action="store_true", help="accepted for compatibility")
    p.add_argument("--command-timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS,
                   help="the time for each call, in ms (default 30000)")
    return p


def _entity(args: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, name): name None for every entity, "" for the broker defaults."""
    given: list[tuple[str, str | None]] = []
    if args.entity_type is not None:
        name = "" if args.entity_default else args.entity_name
        given.append((args.entity_type, name))
    for flag, kind in (("topic", "topics"), ("broker", "brokers"), ("broker_logger", "broker-loggers"),
                       ("group", "groups")):
        if getattr(args, flag) is not None:
            given.append((kind, getattr(args, flag)))
    if args.broker_defaults:
        given.append(("brokers", ""))
    if len(given) != 1:
        raise UsageError("Exactly one entity must be given: --entity-type with --entity-name or "
                         "--entity-default, or one of --topic, --broker, --broker-defaults, "
                         "--broker-logger, --group")
    kind, name = given[0]
    if kind in LATER:
        raise UsageError(f"Entity type {kind} is not supported yet (quotas and SCRAM credentials)")
    if args.entity_default and kind != "brokers":
        raise UsageError("--entity-default applies to brokers only here")
    if kind in ("brokers", "broker-loggers") and name and not name.isdigit():
        raise UsageError(f"The entity name for {kind} must be a valid integer broker id, found: {name}")
    if args.alter and name is None:
        raise UsageError("An entity name must be specified with --alter")
    return kind, name


def _line(e: ConfigEntry) -> str:
    synonyms = ", ".join(f"{_source(src)}:{n}={'null' if v is None else v}" for n, v, src in e.synonyms)
    value = "null" if e.value is None else e.value
    return f"  {e.name}={value} sensitive={'true' if e.is_sensitive else 'false'} synonyms={{{synonyms}}}"


def _source(code: int) -> str:
    try:
        return ConfigSource(code).name
    except ValueError:
        return "UNKNOWN"


async def _names(client: KafkaClient, admin: Admin, kind: str) -> list[str]:
    if kind == "topics":
        return [t.name for t in await admin.list_topics()]
    if kind in ("brokers", "broker-loggers"):
        return [*(str(b) for b in sorted((await admin.describe_cluster()).brokers)), ""]
    return [g.group_id for g in await Groups(client).list_groups()]


async def describe(client: KafkaClient, kind: str, name: str | None, everything: bool, out: TextIO) -> None:
    admin = Admin(client)
    resource_type, own_source = ENTITY_TYPES[kind]
    for entity in [name] if name is not None else await _names(client, admin, kind):
        if entity == "" and kind == "broker-loggers":
            continue
        source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if entity == "" else own_source
        if entity == "":
            print(f"Default configs for {kind} in the cluster are:", file=out)
        else:
            print(f"{'All' if everything else 'Dynamic'} configs for {kind[:-1]} {entity} are:", file=out)
        entries = await admin.describe_configs(resource_type, entity, include_synonyms=True)
        for e in sorted(entries, key=lambda e: e.name):
            if everything or source is None or e.source == source:
                print(_line(e), file=out)


async def alter(client: KafkaClient, kind: str, name: str, to_set: dict[str, str], to_delete: list[str],
                out: TextIO) -> None:
    admin = Admin(client)
    resource_type, own_source = ENTITY_TYPES[kind]
    if to_delete:
        source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if name == "" else own_source
        current = {e.name for e in await admin.describe_configs(resource_type, name)
                   if source is None or e.source == source}
        invalid = [k for k in to_delete if k not in current]
        if invalid:
            raise UsageError(f"Invalid config(s): {','.join(invalid)}")
    ops: list[tuple[str, AlterOp, str | None]] = [(k, AlterOp.SET, v) for k, v in to_set.items()]
    ops += [(k, AlterOp.DELETE, None) for k in to_delete]
    await admin.incremental_alter_configs(resource_type, name, ops)
    if name:
        print(f"Completed updating config for {kind[:-1]} {name}.", file=out)
    else:
        print(f"Completed updating default config for {kind} in the cluster.", file=out)


async def _run(args: argparse.Namespace, out: TextIO) -> None:
    kind, name = _entity(args)
    to_set = read_properties(args.add_config_file)
    if args.add_config:
        to_set.update(parse_add_config(args.add_config))
    to_delete = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if args.alter and not (to_set or to_delete):
        raise UsageError("At least one of --add-config, --add-config-file or --delete-config must be specified with --alter")
    if args.describe and (to_set or to_delete):
        raise UsageError("--add-config, --add-config-file and --delete-config apply to --alter only")
    config = client_config(args, tool_config(args.command_timeout_ms))
    async with KafkaClient(args.bootstrap_server, config) as client:
        if args.describe:
            await describe(client, kind, name, args.all, out)
        else:
            assert name is not None
            await alter(client, kind, name, to_set, to_delete, out)


def _for_users_or_clients(argv: list[str]) -> bool:
    return any(a in USERS_AND_CLIENTS and i and argv[i - 1] == "--entity-type" for i, a in enumerate(argv))


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    stream = out if out is not None else sys.stdout
    argv = list(sys.argv[1:] if argv is None else argv)
    if _for_users_or_clients(argv):
        return configs_users.main(argv, stream)
    args = _parser().parse_args(argv)
    try:
        asyncio.run(_run(args, stream))
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 1
    except ClientError as exc:
        print(f"Error while executing config command with args '{' '.join(argv)}'", file=sys.stderr)
        print(f"{exc.error_name}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

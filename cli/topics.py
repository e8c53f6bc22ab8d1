"""``minikafka topics``: create, list, describe, alter and delete topics, like kafka-topics.sh.

Flags are kafka-topics' own: ``--bootstrap-server H:P`` and one action of ``--create``,
``--list``, ``--describe``, ``--delete``, ``--alter``, with ``--topic`` (a regular
expression for list/describe/delete/alter, as kafka-topics' include list: ``,`` means
``|``), ``--partitions``, ``--replication-factor``, ``--config k=v`` (repeatable),
``--delete-config k`` (repeatable; like kafka-topics before 3.0 it applies with
``--alter``, through IncrementalAlterConfigs), ``--if-not-exists``, ``--if-exists``,
``--exclude-internal``, ``--command-timeout-ms``.

Output matches kafka-topics 3.9::

    Created topic t.
    Topic: t\tTopicId: <base64 uuid>\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: k=v,...
    \tTopic: t\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\tLastKnownElr: N/A

Errors print ``Error while executing topic command : <message>`` on stdout, as kafka-topics
does, and exit 1; a usage error exits 1 after argparse's message on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import re
import sys
import uuid
from collections.abc import Sequence
from typing import TextIO

from cli.common import tool_config
from client import Admin, ClientError, KafkaClient, TopicInfo

DEFAULT_TIMEOUT_MS = 30_000


class CommandError(Exception):
    """A failure kafka-topics reports as ``Error while executing topic command``."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="minikafka topics",
        description="Create, delete, describe, or change a topic.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "delete", "alter"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic", metavar="TOPIC")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--delete-config", action="append", default=[], metavar="NAME")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    p.add_argument("--command-timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS)
    return p


def _parse_configs(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CommandError(f"Invalid topic config: all configs to be added must be in the format \"key=val\": {item}")
        out[name.strip()] = value.strip()
    return out


def topic_filter(pattern: str | None) -> re.Pattern[str] | None:
    """kafka-topics' IncludeList: ``,`` means ``|``, spaces and surrounding quotes dropped."""
    if pattern is None:
        return None
    cleaned = pattern.strip().replace(",", "|").replace(" ", "").strip("\"'")
    try:
        return re.compile(cleaned)
    except re.error as exc:
        raise CommandError(f"{cleaned} is an invalid regex: {exc}") from None


async def _matching(admin: Admin, args: argparse.Namespace) -> list[str]:
    pattern = topic_filter(args.topic)
    names = [
        t.name
        for t in await admin.list_topics()
        if not (args.exclude_internal and t.is_internal)
        and (pattern is None or pattern.fullmatch(t.name))
    ]
    if args.topic is not None and not names and not args.if_exists:
        raise CommandError(f"Topic '{args.topic}' does not exist as expected")
    return sorted(names)


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka prints a Uuid as URL-safe base64 without padding (Uuid.toString)."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def format_topic(t: TopicInfo, overrides: dict[str, str]) -> list[str]:
    configs = ",".join(f"{k}={v}" for k, v in overrides.items())
    head = f"Topic: {t.name}"
    if t.topic_id.int != 0:
        head += f"\tTopicId: {kafka_uuid(t.topic_id)}"
    head += f"\tPartitionCount: {len(t.partitions)}\tReplicationFactor: {t.replication_factor}"
    lines = [head + f"\tConfigs: {configs}"]
    for p in sorted(t.partitions.values(), key=lambda p: p.partition):
        leader = str(p.leader) if p.leader >= 0 else "none"
        lines.append(
            f"\tTopic: {t.name}\tPartition: {p.partition}\tLeader: {leader}"
            f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
            "\tElr: N/A\tLastKnownElr: N/A"
        )
    return lines


async def _run(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    configs = _parse_configs(args.config)
    if args.create:
        if args.topic is None:
            raise CommandError("Missing required argument \"[topic]\"")
        if args.partitions is not None and args.partitions < 1:
            raise CommandError("The partitions must be greater than 0")
        if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
            raise CommandError("The replication factor must be between 1 and 32767 inclusive")
        if "." in args.topic and "_" in args.topic:
            print(
                "WARNING: Due to limitations in metric names, topics with a period ('.') or"
                " underscore ('_') could collide. To avoid issues it is best to use either,"
                " but not both.",
                file=out,
            )
        try:
            await admin.create_topic(
                args.topic,
                args.partitions if args.partitions is not None else -1,
                args.replication_factor if args.replication_factor is not None else -1,
                configs,
            )
        except ClientError as exc:
            if not (exc.error_name == "TOPIC_ALREADY_EXISTS" and args.if_not_exists):
                raise
            return
        print(f"Created topic {args.topic}.", file=out)
    elif args.list:
        for name in await _matching(admin, args):
            print(name, file=out)
    elif args.describe:
        names = await _matching(admin, args)
        if not names:
            return
        topics = {t.name: t for t in await admin.describe_topics(names)}
        for name in names:
            overrides = await admin.topic_config_overrides(name)
            for line in format_topic(topics[name], overrides):
                print(line, file=out)
    elif args.delete:
        if args.topic is None:
            raise CommandError("Missing required argument \"[topic]\"")
        names = await _matching(admin, args)
        if names:
            await admin.delete_topics(names)
    elif args.alter:
        if args.topic is None:
            raise CommandError("Missing required argument \"[topic]\"")
        if args.partitions is None and not configs and not args.delete_config:
            raise CommandError("At least one of --partitions, --config or --delete-config is required with --alter")
        names = await _matching(admin, args)
        for name in names:
            if configs or args.delete_config:
                await admin.alter_topic_configs(name, configs, list(args.delete_config))
            if args.partitions is not None:
                await admin.create_partitions(name, args.partitions)


async def _connect_and_run(args: argparse.Namespace, out: TextIO) -> None:
    async with KafkaClient(args.bootstrap_server, tool_config(args.command_timeout_ms)) as client:
        await _run(Admin(client), args, out)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run one kafka-topics command; returns the process exit code."""
    stream = out if out is not None else sys.stdout
    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 1
    if args.command_timeout_ms <= 0:
        print("Error while executing topic command : --command-timeout-ms must be positive", file=stream)
        return 1
    try:
        asyncio.run(_connect_and_run(args, stream))
    except (CommandError, ClientError) as exc:
        print(f"Error while executing topic command : {exc}", file=stream)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

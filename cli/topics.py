"""``minikafka topics``: create, list, describe, alter and delete topics, like kafka-topics.sh.

Flags are kafka-topics' own: ``--bootstrap-server H:P``, ``--command-config FILE`` and one
action of ``--create``, ``--list``, ``--describe``, ``--delete``, ``--alter``, with ``--topic``
(a regular expression for list/describe/delete/alter, as kafka-topics' include list: ``,``
means ``|``), ``--partitions``, ``--replication-factor``, ``--replica-assignment
0:1,1:2`` (replicas per partition, with --create or --alter), ``--config k=v``
(repeatable), ``--delete-config k`` (repeatable; like kafka-topics before 3.0 it applies
with ``--alter``, through IncrementalAlterConfigs), ``--if-not-exists``, ``--if-exists``,
``--exclude-internal``, ``--command-timeout-ms``. ``--describe`` also takes kafka-topics'
reports: ``--under-replicated-partitions`` (ISR smaller than the replicas),
``--under-min-isr-partitions`` (no leader, or ISR below the topic's min.insync.replicas),
``--at-min-isr-partitions``, ``--unavailable-partitions`` (no leader, or a leader that is
not a live broker) print only the matching partition lines; ``--topics-with-overrides``
prints only the topic lines of topics with non-default configs.

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

from cli.common import add_connection_args, client_config, tool_config
from client import Admin, ClientError, KafkaClient, PartitionInfo, ResourceType, TopicInfo

DEFAULT_TIMEOUT_MS = 30_000


class CommandError(Exception):
    """A failure kafka-topics reports as ``Error while executing topic command``."""


REPORTS = ("under_replicated_partitions", "under_min_isr_partitions", "at_min_isr_partitions",
           "unavailable_partitions")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="minikafka topics",
        description="Create, delete, describe, or change a topic.",
    )
    add_connection_args(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create a new topic")
    action.add_argument("--list", action="store_true", help="list all available topics")
    action.add_argument("--describe", action="store_true", help="list details for the given topics")
    action.add_argument("--delete", action="store_true", help="delete a topic")
    action.add_argument("--alter", action="store_true",
                        help="change the number of partitions or the configs of a topic")
    p.add_argument("--topic", metavar="TOPIC",
                   help="the topic to create, alter, describe or delete; a regular expression "
                        "except with --create")
    p.add_argument("--partitions", type=int, help="the number of partitions (--create, --alter)")
    p.add_argument("--replication-factor", type=int, help="replicas of each partition (--create)")
    p.add_argument("--replica-assignment", metavar="B0:B1,B0:B1,...",
                   help="replicas of each partition: broker ids, ':' within a partition, ',' "
                        "between partitions (--create, or --alter with the new partitions)")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help="a topic config override (repeatable)")
    p.add_argument("--delete-config", action="append", default=[], metavar="NAME",
                   help="with --alter: remove a topic config override (repeatable)")
    p.add_argument("--if-not-exists", action="store_true",
                   help="with --create: do nothing if the topic exists")
    p.add_argument("--if-exists", action="store_true",
                   help="with --alter or --delete: do nothing if the topic does not exist")
    p.add_argument("--exclude-internal", action="store_true",
                   help="with --list or --describe: leave out internal topics")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="with --describe: only partitions whose ISR is smaller than their replicas")
    p.add_argument("--under-min-isr-partitions", action="store_true",
                   help="with --describe: only partitions whose ISR is below min.insync.replicas")
    p.add_argument("--at-min-isr-partitions", action="store_true",
                   help="with --describe: only partitions whose ISR equals min.insync.replicas")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="with --describe: only partitions without a live leader")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="with --describe: only topics with config overrides (no partitions)")
    p.add_argument("--command-timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS,
                   help="the time for each admin call, in ms (default 30000)")
    return p


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """kafka-topics' ``0:1,1:2``: partition index -> broker ids; CommandError when it is bad."""
    out: dict[int, list[int]] = {}
    for index, item in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in item.split(":")]
        except ValueError:
            raise CommandError(f"Invalid replica assignment '{text}': broker ids are integers") from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise CommandError("Partition replica lists may not contain duplicate entries: "
                               + ",".join(map(str, duplicates)))
        if out and len(brokers) != len(out[0]):
            raise CommandError(f"Partition {index} has different replication factor: {brokers}")
        out[index] = brokers
    return out


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
    """The topic line and its partition lines, as kafka-topics --describe prints them."""
    return [topic_line(t, overrides), *(partition_line(t, p) for p in sorted(
        t.partitions.values(), key=lambda p: p.partition))]


def topic_line(t: TopicInfo, overrides: dict[str, str]) -> str:
    configs = ",".join(f"{k}={v}" for k, v in overrides.items())
    head = f"Topic: {t.name}"
    if t.topic_id.int != 0:
        head += f"\tTopicId: {kafka_uuid(t.topic_id)}"
    head += f"\tPartitionCount: {len(t.partitions)}\tReplicationFactor: {t.replication_factor}"
    return head + f"\tConfigs: {configs}"


def partition_line(t: TopicInfo, p: PartitionInfo) -> str:
    leader = str(p.leader) if p.leader >= 0 else "none"
    return (f"\tTopic: {t.name}\tPartition: {p.partition}\tLeader: {leader}"
            f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
            "\tElr: N/A\tLastKnownElr: N/A")


def reported(args: argparse.Namespace, p: PartitionInfo, min_isr: int, live: set[int]) -> bool:
    """Whether a report flag selects partition ``p`` (kafka-topics' PartitionDescription)."""
    has_leader = p.leader >= 0
    return bool(
        (args.under_replicated_partitions and len(p.replicas) - len(p.isr) > 0)
        or (args.under_min_isr_partitions and (not has_leader or len(p.isr) < min_isr))
        or (args.at_min_isr_partitions and len(p.isr) == min_isr)
        or (args.unavailable_partitions and (not has_leader or p.leader not in live)))


async def _describe(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    names = await _matching(admin, args)
    if not names:
        return
    topics = {t.name: t for t in await admin.describe_topics(names)}
    live = set(admin.client.cluster.brokers)
    report = any(getattr(args, r) for r in REPORTS)
    for name in names:
        topic = topics[name]
        entries = await admin.describe_configs(ResourceType.TOPIC, name)
        overrides = {e.name: e.value for e in entries if not e.is_default and e.value is not None}
        if not report and (not args.topics_with_overrides or overrides):
            print(topic_line(topic, overrides), file=out)
        if args.topics_with_overrides:
            continue
        min_isr = next((int(e.value) for e in entries
                        if e.name == "min.insync.replicas" and e.value and e.value.isdigit()), 1)
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
            if not report or reported(args, p, min_isr, live):
                print(partition_line(topic, p), file=out)


def _check_flags(args: argparse.Namespace) -> None:
    reports = [r for r in REPORTS if getattr(args, r)]
    if (reports or args.topics_with_overrides) and not args.describe:
        flag = "--" + (reports[0] if reports else "topics_with_overrides").replace("_", "-")
        raise CommandError(f"Option \"[{flag[2:]}]\" can't be used with option \"[{_action(args)}]\"")
    if args.topics_with_overrides and reports:
        raise CommandError("Option \"[topics-with-overrides]\" can't be used with option "
                           f"\"[{reports[0].replace('_', '-')}]\"")
    if args.replica_assignment is not None:
        if not (args.create or args.alter):
            raise CommandError(f"Option \"[replica-assignment]\" can't be used with option \"[{_action(args)}]\"")
        if args.create and (args.partitions is not None or args.replication_factor is not None):
            raise CommandError("Option \"[replica-assignment]\" can't be used with option "
                               "\"[partitions]\" or \"[replication-factor]\"")


def _action(args: argparse.Namespace) -> str:
    return next(a for a in ("create", "list", "describe", "delete", "alter") if getattr(args, a))


async def _run(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    configs = _parse_configs(args.config)
    _check_flags(args)
    assignment = None if args.replica_assignment is None else parse_replica_assignment(args.replica_assignment)
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
                assignments=assignment,
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
        await _describe(admin, args, out)
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
                existing = len((await admin.describe_topics([name]))[0].partitions)
                new_replicas = None if assignment is None else [
                    assignment[i] for i in sorted(assignment) if i >= existing]
                await admin.create_partitions(name, args.partitions, new_replicas)


async def _connect_and_run(args: argparse.Namespace, out: TextIO) -> None:
    config = client_config(args, tool_config(args.command_timeout_ms))
    async with KafkaClient(args.bootstrap_server, config) as client:
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

"""``minikafka reassign-partitions``: move partition replicas, like kafka-reassign-partitions.sh.

    minikafka reassign-partitions --bootstrap-server H:P [--command-config FILE]
        (--execute [--throttle B/s] | --verify | --cancel) --reassignment-json-file FILE
        | --list

The JSON file is kafka-reassign-partitions' own::

    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],"log_dirs":["any","any"]}]}

(``log_dirs`` other than "any" are refused: replicas do not move between log dirs here).
``--execute`` prints the current assignment of those partitions (to roll back with) and
starts the reassignments (AlterPartitionReassignments to the controller); ``--verify``
says, per partition, whether it completed (the assignment is the target and nothing is in
motion) or is still in progress; ``--cancel`` reverts the ongoing ones to their original
replicas; ``--list`` shows what is in motion. Output follows kafka-reassign-partitions 3.9;
exit 1 with ``Error: ...`` when something failed.

``--throttle B/s`` (with --execute), as Kafka's tool: each moving partition's current
replicas go into its topic's ``leader.replication.throttled.replicas`` and its new ones into
``follower.replication.throttled.replicas`` (``partition:broker`` lists), and every broker
involved gets ``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate``
(dynamic broker configs). ``--verify``, once nothing is in progress any more, removes those
broker configs from every broker (and ``replica.alter.log.dirs.io.max.bytes.per.second``)
and the two topic configs from the topics of the file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from cli.common import add_connection_args, client_config, tool_config
from client import Admin, ClientError, KafkaClient
from client.admin import AlterOp, ResourceType
from protocol.topic_partition import TopicPartition

DEFAULT_TIMEOUT_MS = 30_000
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment "
                  "completes, to ensure the throttle is removed.")


class CommandError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="minikafka reassign-partitions",
                                description="Move partition replicas between brokers.")
    add_connection_args(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("execute", "verify", "cancel", "list"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--reassignment-json-file", type=Path)
    p.add_argument("--throttle", type=int, default=-1, metavar="B/s",
                   help="with --execute: the replication rate bound of the brokers involved")
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_MS // 1000)
    p.add_argument("--command-timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS)
    return p


def parse_reassignment(text: str) -> dict[TopicPartition, list[int]]:
    """kafka-reassign-partitions' JSON: partition -> target replicas (order kept)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"the reassignment JSON is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise CommandError("the reassignment JSON needs a \"partitions\" list")
    out: dict[TopicPartition, list[int]] = {}
    for item in doc["partitions"]:
        if not isinstance(item, dict):
            raise CommandError(f"not a partition entry: {item!r}")
        topic, partition, replicas = item.get("topic"), item.get("partition"), item.get("replicas")
        if (not isinstance(topic, str) or not isinstance(partition, int)
                or not isinstance(replicas, list)
                or not all(isinstance(r, int) for r in replicas)):
            raise CommandError(f"a partition entry needs topic, partition and replicas: {item!r}")
        log_dirs = item.get("log_dirs")
        if log_dirs is not None and any(d != "any" for d in log_dirs):
            raise CommandError("log_dirs other than \"any\" are not supported")
        tp = TopicPartition(topic, partition)
        if tp in out:
            raise CommandError(f"Duplicate reassignment of partition {tp}")
        if len(set(replicas)) != len(replicas):
            raise CommandError(f"Duplicate replica ids in the reassignment of {tp}: {replicas}")
        out[tp] = list(replicas)
    if not out:
        raise CommandError("Partition reassignment list cannot be empty")
    return out


def format_reassignment(assignment: dict[TopicPartition, list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": replicas,
         "log_dirs": ["any"] * len(replicas)}
        for tp, replicas in sorted(assignment.items())]}, separators=(",", ":"))


async def _current(admin: Admin, tps: Sequence[TopicPartition]) -> dict[TopicPartition, list[int]]:
    topics = {t.name: t for t in await admin.describe_topics(sorted({tp.topic for tp in tps}))}
    out: dict[TopicPartition, list[int]] = {}
    for tp in tps:
        info = topics.get(tp.topic)
        p = None if info is None else info.partitions.get(tp.partition)
        if p is None:
            raise CommandError(f"Topic {tp.topic} or partition {tp.partition} not found")
        out[tp] = list(p.replicas)
    return out


async def _run(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    if args.list:
        moving = await admin.list_partition_reassignments()
        if not moving:
            print("No partition reassignments found.", file=out)
            return
        print("Current partition reassignments:", file=out)
        for tp, (replicas, adding, removing) in sorted(moving.items()):
            print(f"{tp}: replicas: {','.join(map(str, replicas))}. adding: "
                  f"{','.join(map(str, adding))}. removing: {','.join(map(str, removing))}.",
                  file=out)
        return
    if args.reassignment_json_file is None:
        raise CommandError("--reassignment-json-file is required")
    try:
        text = args.reassignment_json_file.read_text()
    except OSError as exc:
        raise CommandError(f"cannot read {args.reassignment_json_file}: {exc}") from None
    targets = parse_reassignment(text)
    tps = sorted(targets)
    if args.throttle >= 0 and not args.execute:
        raise CommandError("--throttle applies to --execute only")
    if args.execute:
        current = await _current(admin, tps)
        print("Current partition replica assignment\n", file=out)
        print(format_reassignment(current), file=out)
        print("\nSave this to use as the --reassignment-json-file option during rollback",
              file=out)
        if args.throttle >= 0:
            print(VERIFY_WARNING, file=out)
            await _set_throttles(admin, current, targets, args.throttle)
            print(f"The inter-broker throttle limit was set to {args.throttle} B/s", file=out)
        results = await admin.alter_partition_reassignments(
            {tp: r for tp, r in targets.items()})
        _check(results, "reassign")
        print(f"Successfully started partition reassignment{'s' if len(tps) > 1 else ''} "
              f"for {','.join(map(str, tps))}", file=out)
    elif args.cancel:
        results = await admin.alter_partition_reassignments({tp: None for tp in tps})
        _check(results, "cancel")
        print(f"Successfully cancelled partition reassignment{'s' if len(tps) > 1 else ''} "
              f"for: {','.join(map(str, tps))}", file=out)
    else:  # verify
        moving = await admin.list_partition_reassignments(tps)
        current = await _current(admin, tps)
        print("Status of partition reassignment:", file=out)
        for tp in tps:
            if tp in moving:
                print(f"Reassignment of partition {tp} is still in progress.", file=out)
            elif current[tp] == targets[tp]:
                print(f"Reassignment of partition {tp} is completed.", file=out)
            else:
                print(f"There is no active reassignment of partition {tp}, but replica set "
                      f"is {','.join(map(str, current[tp]))} rather than "
                      f"{','.join(map(str, targets[tp]))}.", file=out)
        if not any(tp in moving for tp in tps):
            await _clear_throttles(admin, targets, out)


def throttled_replicas(current: dict[TopicPartition, list[int]],
                       targets: dict[TopicPartition, list[int]]
                       ) -> dict[str, tuple[str, str]]:
    """Per topic, (leader throttled replicas, follower throttled replicas) of the partitions
    that move: their current replicas, and the target replicas they do not have yet, as
    ``partition:broker`` lists (Kafka's calculateLeaderThrottles / calculateFollowerThrottles,
    sorted as it sorts them: as text)."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    for tp, target in targets.items():
        now = current[tp]
        if now == target:
            continue
        leaders.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in now)
        followers.setdefault(tp.topic, set()).update(
            f"{tp.partition}:{b}" for b in target if b not in now)
    return {topic: (",".join(sorted(leaders[topic])),
                    ",".join(sorted(followers.get(topic, set())))) for topic in sorted(leaders)}


async def _set_throttles(admin: Admin, current: dict[TopicPartition, list[int]],
                         targets: dict[TopicPartition, list[int]], rate: int) -> None:
    for topic, (leader, follower) in throttled_replicas(current, targets).items():
        await admin.incremental_alter_configs(ResourceType.TOPIC, topic, [
            (LEADER_REPLICAS, AlterOp.SET, leader), (FOLLOWER_REPLICAS, AlterOp.SET, follower)])
    moving = [tp for tp in targets if current[tp] != targets[tp]]
    brokers = sorted({b for tp in moving for b in (*current[tp], *targets[tp])})
    for broker in brokers:
        await admin.incremental_alter_configs(ResourceType.BROKER, str(broker), [
            (LEADER_RATE, AlterOp.SET, str(rate)), (FOLLOWER_RATE, AlterOp.SET, str(rate))])


async def _clear_throttles(admin: Admin, targets: dict[TopicPartition, list[int]],
                           out: TextIO) -> None:
    """Kafka's clearAllThrottles: every live broker and every target replica's broker, and
    the topics of the file."""
    alive = set((await admin.describe_cluster()).brokers)
    brokers = sorted(alive | {b for replicas in targets.values() for b in replicas})
    print(f"\nClearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          f"{','.join(map(str, brokers))}", file=out)
    for broker in brokers:
        await admin.incremental_alter_configs(ResourceType.BROKER, str(broker), [
            (name, AlterOp.DELETE, None) for name in (LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE)])
    topics = sorted({tp.topic for tp in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} "
          f"{','.join(topics)}", file=out)
    for topic in topics:
        await admin.incremental_alter_configs(ResourceType.TOPIC, topic, [
            (LEADER_REPLICAS, AlterOp.DELETE, None), (FOLLOWER_REPLICAS, AlterOp.DELETE, None)])


def _check(results: dict[TopicPartition, tuple[str, str | None]], what: str) -> None:
    failed = {tp: r for tp, r in results.items() if r[0] != "NO_ERROR"}
    if failed:
        lines = [f"{tp}: {name}{': ' + message if message else ''}"
                 for tp, (name, message) in sorted(failed.items())]
        raise CommandError(f"Error {what}ing partition(s):\n" + "\n".join(lines))


async def _connect_and_run(args: argparse.Namespace, out: TextIO) -> None:
    config = client_config(args, tool_config(args.command_timeout_ms))
    async with KafkaClient(args.bootstrap_server, config) as client:
        await _run(Admin(client), args, out)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    stream = out if out is not None else sys.stdout
    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 1
    try:
        asyncio.run(_connect_and_run(args, stream))
    except (CommandError, ClientError) as exc:
        print(f"Error: {exc}", file=stream)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

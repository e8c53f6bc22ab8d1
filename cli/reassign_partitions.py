"""``minikafka reassign-partitions``: move partition replicas, like kafka-reassign-partitions.sh.

    minikafka reassign-partitions --bootstrap-server H:P
        (--execute | --verify | --cancel) --reassignment-json-file FILE
        | --list

The JSON file is kafka-reassign-partitions' own::

    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],"log_dirs":["any","any"]}]}

(``log_dirs`` other than "any" are refused: one log dir per broker here).
``--execute`` prints the current assignment of those partitions (to roll back with) and
starts the reassignments (AlterPartitionReassignments to the controller); ``--verify``
says, per partition, whether it completed (the assignment is the target and nothing is in
motion) or is still in progress; ``--cancel`` reverts the ongoing ones to their original
replicas; ``--list`` shows what is in motion. Output follows kafka-reassign-partitions 3.9;
exit 1 with ``Error: ...`` when something failed. ``--throttle`` is not supported (replica
throttling is configured per broker and topic, not through this tool, here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from cli.common import tool_config
from client import Admin, ClientError, KafkaClient
from protocol.topic_partition import TopicPartition

DEFAULT_TIMEOUT_MS = 30_000


class CommandError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="minikafka reassign-partitions",
                                description="Move partition replicas between brokers.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("execute", "verify", "cancel", "list"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--reassignment-json-file", type=Path)
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
    if args.execute:
        current = await _current(admin, tps)
        print("Current partition replica assignment\n", file=out)
        print(format_reassignment(current), file=out)
        print("\nSave this to use as the --reassignment-json-file option during rollback",
              file=out)
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


def _check(results: dict[TopicPartition, tuple[str, str | None]], what: str) -> None:
    failed = {tp: r for tp, r in results.items() if r[0] != "NO_ERROR"}
    if failed:
        lines = [f"{tp}: {name}{': ' + message if message else ''}"
                 for tp, (name, message) in sorted(failed.items())]
        raise CommandError(f"Error {what}ing partition(s):\n" + "\n".join(lines))


async def _connect_and_run(args: argparse.Namespace, out: TextIO) -> None:
    async with KafkaClient(args.bootstrap_server, tool_config(args.command_timeout_ms)) as client:
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

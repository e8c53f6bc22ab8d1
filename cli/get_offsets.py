"""``minikafka get-offsets``: offsets of topic-partitions at a time, like Kafka's GetOffsetShell
(``kafka-get-offsets.sh``; same flags, same output).

    minikafka get-offsets --bootstrap-server H:P [--topic REGEX] [--partitions 0,1]
        [--topic-partitions 'a:0,b:1-3,c:5-,:-2'] [--time latest|earliest|max-timestamp|-1|-2|-3|MS]
        [--exclude-internal-topics] [--command-config FILE]

Prints ``topic:partition:offset`` per partition, sorted by the ``topic-partition`` text as
Kafka's tool sorts it; a partition with no offset for the time (a timestamp after its last
record) is left out. ``--topic`` is kafka-topics' include list (``,`` means ``|``);
``--topic-partitions`` takes GetOffsetShell's patterns (topic regex, then ``:N``, ``:N-M``
upper bound exclusive, ``:N-`` or ``:-M``). Errors print ``Error occurred: <message>`` on
stderr and exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Callable, Sequence
from typing import Final, TextIO

from cli.common import add_connection_args, client_config, tool_config
from cli.topics import CommandError, topic_filter
from client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Admin,
    ClientError,
    KafkaClient,
    list_offsets,
)
from protocol.topic_partition import TopicPartition

CLIENT_ID: Final = "GetOffsetShell"
TIME_NAMES: Final = {"latest": LATEST_TIMESTAMP, "earliest": EARLIEST_TIMESTAMP, "max-timestamp": MAX_TIMESTAMP}
_RULE: Final = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
INT32_MAX: Final = 2**31 - 1

Rule = tuple[re.Pattern[str], Callable[[int], bool]]


def parse_time(text: str) -> int:
    if text in TIME_NAMES:
        return TIME_NAMES[text]
    try:
        value = int(text)
    except ValueError:
        raise CommandError(f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / "
                           "-3 or max-timestamp, or a specified long format timestamp") from None
    if value in (-4, -5):
        raise CommandError(f"Time {value} (tiered storage) is not supported: there is no tiered storage")
    return value


def parse_rules(text: str) -> list[Rule]:
    """GetOffsetShell's --topic-partitions patterns."""
    rules: list[Rule] = []
    for spec in text.split(","):
        match = _RULE.fullmatch(spec)
        if match is None:
            raise CommandError(f"Invalid rule specification: {spec}")
        topic, single, low, high = (g or None for g in match.groups())
        pattern = topic_filter(topic) if topic else re.compile(".*")
        assert pattern is not None
        if single is not None:
            lo, hi = int(single), int(single) + 1
        else:
            lo, hi = int(low or 0), int(high or INT32_MAX)
        rules.append((pattern, _in_range(lo, hi)))
    return rules


def _in_range(lo: int, hi: int) -> Callable[[int], bool]:
    def accepts(partition: int) -> bool:
        return lo <= partition < hi
    return accepts


def _rules(args: argparse.Namespace) -> list[Rule]:
    if args.topic_partitions is not None:
        if args.topic is not None or args.partitions is not None:
            raise CommandError("--topic-partitions cannot be used with --topic or --partitions")
        return parse_rules(args.topic_partitions)
    pattern = topic_filter(args.topic) if args.topic is not None else re.compile(".*")
    assert pattern is not None
    if not args.partitions:
        return [(pattern, lambda p: True)]
    try:
        wanted = {int(p) for p in args.partitions.split(",")}
    except ValueError:
        raise CommandError("--partitions expects a comma separated list of numeric partition ids, "
                           f"but received: {args.partitions}") from None
    return [(pattern, lambda p: p in wanted)]


async def offsets(client: KafkaClient, rules: list[Rule], timestamp: int,
                  exclude_internal: bool) -> dict[TopicPartition, int]:
    topics = await Admin(client).list_topics(include_internal=not exclude_internal)
    chosen = [TopicPartition(t.name, p) for t in topics for p in sorted(t.partitions)
              if any(pattern.fullmatch(t.name) and accepts(p) for pattern, accepts in rules)]
    if not chosen:
        raise CommandError("Could not match any topic-partitions with the specified filters")
    found = await list_offsets(client, dict.fromkeys(chosen, timestamp))
    return {tp: o.offset for tp, o in found.items() if o.offset != -1}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="minikafka get-offsets",
                                description="Offsets of topic-partitions at a time (like GetOffsetShell).")
    add_connection_args(p)
    p.add_argument("--topic", help="topics to get the offsets of: a regular expression (default: all)")
    p.add_argument("--partitions", help="comma-separated partition ids (default: all)")
    p.add_argument("--topic-partitions", metavar="topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3",
                   help="topic-partition patterns; cannot be used with --topic or --partitions")
    p.add_argument("--time", default="latest",
                   help="latest (-1, default), earliest (-2), max-timestamp (-3), or a timestamp in ms")
    p.add_argument("--exclude-internal-topics", action="store_true", help="leave out internal topics")
    return p


async def _run(args: argparse.Namespace, out: TextIO) -> None:
    rules = _rules(args)
    timestamp = parse_time(args.time)
    config = client_config(args, tool_config(30_000, CLIENT_ID))
    async with KafkaClient(args.bootstrap_server, config) as client:
        found = await offsets(client, rules, timestamp, args.exclude_internal_topics)
    for tp in sorted(found, key=str):
        print(f"{tp.topic}:{tp.partition}:{found[tp]}", file=out)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = _parser().parse_args(list(argv) if argv is not None else None)
    try:
        asyncio.run(_run(args, out if out is not None else sys.stdout))
    except (CommandError, ClientError) as exc:
        print(f"Error occurred: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

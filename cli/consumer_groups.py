"""``minikafka consumer-groups``: list, describe, reset offsets of and delete consumer groups,
like Kafka's ``kafka-consumer-groups.sh`` (same flags, same columns).

    minikafka consumer-groups --bootstrap-server H:P --list [--state S]
    minikafka consumer-groups --bootstrap-server H:P --describe --group G [--members|--state]
    minikafka consumer-groups --bootstrap-server H:P --reset-offsets --group G
        (--topic T[:P,P] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --to-datetime YYYY-MM-DDTHH:mm:SS.sss)
        [--dry-run | --execute]
    minikafka consumer-groups --bootstrap-server H:P --delete --group G [--group G2 ...]

It talks the Kafka protocol through ``client`` (``client.groups``): FindCoordinator, then
ListGroups, DescribeGroups, OffsetFetch, OffsetCommit and DeleteGroups at the group's
coordinator, Metadata, and ListOffsets at each partition's leader.
Offsets are reset like Kafka's tool: only for an inactive group (Empty or Dead), committed
with generation -1 and no member id; without ``--execute`` it is a dry run. The describe
view shows, per partition, the committed offset, the log end offset and the lag, and the
member owning the partition (decoded from the ``consumer`` protocol assignment).
Exit codes: 0 done, 1 an error (message on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TextIO

from cli.common import tool_config
from client import Admin, ClientError, Groups, KafkaClient, list_offsets
from client.groups import Member
from protocol.topic_partition import TopicPartition

EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
INACTIVE_STATES: Final = ("Empty", "Dead")


@dataclass(frozen=True, slots=True)
class Tool:
    """The calls the commands make, over one client."""

    client: KafkaClient
    admin: Admin
    groups: Groups

    async def offsets_at(self, partitions: Sequence[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """The offset for ``timestamp`` (-1 latest, -2 earliest) of each partition; -1 if none."""
        if not partitions:
            return {}
        found = await list_offsets(self.client, dict.fromkeys(partitions, timestamp))
        return {tp: o.offset for tp, o in found.items()}


def _row(cols: Sequence[object], widths: Sequence[int]) -> str:
    return " ".join(str(c).ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()


def _table(
    header: Sequence[str], rows: list[Sequence[object]], out: TextIO, min_widths: Sequence[int]
) -> None:
    """Kafka's layout: left-aligned columns, each as wide as its widest cell or its minimum."""
    widths = [
        max([min_widths[i], len(h)] + [len(str(r[i])) for r in rows]) for i, h in enumerate(header)
    ]
    print(file=out)
    print(_row(header, widths), file=out)
    for r in rows:
        print(_row(r, widths), file=out)


async def describe_offsets(tool: Tool, group_id: str, out: TextIO) -> int:
    desc = await tool.groups.describe_group(group_id)
    if desc.state == "Dead":
        print(f"Error: Consumer group '{group_id}' does not exist.", file=sys.stderr)
        return 1
    committed = await tool.groups.committed_offsets(group_id)
    owner: dict[TopicPartition, Member] = {}
    for m in desc.members:
        for tp in m.assignment:
            owner[tp] = m
    partitions = sorted(set(committed) | set(owner))
    ends = await tool.offsets_at(partitions, LATEST_TIMESTAMP)
    if not desc.members:
        print(f"\nConsumer group '{group_id}' has no active members.", file=out)
    rows: list[Sequence[object]] = []
    for tp in partitions:
        current = committed.get(tp)
        end = ends.get(tp, -1)
        lag: object = "-" if current is None or end < 0 else max(end - current, 0)
        who = owner.get(tp)
        rows.append([
            group_id, tp[0], tp[1], "-" if current is None else current, "-" if end < 0 else end,
            lag, who.member_id if who else "-", who.host if who else "-", who.client_id if who else "-",
        ])
    for member in desc.members:  # members with nothing assigned still show
        if not member.assignment:
            rows.append([group_id, "-", "-", "-", "-", "-", member.member_id, member.host,
                         member.client_id])
    _table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID"], rows, out, [15, 15, 10, 15, 15, 15, 15, 15, 0])
    return 0


async def describe_members(tool: Tool, group_id: str, out: TextIO) -> int:
    desc = await tool.groups.describe_group(group_id)
    if not desc.members:
        print(f"\nConsumer group '{group_id}' has no active members.", file=out)
        return 0
    rows: list[Sequence[object]] = [
        [group_id, m.member_id, m.group_instance_id or "-", m.host, m.client_id, len(m.assignment)]
        for m in desc.members
    ]
    _table(["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"], rows, out,
           [15, 15, 17, 15, 15, 0])
    return 0


async def describe_state(tool: Tool, group_id: str, out: TextIO) -> int:
    desc = await tool.groups.describe_group(group_id)
    rows: list[Sequence[object]] = [[group_id, desc.protocol or "-", desc.state, len(desc.members)]]
    _table(["GROUP", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"], rows, out, [15, 19, 15, 0])
    return 0


def parse_datetime_ms(text: str) -> int:
    """Kafka's --to-datetime formats: YYYY-MM-DDTHH:mm:SS[.sss][zone]; no zone = local time."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"Error parsing timestamp '{text}': use YYYY-MM-DDTHH:mm:SS.sss") from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # local time zone, as Kafka's tool
    return int(parsed.timestamp() * 1000)


async def _partitions_in_scope(tool: Tool, args: argparse.Namespace, group_id: str) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(await tool.groups.committed_offsets(group_id))
    out: list[TopicPartition] = []
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        if parts:
            out.extend(TopicPartition(name, int(p)) for p in parts.split(",") if p.strip())
        else:
            meta = await tool.admin.describe_topics([name])
            out.extend(TopicPartition(name, p) for p in meta[0].partitions)
    return sorted(set(out))


async def reset_offsets(tool: Tool, args: argparse.Namespace, out: TextIO) -> int:
    group_id = args.group[0]
    desc = await tool.groups.describe_group(group_id)
    if desc.state not in INACTIVE_STATES:
        print(f"Error: Assignments can only be reset if the group '{group_id}' is inactive, "
              f"but the current state is {desc.state}.", file=sys.stderr)
        return 1
    partitions = await _partitions_in_scope(tool, args, group_id)
    earliest = await tool.offsets_at(partitions, EARLIEST_TIMESTAMP)
    latest = await tool.offsets_at(partitions, LATEST_TIMESTAMP)
    if args.to_earliest:
        targets = dict(earliest)
    elif args.to_latest:
        targets = dict(latest)
    elif args.to_offset is not None:
        # out-of-range targets are clamped to the log's bounds, as Kafka's tool does
        targets = {tp: min(max(args.to_offset, earliest[tp]), latest[tp]) for tp in partitions}
    else:
        stamp_ms = parse_datetime_ms(args.to_datetime)
        found = await tool.offsets_at(partitions, stamp_ms)
        targets = {tp: (found[tp] if found.get(tp, -1) >= 0 else latest[tp]) for tp in partitions}
    if not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. "
              "In a future major release, the default behavior of this command will be to "
              "prompt the user before executing the reset rather than doing a dry run. You "
              "should add the --dry-run option explicitly if you are scripting this command "
              "and want to keep the current default behavior without prompting.", file=sys.stderr)
    if args.execute:
        await tool.groups.commit_offsets(group_id, targets)
    rows: list[Sequence[object]] = [[group_id, tp.topic, tp.partition, targets[tp]] for tp in sorted(targets)]
    _table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, out, [30, 30, 10, 0])
    return 0


async def delete(tool: Tool, group_ids: list[str], out: TextIO) -> int:
    results = await tool.groups.delete_groups(group_ids)
    ok = [g for g in group_ids if results.get(g) == "NONE"]
    failed = {g: e for g, e in results.items() if e != "NONE"}
    if ok and not failed:
        quoted = ", ".join(f"'{g}'" for g in ok)
        print(f"Deletion of requested consumer groups ({quoted}) was successful.", file=out)
        return 0
    if ok:
        print("These consumer groups were deleted successfully: "
              + ", ".join(f"'{g}'" for g in ok), file=out)
    print("Deletion of some consumer groups failed:", file=sys.stderr)
    for g, e in failed.items():
        print(f"* Group '{g}' could not be deleted due to: {e}", file=sys.stderr)
    return 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="minikafka consumer-groups",
                                description="List, describe, reset offsets of, and delete consumer groups.")
    p.add_argument("--bootstrap-server", required=True, help="host:port of a broker")
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list all consumer groups")
    actions.add_argument("--describe", action="store_true", help="describe a group: offsets, lag, members")
    actions.add_argument("--reset-offsets", action="store_true", help="reset the group's committed offsets")
    actions.add_argument("--delete", action="store_true", help="delete groups (only inactive ones)")
    p.add_argument("--group", action="append", default=[], help="the consumer group (repeatable for --delete)")
    p.add_argument("--members", action="store_true", help="with --describe: list the members")
    p.add_argument("--state", nargs="?", const="", default=None,
                   help="with --describe: the group's state; with --list: filter by states (comma-separated)")
    p.add_argument("--offsets", action="store_true", help="with --describe: the offsets view (default)")
    p.add_argument("--topic", action="append", default=[], help="with --reset-offsets: TOPIC or TOPIC:P,P")
    p.add_argument("--all-topics", action="store_true", help="with --reset-offsets: every committed topic")
    targets = p.add_mutually_exclusive_group()
    targets.add_argument("--to-earliest", action="store_true")
    targets.add_argument("--to-latest", action="store_true")
    targets.add_argument("--to-offset", type=int, default=None)
    targets.add_argument("--to-datetime", default=None, help="YYYY-MM-DDTHH:mm:SS.sss")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true")
    mode.add_argument("--execute", action="store_true")
    p.add_argument("--timeout", type=int, default=30_000, help="ms to wait for each answer")
    return p


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    async with KafkaClient(args.bootstrap_server, tool_config(args.timeout)) as client:
        tool = Tool(client, Admin(client), Groups(client))
        if args.list:
            states = [s for s in (args.state or "").split(",") if s]
            for listing in await tool.groups.list_groups(states):
                print(listing.group_id, file=out)
            return 0
        if args.describe:
            code = 0
            for group_id in args.group:
                if args.members:
                    code |= await describe_members(tool, group_id, out)
                elif args.state is not None:
                    code |= await describe_state(tool, group_id, out)
                else:
                    code |= await describe_offsets(tool, group_id, out)
            return code
        if args.reset_offsets:
            return await reset_offsets(tool, args, out)
        return await delete(tool, args.group, out)


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.describe or args.reset_offsets or args.delete) and not args.group:
        parser.error("--group is required with --describe, --reset-offsets and --delete")
    if args.reset_offsets:
        if not (args.topic or args.all_topics):
            parser.error("--reset-offsets needs --topic or --all-topics")
        if not (args.to_earliest or args.to_latest or args.to_offset is not None or args.to_datetime):
            parser.error("--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --to-datetime")
    try:
        return asyncio.run(_run(args, out))
    except (ClientError, ValueError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1

if __name__ == "__main__":
    sys.exit(main())

"""``minikafka consumer-groups``: list, describe, reset offsets of and delete consumer groups,
like Kafka's ``kafka-consumer-groups.sh`` (same flags, same columns).

    minikafka consumer-groups --bootstrap-server H:P --list [--state [S,S]]
    minikafka consumer-groups --bootstrap-server H:P --describe (--group G ... | --all-groups)
        [--members | --state | --offsets]
    minikafka consumer-groups --bootstrap-server H:P --reset-offsets (--group G ... | --all-groups)
        (--topic T[:P,P] ... | --all-topics)
        (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N
         | --to-datetime YYYY-MM-DDTHH:mm:SS.sss | --by-duration PnDTnHnMnS | --from-file CSV)
        [--dry-run | --execute] [--export]
    minikafka consumer-groups --bootstrap-server H:P --delete (--group G ... | --all-groups)
    minikafka consumer-groups --bootstrap-server H:P --delete-offsets --group G --topic T[:P,P]

Every command takes ``--command-config FILE`` (client properties).

It talks the Kafka protocol through ``client`` (``client.groups``): FindCoordinator, then
ListGroups, DescribeGroups, OffsetFetch, OffsetCommit and DeleteGroups at the group's
coordinator, Metadata, and ListOffsets at each partition's leader.
Offsets are reset like Kafka's tool: only for an inactive group (Empty or Dead), committed
with generation -1 and no member id, clamped to the log's bounds (--to-offset, --shift-by,
--from-file); without ``--execute`` it is a dry run; ``--export`` prints the plan as CSV
(``topic,partition,offset``; with several groups ``group,topic,partition,offset``). The describe
view shows, per partition, the committed offset, the log end offset and the lag, and the
member owning the partition (decoded from the ``consumer`` protocol assignment).
Exit codes: 0 done, 1 an error (message on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from cli.common import add_connection_args, client_config, tool_config
from client import Admin, ClientError, Groups, KafkaClient, list_offsets
from client.groups import Member
from protocol.topic_partition import TopicPartition

EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
INACTIVE_STATES: Final = ("Empty", "Dead")
# --list --state names (case-insensitive) -> the broker's state names
_STATES: Final = {s.lower(): s for s in ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")}
_DURATION: Final = re.compile(r"([-+]?)P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?")


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
    if desc.state == "Dead":
        print(f"Error: Consumer group '{group_id}' does not exist.", file=sys.stderr)
        return 1
    address = tool.client.address(desc.coordinator)
    coordinator = f"{address[0]}:{address[1]}  ({desc.coordinator})" if address else f"({desc.coordinator})"
    rows: list[Sequence[object]] = [[group_id, coordinator, desc.protocol or "", desc.state, len(desc.members)]]
    _table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"], rows, out,
           [15, 25, 20, 15, 0])
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


def parse_duration_ms(text: str) -> int:
    """ISO-8601 ``PnDTnHnMn.nS`` (java.time.Duration.parse), as --by-duration takes it."""
    match = _DURATION.fullmatch(text.strip().upper())
    if match is None or not any(match.groups()[1:]):
        raise ValueError(f"Error parsing duration '{text}': use the ISO-8601 form PnDTnHnMnS, e.g. PT1H30M")
    sign = -1 if match.group(1) == "-" else 1
    days, hours, minutes = (float(g or 0) for g in match.groups()[1:4])
    seconds = float(match.group(5) or 0)
    return sign * int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


async def _partitions_in_scope(tool: Tool, args: argparse.Namespace, group_id: str) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(await tool.groups.committed_offsets(group_id))
    return await _named_partitions(tool, args.topic)


async def _named_partitions(tool: Tool, specs: list[str]) -> list[TopicPartition]:
    """The partitions ``--topic`` names, sorted: ``topic:0,2`` those partitions, ``topic``
    all of its partitions (from the cluster's metadata)."""
    out: list[TopicPartition] = []
    for spec in specs:
        name, _, parts = spec.partition(":")
        if parts:
            out.extend(TopicPartition(name, int(p)) for p in parts.split(",") if p.strip())
        else:
            meta = await tool.admin.describe_topics([name])
            out.extend(TopicPartition(name, p) for p in meta[0].partitions)
    return sorted(set(out))


async def _clamped(tool: Tool, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Offsets moved into the log's bounds, as Kafka's tool does (checkOffsetsRange)."""
    earliest = await tool.offsets_at(list(wanted), EARLIEST_TIMESTAMP)
    latest = await tool.offsets_at(list(wanted), LATEST_TIMESTAMP)
    return {tp: min(max(o, earliest[tp]), latest[tp]) for tp, o in wanted.items()}


async def _targets(tool: Tool, args: argparse.Namespace, group_id: str,
                   plan: dict[str, dict[TopicPartition, int]] | None) -> dict[TopicPartition, int]:
    if plan is not None:
        if group_id not in plan:
            print(f"\nError: No reset plan for group {group_id} found", file=sys.stderr)
            return {}
        return await _clamped(tool, plan[group_id])
    partitions = await _partitions_in_scope(tool, args, group_id)
    if args.to_earliest:
        return await tool.offsets_at(partitions, EARLIEST_TIMESTAMP)
    if args.to_latest:
        return await tool.offsets_at(partitions, LATEST_TIMESTAMP)
    if args.to_offset is not None:
        return await _clamped(tool, dict.fromkeys(partitions, args.to_offset))
    if args.shift_by is not None:
        committed = await tool.groups.committed_offsets(group_id)
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            raise ValueError(f"Cannot shift offset for partition {missing[0]} since there is no "
                             "current committed offset")
        return await _clamped(tool, {tp: committed[tp] + args.shift_by for tp in partitions})
    if args.to_current:
        committed = await tool.groups.committed_offsets(group_id)
        latest = await tool.offsets_at([tp for tp in partitions if tp not in committed], LATEST_TIMESTAMP)
        return {tp: committed[tp] if tp in committed else latest[tp] for tp in partitions}
    if args.by_duration is not None:
        stamp_ms = int(time.time() * 1000) - parse_duration_ms(args.by_duration)
    else:
        stamp_ms = parse_datetime_ms(args.to_datetime)
    found = await tool.offsets_at(partitions, stamp_ms)
    latest = await tool.offsets_at([tp for tp in partitions if found.get(tp, -1) < 0], LATEST_TIMESTAMP)
    return {tp: (found[tp] if found.get(tp, -1) >= 0 else latest[tp]) for tp in partitions}


def read_reset_plan(path: str, groups: Sequence[str]) -> dict[str, dict[TopicPartition, int]]:
    """A CSV written by --export: ``topic,partition,offset`` (one group) or
    ``group,topic,partition,offset``."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"Cannot read {path}: {exc.strerror or exc}") from None
    plan: dict[str, dict[TopicPartition, int]] = {}
    for n, row in enumerate(csv.reader(text.splitlines()), 1):
        if not row:
            continue
        try:
            if len(row) == 3 and len(groups) == 1:
                group, (topic, partition, offset) = groups[0], row
            else:
                group, topic, partition, offset = row
            plan.setdefault(group, {})[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError:
            raise ValueError(f"{path}:{n}: expected topic,partition,offset or group,topic,partition,offset") from None
    return plan


async def reset_offsets(tool: Tool, args: argparse.Namespace, group_ids: list[str], out: TextIO) -> int:
    plan = None if args.from_file is None else read_reset_plan(args.from_file, group_ids)
    code = 0
    results: dict[str, dict[TopicPartition, int]] = {}
    for group_id in group_ids:
        desc = await tool.groups.describe_group(group_id)
        if desc.state not in INACTIVE_STATES:
            print(f"\nError: Assignments can only be reset if the group '{group_id}' is inactive, "
                  f"but the current state is {desc.state}.", file=sys.stderr)
            code = 1
            continue
        targets = await _targets(tool, args, group_id, plan)
        if args.execute:
            await tool.groups.commit_offsets(group_id, targets)
        results[group_id] = targets
    if not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. "
              "In a future major release, the default behavior of this command will be to "
              "prompt the user before executing the reset rather than doing a dry run. You "
              "should add the --dry-run option explicitly if you are scripting this command "
              "and want to keep the current default behavior without prompting.", file=sys.stderr)
    if args.export:
        writer = csv.writer(out, lineterminator="\n")
        for group_id, targets in results.items():
            for tp in sorted(targets):
                prefix = [group_id] if len(group_ids) > 1 else []
                writer.writerow([*prefix, tp.topic, tp.partition, targets[tp]])
        return code
    rows: list[Sequence[object]] = [[g, tp.topic, tp.partition, targets[tp]]
                                    for g, targets in results.items() for tp in sorted(targets)]
    if rows:
        _table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, out, [30, 30, 10, 0])
    return code


async def delete_offsets(tool: Tool, args: argparse.Namespace, group_id: str, out: TextIO) -> int:
    partitions = await _named_partitions(tool, args.topic)
    try:
        results = await tool.groups.delete_offsets(group_id, partitions)
    except ClientError as exc:
        messages = {"GROUP_ID_NOT_FOUND": f"'{group_id}' does not exist.",
                    "INVALID_GROUP_ID": f"'{group_id}' is not valid.",
                    "NON_EMPTY_GROUP": f"Deleting offsets of a consumer group '{group_id}' is forbidden "
                                       "if the group is not empty."}
        if exc.error_name not in messages:
            raise
        print(f"\nError: {messages[exc.error_name]}", file=sys.stderr)
        return 1
    failed = any(e != "NONE" for e in results.values())
    if failed:
        print("\nError: Encounter some partition level error, see the follow-up details:", file=sys.stderr)
    else:
        print(f"Request succeed for deleting offsets with topic {', '.join(args.topic)} group {group_id}",
              file=out)
    rows: list[Sequence[object]] = [[tp.topic, tp.partition, "Successful" if e == "NONE" else f"Error: :{e}"]
                                    for tp, e in sorted(results.items())]
    _table(["TOPIC", "PARTITION", "STATUS"], rows, out, [30, 15, 15])
    return 1 if failed else 0


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
    add_connection_args(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list all consumer groups")
    actions.add_argument("--describe", action="store_true", help="describe groups: offsets, lag, members")
    actions.add_argument("--reset-offsets", action="store_true",
                         help="reset the committed offsets of inactive groups (a dry run without --execute)")
    actions.add_argument("--delete", action="store_true", help="delete groups (only inactive ones)")
    actions.add_argument("--delete-offsets", action="store_true",
                         help="delete the committed offsets of a group for --topic")
    p.add_argument("--group", action="append", default=[], help="a consumer group (repeatable)")
    p.add_argument("--all-groups", action="store_true",
                   help="with --describe, --reset-offsets or --delete: every group")
    p.add_argument("--members", action="store_true", help="with --describe: list the members")
    p.add_argument("--state", nargs="?", const="", default=None,
                   help="with --describe: the group's state; with --list: a STATE column, and only "
                        "groups in these states when given (comma-separated)")
    p.add_argument("--offsets", action="store_true", help="with --describe: the offsets view (default)")
    p.add_argument("--verbose", action="store_true", help="accepted for compatibility")
    p.add_argument("--topic", action="append", default=[],
                   help="with --reset-offsets or --delete-offsets: TOPIC or TOPIC:P,P (repeatable)")
    p.add_argument("--all-topics", action="store_true",
                   help="with --reset-offsets: every topic the group has offsets for")
    targets = p.add_mutually_exclusive_group()
    targets.add_argument("--to-earliest", action="store_true", help="reset to the earliest offsets")
    targets.add_argument("--to-latest", action="store_true", help="reset to the latest offsets")
    targets.add_argument("--to-current", action="store_true",
                         help="reset to the committed offsets (the log end where there is none)")
    targets.add_argument("--to-offset", type=int, default=None, help="reset to this offset")
    targets.add_argument("--shift-by", type=int, default=None, metavar="N",
                         help="move the committed offsets by N (negative: back)")
    targets.add_argument("--to-datetime", default=None, metavar="YYYY-MM-DDTHH:mm:SS.sss",
                         help="reset to the first offset at or after this time")
    targets.add_argument("--by-duration", default=None, metavar="PnDTnHnMnS",
                         help="reset to the first offset at or after this long ago")
    targets.add_argument("--from-file", default=None, metavar="CSV",
                         help="reset to the offsets in a file written by --export")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.add_argument("--export", action="store_true",
                   help="with --reset-offsets: print the plan as CSV (input for --from-file)")
    p.add_argument("--timeout", type=int, default=30_000, help="ms to wait for each call (default 30000)")
    return p


async def _groups(tool: Tool, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in await tool.groups.list_groups()]
    return list(args.group)


async def _list(tool: Tool, args: argparse.Namespace, out: TextIO) -> int:
    states = [s.strip() for s in (args.state or "").split(",") if s.strip()]
    unknown = [s for s in states if s.lower() not in _STATES]
    if unknown:
        raise ValueError(f"Invalid state list '{args.state}'. Valid states are: {', '.join(_STATES.values())}")
    listings = await tool.groups.list_groups([_STATES[s.lower()] for s in states])
    if args.state is None:
        for listing in listings:
            print(listing.group_id, file=out)
        return 0
    width = max([15, *(len(g.group_id) for g in listings)]) + 10
    print(f"{'GROUP'.ljust(width)} {'STATE'.ljust(20)}".rstrip(), file=out)
    for g in listings:
        print(f"{g.group_id.ljust(width)} {g.state.ljust(20)}".rstrip(), file=out)
    return 0


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    config = client_config(args, tool_config(args.timeout))
    async with KafkaClient(args.bootstrap_server, config) as client:
        tool = Tool(client, Admin(client), Groups(client))
        if args.list:
            return await _list(tool, args, out)
        group_ids = await _groups(tool, args)
        if args.describe:
            code = 0
            for group_id in group_ids:
                if args.members:
                    code |= await describe_members(tool, group_id, out)
                elif args.state is not None:
                    code |= await describe_state(tool, group_id, out)
                else:
                    code |= await describe_offsets(tool, group_id, out)
            return code
        if args.reset_offsets:
            return await reset_offsets(tool, args, group_ids, out)
        if args.delete_offsets:
            return await delete_offsets(tool, args, group_ids[0], out)
        return await delete(tool, group_ids, out) if group_ids else 0


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    needs_group = args.describe or args.reset_offsets or args.delete or args.delete_offsets
    if needs_group and not (args.group or args.all_groups):
        parser.error("--group or --all-groups is required with --describe, --reset-offsets, --delete "
                     "and --delete-offsets")
    if args.all_groups and args.group:
        parser.error("--group cannot be used with --all-groups")
    if args.delete_offsets and (args.all_groups or len(args.group) != 1 or not args.topic):
        parser.error("--delete-offsets takes one --group and at least one --topic")
    if args.reset_offsets:
        if not (args.topic or args.all_topics or args.from_file):
            parser.error("--reset-offsets needs --topic or --all-topics")
        chosen = [args.to_earliest, args.to_latest, args.to_current, args.to_offset is not None,
                  args.shift_by is not None, args.to_datetime, args.by_duration, args.from_file]
        if not any(chosen):
            parser.error("--reset-offsets needs one of --to-earliest, --to-latest, --to-current, "
                         "--to-offset, --shift-by, --to-datetime, --by-duration, --from-file")
    elif args.export:
        parser.error("--export applies to --reset-offsets only")


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    _check(parser, args)
    try:
        return asyncio.run(_run(args, out))
    except (ClientError, ValueError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

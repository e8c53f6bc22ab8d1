"""``minikafka consumer-groups``: list, describe, reset offsets of and delete consumer groups,
like Kafka's ``kafka-consumer-groups.sh`` (same flags, same columns).

    minikafka consumer-groups --bootstrap-server H:P --list [--state S]
    minikafka consumer-groups --bootstrap-server H:P --describe --group G [--members|--state]
    minikafka consumer-groups --bootstrap-server H:P --reset-offsets --group G
        (--topic T[:P,P] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --to-datetime YYYY-MM-DDTHH:mm:SS.sss)
        [--dry-run | --execute]
    minikafka consumer-groups --bootstrap-server H:P --delete --group G [--group G2 ...]

It talks the Kafka protocol over one socket (``broker.tools.client``): FindCoordinator,
ListGroups, DescribeGroups, OffsetFetch, ListOffsets, Metadata, OffsetCommit, DeleteGroups.
Offsets are reset like Kafka's tool: only for an inactive group (Empty or Dead), committed
with generation -1 and no member id; without ``--execute`` it is a dry run. The describe
view shows, per partition, the committed offset, the log end offset and the lag, and the
member owning the partition (decoded from the ``consumer`` protocol assignment).
Exit codes: 0 done, 1 an error (message on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TextIO

from broker.tools.client import AdminClient, ClientError, _check
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest

EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
INACTIVE_STATES: Final = ("Empty", "Dead")

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[Member]


def decode_assignment(data: bytes) -> list[TopicPartition]:
    """Partitions in a ``consumer`` protocol assignment (int16 version + struct); [] if unreadable."""
    if len(data) < 2:
        return []
    version = min(int.from_bytes(data[:2], "big", signed=True), ConsumerProtocolAssignment.HIGHEST_VERSION)
    if version < 0:
        return []
    try:
        decoded = ConsumerProtocolAssignment.decode(memoryview(data)[2:], version)
    except (ProtocolError, ValueError, IndexError):
        return []
    return [(tp.topic, p) for tp in decoded.assigned_partitions for p in tp.partitions]


class GroupAdminClient(AdminClient):
    """Group operations; errors raise ``ClientError``."""

    def find_coordinator(self, group_id: str) -> None:
        version = self.version_for(FindCoordinatorRequest)
        if version >= 4:
            response = self.send(FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id]), version)
            c = response.coordinators[0]
            _check(c.error_code, c.error_message, f"FindCoordinator({group_id})")
        else:
            response = self.send(FindCoordinatorRequest(key=group_id, key_type=0), version)
            _check(response.error_code, response.error_message, f"FindCoordinator({group_id})")

    def list_groups(self, states: Sequence[str] = ()) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group."""
        version = self.version_for(ListGroupsRequest)
        response = self.send(ListGroupsRequest(states_filter=list(states)), version)
        _check(response.error_code, None, "ListGroups")
        return [(g.group_id, g.protocol_type, g.group_state) for g in response.groups]

    def describe_group(self, group_id: str) -> GroupDescription:
        self.find_coordinator(group_id)
        version = self.version_for(DescribeGroupsRequest)
        response = self.send(DescribeGroupsRequest(groups=[group_id]), version)
        g = response.groups[0]
        _check(g.error_code, None, f"DescribeGroups({group_id})")
        members = [
            Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                   decode_assignment(bytes(m.member_assignment)) if g.protocol_type == "consumer" else [])
            for m in g.members
        ]
        return GroupDescription(group_id, g.group_state, g.protocol_type, g.protocol_data, members)

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        version = self.version_for(OffsetFetchRequest, our_max=7)
        response = self.send(OffsetFetchRequest(group_id=group_id, topics=None), max(version, 2))
        _check(response.error_code, None, f"OffsetFetch({group_id})")
        out: dict[TopicPartition, int] = {}
        for t in response.topics:
            for p in t.partitions:
                _check(p.error_code, None, f"OffsetFetch({group_id}, {t.name}-{p.partition_index})")
                if p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return out

    def list_offsets(self, partitions: Sequence[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """The offset for ``timestamp`` (-1 latest, -2 earliest) of each partition; -1 if none."""
        if not partitions:
            return {}
        version = self.version_for(ListOffsetsRequest)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = ListOffsetsRequest(replica_id=-1, topics=[
            ListOffsetsRequest.ListOffsetsTopic(topic, [
                ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                for p in parts
            ])
            for topic, parts in by_topic.items()
        ])
        response = self.send(request, version)
        out: dict[TopicPartition, int] = {}
        for t in response.topics:
            for p in t.partitions:
                _check(p.error_code, None, f"ListOffsets({t.name}-{p.partition_index})")
                out[(t.name, p.partition_index)] = p.offset
        return out

    def commit_offsets(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        version = self.version_for(OffsetCommitRequest)
        by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=offset, committed_metadata=""
                )
            )
        request = OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(t, parts) for t, parts in by_topic.items()],
        )
        response = self.send(request, version)
        for t in response.topics:
            for p in t.partitions:
                _check(p.error_code, None, f"OffsetCommit({group_id}, {t.name}-{p.partition_index})")

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, str]:
        """Group id -> error name ("NONE" when deleted)."""
        version = self.version_for(DeleteGroupsRequest)
        response = self.send(DeleteGroupsRequest(groups_names=list(group_ids)), version)
        return {r.group_id: ErrorCode(r.error_code).name if r.error_code else "NONE" for r in response.results}


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


def describe_offsets(client: GroupAdminClient, group_id: str, out: TextIO) -> int:
    desc = client.describe_group(group_id)
    if desc.state == "Dead":
        print(f"Error: Consumer group '{group_id}' does not exist.", file=sys.stderr)
        return 1
    committed = client.committed_offsets(group_id)
    owner: dict[TopicPartition, Member] = {}
    for m in desc.members:
        for tp in m.assignment:
            owner[tp] = m
    partitions = sorted(set(committed) | set(owner))
    ends = client.list_offsets(partitions, LATEST_TIMESTAMP)
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


def describe_members(client: GroupAdminClient, group_id: str, out: TextIO) -> int:
    desc = client.describe_group(group_id)
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


def describe_state(client: GroupAdminClient, group_id: str, out: TextIO) -> int:
    desc = client.describe_group(group_id)
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


def _partitions_in_scope(client: GroupAdminClient, args: argparse.Namespace, group_id: str) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(client.committed_offsets(group_id))
    out: list[TopicPartition] = []
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        if parts:
            out.extend((name, int(p)) for p in parts.split(",") if p.strip())
        else:
            meta = client.describe_topics([name])
            out.extend((name, p.partition) for p in meta[0].partitions)
    return sorted(set(out))


def reset_offsets(client: GroupAdminClient, args: argparse.Namespace, out: TextIO) -> int:
    group_id = args.group[0]
    desc = client.describe_group(group_id)
    if desc.state not in INACTIVE_STATES:
        print(f"Error: Assignments can only be reset if the group '{group_id}' is inactive, "
              f"but the current state is {desc.state}.", file=sys.stderr)
        return 1
    partitions = _partitions_in_scope(client, args, group_id)
    earliest = client.list_offsets(partitions, EARLIEST_TIMESTAMP)
    latest = client.list_offsets(partitions, LATEST_TIMESTAMP)
    if args.to_earliest:
        targets = dict(earliest)
    elif args.to_latest:
        targets = dict(latest)
    elif args.to_offset is not None:
        # out-of-range targets are clamped to the log's bounds, as Kafka's tool does
        targets = {tp: min(max(args.to_offset, earliest[tp]), latest[tp]) for tp in partitions}
    else:
        stamp_ms = parse_datetime_ms(args.to_datetime)
        found = client.list_offsets(partitions, stamp_ms)
        targets = {tp: (found[tp] if found.get(tp, -1) >= 0 else latest[tp]) for tp in partitions}
    if not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. "
              "In a future major release, the default behavior of this command will be to "
              "prompt the user before executing the reset rather than doing a dry run. You "
              "should add the --dry-run option explicitly if you are scripting this command "
              "and want to keep the current default behavior without prompting.", file=sys.stderr)
    if args.execute:
        client.commit_offsets(group_id, targets)
    rows: list[Sequence[object]] = [[group_id, t, p, targets[(t, p)]] for t, p in sorted(targets)]
    _table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, out, [30, 30, 10, 0])
    return 0


def delete(client: GroupAdminClient, group_ids: list[str], out: TextIO) -> int:
    results = client.delete_groups(group_ids)
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
        with GroupAdminClient(args.bootstrap_server, timeout_ms=args.timeout) as client:
            if args.list:
                states = [s for s in (args.state or "").split(",") if s]
                for group_id, _type, _state in sorted(client.list_groups(states)):
                    print(group_id, file=out)
                return 0
            if args.describe:
                code = 0
                for group_id in args.group:
                    if args.members:
                        code |= describe_members(client, group_id, out)
                    elif args.state is not None:
                        code |= describe_state(client, group_id, out)
                    else:
                        code |= describe_offsets(client, group_id, out)
                return code
            if args.reset_offsets:
                return reset_offsets(client, args, out)
            return delete(client, args.group, out)
    except (ClientError, OSError, ValueError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

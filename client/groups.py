"""Consumer-group admin calls (Kafka's Admin API for groups), over ``KafkaClient``.

ListGroups goes to every known broker (each lists the groups it coordinates); the others go
to the group's coordinator (FindCoordinator), forgetting it and retrying on
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and COORDINATOR_LOAD_IN_PROGRESS. A ``consumer``
group's member assignments are decoded (``ConsumerProtocolAssignment``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from client.errors import ClientError, check, error_name
from client.kafka_client import KafkaClient
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.topic_partition import TopicPartition

T = TypeVar("T")

COORDINATOR_MOVED: Final = frozenset({
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
})
GROUPS_ARRAY_SINCE: Final = 8  # OffsetFetch v8+: a list of groups
ListedGroups = list[tuple[str, str, str]]  # (group id, protocol type, state)


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[Member, ...]
    coordinator: int


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
    return [TopicPartition(tp.topic, p) for tp in decoded.assigned_partitions for p in tp.partitions]


class Groups:
    """Group calls over ``client`` (which it does not own)."""

    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    async def _at_coordinator(self, group_id: str, op: Callable[[int], Awaitable[T]], what: str) -> T:
        async def attempt() -> T:
            node = await self.client.coordinator_for(group_id)
            try:
                return await op(node)
            except ClientError as exc:
                if exc.error_code in COORDINATOR_MOVED:
                    self.client.forget_coordinator(group_id)
                raise

        return await self.client.retry(attempt, what=what)

    async def list_groups(self, states: Sequence[str] = ()) -> list[GroupListing]:
        """Every group of every broker (``states``: only groups in these states)."""
        await self.client.retry(lambda: self.client.refresh_metadata([]), what="Metadata")
        out: dict[str, GroupListing] = {}
        for node in self.client.known_brokers():
            async def one(n: int = node) -> ListedGroups:
                response = await self.client.send(n, ListGroupsRequest(states_filter=list(states)))
                check(response.error_code, None, f"ListGroups of broker {n}")
                return [(g.group_id, g.protocol_type, g.group_state) for g in response.groups]

            for group_id, protocol_type, state in await self.client.retry(one, what=f"ListGroups of broker {node}"):
                out[group_id] = GroupListing(group_id, protocol_type, state)
        return sorted(out.values(), key=lambda g: g.group_id)

    async def describe_group(self, group_id: str) -> GroupDescription:
        async def op(node: int) -> GroupDescription:
            response = await self.client.send(node, DescribeGroupsRequest(groups=[group_id]))
            g = response.groups[0]
            check(g.error_code, None, f"DescribeGroups({group_id})")
            members = tuple(
                Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                       tuple(decode_assignment(bytes(m.member_assignment)))
                       if g.protocol_type == "consumer" else ())
                for m in g.members)
            return GroupDescription(group_id, g.group_state, g.protocol_type, g.protocol_data, members, node)

        return await self._at_coordinator(group_id, op, f"DescribeGroups({group_id})")

    async def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (partitions without one are left out)."""
        async def op(node: int) -> dict[TopicPartition, int]:
            version = await self.client.version_for(node, OffsetFetchRequest)
            if version >= GROUPS_ARRAY_SINCE:
                request = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group_id, topics=None)])
                response = await self.client.send(node, request, version=version)
                (group,) = response.groups
                check(group.error_code, None, f"OffsetFetch({group_id})")
                found = [(t.name, p.partition_index, p.committed_offset, p.error_code)
                         for t in group.topics for p in t.partitions]
            else:
                response_old = await self.client.send(
                    node, OffsetFetchRequest(group_id=group_id, topics=None), version=version)
                check(response_old.error_code, None, f"OffsetFetch({group_id})")
                found = [(t.name, p.partition_index, p.committed_offset, p.error_code)
                         for t in response_old.topics for p in t.partitions]
            out: dict[TopicPartition, int] = {}
            for topic, partition, offset, code in found:
                check(code, None, f"OffsetFetch({group_id}, {topic}-{partition})")
                if offset >= 0:
                    out[TopicPartition(topic, partition)] = offset
            return out

        return await self._at_coordinator(group_id, op, f"OffsetFetch({group_id})")

    async def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit as an admin does: generation -1, no member (the group must be empty)."""
        by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=""))
        request = OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p)
                    for t, p in by_topic.items()])

        async def op(node: int) -> None:
            for t in (await self.client.send(node, request)).topics:
                for p in t.partitions:
                    check(p.error_code, None, f"OffsetCommit({group_id}, {t.name}-{p.partition_index})")

        await self._at_coordinator(group_id, op, f"OffsetCommit({group_id})")

    async def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, str]:
        """OffsetDelete: partition -> error name ("NONE" when deleted)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        request = OffsetDeleteRequest(group_id=group_id, topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(name=t, partitions=[
                OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
            for t, ps in by_topic.items()])

        async def op(node: int) -> dict[TopicPartition, str]:
            response = await self.client.send(node, request)
            check(response.error_code, None, f"OffsetDelete({group_id})")
            return {TopicPartition(t.name, p.partition_index): error_name(p.error_code) if p.error_code else "NONE"
                    for t in response.topics for p in t.partitions}

        return await self._at_coordinator(group_id, op, f"OffsetDelete({group_id})")

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, str]:
        """Group id -> error name ("NONE" when deleted)."""
        out: dict[str, str] = {}
        for group_id in group_ids:
            async def op(node: int, g: str = group_id) -> str:
                response = await self.client.send(node, DeleteGroupsRequest(groups_names=[g]))
                (result,) = response.results
                if result.error_code in COORDINATOR_MOVED or result.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    check(result.error_code, None, f"DeleteGroups({g})")
                return error_name(result.error_code) if result.error_code else "NONE"

            out[group_id] = await self._at_coordinator(group_id, op, f"DeleteGroups({group_id})")
        return out

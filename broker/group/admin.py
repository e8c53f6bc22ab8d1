"""ListGroups, DescribeGroups and DeleteGroups on the coordinator (Kafka's ``handleListGroups``,
``handleDescribeGroup``, ``handleDeleteGroups``).

- ListGroups lists the groups in the cache, filtered by state names (case-insensitive, v4+);
  COORDINATOR_LOAD_IN_PROGRESS while any ``__consumer_offsets`` partition is loading.
- DescribeGroups of an unknown group answers NONE with state ``Dead`` (Kafka up to v5).
  Member metadata and assignment bytes are only shown for a Stable group.
- DeleteGroups deletes only Empty groups (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND when
  unknown): their offsets and the group get tombstones in ``__consumer_offsets``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.group.coordinator import GroupCoordinator
from broker.group.metadata import GroupMetadata
from broker.group.state import GroupState
from protocol.errors import ErrorCode

CLASSIC_GROUP_TYPE = "classic"


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC_GROUP_TYPE


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary] = field(default_factory=list)


DEAD_GROUP = GroupSummary(GroupState.DEAD.value, "", "", [])


def list_groups(
    coordinator: GroupCoordinator,
    states: Iterable[str] = (),
    types: Iterable[str] = (),
) -> tuple[ErrorCode, list[GroupOverview]]:
    if not coordinator.is_active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    wanted_states = {s.lower() for s in states}
    wanted_types = {t.lower() for t in types}
    if wanted_types and CLASSIC_GROUP_TYPE not in wanted_types:
        return ErrorCode.NO_ERROR, []  # only classic groups live here
    manager = coordinator.manager
    error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if manager.loading_partitions else ErrorCode.NO_ERROR
    out = [
        GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
        for g in list(manager.groups.values())
        if not wanted_states or g.state.value.lower() in wanted_states
    ]
    return error, out


def _summary(group: GroupMetadata) -> GroupSummary:
    if group.is_state(GroupState.STABLE) and group.protocol_name is not None:
        protocol = group.protocol_name
        members = [
            MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                          m.metadata(protocol), m.assignment)
            for m in group.members.values()
        ]
        return GroupSummary(group.state.value, group.protocol_type or "", protocol, members)
    members = [
        MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
        for m in group.members.values()
    ]
    return GroupSummary(group.state.value, group.protocol_type or "", "", members)


def describe_group(coordinator: GroupCoordinator, group_id: str) -> tuple[ErrorCode, GroupSummary]:
    error = coordinator.validate_group_status(group_id, "describe_groups")
    if error is not None:
        return error, GroupSummary("", "", "", [])
    group = coordinator.manager.get_group(group_id)
    if group is None:
        return ErrorCode.NO_ERROR, DEAD_GROUP
    return ErrorCode.NO_ERROR, _summary(group)


def delete_groups(coordinator: GroupCoordinator, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
    manager = coordinator.manager
    results: dict[str, ErrorCode] = {}
    eligible: list[GroupMetadata] = []
    now_ms = coordinator.timers.now_ms()
    for group_id in group_ids:
        error = coordinator.validate_group_status(group_id, "delete_groups")
        if error is not None:
            results[group_id] = error
            continue
        group = manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            not_found = manager.group_not_exists(group_id)
            results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND if not_found else ErrorCode.NOT_COORDINATOR
        elif group.is_state(GroupState.EMPTY):
            group.transition_to(GroupState.DEAD, now_ms)
            eligible.append(group)
            results[group_id] = ErrorCode.NO_ERROR
        else:
            results[group_id] = ErrorCode.NON_EMPTY_GROUP
    if eligible:
        manager.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets())
    return results

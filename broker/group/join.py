"""JoinGroup on the coordinator (Kafka's ``GroupCoordinator.handleJoinGroup`` and helpers).

- A new member (empty member id): with JoinGroup v4+ a dynamic member first gets
  MEMBER_ID_REQUIRED and a member id (it stays "pending" for a session timeout) and must
  rejoin with it; a static member (group.instance.id, v5+) is added at once, or, when its
  instance id is already known, replaces its previous member id (the old one is fenced with
  FENCED_INSTANCE_ID) and, in a Stable group whose selected protocol does not change, keeps
  its assignment without a rebalance (the new member id is stored first).
- A known member: joins the rebalance under way; in CompletingRebalance with unchanged
  metadata it gets the current generation again; in Stable the leader (or a member with new
  metadata) triggers a rebalance, a follower with unchanged metadata gets the generation.
- Checks, in Kafka's order: group id, coordinator state, session timeout bounds, group
  existence (UNKNOWN_MEMBER_ID), ``group.max.size`` (GROUP_MAX_SIZE_REACHED), protocol type
  and protocols in common (INCONSISTENT_GROUP_PROTOCOL), fencing, membership.

The answer goes to ``callback`` exactly once: at once, or when the rebalance completes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from broker.group.config import GroupConfig
from broker.group.delayed import JoinPurgatory
from broker.group.manager import GroupMetadataManager
from broker.group.member import MemberMetadata
from broker.group.metadata import GroupMetadata
from broker.group.results import UNKNOWN_MEMBER_ID, JoinCallback, JoinResult
from broker.group.state import GroupState
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # GroupCoordinator.NewMemberJoinTimeoutMs


class GroupCoordinator(Protocol):
    """What JoinGroup needs of ``broker.group.coordinator.GroupCoordinator`` (which binds
    ``join_group`` as a method); named here so this module does not import it back."""

    config: GroupConfig
    manager: GroupMetadataManager
    join_purgatory: JoinPurgatory

    def validate_group_status(self, group_id: str | None, api: str) -> ErrorCode | None: ...
    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None: ...
    def complete_and_schedule_next_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None: ...
    def schedule_pending_member_expiration(
        self, group: GroupMetadata, member_id: str, session_timeout_ms: int
    ) -> None: ...
    def cancel_pending_member_expiration(self, group: GroupMetadata, member_id: str) -> None: ...


def join_group(
    coord: GroupCoordinator,
    *,
    group_id: str,
    member_id: str,
    group_instance_id: str | None,
    require_known_member_id: bool,
    supports_skip_assignment: bool,
    client_id: str,
    client_host: str,
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
    protocol_type: str,
    protocols: Sequence[tuple[str, bytes]],
    callback: JoinCallback,
    reason: str | None = None,
) -> None:
    error = coord.validate_group_status(group_id, "join_group")
    if error is not None:
        callback(JoinResult(member_id, error))
        return
    if not (
        coord.config.min_session_timeout_ms
        <= session_timeout_ms
        <= coord.config.max_session_timeout_ms
    ):
        callback(JoinResult(member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
        return
    protocols = [(name, bytes(data)) for name, data in protocols]
    is_unknown_member = member_id == UNKNOWN_MEMBER_ID
    existed = coord.manager.get_group(group_id) is not None
    group = coord.manager.get_or_create_group(group_id, create=is_unknown_member)
    if group is None:
        callback(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        return
    if not _accept_joining_member(coord, group, member_id):
        log.info("group %s: rejecting member %s, group.max.size %d reached",
                 group_id, member_id, coord.config.max_size)
        callback(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
    elif is_unknown_member:
        _do_new_member_join(
            coord, group, group_instance_id, require_known_member_id, supports_skip_assignment,
            client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
            protocol_type, protocols, callback, reason,
        )
    else:
        _do_current_member_join(
            coord, group, member_id, group_instance_id, client_id, client_host,
            rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, callback, reason,
        )
    if group.is_state(GroupState.PREPARING_REBALANCE):
        coord.join_purgatory.check_and_complete(group_id)
    if (
        not existed
        and group.is_state(GroupState.EMPTY)
        and not group.members
        and not group.pending_members
        and not group.has_offsets()
    ):
        coord.manager.remove_group(group)  # a failed first join leaves nothing behind


def _accept_joining_member(coord: GroupCoordinator, group: GroupMetadata, member_id: str) -> bool:
    state = group.state
    if state in (GroupState.EMPTY, GroupState.DEAD):
        return True
    if state is GroupState.PREPARING_REBALANCE:
        return (
            group.has(member_id) and group.get(member_id).is_awaiting_join
        ) or group.num_awaiting() < coord.config.max_size
    return group.has(member_id) or group.size < coord.config.max_size


def _refuse_join(
    group: GroupMetadata, protocol_type: str, protocols: Sequence[tuple[str, bytes]]
) -> ErrorCode | None:
    """What new and known members are both refused for: a Dead group
    (COORDINATOR_NOT_AVAILABLE), protocols the group cannot use (INCONSISTENT_GROUP_PROTOCOL)."""
    if group.is_state(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
        return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    return None


def _do_new_member_join(
    coord: GroupCoordinator,
    group: GroupMetadata,
    group_instance_id: str | None,
    require_known_member_id: bool,
    supports_skip_assignment: bool,
    client_id: str,
    client_host: str,
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
    protocol_type: str,
    protocols: list[tuple[str, bytes]],
    callback: JoinCallback,
    reason: str | None,
) -> None:
    error = _refuse_join(group, protocol_type, protocols)
    if error is not None:
        callback(JoinResult(UNKNOWN_MEMBER_ID, error))
        return
    new_member_id = group.generate_member_id(client_id, group_instance_id)
    if group_instance_id is not None:
        old_member_id = group.current_static_member_id(group_instance_id)
        if old_member_id is not None:
            log.info("group %s: static member %s rejoins with unknown member id; "
                     "replacing %s with %s", group.group_id, group_instance_id,
                     old_member_id, new_member_id)
            _update_static_member_and_rebalance(
                coord, group, old_member_id, new_member_id, group_instance_id, protocols,
                rebalance_timeout_ms, session_timeout_ms, callback, supports_skip_assignment,
            )
            return
        _add_member_and_rebalance(
            coord, group, new_member_id, group_instance_id, client_id, client_host,
            rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, callback, reason,
        )
    elif require_known_member_id:
        # JoinGroup v4+: hand out the member id first; the member rejoins with it.
        group.add_pending_member(new_member_id)
        coord.schedule_pending_member_expiration(group, new_member_id, session_timeout_ms)
        callback(JoinResult(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
    else:
        _add_member_and_rebalance(
            coord, group, new_member_id, None, client_id, client_host,
            rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, callback, reason,
        )


def _do_current_member_join(
    coord: GroupCoordinator,
    group: GroupMetadata,
    member_id: str,
    group_instance_id: str | None,
    client_id: str,
    client_host: str,
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
    protocol_type: str,
    protocols: list[tuple[str, bytes]],
    callback: JoinCallback,
    reason: str | None,
) -> None:
    error = _refuse_join(group, protocol_type, protocols)
    if error is not None:
        callback(JoinResult(member_id, error))
        return
    if group.is_pending_member(member_id):
        if group_instance_id is not None:
            # Kafka throws here: a pending member id is never static. Answer, don't crash.
            callback(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        coord.cancel_pending_member_expiration(group, member_id)
        _add_member_and_rebalance(
            coord, group, member_id, None, client_id, client_host,
            rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, callback, reason,
        )
        return
    instance_not_found = group_instance_id is not None and not group.has_static_member(
        group_instance_id
    )
    if group.is_static_member_fenced(group_instance_id, member_id):
        callback(JoinResult(member_id, ErrorCode.FENCED_INSTANCE_ID))
        return
    if not group.has(member_id) or instance_not_found:
        callback(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        return
    member = group.get(member_id)
    state = group.state
    if state is GroupState.PREPARING_REBALANCE:
        _update_member_and_rebalance(
            coord, group, member, protocols, rebalance_timeout_ms, session_timeout_ms, callback,
            f"member {member_id} joining group {group.group_id}",
        )
    elif state is GroupState.COMPLETING_REBALANCE:
        if member.matches(protocols):
            # Same metadata (it may have missed the first answer): current generation again.
            callback(join_answer(group, member, members_for_leader=True))
        else:
            _update_member_and_rebalance(
                coord, group, member, protocols, rebalance_timeout_ms, session_timeout_ms, callback,
                f"updating metadata for member {member_id}",
            )
    elif state is GroupState.STABLE:
        if group.is_leader(member_id) or not member.matches(protocols):
            # The leader rejoining forces a rebalance (e.g. topic metadata changed).
            _update_member_and_rebalance(
                coord, group, member, protocols, rebalance_timeout_ms, session_timeout_ms, callback,
                f"member {member_id} rejoining a Stable group",
            )
        else:
            callback(join_answer(group, member, members_for_leader=False))
    else:  # Empty: members of an Empty group are gone; rejoin from scratch
        callback(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))


def join_answer(
    group: GroupMetadata, member: MemberMetadata, *, members_for_leader: bool,
    leader_id: str | None = None, skip_assignment: bool = False,
) -> JoinResult:
    is_leader = group.is_leader(member.member_id)
    return JoinResult(
        member_id=member.member_id,
        error=ErrorCode.NO_ERROR,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader_id=(leader_id if leader_id is not None else group.leader_id or UNKNOWN_MEMBER_ID),
        skip_assignment=skip_assignment,
        members=group.current_member_metadata() if members_for_leader and is_leader else [],
    )


def _add_member_and_rebalance(
    coord: GroupCoordinator,
    group: GroupMetadata,
    member_id: str,
    group_instance_id: str | None,
    client_id: str,
    client_host: str,
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
    protocol_type: str,
    protocols: list[tuple[str, bytes]],
    callback: JoinCallback,
    reason: str | None,
) -> None:
    member = MemberMetadata(
        member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
        session_timeout_ms, protocol_type, protocols,
    )
    member.is_new = True
    if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
        group.new_member_added = True
    member.awaiting_join_callback = callback
    group.add(member)
    # A new member cannot heartbeat before its first JoinGroup answer; a lost client would
    # stay forever, so its join times out after 5 minutes (Kafka's NewMemberJoinTimeoutMs).
    coord.complete_and_schedule_next_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
    coord.maybe_prepare_rebalance(
        group, f"adding new member {member_id} (instance {group_instance_id}); reason: {reason}"
    )


def _update_member_and_rebalance(
    coord: GroupCoordinator,
    group: GroupMetadata,
    member: MemberMetadata,
    protocols: list[tuple[str, bytes]],
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
    callback: JoinCallback,
    reason: str,
) -> None:
    group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
    coord.maybe_prepare_rebalance(group, reason)


def _update_static_member_and_rebalance(
    coord: GroupCoordinator,
    group: GroupMetadata,
    old_member_id: str,
    new_member_id: str,
    group_instance_id: str,
    protocols: list[tuple[str, bytes]],
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
    callback: JoinCallback,
    supports_skip_assignment: bool,
) -> None:
    current_leader = group.leader_id
    member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
    coord.complete_and_schedule_next_heartbeat(group, member)
    old_protocols = list(member.supported_protocols)
    old_rebalance_timeout_ms = member.rebalance_timeout_ms
    old_session_timeout_ms = member.session_timeout_ms
    group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
    state = group.state
    if state is GroupState.STABLE:
        if group.protocol_name != group.select_protocol():
            coord.maybe_prepare_rebalance(
                group, f"static member {group_instance_id} changed the selected protocol"
            )
            return
        # Same protocol: the others keep their assignment; just persist the new member id.
        generation = group.generation_id
        assignment = {m.member_id: m.assignment for m in group.members.values()}

        def stored(error: ErrorCode) -> None:
            if group.generation_id != generation or not group.has(new_member_id):
                group.maybe_invoke_join_callback(
                    member, JoinResult(new_member_id, ErrorCode.REBALANCE_IN_PROGRESS)
                )
                return
            if error is not ErrorCode.NO_ERROR:
                group.update_member(
                    member, old_protocols, old_rebalance_timeout_ms, old_session_timeout_ms, None
                )
                restored = group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                coord.complete_and_schedule_next_heartbeat(group, restored)
                callback(
                    JoinResult(
                        UNKNOWN_MEMBER_ID, error, group.generation_id, group.protocol_type,
                        group.protocol_name, current_leader or UNKNOWN_MEMBER_ID,
                    )
                )
            elif supports_skip_assignment:
                # JoinGroup v9: a static leader learns it leads but skips the assignor.
                is_leader = group.is_leader(new_member_id)
                group.maybe_invoke_join_callback(
                    member,
                    join_answer(group, member, members_for_leader=True,
                                      skip_assignment=is_leader),
                )
            else:
                # Older versions: report the old leader id so this member does not assign.
                group.maybe_invoke_join_callback(
                    member,
                    join_answer(group, member, members_for_leader=False,
                                      leader_id=current_leader or UNKNOWN_MEMBER_ID),
                )

        coord.manager.store_group(group, assignment, stored)
    elif state is GroupState.COMPLETING_REBALANCE:
        coord.maybe_prepare_rebalance(group, f"static member {group_instance_id} rejoined")
    elif state is not GroupState.PREPARING_REBALANCE:
        # Kafka throws here (a group with members is never Empty or Dead); answer instead.
        group.maybe_invoke_join_callback(member, JoinResult(new_member_id, ErrorCode.UNKNOWN_MEMBER_ID))
    # PreparingRebalance: it simply takes part in the rebalance under way.

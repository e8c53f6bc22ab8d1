"""The classic group membership protocol (Kafka's ``GroupCoordinator``, JoinGroup to LeaveGroup).

Sans-IO and callback-driven: JoinGroup and SyncGroup answers may come later (when the
rebalance completes), so they take a callback that is called exactly once; the handlers
turn it into a future. Time comes from ``Timers``; writes go through the manager's
``RecordLog``. Everything runs on one event loop, so no locks.

A rebalance: a member joins, leaves, fails its session timeout, or the leader rejoins ->
``PreparingRebalance`` (a ``DelayedJoin`` waits until every member rejoined or the rebalance
timeout) -> ``CompletingRebalance``: every member gets its JoinGroup answer, the leader with
all members' subscriptions; the leader computes the assignment client-side and sends it in
SyncGroup; the coordinator stores it in ``__consumer_offsets`` and answers every SyncGroup
-> ``Stable``. Members that miss the rejoin (dynamic ones) or the sync are removed.

Errors are Kafka's: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT,
GROUP_MAX_SIZE_REACHED, MEMBER_ID_REQUIRED, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID. JoinGroup's cases are in ``broker.group.join``;
offsets and admin operations in ``broker.group.offsets`` and ``broker.group.admin``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from broker.group import join
from broker.group.config import GroupConfig
from broker.group.delayed import DelayedJoin, InitialDelayedJoin, JoinPurgatory
from broker.group.manager import GroupMetadataManager
from broker.group.member import MemberMetadata
from broker.group.metadata import GroupMetadata
from broker.group.results import (
    UNKNOWN_MEMBER_ID,
    JoinResult,
    SyncCallback,
    SyncResult,
)
from broker.group.state import GroupState
from broker.group.store import GroupRecord, RecordLog
from broker.group.timers import TimerHandle, Timers
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# APIs whose group id may be empty (Kafka's isValidGroupId); the others need a non-empty one.
EMPTY_GROUP_ID_ALLOWED: Final = frozenset({"offset_commit", "offset_fetch", "describe_groups", "delete_groups"})


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error: ErrorCode  # top-level
    members: list[tuple[LeavingMember, ErrorCode]]


class GroupCoordinator:
    def __init__(self, config: GroupConfig, timers: Timers, record_log: RecordLog) -> None:
        self.config = config
        self.timers = timers
        self.manager = GroupMetadataManager(config, timers, record_log)
        self.join_purgatory = JoinPurgatory(timers)
        self._pending_member_timers: dict[tuple[str, str], TimerHandle] = {}
        self._sync_timers: dict[str, TimerHandle] = {}
        self._expiry_timer: TimerHandle | None = None
        self.is_active = False

    # --- life cycle ------------------------------------------------------------------------

    def startup(self, *, enable_offset_expiration: bool = True) -> None:
        self.is_active = True
        if enable_offset_expiration:
            self._schedule_offset_expiration()

    def shutdown(self) -> None:
        """Unload every group (pending joins/syncs answered NOT_COORDINATOR), stop all timers."""
        self.is_active = False
        for partition in sorted(self.manager.owned_partitions | self.manager.loading_partitions):
            self.on_resignation(partition)
        self.join_purgatory.cancel_all()
        for handle in self._pending_member_timers.values():
            handle.cancel()
        self._pending_member_timers.clear()
        for handle in self._sync_timers.values():
            handle.cancel()
        self._sync_timers.clear()
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None

    def _schedule_offset_expiration(self) -> None:
        def run() -> None:
            self._expiry_timer = None
            if not self.is_active:
                return
            removed = self.manager.expire_offsets()
            if removed:
                log.info("removed %d expired offsets", removed)
            self._schedule_offset_expiration()

        self._expiry_timer = self.timers.call_later(
            self.config.offsets_retention_check_interval_ms, run
        )

    def on_election(self, partition: int, records: Iterable[GroupRecord]) -> list[GroupMetadata]:
        """This broker leads ``__consumer_offsets-<partition>``: load its groups and offsets."""
        self.manager.begin_loading(partition)
        loaded = self.manager.load_partition(partition, records)
        for group in loaded:
            self._on_group_loaded(group)
        return loaded

    def on_resignation(self, partition: int) -> None:
        for group in self.manager.unload_partition(partition):
            self._on_group_unloaded(group)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.config.max_size:
            self._prepare_rebalance(group, "freshly-loaded group is over capacity")
        for member in group.all_members():
            self.complete_and_schedule_next_heartbeat(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        # The manager moved the group to Dead; answer whoever is still waiting.
        for member in group.all_members():
            group.maybe_invoke_join_callback(member, JoinResult(member.member_id, ErrorCode.NOT_COORDINATOR))
            group.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            self._remove_heartbeat(member)
        self.join_purgatory.check_and_complete(group.group_id)
        self._remove_sync_expiration(group)

    # --- validation ------------------------------------------------------------------------

    def validate_group_status(self, group_id: str | None, api: str) -> ErrorCode | None:
        """Kafka's ``validateGroupStatus``: the error for ``api`` on ``group_id``, or None."""
        if group_id is None or (not group_id and api not in EMPTY_GROUP_ID_ALLOWED):
            return ErrorCode.INVALID_GROUP_ID
        if not self.is_active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_coordinator_for(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None

    @staticmethod
    def validate_current_member(
        group: GroupMetadata, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # --- JoinGroup (broker.group.join) --------------------------------------------------------

    # ``broker.group.join.join_group(coord, *, group_id, member_id, ...)`` as a method: the
    # coordinator is its first parameter, so the keyword-only signature is written once.
    join_group = join.join_group

    # --- rebalance -------------------------------------------------------------------------

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        delayed: DelayedJoin
        if group.is_state(GroupState.EMPTY):
            initial_delay_ms = self.config.initial_rebalance_delay_ms
            delayed = InitialDelayedJoin(
                self, self.join_purgatory, group, initial_delay_ms, initial_delay_ms,
                max(group.rebalance_timeout_ms() - initial_delay_ms, 0),
            )
        else:
            delayed = DelayedJoin(self, group, group.rebalance_timeout_ms())
        group.transition_to(GroupState.PREPARING_REBALANCE, self.timers.now_ms())
        log.info("preparing to rebalance group %s in state PreparingRebalance with old "
                 "generation %d (reason: %s)", group.group_id, group.generation_id, reason)
        self.join_purgatory.try_complete_else_watch(delayed)

    def can_complete_join(self, group: GroupMetadata) -> bool:
        return group.has_all_members_joined()

    def on_complete_join(self, group: GroupMetadata) -> None:
        for failed in group.not_yet_rejoined_members():
            if failed.is_static:
                continue
            log.info("group %s: removing dynamic member %s that did not rejoin",
                     group.group_id, failed.member_id)
            group.remove(failed.member_id)
            self._remove_heartbeat(failed)
        if group.is_state(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait again, until session timeouts remove the silent members.
            log.warning("group %s could not complete rebalance: no members rejoined", group.group_id)
            self.join_purgatory.try_complete_else_watch(
                DelayedJoin(self, group, group.rebalance_timeout_ms())
            )
            return
        now_ms = self.timers.now_ms()
        group.init_next_generation(now_ms)
        if group.is_state(GroupState.EMPTY):
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            self.manager.store_group(group, {}, lambda error: None)
            return
        log.info("stabilized group %s generation %d with %d members (protocol %s)",
                 group.group_id, group.generation_id, group.size, group.protocol_name)
        for member in group.all_members():
            group.maybe_invoke_join_callback(
                member, join.join_answer(group, member, members_for_leader=True)
            )
            self.complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False
        self._schedule_pending_sync(group)

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self._remove_sync_expiration(group)
        group.pending_sync_members = set(group.members)
        generation = group.generation_id
        group_id = group.group_id
        self._sync_timers[group_id] = self.timers.call_later(
            group.rebalance_timeout_ms(), lambda: self._on_expire_pending_sync(group, generation)
        )

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members = set()
        handle = self._sync_timers.pop(group.group_id, None)
        if handle is not None:
            handle.cancel()

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            handle = self._sync_timers.pop(group.group_id, None)
            if handle is not None:
                handle.cancel()

    def _on_expire_pending_sync(self, group: GroupMetadata, generation: int) -> None:
        self._sync_timers.pop(group.group_id, None)
        if generation != group.generation_id or group.state not in (
            GroupState.COMPLETING_REBALANCE, GroupState.STABLE
        ):
            return
        missing = sorted(group.pending_sync_members)
        if not missing:
            return
        log.info("group %s: removing members that did not send SyncGroup: %s", group.group_id, missing)
        for member_id in missing:
            member = group.members.get(member_id)
            group.remove(member_id)
            if member is not None:
                self._remove_heartbeat(member)
        self.maybe_prepare_rebalance(group, "members removed after missing SyncGroup")

    # --- heartbeats and member expiry -----------------------------------------------------

    def complete_and_schedule_next_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        member.heartbeat_satisfied = False
        delay_ms = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member_id = member.member_id
        member.heartbeat_timer = self.timers.call_later(
            delay_ms, lambda: self._on_expire_heartbeat(group, member, member_id)
        )

    def _remove_heartbeat(self, member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _on_expire_heartbeat(self, group: GroupMetadata, member: MemberMetadata, member_id: str) -> None:
        if member.member_id == member_id and member.heartbeat_timer is not None:
            member.heartbeat_timer = None
        if group.is_state(GroupState.DEAD) or group.members.get(member_id) is not member:
            return
        if member.has_satisfied_heartbeat:
            return
        log.info("member %s in group %s has failed (session timeout %d ms), removing it",
                 member_id, group.group_id, member.session_timeout_ms)
        self.remove_member_and_update_group(group, member, "session timeout")

    def remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        # A new member may time out while its JoinGroup waits: answer it so it can retry.
        group.maybe_invoke_join_callback(member, JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        group.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._remove_heartbeat(member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(group.group_id)

    def schedule_pending_member_expiration(
        self, group: GroupMetadata, member_id: str, session_timeout_ms: int
    ) -> None:
        key = (group.group_id, member_id)

        def expire() -> None:
            self._pending_member_timers.pop(key, None)
            if group.is_state(GroupState.DEAD) or not group.is_pending_member(member_id):
                return
            log.info("pending member %s of group %s removed after session timeout",
                     member_id, group.group_id)
            self._remove_pending_member_and_update_group(group, member_id)

        self._pending_member_timers[key] = self.timers.call_later(session_timeout_ms, expire)

    def cancel_pending_member_expiration(self, group: GroupMetadata, member_id: str) -> None:
        handle = self._pending_member_timers.pop((group.group_id, member_id), None)
        if handle is not None:
            handle.cancel()

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        self.cancel_pending_member_expiration(group, member_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(group.group_id)

    # --- SyncGroup -------------------------------------------------------------------------

    def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
        callback: SyncCallback,
    ) -> None:
        error = self.validate_group_status(group_id, "sync_group")
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the load; make the member rejoin.
            callback(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        if error is not None:
            callback(SyncResult(error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync(group, generation_id, member_id, protocol_type,
                                    protocol_name, group_instance_id)
        if error is not None:
            callback(SyncResult(error))
            return
        state = group.state
        if state is GroupState.EMPTY:
            callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif state is GroupState.PREPARING_REBALANCE:
            callback(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif state is GroupState.COMPLETING_REBALANCE:
            member = group.get(member_id)
            if member.awaiting_sync_callback is not None:
                # A retried SyncGroup replaces the earlier one, which is answered now.
                group.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.awaiting_sync_callback = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._store_leader_assignment(group, member_id, assignments)
        elif state is GroupState.STABLE:
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            callback(SyncResult(ErrorCode.NO_ERROR, group.protocol_type, group.protocol_name,
                                member.assignment))
            self.complete_and_schedule_next_heartbeat(group, member)
        else:  # Dead was refused by _validate_sync
            callback(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))

    def _validate_member_generation(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
        generation_id: int,
    ) -> ErrorCode | None:
        """The checks SyncGroup and Heartbeat share, in Kafka's order: a Dead group is
        COORDINATOR_NOT_AVAILABLE, then ``validate_current_member``, then the generation
        (ILLEGAL_GENERATION)."""
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    def _validate_sync(
        self, group: GroupMetadata, generation_id: int, member_id: str,
        protocol_type: str | None, protocol_name: str | None, group_instance_id: str | None,
    ) -> ErrorCode | None:
        error = self._validate_member_generation(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return error
        if protocol_type is not None and group.protocol_type != protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and group.protocol_name != protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _store_leader_assignment(
        self, group: GroupMetadata, leader_id: str, assignments: Mapping[str, bytes]
    ) -> None:
        assignment = {mid: bytes(data) for mid, data in assignments.items() if group.has(mid)}
        missing = [mid for mid in group.members if mid not in assignment]
        if missing:
            log.warning("group %s generation %d: empty assignment for members %s",
                        group.group_id, group.generation_id, missing)
        for mid in missing:
            assignment[mid] = b""
        generation = group.generation_id
        log.info("group %s: assignment received from leader %s for generation %d (%d members)",
                 group.group_id, leader_id, generation, group.size)

        def stored(error: ErrorCode) -> None:
            # Another member may have joined meanwhile: act only on the same generation.
            if not group.is_state(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation:
                return
            if error is not ErrorCode.NO_ERROR:
                self._reset_and_propagate_assignment_error(group, error)
                self.maybe_prepare_rebalance(group, "error storing the group assignment")
            else:
                for member in group.all_members():
                    member.assignment = assignment.get(member.member_id, b"")
                self._propagate_assignment(group, ErrorCode.NO_ERROR)
                group.transition_to(GroupState.STABLE, self.timers.now_ms())

        self.manager.store_group(group, assignment, stored)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.all_members():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error is ErrorCode.NO_ERROR
        for member in group.all_members():
            result = SyncResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            if group.maybe_invoke_sync_callback(member, result):
                # Sessions that ran out while waiting for the leader restart now.
                self.complete_and_schedule_next_heartbeat(group, member)

    # --- Heartbeat -------------------------------------------------------------------------

    def heartbeat(
        self, *, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self.validate_group_status(group_id, "heartbeat")
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NO_ERROR  # Kafka answers blindly while loading
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = self._validate_member_generation(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return error
        if group.is_state(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.complete_and_schedule_next_heartbeat(group, group.get(member_id))
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NO_ERROR

    # --- LeaveGroup ------------------------------------------------------------------------

    def leave_group(self, group_id: str, leaving: Sequence[LeavingMember]) -> LeaveResult:
        error = self.validate_group_status(group_id, "leave_group")
        if error is not None:
            return LeaveResult(error, [])
        group = self.manager.get_group(group_id)
        if group is None:
            return LeaveResult(
                ErrorCode.NO_ERROR, [(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in leaving]
            )
        if group.is_state(GroupState.DEAD):
            return LeaveResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, [])
        results: list[tuple[LeavingMember, ErrorCode]] = []
        for m in leaving:
            reason = m.reason or "not provided"
            if m.member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal of a static member by its group.instance.id.
                current = (
                    group.current_static_member_id(m.group_instance_id)
                    if m.group_instance_id is not None else None
                )
                if current is None:
                    results.append((m, ErrorCode.UNKNOWN_MEMBER_ID))
                else:
                    self._remove_current_member(group, current, reason)
                    results.append((m, ErrorCode.NO_ERROR))
            elif group.is_pending_member(m.member_id):
                self._remove_pending_member_and_update_group(group, m.member_id)
                results.append((m, ErrorCode.NO_ERROR))
            else:
                member_error = self.validate_current_member(group, m.member_id, m.group_instance_id)
                if member_error is None:
                    self._remove_current_member(group, m.member_id, reason)
                    member_error = ErrorCode.NO_ERROR
                results.append((m, member_error))
        return LeaveResult(ErrorCode.NO_ERROR, results)

    def _remove_current_member(self, group: GroupMetadata, member_id: str, reason: str) -> None:
        member = group.get(member_id)
        log.info("member %s leaves group %s (reason: %s)", member_id, group.group_id, reason)
        self.remove_member_and_update_group(group, member, f"LeaveGroup; client reason: {reason}")

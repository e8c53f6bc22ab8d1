"""OffsetCommit, OffsetFetch and OffsetDelete on the coordinator (Kafka's ``handleCommitOffsets``,
``handleFetchOffsets``, ``handleDeleteOffsets``).

Commit rules (Kafka's ``validateOffsetCommit``): a commit carrying a generation >= 0, a member
id or a group.instance.id must come from a current member of that generation
(UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION); a commit with none of them is a
standalone ("simple") consumer's, accepted only while the group has no members. A group that
is rebalancing answers REBALANCE_IN_PROGRESS in CompletingRebalance and accepts commits in
PreparingRebalance. Committed offsets become visible once the ``__consumer_offsets`` append
succeeded; ``require_stable`` fetches answer UNSTABLE_OFFSET_COMMIT while one is in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from broker.group.coordinator import GroupCoordinator
from broker.group.metadata import CommittedOffset, GroupMetadata
from broker.group.results import UNKNOWN_MEMBER_ID
from broker.group.state import GroupState
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

INVALID_OFFSET = -1  # OffsetFetchResponse.INVALID_OFFSET


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode


NO_OFFSET = FetchedOffset(INVALID_OFFSET, -1, "", ErrorCode.NO_ERROR)


def commit_offsets(
    coordinator: GroupCoordinator,
    *,
    group_id: str,
    member_id: str,
    group_instance_id: str | None,
    generation_id: int,
    offsets: Mapping[TopicPartition, CommittedOffset],
    callback: Callable[[dict[TopicPartition, ErrorCode]], None],
) -> None:
    def fail(error: ErrorCode) -> None:
        callback({tp: error for tp in offsets})

    error = coordinator.validate_group_status(group_id, "offset_commit")
    if error is not None:
        fail(error)
        return
    manager = coordinator.manager
    group = manager.get_group(group_id)
    if group is None:
        if generation_id >= 0:
            fail(ErrorCode.ILLEGAL_GENERATION)  # an older generation of a group now gone
            return
        # Not using Kafka for group management: commits only.
        group = manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, coordinator.timers.now_ms()))
    error = _validate_commit(group, generation_id, member_id, group_instance_id)
    if error is not None:
        fail(error)
        return
    if group.is_state(GroupState.COMPLETING_REBALANCE):
        fail(ErrorCode.REBALANCE_IN_PROGRESS)
        return
    if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
        # A commit counts as a sign of life, like a heartbeat.
        coordinator.complete_and_schedule_next_heartbeat(group, group.get(member_id))
    if not offsets:
        callback({})
        return
    manager.store_offsets(group, offsets, callback)


def _validate_commit(
    group: GroupMetadata, generation_id: int, member_id: str, group_instance_id: str | None
) -> ErrorCode | None:
    if group.is_state(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
        error = GroupCoordinator.validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None
    if not group.is_state(GroupState.EMPTY):
        return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit to a group with members
    return None


def fetch_offsets(
    coordinator: GroupCoordinator,
    group_id: str,
    partitions: Iterable[TopicPartition] | None,
    *,
    require_stable: bool = False,
) -> tuple[ErrorCode, dict[TopicPartition, FetchedOffset]]:
    """The committed offsets of ``partitions`` (None: every partition the group committed)."""
    error = coordinator.validate_group_status(group_id, "offset_fetch")
    if error is not None:
        return error, {}
    group = coordinator.manager.get_group(group_id)
    if group is None or group.is_state(GroupState.DEAD):
        return ErrorCode.NO_ERROR, {tp: NO_OFFSET for tp in (partitions or ())}
    wanted = list(group.offsets) if partitions is None else list(partitions)
    out: dict[TopicPartition, FetchedOffset] = {}
    for tp in wanted:
        if require_stable and tp in group.pending_offset_commits:
            out[tp] = FetchedOffset(INVALID_OFFSET, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
            continue
        committed = group.offsets.get(tp)
        if committed is None:
            out[tp] = NO_OFFSET
        else:
            out[tp] = FetchedOffset(
                committed.offset, committed.leader_epoch, committed.metadata, ErrorCode.NO_ERROR
            )
    return ErrorCode.NO_ERROR, out


def delete_offsets(
    coordinator: GroupCoordinator, group_id: str, partitions: Iterable[TopicPartition]
) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    """OffsetDelete: only for an Empty group, or for topics a consumer group does not subscribe to."""
    tps = list(dict.fromkeys(partitions))
    error = coordinator.validate_group_status(group_id, "offset_delete")
    if error is not None:
        return error, {}
    manager = coordinator.manager
    group = manager.get_group(group_id)
    if group is None or group.is_state(GroupState.DEAD):
        not_found = manager.group_not_exists(group_id)
        return (ErrorCode.GROUP_ID_NOT_FOUND if not_found else ErrorCode.NOT_COORDINATOR), {}
    errors: dict[TopicPartition, ErrorCode] = {}
    if group.is_state(GroupState.EMPTY):
        eligible = tps
    elif group.protocol_type == "consumer":
        eligible = [tp for tp in tps if not group.is_subscribed_to_topic(tp[0])]
        errors.update(
            {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in tps if group.is_subscribed_to_topic(tp[0])}
        )
    else:
        return ErrorCode.NON_EMPTY_GROUP, {}
    if eligible:
        manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
        errors.update({tp: ErrorCode.NO_ERROR for tp in eligible})
    return ErrorCode.NO_ERROR, errors


def remove_topic_offsets(coordinator: GroupCoordinator, topic: str) -> int:
    """A deleted topic's committed offsets leave every group (Kafka's ``onPartitionsDeleted``):
    tombstones are written, and groups left Empty without offsets are removed. Returns how many
    offsets were removed."""
    manager = coordinator.manager
    groups = [g for g in list(manager.groups.values()) if any(t == topic for t, _ in g.offsets)]
    return manager.cleanup_group_metadata(
        groups, lambda g: g.remove_offsets([tp for tp in g.offsets if tp[0] == topic])
    )

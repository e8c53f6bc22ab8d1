"""The groups this broker coordinates and their records in ``__consumer_offsets`` (Kafka's
``GroupMetadataManager``).

- Which partitions of ``__consumer_offsets`` it owns (single broker: all of them, once loaded)
  and which are still loading; a group belongs to ``partition_for(group_id)``.
- The cache of ``GroupMetadata`` and committed offsets, written through ``RecordLog``:
  ``store_group`` after a rebalance, ``store_offsets`` on OffsetCommit, tombstones when offsets
  expire or are deleted or a group is deleted.
- Loading a partition replays its records in order (newest record per key wins, a null value
  deletes): groups come back in ``Stable`` (members) or ``Empty`` (none), offsets with them.

Errors from the log are turned into the codes Kafka gives clients (``_commit_error`` and
``_store_group_error``). Thread-safety: none, one event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TypeAlias

from broker.group.config import GroupConfig
from broker.group.member import MemberMetadata
from broker.group.metadata import CommittedOffset, GroupMetadata
from broker.group.partitioning import partition_for
from broker.group.records import (
    GroupKey,
    GroupRecordError,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from broker.group.state import GroupState
from broker.group.store import GroupRecord, RecordLog
from broker.group.timers import Timers
from protocol.errors import ErrorCode
from protocol.messages.internal.group_metadata_value import GroupMetadataValue
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

OffsetCommitCallback: TypeAlias = Callable[[dict[TopicPartition, ErrorCode]], None]
StoreCallback: TypeAlias = Callable[[ErrorCode], None]

MAX_RECORDS_PER_LOAD = 50_000_000  # a bound on one partition's replay


def _append_error(error: ErrorCode, *, too_large: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed ``__consumer_offsets`` append to a coordinator error,
    shared by OffsetCommit and group metadata stores; ``too_large`` is what a record too
    large for the log becomes."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (
        ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE
    ):
        return too_large
    return error


def _commit_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed ``__consumer_offsets`` append to an OffsetCommit error."""
    return _append_error(error, too_large=ErrorCode.INVALID_COMMIT_OFFSET_SIZE)


def _store_group_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed group metadata append to a SyncGroup/JoinGroup error."""
    if error is ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return _append_error(error, too_large=ErrorCode.UNKNOWN_SERVER_ERROR)


def group_metadata_value(
    group: GroupMetadata, assignment: Mapping[str, bytes]
) -> GroupMetadataValue:
    members = []
    for m in group.members.values():
        subscription = m.metadata(group.protocol_name) if group.protocol_name is not None else b""
        members.append(
            GroupMetadataValue.MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=subscription,
                assignment=assignment.get(m.member_id, b""),
            )
        )
    return GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp=(
            group.state_timestamp_ms if group.state_timestamp_ms is not None else -1
        ),
        members=members,
    )


def group_from_value(group_id: str, value: GroupMetadataValue, now_ms: int) -> GroupMetadata:
    """Rebuild a group from its stored value: Stable with its members, or Empty."""
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    group = GroupMetadata(group_id, state, now_ms)
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.state_timestamp_ms = (
        value.current_state_timestamp if value.current_state_timestamp >= 0 else None
    )
    for stored in value.members:
        protocols = (
            [(value.protocol, bytes(stored.subscription))] if value.protocol is not None else []
        )
        member = MemberMetadata(
            member_id=stored.member_id,
            group_instance_id=stored.group_instance_id,
            client_id=stored.client_id,
            client_host=stored.client_host,
            rebalance_timeout_ms=(
                stored.rebalance_timeout if stored.rebalance_timeout >= 0 else stored.session_timeout
            ),
            session_timeout_ms=stored.session_timeout,
            protocol_type=value.protocol_type,
            supported_protocols=protocols,
        )
        member.assignment = bytes(stored.assignment)
        group.add(member)
    group.leader_id = value.leader if value.leader in group.members else group.leader_id
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


class GroupMetadataManager:
    def __init__(self, config: GroupConfig, timers: Timers, record_log: RecordLog) -> None:
        self.config = config
        self.timers = timers
        self.record_log = record_log
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()

    # --- ownership -------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def is_coordinator_for(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    def begin_loading(self, partition: int) -> None:
        self.loading_partitions.add(partition)

    def load_partition(
        self, partition: int, records: Iterable[GroupRecord]
    ) -> list[GroupMetadata]:
        """Replay ``records`` of ``__consumer_offsets-<partition>``; returns the groups loaded."""
        now_ms = self.timers.now_ms()
        values: dict[str, GroupMetadataValue | None] = {}
        offsets: dict[str, dict[TopicPartition, CommittedOffset | None]] = {}
        skipped = 0
        read = 0
        for count, (key_bytes, value_bytes) in enumerate(records):
            read = count + 1
            if count >= MAX_RECORDS_PER_LOAD:
                log.error("__consumer_offsets-%d: stopped loading after %d records", partition, count)
                break
            try:
                key = decode_key(key_bytes)
                if isinstance(key, OffsetKey):
                    tp = TopicPartition(key.topic, key.partition)
                    if value_bytes is None:
                        offsets.setdefault(key.group, {})[tp] = None
                    else:
                        v = decode_offset_value(value_bytes)
                        offsets.setdefault(key.group, {})[tp] = CommittedOffset(
                            offset=v.offset,
                            leader_epoch=v.leader_epoch,
                            metadata=v.metadata,
                            commit_timestamp_ms=v.commit_timestamp,
                            expire_timestamp_ms=(
                                v.expire_timestamp if v.expire_timestamp >= 0 else None
                            ),
                        )
                elif isinstance(key, GroupKey):
                    values[key.group] = (
                        None if value_bytes is None else decode_group_value(value_bytes)
                    )
            except GroupRecordError as exc:
                skipped += 1
                log.warning("__consumer_offsets-%d: skipping undecodable record: %s", partition, exc)
        loaded: list[GroupMetadata] = []
        for group_id in dict.fromkeys([*values, *offsets]):
            if self.partition_for(group_id) != partition:
                log.warning("group %s found in __consumer_offsets-%d, belongs elsewhere; loaded anyway",
                            group_id, partition)
            value = values.get(group_id)
            live_offsets = {
                tp: c for tp, c in offsets.get(group_id, {}).items() if c is not None
            }
            if value is None and not live_offsets:
                continue  # deleted group (tombstone), or every offset deleted
            if value is not None:
                group = group_from_value(group_id, value, now_ms)
            else:
                group = GroupMetadata(group_id, GroupState.EMPTY, now_ms)
                group.state_timestamp_ms = None
            group.offsets.update(live_offsets)
            self.groups[group_id] = group
            loaded.append(group)
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)
        # One line per partition that held something; 50 empty partitions stay quiet at start-up.
        log.log(logging.INFO if loaded or read else logging.DEBUG,
                "loaded %d groups from __consumer_offsets-%d (%d records read, %d skipped)",
                len(loaded), partition, read, skipped)
        return loaded

    def unload_partition(self, partition: int) -> list[GroupMetadata]:
        """Stop coordinating the groups of ``partition``; returns them (now Dead)."""
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        removed = [g for gid, g in self.groups.items() if self.partition_for(gid) == partition]
        for group in removed:
            del self.groups[group.group_id]
            group.transition_to(GroupState.DEAD, self.timers.now_ms())
        return removed

    # --- cache -----------------------------------------------------------------------------

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def get_or_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.timers.now_ms()))
        return group

    def group_not_exists(self, group_id: str) -> bool:
        """True when this broker coordinates ``group_id`` and has no live group by that id."""
        if not self.is_coordinator_for(group_id):
            return False
        group = self.groups.get(group_id)
        return group is None or group.is_state(GroupState.DEAD)

    def remove_group(self, group: GroupMetadata) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # --- writes ----------------------------------------------------------------------------

    def store_group(
        self, group: GroupMetadata, assignment: Mapping[str, bytes], callback: StoreCallback
    ) -> None:
        value = encode_group_value(group_metadata_value(group, assignment))
        record = (encode_group_key(group.group_id), value)

        def done(error: ErrorCode) -> None:
            if error is not ErrorCode.NO_ERROR:
                log.warning("storing group %s generation %d failed: %s",
                            group.group_id, group.generation_id, error.name)
            callback(_store_group_error(error))

        self.record_log.append(self.partition_for(group.group_id), [record], done)

    def store_offsets(
        self,
        group: GroupMetadata,
        offsets: Mapping[TopicPartition, CommittedOffset],
        callback: OffsetCommitCallback,
    ) -> None:
        """Write the commits; offsets become visible to OffsetFetch once the append succeeds."""
        max_bytes = self.config.offset_metadata_max_bytes
        errors: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, CommittedOffset] = {}
        for tp, committed in offsets.items():
            if len(committed.metadata.encode("utf-8")) > max_bytes:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = committed
        if not valid:
            callback(errors)
            return
        records: list[GroupRecord] = [
            (
                encode_offset_key(group.group_id, tp[0], tp[1]),
                encode_offset_value(
                    c.offset, c.leader_epoch, c.metadata, c.commit_timestamp_ms,
                    c.expire_timestamp_ms,
                ),
            )
            for tp, c in valid.items()
        ]
        group.prepare_offset_commit(valid)

        def done(error: ErrorCode) -> None:
            ok = error is ErrorCode.NO_ERROR
            dead = group.is_state(GroupState.DEAD)
            for tp, committed in valid.items():
                group.on_offset_commit_append(tp, committed if ok and not dead else None)
                errors[tp] = ErrorCode.NO_ERROR if ok else _commit_error(error)
            if not ok:
                log.warning("offset commit for group %s failed: %s", group.group_id, error.name)
            callback(errors)

        self.record_log.append(self.partition_for(group.group_id), records, done)

    def write_tombstones(
        self, group: GroupMetadata, removed: Iterable[TopicPartition], group_tombstone: bool
    ) -> int:
        """Tombstones for ``removed`` offsets (and the group itself); returns how many records."""
        records: list[GroupRecord] = [
            (encode_offset_key(group.group_id, topic, partition), None) for topic, partition in removed
        ]
        if group_tombstone:
            records.append((encode_group_key(group.group_id), None))
        if records:
            def done(error: ErrorCode) -> None:
                if error is not ErrorCode.NO_ERROR:
                    log.warning("tombstones for group %s failed: %s (the cache is already updated)",
                                group.group_id, error.name)

            self.record_log.append(self.partition_for(group.group_id), records, done)
        return len(records)

    def cleanup_group_metadata(
        self,
        groups: Iterable[GroupMetadata],
        select: Callable[[GroupMetadata], dict[TopicPartition, CommittedOffset]],
    ) -> int:
        """Remove the offsets ``select`` picks from each group, write tombstones for them, and
        for groups left Empty without offsets (or already Dead) a group tombstone too; such
        groups leave the cache. Returns the number of offsets removed."""
        removed_total = 0
        now_ms = self.timers.now_ms()
        for group in list(groups):
            removed = select(group)
            removed_total += len(removed)
            if group.is_state(GroupState.EMPTY) and not group.has_offsets():
                group.transition_to(GroupState.DEAD, now_ms)
            dead = group.is_state(GroupState.DEAD)
            if dead:
                self.remove_group(group)
            self.write_tombstones(group, removed, group_tombstone=dead)
        return removed_total

    def expire_offsets(self) -> int:
        """One pass of ``offsets.retention.minutes`` expiry over every group; offsets removed."""
        now_ms = self.timers.now_ms()
        retention_ms = self.config.offsets_retention_ms
        return self.cleanup_group_metadata(
            list(self.groups.values()),
            lambda g: g.remove_expired_offsets(now_ms, retention_ms),
        )

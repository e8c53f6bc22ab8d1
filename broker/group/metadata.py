"""One classic group's state: members, generation, protocol, and its committed offsets.

Kafka's ``GroupMetadata``. It keeps the bookkeeping (members, pending members, static member
ids, protocol votes, who awaits join/sync) and enforces the state transition table in
``broker.group.state``; the rebalance protocol that drives it lives in
``broker.group.coordinator``.

Committed offsets are keyed by ``(topic, partition)``. An offset commit is first "pending"
(written to ``__consumer_offsets`` but not yet acknowledged) and becomes visible only once the
append succeeded, as in Kafka. Thread-safety: none; one event loop owns all groups.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from broker.group.member import MemberMetadata
from broker.group.results import JoinCallback, JoinMember, JoinResult, SyncResult
from broker.group.state import VALID_PREVIOUS_STATES, GroupState, IllegalStateTransition
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from protocol.topic_partition import TopicPartition

CONSUMER_PROTOCOL_TYPE: Final = "consumer"
MEMBER_ID_DELIMITER: Final = "-"
NO_LEADER_EPOCH: Final = -1


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """Kafka's ``OffsetAndMetadata``: what OffsetFetch returns for one partition."""

    offset: int
    leader_epoch: int  # -1 when the client did not send one
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only from OffsetCommit v2-v4 retention_time_ms


def parse_subscription_topics(metadata: bytes) -> set[str] | None:
    """Topics in a ``consumer`` protocol subscription (int16 version + struct), None if unreadable."""
    if len(metadata) < 2:
        return None
    version = int.from_bytes(metadata[:2], "big", signed=True)
    if version < 0:
        return None
    version = min(version, ConsumerProtocolSubscription.HIGHEST_VERSION)
    try:
        sub = ConsumerProtocolSubscription.decode(memoryview(metadata)[2:], version)
    except (ProtocolError, ValueError, IndexError):
        return None
    return set(sub.topics)


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.num_members_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        self.pending_offset_commits: Counter[TopicPartition] = Counter()

    # --- state -----------------------------------------------------------------------------

    def is_state(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {state.value} is not allowed"
            )
        self.state = state
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # --- members ---------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def all_members(self) -> Iterator[MemberMetadata]:
        return iter(list(self.members.values()))

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}{MEMBER_ID_DELIMITER}{uuid.uuid4()}"

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(set(member.protocol_names))
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(set(member.protocol_names))
            self.supported_protocols += Counter()  # drop zero counts
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        """Replace a member's protocols and timeouts; ``callback`` (a JoinCallback) marks it joining."""
        self.supported_protocols.subtract(set(member.protocol_names))
        self.supported_protocols += Counter()
        member.supported_protocols = [(n, bytes(d)) for n, d in protocols]
        self.supported_protocols.update(set(member.protocol_names))
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        previous = member.awaiting_join_callback
        if callback is not None and previous is not None and previous is not callback:
            # A second JoinGroup replaces a waiting one: answer the old request, never drop it.
            member.awaiting_join_callback = None
            previous(JoinResult(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
            member.awaiting_join_callback = callback
            return
        if callback is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join_callback = callback

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinResult) -> bool:
        callback = member.awaiting_join_callback
        if callback is None:
            return False
        member.awaiting_join_callback = None
        self.num_members_awaiting_join -= 1
        callback(result)
        return True

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncResult) -> bool:
        callback = member.awaiting_sync_callback
        if callback is None:
            return False
        member.awaiting_sync_callback = None
        callback(result)
        return True

    def add_pending_member(self, member_id: str) -> None:
        self.pending_members.add(member_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def num_awaiting(self) -> int:
        return self.num_members_awaiting_join

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    # --- static members -------------------------------------------------------------------

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Give a static member a new member id; a zombie still waiting with the old id is fenced."""
        member = self.members.pop(old_member_id)
        self.maybe_invoke_join_callback(member, JoinResult(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        self.pending_sync_members.discard(old_member_id)
        return member

    # --- protocols -------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = set(protocols)
        if self.is_state(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == n for name in names
        )

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins (ties: first seen)."""
        if not self.members:
            raise ValueError(f"cannot select protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def current_member_metadata(self) -> list[JoinMember]:
        if self.protocol_name is None:
            raise ValueError(f"no protocol selected for group {self.group_id}")
        protocol = self.protocol_name
        return [
            JoinMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        ]

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        if not self.members:
            return set()
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members = set()

    # --- offsets ---------------------------------------------------------------------------

    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits)

    def prepare_offset_commit(self, partitions: Iterable[TopicPartition]) -> None:
        self.pending_offset_commits.update(list(partitions))

    def on_offset_commit_append(self, tp: TopicPartition, committed: CommittedOffset | None) -> None:
        """The append finished: ``committed`` becomes visible (None: it failed, drop pending)."""
        if self.pending_offset_commits[tp] > 0:
            self.pending_offset_commits[tp] -= 1
            if self.pending_offset_commits[tp] == 0:
                del self.pending_offset_commits[tp]
        if committed is not None:
            self.offsets[tp] = committed

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, CommittedOffset]:
        removed: dict[TopicPartition, CommittedOffset] = {}
        for tp in partitions:
            old = self.offsets.pop(tp, None)
            self.pending_offset_commits.pop(tp, None)
            if old is not None:
                removed[tp] = old
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, CommittedOffset]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(
        self, now_ms: int, retention_ms: int
    ) -> dict[TopicPartition, CommittedOffset]:
        """Kafka's ``removeExpiredOffsets``: which offsets have outlived ``offsets.retention.minutes``.

        - Empty group with a protocol type: retention counts from when the group became Empty;
        - a Stable ``consumer`` group knowing its subscription: offsets of topics it no longer
          subscribes to expire by commit time;
        - a group with no protocol type (standalone consumer, commits only): by commit time.
        Offsets with a pending commit and explicit v2-v4 expire timestamps follow Kafka too.
        """

        def expired(base_of: dict[TopicPartition, int], keep_topics: set[str]) -> list[TopicPartition]:
            out: list[TopicPartition] = []
            for tp, committed in self.offsets.items():
                if tp[0] in keep_topics or tp in self.pending_offset_commits:
                    continue
                if committed.expire_timestamp_ms is not None:
                    if now_ms >= committed.expire_timestamp_ms:
                        out.append(tp)
                elif now_ms - base_of[tp] >= retention_ms:
                    out.append(tp)
            return out

        by_commit = {tp: c.commit_timestamp_ms for tp, c in self.offsets.items()}
        if self.protocol_type is not None and self.is_state(GroupState.EMPTY):
            if self.state_timestamp_ms is not None:
                base = {tp: self.state_timestamp_ms for tp in self.offsets}
            else:
                base = by_commit
            victims = expired(base, set())
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_state(GroupState.STABLE)
        ):
            victims = expired(by_commit, self.subscribed_topics)
        elif self.protocol_type is None:
            victims = expired(by_commit, set())
        else:
            victims = []
        return self.remove_offsets(victims)

    def __repr__(self) -> str:
        return (
            f"GroupMetadata(group_id={self.group_id!r}, state={self.state.value}, "
            f"generation={self.generation_id}, members={len(self.members)})"
        )

"""What the coordinator answers to JoinGroup and SyncGroup (Kafka's JoinGroupResult/SyncGroupResult).

Join and sync answers may come later than the request (when the rebalance completes), so the
coordinator takes a callback and calls it exactly once with one of these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from protocol.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""  # JoinGroupRequest.UNKNOWN_MEMBER_ID
UNKNOWN_GENERATION_ID = -1  # JoinGroupRequest.UNKNOWN_GENERATION_ID


@dataclass(frozen=True, slots=True)
class JoinMember:
    """One member's subscription as the leader sees it in its JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    member_id: str
    error: ErrorCode
    generation_id: int = UNKNOWN_GENERATION_ID
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = UNKNOWN_MEMBER_ID
    skip_assignment: bool = False
    members: list[JoinMember] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback: TypeAlias = Callable[[JoinResult], None]
SyncCallback: TypeAlias = Callable[[SyncResult], None]

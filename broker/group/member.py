"""One member of a classic group (Kafka's ``MemberMetadata``).

A member is identified by ``member_id`` (``<client.id or group.instance.id>-<uuid4>``, assigned
by the coordinator); a static member also has a ``group_instance_id`` that survives restarts of
the client. ``supported_protocols`` is the ordered list of (assignor name, subscription bytes)
the member sent in JoinGroup, most preferred first; the broker never parses the bytes for
rebalancing, it only relays them to the leader (client-side assignors).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from broker.group.results import JoinCallback, SyncCallback
from broker.group.timers import TimerHandle


class MemberMetadata:
    __slots__ = (
        "assignment",
        "awaiting_join_callback",
        "awaiting_sync_callback",
        "client_host",
        "client_id",
        "group_instance_id",
        "heartbeat_satisfied",
        "heartbeat_timer",
        "is_new",
        "member_id",
        "protocol_type",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "supported_protocols",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        supported_protocols: Sequence[tuple[str, bytes]],
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols: list[tuple[str, bytes]] = list(supported_protocols)
        self.assignment = b""
        self.awaiting_join_callback: JoinCallback | None = None
        self.awaiting_sync_callback: SyncCallback | None = None
        self.is_new = False
        self.heartbeat_satisfied = False
        self.heartbeat_timer: TimerHandle | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync_callback is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        """This member's subscription bytes for ``protocol``."""
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """True when ``protocols`` is exactly what this member sent before (same order)."""
        return [(n, bytes(d)) for n, d in protocols] == self.supported_protocols

    def vote(self, candidates: Collection[str]) -> str:
        """The first of this member's protocols (its preference order) found in ``candidates``."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's rule: members awaiting a rebalance need no heartbeat, except new ones."""
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def __repr__(self) -> str:
        return (
            f"MemberMetadata(member_id={self.member_id!r}, "
            f"group_instance_id={self.group_instance_id!r}, client_id={self.client_id!r})"
        )

"""A group coordinator on a manual clock and an in-memory __consumer_offsets, for unit tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.group.config import GroupConfig
from broker.group.coordinator import GroupCoordinator
from broker.group.metadata import CommittedOffset, GroupMetadata
from broker.group.offsets import commit_offsets
from broker.group.results import JoinResult, SyncResult
from broker.group.store import MemoryRecordLog
from broker.group.timers import ManualTimers
from protocol.errors import ErrorCode
from protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def subscription(*topics: str, version: int = 1) -> bytes:
    return version.to_bytes(2, "big") + ConsumerProtocolSubscription(list(topics)).encode(version)


@dataclass
class Reply:
    """Collects the (at most one) answer a callback receives."""

    results: list[object] = field(default_factory=list)

    def __call__(self, result: object) -> None:
        self.results.append(result)

    @property
    def done(self) -> bool:
        return bool(self.results)

    @property
    def join(self) -> JoinResult:
        assert len(self.results) == 1, self.results
        r = self.results[0]
        assert isinstance(r, JoinResult)
        return r

    @property
    def sync(self) -> SyncResult:
        assert len(self.results) == 1, self.results
        r = self.results[0]
        assert isinstance(r, SyncResult)
        return r


class Harness:
    def __init__(
        self,
        config: GroupConfig | None = None,
        log: MemoryRecordLog | None = None,
        timers: ManualTimers | None = None,
        load: bool = True,
    ) -> None:
        self.config = config or GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=0)
        self.timers = timers or ManualTimers()
        self.log = log or MemoryRecordLog()
        self.coordinator = GroupCoordinator(self.config, self.timers, self.log)
        self.coordinator.startup()
        if load:
            for p in range(self.config.offsets_topic_num_partitions):
                self.coordinator.on_election(p, self.log.records(p))

    def group(self, group_id: str) -> GroupMetadata:
        g = self.coordinator.manager.get_group(group_id)
        assert g is not None
        return g

    def join(
        self,
        group_id: str,
        member_id: str = "",
        *,
        instance_id: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        require_known: bool = True,
        skip_assignment: bool = False,
        client_id: str = "client",
    ) -> Reply:
        reply = Reply()
        self.coordinator.join_group(
            group_id=group_id,
            member_id=member_id,
            group_instance_id=instance_id,
            require_known_member_id=require_known,
            supports_skip_assignment=skip_assignment,
            client_id=client_id,
            client_host="/127.0.0.1",
            rebalance_timeout_ms=rebalance_ms,
            session_timeout_ms=session_ms,
            protocol_type=protocol_type,
            protocols=protocols if protocols is not None else [("range", subscription("t"))],
            callback=reply,
        )
        return reply

    def join_new(self, group_id: str, **kwargs: object) -> tuple[str, Reply]:
        """The v4+ dance: MEMBER_ID_REQUIRED, then join with the given id."""
        first = self.join(group_id, **kwargs)  # type: ignore[arg-type]
        assert first.join.error is ErrorCode.MEMBER_ID_REQUIRED
        member_id = first.join.member_id
        return member_id, self.join(group_id, member_id, **kwargs)  # type: ignore[arg-type]

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance_id: str | None = None,
    ) -> Reply:
        reply = Reply()
        self.coordinator.sync_group(
            group_id=group_id,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type="consumer",
            protocol_name=None,
            assignments=assignments or {},
            callback=reply,
        )
        return reply

    def heartbeat(
        self, group_id: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> ErrorCode:
        return self.coordinator.heartbeat(
            group_id=group_id, member_id=member_id, group_instance_id=instance_id,
            generation_id=generation,
        )

    def commit(
        self,
        group_id: str,
        offsets: dict[tuple[str, int], int],
        *,
        member_id: str = "",
        generation: int = -1,
        instance_id: str | None = None,
        metadata: str = "",
        leader_epoch: int = -1,
    ) -> dict[tuple[str, int], ErrorCode]:
        out: list[dict[tuple[str, int], ErrorCode]] = []
        now = self.timers.now_ms()
        commit_offsets(
            self.coordinator,
            group_id=group_id,
            member_id=member_id,
            group_instance_id=instance_id,
            generation_id=generation,
            offsets={tp: CommittedOffset(o, leader_epoch, metadata, now) for tp, o in offsets.items()},
            callback=out.append,
        )
        if not out:  # deferred log
            return {}
        assert len(out) == 1
        return out[0]

    def restarted(self) -> Harness:
        """A new coordinator over the same records (a broker restart)."""
        self.coordinator.shutdown()
        return Harness(self.config, self.log, self.timers)

"""The classic group state machine on a manual clock: joins, syncs, heartbeats, leaves, timeouts."""

from __future__ import annotations

from broker.group.config import GroupConfig
from broker.group.coordinator import LeavingMember
from broker.group.state import GroupState
from protocol.errors import ErrorCode
from tests.unit.group_harness import REBALANCE_MS, SESSION_MS, Harness, subscription

G = "g1"


def stable_group(h: Harness, n: int) -> tuple[list[str], int]:
    """n members joined and synced; returns (member ids, generation)."""
    ids = []
    replies = []
    for i in range(n):
        mid, reply = h.join_new(G, client_id=f"c{i}")
        ids.append(mid)
        replies.append(reply)
    h.timers.advance(0)
    gen = replies[0].join.generation_id
    leader = replies[0].join.leader_id
    assert all(r.join.error is ErrorCode.NO_ERROR and r.join.generation_id == gen for r in replies)
    assignments = {mid: f"assign-{mid}".encode() for mid in ids}
    syncs = {mid: h.sync(G, mid, gen, assignments if mid == leader else None) for mid in ids}
    for mid, s in syncs.items():
        assert s.sync.error is ErrorCode.NO_ERROR
        assert s.sync.assignment == assignments[mid]
    assert h.group(G).state is GroupState.STABLE
    return ids, gen


def test_v4_join_requires_member_id_then_completes_a_generation() -> None:
    h = Harness()
    first = h.join(G)
    assert first.join.error is ErrorCode.MEMBER_ID_REQUIRED
    assert first.join.member_id.startswith("client-")
    assert h.group(G).is_pending_member(first.join.member_id)
    second = h.join(G, first.join.member_id)
    assert not second.done  # waits in the delayed join
    h.timers.advance(0)
    r = second.join
    assert r.error is ErrorCode.NO_ERROR
    assert r.generation_id == 1
    assert r.leader_id == r.member_id == first.join.member_id
    assert r.protocol_name == "range" and r.protocol_type == "consumer"
    assert [m.member_id for m in r.members] == [r.member_id]
    assert r.members[0].metadata == subscription("t")
    assert h.group(G).state is GroupState.COMPLETING_REBALANCE


def test_old_versions_join_without_member_id_round_trip() -> None:
    h = Harness()
    reply = h.join(G, require_known=False)
    h.timers.advance(0)
    assert reply.join.error is ErrorCode.NO_ERROR and reply.join.member_id


def test_initial_rebalance_delay_gathers_members_into_one_generation() -> None:
    h = Harness(GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=3000))
    a, ra = h.join_new(G)
    h.timers.advance(2000)
    b, rb = h.join_new(G)  # a new member in the window: one more full delay after it ends
    h.timers.advance(3999)  # t = 5999
    assert not ra.done and not rb.done
    h.timers.advance(1)  # t = 6000 = 3000 + 3000
    assert ra.join.generation_id == rb.join.generation_id == 1
    leader = ra.join.leader_id
    assert leader == a
    assert {m.member_id for m in ra.join.members} == {a, b}
    assert rb.join.members == []  # only the leader sees the subscriptions


def test_initial_delay_is_capped_by_the_rebalance_timeout() -> None:
    h = Harness(GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=3000))
    _, ra = h.join_new(G, rebalance_ms=4000)
    for _ in range(5):  # keep adding members: the delay must still end by ~4 s
        h.timers.advance(1000)
        h.join_new(G, rebalance_ms=4000)
    assert ra.done and ra.join.error is ErrorCode.NO_ERROR


def test_three_members_sync_and_get_their_own_assignment() -> None:
    h = Harness()
    ids, gen = stable_group(h, 3)
    for mid in ids:
        assert h.heartbeat(G, mid, gen) is ErrorCode.NO_ERROR
    # SyncGroup again in Stable returns the stored assignment.
    assert h.sync(G, ids[1], gen).sync.assignment == f"assign-{ids[1]}".encode()


def test_new_member_triggers_rebalance_others_rejoin() -> None:
    h = Harness()
    (a,), gen = stable_group(h, 1)
    b, rb = h.join_new(G)
    assert h.group(G).state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(G, a, gen) is ErrorCode.REBALANCE_IN_PROGRESS
    assert not rb.done
    ra = h.join(G, a)
    assert ra.join.generation_id == rb.join.generation_id == gen + 1
    assert ra.join.leader_id == a  # the old leader rejoined and stays leader
    assert {m.member_id for m in ra.join.members} == {a, b}
    # the old generation is refused now
    assert h.heartbeat(G, a, gen) is ErrorCode.ILLEGAL_GENERATION
    assert h.sync(G, a, gen).sync.error is ErrorCode.ILLEGAL_GENERATION


def test_member_that_does_not_rejoin_is_dropped_at_rebalance_timeout() -> None:
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    c, rc = h.join_new(G)
    ra = h.join(G, a)
    # b keeps heartbeating but never rejoins
    for _ in range(REBALANCE_MS // 5000):
        h.timers.advance(5000)
        h.heartbeat(G, b, gen)
    h.timers.advance(1)
    assert ra.done and rc.done
    assert ra.join.generation_id == gen + 1
    assert set(h.group(G).members) == {a, c}


def test_session_timeout_removes_silent_member_and_rebalances() -> None:
    h = Harness()
    (a, b, c), gen = stable_group(h, 3)
    for _ in range(3):
        h.timers.advance(SESSION_MS // 4)
        assert h.heartbeat(G, a, gen) is ErrorCode.NO_ERROR
        assert h.heartbeat(G, b, gen) is ErrorCode.NO_ERROR
    h.timers.advance(SESSION_MS // 4 - 1)
    assert h.group(G).has(c)
    h.timers.advance(1)  # c's last sign of life was SESSION_MS ago
    g = h.group(G)
    assert not g.has(c)
    assert g.state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(G, c, gen) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(G, a, gen) is ErrorCode.REBALANCE_IN_PROGRESS
    ra, rb = h.join(G, a), h.join(G, b)
    assert ra.join.generation_id == rb.join.generation_id == gen + 1
    assert {m.member_id for m in ra.join.members} == {a, b}


def test_graceful_leave_rebalances_and_last_leave_empties() -> None:
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    res = h.coordinator.leave_group(G, [LeavingMember(b)])
    assert res.error is ErrorCode.NO_ERROR and res.members[0][1] is ErrorCode.NO_ERROR
    assert h.group(G).state is GroupState.PREPARING_REBALANCE
    ra = h.join(G, a)
    assert ra.join.generation_id == gen + 1 and [m.member_id for m in ra.join.members] == [a]
    h.sync(G, a, gen + 1, {a: b"x"})
    res = h.coordinator.leave_group(G, [LeavingMember(a)])
    assert res.members[0][1] is ErrorCode.NO_ERROR
    h.timers.advance(0)
    assert h.group(G).state is GroupState.EMPTY
    assert h.group(G).generation_id == gen + 2


def test_leave_errors_unknown_member_and_fenced_instance() -> None:
    h = Harness()
    a, _ra = h.join_new(G)
    h.timers.advance(0)
    res = h.coordinator.leave_group(G, [LeavingMember("nobody"), LeavingMember("", "ghost")])
    assert [e for _, e in res.members] == [ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID]
    res = h.coordinator.leave_group("no-such-group", [LeavingMember("x")])
    assert res.error is ErrorCode.NO_ERROR and res.members[0][1] is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.group(G).has(a)


def test_heartbeat_errors() -> None:
    h = Harness()
    (a,), gen = stable_group(h, 1)
    assert h.heartbeat(G, a, gen + 5) is ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat(G, "stranger", gen) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("other-group", a, gen) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("", a, gen) is ErrorCode.INVALID_GROUP_ID
    # none of that touched the group
    assert h.group(G).state is GroupState.STABLE and h.heartbeat(G, a, gen) is ErrorCode.NO_ERROR


def test_join_protocol_checks() -> None:
    h = Harness()
    assert h.join(G, protocol_type="").join.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(G, protocols=[]).join.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.coordinator.manager.get_group(G) is None  # failed first joins leave nothing
    stable_group(h, 1)
    assert h.join(G, protocol_type="connect").join.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    no_common = h.join(G, protocols=[("roundrobin", b"x")])
    assert no_common.join.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.group(G).state is GroupState.STABLE
    assert h.join(G, "made-up-id").join.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_protocol_vote_picks_the_common_preferred_one() -> None:
    h = Harness()
    both = [("cooperative-sticky", b"s"), ("range", b"r")]
    _, ra = h.join_new(G, protocols=both)
    _, _rb = h.join_new(G, protocols=[("range", b"r2"), ("cooperative-sticky", b"s2")])
    _, _rc = h.join_new(G, protocols=both)
    h.timers.advance(0)
    assert ra.join.protocol_name == "cooperative-sticky"  # 2 votes to 1
    metas = {m.metadata for m in ra.join.members}
    assert metas == {b"s", b"s2"}


def test_session_timeout_bounds() -> None:
    h = Harness(GroupConfig(min_session_timeout_ms=6000, max_session_timeout_ms=60000))
    assert h.join(G, session_ms=5999).join.error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join(G, session_ms=60001).join.error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join(G, session_ms=6000).join.error is ErrorCode.MEMBER_ID_REQUIRED


def test_group_max_size() -> None:
    h = Harness(GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=0, max_size=2))
    stable_group(h, 2)
    # Kafka checks the size before handing out a member id
    assert h.join(G).join.error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert h.group(G).size == 2 and not h.group(G).pending_members
    assert h.group(G).state is GroupState.STABLE


def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    h = Harness()
    ra = h.join(G, instance_id="inst-a")
    rb = h.join(G, instance_id="inst-b")
    h.timers.advance(0)
    a, b = ra.join.member_id, rb.join.member_id
    gen = ra.join.generation_id
    leader = ra.join.leader_id
    assign = {a: b"A", b: b"B"}
    sa = h.sync(G, a, gen, assign if leader == a else None, "inst-a")
    sb = h.sync(G, b, gen, assign if leader == b else None, "inst-b")
    assert sa.sync.assignment == b"A" and sb.sync.assignment == b"B"
    # b restarts: joins with an unknown member id and the same instance id
    rb2 = h.join(G, instance_id="inst-b")
    new_b = rb2.join.member_id
    assert rb2.join.error is ErrorCode.NO_ERROR and new_b != b
    assert rb2.join.generation_id == gen  # no new generation
    assert rb2.join.leader_id == leader  # the old leader id: b will not run the assignor
    assert h.group(G).state is GroupState.STABLE
    assert h.heartbeat(G, a, gen, "inst-a") is ErrorCode.NO_ERROR  # a saw no rebalance
    assert h.sync(G, new_b, gen, None, "inst-b").sync.assignment == b"B"
    # the old incarnation is fenced
    assert h.heartbeat(G, b, gen, "inst-b") is ErrorCode.FENCED_INSTANCE_ID
    assert h.join(G, b, instance_id="inst-b").join.error is ErrorCode.FENCED_INSTANCE_ID


def test_static_member_is_not_removed_when_it_misses_a_rejoin() -> None:
    h = Harness()
    ra = h.join(G, instance_id="inst-a")
    rb = h.join(G, instance_id="inst-b")
    h.timers.advance(0)
    a, b, gen = ra.join.member_id, rb.join.member_id, ra.join.generation_id
    h.sync(G, ra.join.leader_id, gen, {a: b"A", b: b"B"})
    h.sync(G, a if ra.join.leader_id != a else b, gen)
    h.coordinator.maybe_prepare_rebalance(h.group(G), "test")
    ra2 = h.join(G, a, instance_id="inst-a")
    for _ in range(6):  # b heartbeats (so it is alive) but does not rejoin before the timeout
        h.timers.advance(5000)
        h.heartbeat(G, b, gen, "inst-b")
    h.timers.advance(1)
    assert ra2.join.error is ErrorCode.NO_ERROR
    assert h.group(G).has(b)  # static members survive a missed rejoin


def test_member_missing_sync_is_removed_after_rebalance_timeout() -> None:
    h = Harness()
    a, ra = h.join_new(G)
    b, _rb = h.join_new(G)
    h.timers.advance(0)
    gen = ra.join.generation_id
    sa = h.sync(G, a, gen, {a: b"A", b: b"B"})
    assert sa.sync.error is ErrorCode.NO_ERROR
    for _ in range(REBALANCE_MS // 5000 - 1):
        h.timers.advance(5000)
        assert h.heartbeat(G, a, gen) is ErrorCode.NO_ERROR
        assert h.heartbeat(G, b, gen) is ErrorCode.NO_ERROR
    h.timers.advance(4999)
    assert h.group(G).has(b)
    h.timers.advance(1)  # b never sent SyncGroup within the rebalance timeout
    assert not h.group(G).has(b)
    assert h.group(G).state is GroupState.PREPARING_REBALANCE


def test_rejoin_in_completing_rebalance_with_same_metadata_returns_current_generation() -> None:
    h = Harness()
    a, ra = h.join_new(G)
    h.timers.advance(0)
    again = h.join(G, a)
    assert again.join.error is ErrorCode.NO_ERROR
    assert again.join.generation_id == ra.join.generation_id
    assert h.group(G).state is GroupState.COMPLETING_REBALANCE


def test_sync_waits_for_leader_and_store() -> None:
    from broker.group.store import MemoryRecordLog

    log = MemoryRecordLog(deferred=True)
    h = Harness(log=log, load=False)
    for p in range(h.config.offsets_topic_num_partitions):
        h.coordinator.on_election(p, [])
    a, ra = h.join_new(G)
    b, _rb = h.join_new(G)
    h.timers.advance(0)
    gen = ra.join.generation_id
    sb = h.sync(G, b, gen)
    assert not sb.done
    sa = h.sync(G, a, gen, {a: b"A", b: b"B"})
    assert not sa.done and not sb.done  # waiting for the append
    assert log.flush() == 1
    assert sa.sync.assignment == b"A" and sb.sync.assignment == b"B"
    assert h.group(G).state is GroupState.STABLE


def test_failed_store_makes_members_rejoin() -> None:
    from broker.group.store import MemoryRecordLog

    log = MemoryRecordLog()
    h = Harness(log=log)
    a, ra = h.join_new(G)
    h.timers.advance(0)
    log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
    sa = h.sync(G, a, ra.join.generation_id, {a: b"A"})
    assert sa.sync.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.group(G).state is GroupState.PREPARING_REBALANCE


def test_new_member_join_times_out_after_five_minutes() -> None:
    h = Harness()
    (a,), gen = stable_group(h, 1)
    b, rb = h.join_new(G, rebalance_ms=600_000)
    # a stays alive but never rejoins; b waits for the rebalance; at 5 min b's join expires
    for _ in range(59):
        h.timers.advance(5000)
        assert h.heartbeat(G, a, gen) is ErrorCode.REBALANCE_IN_PROGRESS
    assert not rb.done
    h.timers.advance(5000)
    assert rb.join.error is ErrorCode.UNKNOWN_MEMBER_ID
    assert not h.group(G).has(b)


def test_pending_member_expires_after_session_timeout() -> None:
    h = Harness()
    first = h.join(G)
    pending = first.join.member_id
    h.timers.advance(SESSION_MS + 1)
    assert not h.group(G).is_pending_member(pending)


def test_duplicate_join_answers_the_replaced_request() -> None:
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    r1 = h.join(G, a)
    r2 = h.join(G, a)
    assert r1.join.error is ErrorCode.REBALANCE_IN_PROGRESS
    h.join(G, b)
    assert r2.join.error is ErrorCode.NO_ERROR and r2.join.generation_id == gen + 1


def test_shutdown_answers_waiting_joins() -> None:
    h = Harness()
    (a, _b), gen = stable_group(h, 2)
    ra = h.join(G, a)
    h.coordinator.shutdown()
    assert ra.join.error is ErrorCode.NOT_COORDINATOR
    assert h.timers.pending() == 0
    assert h.heartbeat(G, a, gen) is ErrorCode.COORDINATOR_NOT_AVAILABLE

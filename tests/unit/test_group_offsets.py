"""Offsets and persistence on the manual clock: commit rules, fetch, reload after restart,
retention, delete groups / offsets, and the __consumer_offsets record format."""

from __future__ import annotations

from broker.group.admin import delete_groups, describe_group, list_groups
from broker.group.config import GroupConfig
from broker.group.coordinator import LeavingMember
from broker.group.offsets import delete_offsets, fetch_offsets
from broker.group.partitioning import partition_for
from broker.group.records import (
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from broker.group.state import GroupState
from broker.group.store import MemoryRecordLog
from protocol.errors import ErrorCode
from tests.unit.group_harness import SESSION_MS, Harness, subscription

G = "offsets-group"
TP0, TP1 = ("t", 0), ("t", 1)


def one_member_stable(h: Harness, topics: tuple[str, ...] = ("t",)) -> tuple[str, int]:
    mid, r = h.join_new(G, protocols=[("range", subscription(*topics))])
    h.timers.advance(0)
    gen = r.join.generation_id
    assert h.sync(G, mid, gen, {mid: b"assignment"}).sync.error is ErrorCode.NO_ERROR
    return mid, gen


def test_member_commit_then_fetch() -> None:
    h = Harness()
    mid, gen = one_member_stable(h)
    res = h.commit(G, {TP0: 42, TP1: 7}, member_id=mid, generation=gen, metadata="m", leader_epoch=3)
    assert res == {TP0: ErrorCode.NO_ERROR, TP1: ErrorCode.NO_ERROR}
    err, got = fetch_offsets(h.coordinator, G, [TP0, TP1, ("t", 2)])
    assert err is ErrorCode.NO_ERROR
    assert (got[TP0].offset, got[TP0].leader_epoch, got[TP0].metadata) == (42, 3, "m")
    assert got[TP1].offset == 7
    assert got[("t", 2)].offset == -1 and got[("t", 2)].error is ErrorCode.NO_ERROR
    err, everything = fetch_offsets(h.coordinator, G, None)
    assert set(everything) == {TP0, TP1}


def test_commit_from_non_member_or_stale_generation_is_refused_without_effect() -> None:
    h = Harness()
    mid, gen = one_member_stable(h)
    assert h.commit(G, {TP0: 1}, member_id="intruder", generation=gen) == {TP0: ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.commit(G, {TP0: 1}, member_id=mid, generation=gen - 1) == {TP0: ErrorCode.ILLEGAL_GENERATION}
    assert h.commit(G, {TP0: 1}) == {TP0: ErrorCode.UNKNOWN_MEMBER_ID}  # standalone, group has members
    assert fetch_offsets(h.coordinator, G, [TP0])[1][TP0].offset == -1
    assert h.group(G).state is GroupState.STABLE and h.group(G).has(mid)
    # no record written for refused commits
    assert all(not isinstance(decode_key(k), OffsetKey) for k, _ in h.log.records(partition_for(G)))


def test_commit_during_completing_rebalance_is_rebalance_in_progress() -> None:
    h = Harness()
    mid, r = h.join_new(G)
    h.timers.advance(0)
    res = h.commit(G, {TP0: 5}, member_id=mid, generation=r.join.generation_id)
    assert res == {TP0: ErrorCode.REBALANCE_IN_PROGRESS}


def test_standalone_commits_create_a_group_without_protocol() -> None:
    h = Harness()
    assert h.commit("simple", {TP0: 9}) == {TP0: ErrorCode.NO_ERROR}
    assert h.group("simple").protocol_type is None
    # a commit with a generation to an unknown group is from an older life of it
    assert h.commit("gone", {TP0: 1}, member_id="m", generation=3) == {TP0: ErrorCode.ILLEGAL_GENERATION}


def test_metadata_too_large() -> None:
    h = Harness(GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=0,
                            offset_metadata_max_bytes=10))
    res = h.commit("simple", {TP0: 1}, metadata="x" * 11)
    assert res == {TP0: ErrorCode.OFFSET_METADATA_TOO_LARGE}


def test_require_stable_while_commit_in_flight() -> None:
    log = MemoryRecordLog(deferred=True)
    h = Harness(log=log)
    assert h.commit("simple", {TP0: 3}) == {}  # not acknowledged yet
    _err, got = fetch_offsets(h.coordinator, "simple", [TP0], require_stable=True)
    assert got[TP0].error is ErrorCode.UNSTABLE_OFFSET_COMMIT
    assert fetch_offsets(h.coordinator, "simple", [TP0])[1][TP0].offset == -1  # not visible yet
    log.flush()
    assert fetch_offsets(h.coordinator, "simple", [TP0], require_stable=True)[1][TP0].offset == 3


def test_failed_append_maps_error_and_keeps_old_offset() -> None:
    log = MemoryRecordLog()
    h = Harness(log=log)
    h.commit("simple", {TP0: 3})
    log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert h.commit("simple", {TP0: 4}) == {TP0: ErrorCode.NOT_COORDINATOR}
    log.fail_with = ErrorCode.MESSAGE_TOO_LARGE
    assert h.commit("simple", {TP0: 4}) == {TP0: ErrorCode.INVALID_COMMIT_OFFSET_SIZE}
    assert fetch_offsets(h.coordinator, "simple", [TP0])[1][TP0].offset == 3


def test_restart_reloads_group_and_offsets() -> None:
    h = Harness()
    mid, gen = one_member_stable(h)
    h.commit(G, {TP0: 11, TP1: 12}, member_id=mid, generation=gen, metadata="meta", leader_epoch=2)
    h.commit(G, {TP0: 13}, member_id=mid, generation=gen)  # newest record wins
    h.commit("simple", {("u", 0): 5})
    h2 = h.restarted()
    g = h2.group(G)
    assert g.state is GroupState.STABLE
    assert g.generation_id == gen and g.leader_id == mid and g.protocol_name == "range"
    assert g.get(mid).assignment == b"assignment"
    assert g.subscribed_topics == {"t"}
    got = fetch_offsets(h2.coordinator, G, [TP0, TP1])[1]
    assert (got[TP0].offset, got[TP1].offset, got[TP1].metadata, got[TP1].leader_epoch) == (13, 12, "meta", 2)
    assert fetch_offsets(h2.coordinator, "simple", [("u", 0)])[1][("u", 0)].offset == 5
    # the member keeps going with the same id and generation
    assert h2.heartbeat(G, mid, gen) is ErrorCode.NO_ERROR
    assert h2.sync(G, mid, gen).sync.assignment == b"assignment"
    # ...and if it is gone, the session timeout empties the group, offsets stay
    h2.timers.advance(SESSION_MS + 1)
    assert h2.group(G).state is GroupState.EMPTY  # the rebalance had no one to wait for
    assert h2.group(G).generation_id == gen + 1
    assert fetch_offsets(h2.coordinator, G, [TP0])[1][TP0].offset == 13


def test_records_are_kafka_format_in_the_group_partition() -> None:
    h = Harness()
    mid, gen = one_member_stable(h)
    h.commit(G, {TP0: 99}, member_id=mid, generation=gen, metadata="md", leader_epoch=4)
    records = h.log.records(partition_for(G, 50))
    assert records and all(k[:2] in (b"\x00\x01", b"\x00\x02") for k, _ in records)
    group_records = [(decode_key(k), v) for k, v in records if isinstance(decode_key(k), GroupKey)]
    value = decode_group_value(group_records[-1][1] or b"")
    assert group_records[-1][1][:2] == b"\x00\x03"  # type: ignore[index]
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == ("consumer", gen, "range", mid)
    assert value.members[0].assignment == b"assignment"
    assert value.members[0].subscription == subscription("t")
    offset_records = [(decode_key(k), v) for k, v in records if isinstance(decode_key(k), OffsetKey)]
    key, raw = offset_records[-1]
    assert key == OffsetKey(G, "t", 0)
    assert raw is not None and raw[:2] == b"\x00\x03"
    v = decode_offset_value(raw)
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (99, 4, "md", h.timers.now_ms())


def test_offsets_of_empty_group_expire_after_retention() -> None:
    cfg = GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=0,
                      offsets_retention_minutes=60, offsets_retention_check_interval_ms=60_000)
    h = Harness(cfg)
    mid, gen = one_member_stable(h)
    h.commit(G, {TP0: 1}, member_id=mid, generation=gen)
    h.coordinator.leave_group(G, [LeavingMember(mid)])
    h.timers.advance(0)
    assert h.group(G).state is GroupState.EMPTY
    h.timers.advance(59 * 60_000)
    assert fetch_offsets(h.coordinator, G, [TP0])[1][TP0].offset == 1
    h.timers.advance(2 * 60_000)
    assert h.coordinator.manager.get_group(G) is None
    assert fetch_offsets(h.coordinator, G, [TP0])[1][TP0].offset == -1
    tail = h.log.records(partition_for(G))[-2:]
    assert tail[0][1] is None and tail[1][1] is None  # offset and group tombstones
    assert h.restarted().coordinator.manager.get_group(G) is None


def test_offsets_of_active_group_do_not_expire() -> None:
    cfg = GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=0,
                      offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    h = Harness(cfg)
    mid, gen = one_member_stable(h)
    h.commit(G, {TP0: 1}, member_id=mid, generation=gen)
    for _ in range(30):
        h.timers.advance(5000)
        assert h.heartbeat(G, mid, gen) is ErrorCode.NO_ERROR
    assert fetch_offsets(h.coordinator, G, [TP0])[1][TP0].offset == 1


def test_delete_groups() -> None:
    h = Harness()
    _mid, _gen = one_member_stable(h)
    h.commit("simple", {TP0: 1})
    res = delete_groups(h.coordinator, [G, "simple", "unknown", ""])
    assert res == {
        G: ErrorCode.NON_EMPTY_GROUP,
        "simple": ErrorCode.NO_ERROR,
        "unknown": ErrorCode.GROUP_ID_NOT_FOUND,
        "": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    assert h.coordinator.manager.get_group("simple") is None
    assert h.restarted().coordinator.manager.get_group("simple") is None


def test_offset_delete_rules() -> None:
    h = Harness()
    mid, gen = one_member_stable(h, topics=("t",))
    h.commit(G, {TP0: 1, ("other", 0): 2}, member_id=mid, generation=gen)
    err, res = delete_offsets(h.coordinator, G, [TP0, ("other", 0)])
    assert err is ErrorCode.NO_ERROR
    assert res == {TP0: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): ErrorCode.NO_ERROR}
    got = fetch_offsets(h.coordinator, G, None)[1]
    assert set(got) == {TP0}
    assert delete_offsets(h.coordinator, "nope", [TP0])[0] is ErrorCode.GROUP_ID_NOT_FOUND


def test_list_and_describe() -> None:
    h = Harness()
    mid, _gen = one_member_stable(h)
    h.commit("simple", {TP0: 1})
    err, groups = list_groups(h.coordinator)
    assert err is ErrorCode.NO_ERROR
    assert {(g.group_id, g.protocol_type, g.state) for g in groups} == {
        (G, "consumer", "Stable"), ("simple", "", "Empty")
    }
    assert [g.group_id for g in list_groups(h.coordinator, states=["stable"])[1]] == [G]
    assert list_groups(h.coordinator, types=["consumer"])[1] == []
    err, summary = describe_group(h.coordinator, G)
    assert (summary.state, summary.protocol_type, summary.protocol) == ("Stable", "consumer", "range")
    m = summary.members[0]
    assert (m.member_id, m.client_id, m.assignment, m.metadata) == (mid, "client", b"assignment", subscription("t"))
    assert describe_group(h.coordinator, "nope")[1].state == "Dead"


def test_not_coordinator_and_loading() -> None:
    h = Harness(load=False)
    assert fetch_offsets(h.coordinator, G, [TP0])[0] is ErrorCode.NOT_COORDINATOR
    p = partition_for(G)
    h.coordinator.manager.begin_loading(p)
    assert fetch_offsets(h.coordinator, G, [TP0])[0] is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat(G, "m", 1) is ErrorCode.NO_ERROR  # Kafka answers heartbeats blindly while loading


def test_undecodable_records_are_skipped_on_load() -> None:
    log = MemoryRecordLog()
    h = Harness(log=log)
    h.commit("simple", {TP0: 8})
    p = partition_for("simple")
    log.partitions[p].insert(0, (b"\x00\x09garbage", b"x"))
    log.partitions[p].append((b"\x00", None))
    h2 = h.restarted()
    assert fetch_offsets(h2.coordinator, "simple", [TP0])[1][TP0].offset == 8


def test_deleted_topic_offsets_leave_every_group() -> None:
    from broker.group.offsets import remove_topic_offsets

    h = Harness()
    mid, gen = one_member_stable(h, topics=("t", "u"))
    h.commit(G, {TP0: 1, ("u", 0): 2}, member_id=mid, generation=gen)
    h.commit("simple", {TP1: 3})
    assert remove_topic_offsets(h.coordinator, "t") == 2
    assert set(fetch_offsets(h.coordinator, G, None)[1]) == {("u", 0)}
    assert h.coordinator.manager.get_group("simple") is None  # Empty and no offsets left
    h2 = h.restarted()
    assert set(fetch_offsets(h2.coordinator, G, None)[1]) == {("u", 0)}
    assert h2.coordinator.manager.get_group("simple") is None

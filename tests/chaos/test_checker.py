"""The checker on made-up histories and replicas: each anomaly it names is found when it is
there, and nothing is reported when it is not; the replica reader on real segment files;
the schedule is a function of the seed."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.records import ControlType, NewRecord, build_batch, build_control_batch
from protocol.topic_partition import TopicPartition
from storage.checkpoints import write_offset_checkpoint
from tests.chaos.checker import (
    CheckResult,
    WriterSpec,
    check,
    check_commits,
    check_recovery,
    unavailability,
)
from tests.chaos.faults import KINDS, applicable, make_schedule
from tests.chaos.history import Commit, History, Outcome, Send, parse_value, record_value
from tests.chaos.replicas import ReplicaLog, StoredRecord, read_broker

T = "chaos-all"
STRICT = WriterSpec("kp-all", -1, True)
ACKS1 = WriterSpec("ck-acks1", 1, False)
CK_STRICT = WriterSpec("ck-all", -1, True)


def _send(history: History, writer: str, seq: int, *, partition: int = 0, offset: int | None,
          outcome: Outcome = "ok", t: float, acks: int = -1) -> Send:
    event = Send(writer, 0, seq, T, partition, acks, t)
    history.sends.append(event)
    if outcome != "unknown":
        event.outcome = outcome
        event.t_done = t + 0.01
        event.offset = offset if outcome == "ok" else None
    return event


def _replica(broker: int, entries: list[tuple[int, str, int]], hw: int | None,
             partition: int = 0) -> ReplicaLog:
    records = [StoredRecord(offset, writer, seq, 0, 1) for offset, writer, seq in entries]
    leo = max((r.offset for r in records), default=-1) + 1
    return ReplicaLog(broker, T, partition, records, hw, leo)


def _check(history: History, replicas: list[ReplicaLog], *, leader: int | None = 1,
           writers: tuple[WriterSpec, ...] = (STRICT,), end: float = 100.0) -> CheckResult:
    return check(history, replicas, {(T, 0): leader}, list(writers), end)


def _kinds(result: CheckResult) -> list[str]:
    return [f.kind for f in result.findings]


def test_a_clean_history_has_no_finding() -> None:
    h = History()
    for seq in range(5):
        _send(h, "kp-all", seq, offset=seq, t=seq)
    log = [(o, "kp-all", o) for o in range(5)]
    result = _check(h, [_replica(1, log, 5), _replica(2, log, 5), _replica(3, log[:4], 4)])
    assert result.findings == []
    assert not result.failed
    w = result.writers["kp-all"]
    assert (w.sent, w.acked, w.lost, w.duplicates, w.order_violations) == (5, 5, 0, 0, 0)


def test_an_acknowledged_record_missing_from_the_leader_is_lost_and_names_the_fault() -> None:
    h = History()
    _send(h, "kp-all", 0, offset=0, t=1.0)
    _send(h, "kp-all", 1, offset=1, t=2.0)
    fault = h.fault("kill_leader", "broker 1 (leader of chaos-all-0)")
    fault.t_start = 2.5
    result = _check(h, [_replica(1, [(0, "kp-all", 0)], 1), _replica(2, [(0, "kp-all", 0),
                                                                        (1, "kp-all", 1)], 1)])
    assert result.failed
    lost = [f for f in result.findings if f.kind == "lost"]
    assert len(lost) == 1 and result.writers["kp-all"].lost == 1
    message = lost[0].message
    assert "chaos-all-0" in message and "kp-all:1" in message and "offset 1" in message
    assert "held by broker(s) [2] but not below the reference's HW" in message
    assert "next fault: #0 kill_leader on broker 1" in message
    assert lost[0].t_ack == pytest.approx(2.01)


def test_a_record_above_the_high_watermark_does_not_count_as_stored() -> None:
    h = History()
    _send(h, "kp-all", 0, offset=0, t=1.0)
    result = _check(h, [_replica(1, [(0, "kp-all", 0)], 0)])
    assert _kinds(result) == ["lost"]


def test_failed_and_unknown_sends_may_or_may_not_be_written() -> None:
    h = History()
    _send(h, "kp-all", 0, offset=None, outcome="fail", t=1.0)
    _send(h, "kp-all", 1, offset=None, outcome="fail", t=1.0)
    _send(h, "kp-all", 2, offset=None, outcome="unknown", t=1.0)
    result = _check(h, [_replica(1, [(0, "kp-all", 0), (1, "kp-all", 2)], 2)])
    assert result.findings == []
    w = result.writers["kp-all"]
    assert (w.failed, w.unknown, w.failed_present, w.unknown_present) == (2, 1, 1, 1)


def test_duplicates_fail_an_idempotent_writer_and_are_only_reported_for_acks1() -> None:
    h = History()
    _send(h, "kp-all", 0, offset=0, t=1.0)
    _send(h, "ck-acks1", 0, offset=2, t=1.0, acks=1)
    log = [(0, "kp-all", 0), (1, "kp-all", 0), (2, "ck-acks1", 0), (3, "ck-acks1", 0)]
    result = _check(h, [_replica(1, log, 4)], writers=(STRICT, ACKS1))
    dups = [f for f in result.findings if f.kind == "duplicate"]
    assert [(f.fails, f.message) for f in dups] == [
        (True, "chaos-all-0: kp-all:0 at offsets [0, 1]"),
        (False, "chaos-all-0: ck-acks1:0 at offsets [2, 3]")]
    assert result.writers["kp-all"].duplicates == 1
    assert result.writers["ck-acks1"].duplicates == 1
    assert result.failed


def test_copies_under_two_producer_epochs_are_reported_not_failed() -> None:
    """A client that bumped its producer epoch and resent a record it was not told about
    writes a second copy no broker can recognise: reported, not held against the broker;
    two copies under one epoch still fail."""
    h = History()
    _send(h, "ck-all", 757, offset=254, t=1.0)
    _send(h, "kp-all", 3, offset=256, t=1.0)
    replica = _replica(1, [], 257)
    replica.records = [StoredRecord(253, "ck-all", 757, 1, 1000, 1),
                       StoredRecord(254, "ck-all", 757, 2, 1000, 2),
                       StoredRecord(255, "kp-all", 3, 2, 7, 0),
                       StoredRecord(256, "kp-all", 3, 2, 7, 0)]
    replica.log_end_offset = 257
    result = _check(h, [replica], writers=(STRICT, CK_STRICT))
    dups = [(f.fails, f.message) for f in result.findings if f.kind == "duplicate"]
    assert dups == [
        (False, "chaos-all-0: ck-all:757 at offsets [253, 254] under producer epochs [1, 2]: "
                "resent by the client after an epoch bump"),
        (True, "chaos-all-0: kp-all:3 at offsets [255, 256]")]
    assert result.writers["ck-all"].duplicates == 0
    assert result.writers["kp-all"].duplicates == 1


def test_acknowledged_records_out_of_send_order_are_an_order_violation() -> None:
    h = History()
    _send(h, "kp-all", 0, offset=1, t=1.0)
    _send(h, "kp-all", 1, offset=0, t=1.1)
    result = _check(h, [_replica(1, [(0, "kp-all", 1), (1, "kp-all", 0)], 2)])
    assert _kinds(result) == ["order"]
    assert "kp-all:0 at offset 1 but kp-all:1 (sent later) at offset 0" in \
        result.findings[0].message
    assert result.writers["kp-all"].order_violations == 1
    assert result.failed


def test_a_record_stored_at_another_offset_than_acknowledged_is_a_mismatch() -> None:
    h = History()
    _send(h, "kp-all", 0, offset=5, t=1.0)
    result = _check(h, [_replica(1, [(0, "kp-all", 0)], 1)])
    assert _kinds(result) == ["offset_mismatch"]
    assert result.writers["kp-all"].offset_mismatches == 1


def test_replicas_must_agree_below_the_high_watermark_only() -> None:
    h = History()
    leader = _replica(1, [(0, "kp-all", 0), (1, "kp-all", 1), (2, "kp-all", 2)], 2)
    tail_differs = _replica(2, [(0, "kp-all", 0), (1, "kp-all", 1), (2, "ck-all", 7)], 2)
    assert _check(h, [leader, tail_differs]).findings == []
    below_differs = _replica(3, [(0, "kp-all", 0), (1, "ck-all", 9)], 2)
    result = _check(h, [leader, below_differs])
    assert _kinds(result) == ["divergence"]
    assert "broker 1 has (1, 'kp-all', 1), broker 3 has (1, 'ck-all', 9)" in \
        result.findings[0].message
    shorter = _replica(3, [(0, "kp-all", 0)], 2)
    assert _kinds(_check(h, [leader, shorter])) == ["divergence"]


def test_the_reference_without_a_known_leader_is_the_replica_with_the_highest_hw() -> None:
    h = History()
    _send(h, "kp-all", 0, offset=0, t=1.0)
    result = _check(h, [_replica(1, [], 0), _replica(2, [(0, "kp-all", 0)], 1)], leader=None)
    assert result.findings == []
    assert result.writers["kp-all"].lost == 0


def test_losses_of_the_acks1_writer_are_reported_but_do_not_fail_the_run() -> None:
    h = History()
    _send(h, "ck-acks1", 0, offset=0, t=1.0, acks=1)
    result = _check(h, [_replica(1, [], 0)], writers=(STRICT, ACKS1))
    assert _kinds(result) == ["lost"]
    assert not result.failed
    assert result.writers["ck-acks1"].lost == 1


def test_a_partition_with_acknowledged_records_and_no_replica_anywhere_is_loss() -> None:
    h = History()
    _send(h, "kp-all", 0, offset=0, t=1.0)
    result = _check(h, [])
    assert _kinds(result) == ["lost"] and result.failed


def _commit(source: str, offset: int, t: float, done: float) -> Commit:
    return Commit("consumer" if source == "consumer" else "observer", source, T, 0, offset, t,
                  done)


def test_committed_offsets_must_not_move_backwards() -> None:
    fine = [_commit("observer", 5, 1.0, 1.1), _commit("consumer", 9, 1.2, 1.3),
            _commit("observer", 9, 1.4, 1.5), _commit("observer", 12, 2.0, 2.1)]
    assert check_commits(fine, []) == []
    back = [_commit("observer", 9, 1.0, 1.1), _commit("observer", 4, 1.2, 1.3),
            _commit("observer", 8, 1.4, 1.5)]
    found = check_commits(back, [])  # 4, then 8: both below the 9 read before, for good
    assert [(f.kind, f.fails) for f in found] == [("offsets_backwards", True)] * 2
    assert "read as 4 at 1.200 s after 9 at 1.000 s" in found[0].message
    assert "highest later read: 8" in found[0].message
    lost_commit = [_commit("consumer", 20, 1.0, 1.1), _commit("observer", 15, 1.5, 1.6)]
    found = check_commits(lost_commit, [])
    assert [(f.kind, f.fails) for f in found] == [("offsets_backwards", True)]
    assert "was told 20 was committed" in found[0].message


def test_a_low_read_followed_by_the_committed_value_is_a_stale_read() -> None:
    # A deposed coordinator answers from its cache, then the new one answers the commit.
    stale = [_commit("consumer", 20, 1.0, 1.1), _commit("observer", 15, 1.5, 1.6),
             _commit("observer", 15, 2.0, 2.1), _commit("observer", 21, 2.5, 2.6)]
    found = check_commits(stale, [])
    assert [(f.kind, f.fails) for f in found] == [("offsets_stale_read", False)] * 2
    assert "read back at 21 at 2.500 s" in found[0].message
    result = CheckResult({}, found, [], 0.0)
    assert not result.failed


def test_an_observation_overlapping_a_commit_is_not_a_regression() -> None:
    # The observer asked (t=1.0) before the consumer's commit was acknowledged (1.1).
    racing = [_commit("consumer", 20, 0.9, 1.1), _commit("observer", 15, 1.0, 1.2)]
    assert check_commits(racing, []) == []


def test_unavailability_is_the_longest_gap_after_each_fault() -> None:
    h = History()
    times = [0.1, 0.2, 0.3, 1.0, 1.1, 4.0, 4.1, 4.2, 9.0]
    for i, t in enumerate(times):
        s = _send(h, "kp-all", i, offset=i, t=t)
        s.t_done = t
    f1 = h.fault("kill_leader", "x")
    f1.t_start = 1.05
    f2 = h.fault("restart", "y")
    f2.t_start = 4.15
    figures, baseline = unavailability(h.sends, h.faults, 10.0, ["kp-all"])
    assert baseline == pytest.approx(0.7)  # 0.3 -> 1.0, before the first fault
    assert [round(f.unavailable_s, 3) for f in figures] == [2.9, 4.8]
    assert [f.kind for f in figures] == ["kill_leader", "restart"]


def test_a_fault_not_recovered_within_the_bound_fails_the_run_and_says_why() -> None:
    h = History()
    whole = h.fault("kill_leader", "broker 2")
    whole.t_start, whole.t_healed, whole.t_recovered = 10.0, 13.0, 20.0
    broken = h.fault("partition_zk", "broker 3 (controller)")
    broken.t_start, broken.t_healed = 30.0, 32.5
    broken.not_whole = ["chaos-all-1: ISR [2, 3] of replicas [1, 2, 3] (leader 2)",
                        "controller: broker 3"]
    assert check_recovery([whole], [], 90.0, 200.0) == []
    findings = check_recovery(h.faults, [], 90.0, 200.0)
    assert [(f.kind, f.fails, f.t) for f in findings] == [("not_recovered", True, 30.0)]
    assert findings[0].message == (
        "fault #1 partition_zk on broker 3 (controller) at 30.0 s (healed at 32.5 s): the "
        "cluster was not whole 90 s after healing: chaos-all-1: ISR [2, 3] of replicas "
        "[1, 2, 3] (leader 2); controller: broker 3")
    final = check_recovery([whole], ["broker 1 not registered in ZooKeeper"], 90.0, 200.0)
    assert [(f.kind, f.fails, f.t) for f in final] == [("not_recovered", True, 200.0)]
    assert final[0].message.endswith("after the final heal: broker 1 not registered in "
                                     "ZooKeeper")
    # A clean check of the same history fails once the recovery findings are added to it.
    result = _check(h, [])
    assert not result.failed
    result.findings += findings
    assert result.failed


def test_values_name_their_writer_and_sequence() -> None:
    assert parse_value(record_value("ck-all", 42)) == ("ck-all", 42)
    assert parse_value(b"something else") is None
    assert parse_value(None) is None


def test_every_replica_is_read_from_its_log_dir(tmp_path: Path) -> None:
    part = tmp_path / f"{T}-0"
    part.mkdir()
    first = build_batch([NewRecord(b"k", record_value("kp-all", 0)),
                         NewRecord(b"k", record_value("kp-all", 1))], base_offset=0,
                        producer_id=7, partition_leader_epoch=3)
    marker = build_control_batch(ControlType.COMMIT, producer_id=7, producer_epoch=0,
                                 base_offset=2)
    second = build_batch([NewRecord(b"k", record_value("kp-all", 2))], base_offset=3,
                         partition_leader_epoch=4)
    (part / "00000000000000000000.log").write_bytes(first + marker + second[:-3])
    (tmp_path / f"{T}-x").mkdir()  # not a partition directory
    (tmp_path / "other-0").mkdir()  # another topic
    write_offset_checkpoint(tmp_path / "replication-offset-checkpoint",
                            {TopicPartition(T, 0): 2})
    (replica,) = read_broker(5, tmp_path, {T})
    assert (replica.broker_id, replica.topic, replica.partition) == (5, T, 0)
    assert [(r.offset, r.writer, r.seq, r.leader_epoch) for r in replica.records] == \
        [(0, "kp-all", 0, 3), (1, "kp-all", 1, 3)]
    assert replica.high_watermark == 2
    assert replica.log_end_offset == 3  # the control batch counts, the cut batch does not
    assert len(replica.problems) == 1 and "TRUNCATED" in replica.problems[0]


def test_the_schedule_is_a_function_of_the_seed_and_spreads_the_kinds() -> None:
    kinds = applicable(3, 3, True)
    assert "lagging_takeover" not in kinds and "lagging_takeover" in KINDS
    one = make_schedule(11, kinds, 40)
    assert one == make_schedule(11, kinds, 40)
    assert one != make_schedule(12, kinds, 40)
    counts = {k: sum(1 for f in one if f.kind == k) for k in kinds}
    assert min(counts.values()) >= 40 // len(kinds)
    assert all(1.0 <= f.quiet_s <= 3.0 for f in one)
    assert applicable(1, 0, False) == ["kill_leader", "restart", "pause_leader", "disk_full"]

"""The leader side of replication in ``broker.partition``: follower fetch state, the HW
over the maximal ISR while an ISR change is pending, shrink after replica.lag.time.max.ms,
expansion once a follower reaches the HW, and the controller's answer (Kafka's
Partition.updateFollowerFetchState / maybeExpandIsr / maybeShrinkIsr / maybeIncrementLeaderHW)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from broker.delayed_ops import FetchParams, FetchPartitionStatus
from broker.partition import IsolationLevel, Partition
from protocol.errors import ErrorCode
from storage.config import LogConfig
from tests.unit.test_replica_manager import (
    HANG_S,
    LONGER_THAN_TEST_MS,
    append,
    close_rm,
    data,
    make_leader,
    new_rm,
)
from tests.waiting import async_wait_for

pytestmark = pytest.mark.timeout(20)


async def leader_with_followers(tmp_path: Path) -> tuple[object, Partition, list[frozenset[int]]]:
    rm = new_rm(tmp_path)
    p = await make_leader(rm, 0, isr=(0, 1, 2))
    asked: list[frozenset[int]] = []
    p.isr_change_sender = lambda _p, isr: asked.append(isr)
    p.is_broker_eligible = lambda _b: True  # no UpdateMetadata here: every broker is alive
    return rm, p, asked


async def test_hw_is_min_over_isr_and_pending_shrink_keeps_counting(tmp_path: Path) -> None:
    rm, p, asked = await leader_with_followers(tmp_path)
    assert await append(rm, data(5), acks=1) == (0, 0)  # type: ignore[arg-type]
    now = int(time.time() * 1000)  # make_leader started every follower's clock now
    assert not p.update_follower_fetch_state(1, 5, now)  # 2 has fetched nothing: HW 0
    assert p.high_watermark == 0
    assert p.update_follower_fetch_state(2, 3, now) and p.high_watermark == 3
    # Follower 2 stops; new records arrive; after the lag time the leader asks to drop it.
    assert await append(rm, data(2), acks=1) == (0, 5)  # type: ignore[arg-type]
    p.update_follower_fetch_state(1, 7, now + 100)
    assert not p.maybe_shrink_isr(now + 20_000, 30_000)  # not yet
    assert p.maybe_shrink_isr(now + 40_000, 30_000)
    assert asked == [frozenset({0, 1})] and p.pending_isr == frozenset({0, 1})
    # Until the controller commits it, replica 2 still holds the HW back.
    assert p.isr == {0, 1, 2} and p.high_watermark == 3
    assert not p.maybe_increment_high_watermark()
    assert p.isr_change_committed([0, 1], p.leader_epoch, p.partition_epoch + 1)
    assert (p.isr, p.pending_isr, p.high_watermark) == ({0, 1}, None, 7)
    close_rm(rm)  # type: ignore[arg-type]


async def test_expansion_waits_for_the_hw_and_the_commit(tmp_path: Path) -> None:
    rm, p, asked = await leader_with_followers(tmp_path)
    p.isr = {0, 1}  # replica 2 out of the ISR
    assert await append(rm, data(4), acks=1) == (0, 0)  # type: ignore[arg-type]
    now = int(time.time() * 1000)
    p.update_follower_fetch_state(1, 4, now)
    assert p.high_watermark == 4
    p.update_follower_fetch_state(2, 2, now)  # below the HW: not yet
    assert asked == []
    p.update_follower_fetch_state(2, 4, now)
    assert asked == [frozenset({0, 1, 2})]
    # Pending: the HW counts replica 2 (it is at 4, so nothing changes), not more.
    assert p.maximal_isr == {0, 1, 2} and p.isr == {0, 1}
    # min.insync.replicas counts the committed ISR only.
    assert len(p.isr) == 2
    # The controller refuses it (INELIGIBLE_REPLICA): back to the committed ISR.
    p.isr_change_failed(ErrorCode.INELIGIBLE_REPLICA, retriable=False)
    assert p.pending_isr is None and p.isr == {0, 1}
    close_rm(rm)  # type: ignore[arg-type]


async def test_caught_up_follower_without_new_data_stays(tmp_path: Path) -> None:
    """Kafka's isCaughtUp: a follower at the log end offset is in sync however long ago it
    last fetched (nothing new to fetch)."""
    rm, p, asked = await leader_with_followers(tmp_path)
    assert await append(rm, data(3), acks=1) == (0, 0)  # type: ignore[arg-type]
    p.update_follower_fetch_state(1, 3, 0)
    p.update_follower_fetch_state(2, 3, 0)
    assert not p.maybe_shrink_isr(10**9, 30_000)
    assert asked == []
    close_rm(rm)  # type: ignore[arg-type]


async def follower_fetch(rm: object, replica_id: int, offset: int, epoch: int = 0) -> ErrorCode:
    """A follower's Fetch through the replica manager (its position comes with it)."""
    results = await rm.fetch_messages(  # type: ignore[attr-defined]
        FetchParams(replica_id, 0, 0, 1 << 20, IsolationLevel.READ_UNCOMMITTED),
        [FetchPartitionStatus("t", 0, offset, 1 << 20, epoch)])
    return ErrorCode(results[0].error)


async def produce_acks_all(rm: object, n: int) -> asyncio.Task[dict[object, object]]:
    return asyncio.get_running_loop().create_task(rm.append_records(  # type: ignore[attr-defined]
        timeout_ms=LONGER_THAN_TEST_MS, required_acks=-1, produce_version=9,
        entries=[(("t", 0), memoryview(data(n)))]))


async def test_acks_all_completes_when_follower_fetches_move_the_hw(tmp_path: Path) -> None:
    rm = new_rm(tmp_path)
    p = await make_leader(rm, 0, isr=(0, 1, 2), epoch=2)
    task = await produce_acks_all(rm, 3)
    await async_wait_for(lambda: p.log_end_offset == 3, HANG_S, "the append")
    assert await follower_fetch(rm, 1, 3, epoch=2) is ErrorCode.NO_ERROR
    await asyncio.sleep(0.05)
    assert not task.done() and p.high_watermark == 0  # replica 2 has not fetched it
    # A fetch at a stale leader epoch is refused and moves nothing.
    assert await follower_fetch(rm, 2, 3, epoch=1) is ErrorCode.FENCED_LEADER_EPOCH
    assert await follower_fetch(rm, 2, 3, epoch=3) is ErrorCode.UNKNOWN_LEADER_EPOCH
    await asyncio.sleep(0.05)
    assert not task.done() and p.high_watermark == 0
    assert await follower_fetch(rm, 2, 3, epoch=2) is ErrorCode.NO_ERROR
    results = await asyncio.wait_for(task, HANG_S)
    r = results[("t", 0)]
    assert (r.error, r.base_offset, p.high_watermark) == (ErrorCode.NO_ERROR, 0, 3)  # type: ignore[attr-defined]
    close_rm(rm)  # type: ignore[arg-type]


async def test_acks_all_below_min_insync_replicas(tmp_path: Path) -> None:
    """Parked acks=all when the committed ISR shrinks below min.insync.replicas:
    NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records stay); then NOT_ENOUGH_REPLICAS before any
    append; acks=1 still appends."""
    rm = new_rm(tmp_path, LogConfig(min_insync_replicas=2))
    p = await make_leader(rm, 0, isr=(0, 1, 2))
    asked: list[frozenset[int]] = []
    p.isr_change_sender = lambda _p, isr: asked.append(isr)
    p.is_broker_eligible = lambda _b: True
    task = await produce_acks_all(rm, 3)
    await async_wait_for(lambda: p.log_end_offset == 3, HANG_S, "the append")
    now = int(time.time() * 1000)
    assert p.maybe_shrink_isr(now + 40_000, 30_000) and asked == [frozenset({0})]
    await asyncio.sleep(0.05)
    assert not task.done()  # pending: replicas 1 and 2 still count
    assert p.isr_change_committed([0], p.leader_epoch, p.partition_epoch + 1)
    rm.on_high_watermark_moved(p.topic_partition)  # as the AlterPartition sender does
    results = await asyncio.wait_for(task, HANG_S)
    assert results[("t", 0)].error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert p.high_watermark == 3
    error, _ = await append(rm, data(2))
    assert error == ErrorCode.NOT_ENOUGH_REPLICAS and p.log_end_offset == 3
    assert await append(rm, data(1), acks=1) == (0, 3)
    close_rm(rm)


async def test_committed_isr_changes_tell_the_listener_expand_or_shrink(tmp_path: Path) -> None:
    """IsrShrinksPerSec / IsrExpandsPerSec count what the controller commits, not what the
    leader asks for: a refused change and a stale answer count nothing."""
    rm, p, _asked = await leader_with_followers(tmp_path)
    told: list[tuple[bool, bool]] = []
    p.isr_change_listener = lambda expanded, shrunk: told.append((expanded, shrunk))
    p.isr_change_failed(ErrorCode.INELIGIBLE_REPLICA, retriable=False)
    assert not p.isr_change_committed([0], p.leader_epoch + 1, p.partition_epoch + 1)
    assert told == []
    p.isr_change_committed([0, 1], p.leader_epoch, p.partition_epoch + 1)
    p.isr_change_committed([0, 1, 2], p.leader_epoch, p.partition_epoch + 1)
    assert told == [(False, True), (True, False)]
    close_rm(rm)  # type: ignore[arg-type]


async def test_latest_offset_is_the_hw_for_consumers_and_the_leo_for_debugging(tmp_path: Path) -> None:
    """ListOffsets LATEST (Kafka's fetchOffsetForTimestamp): a consumer is told the high
    watermark, never an offset only the leader has; the debugging replica id -2 the LEO."""
    rm, p, _asked = await leader_with_followers(tmp_path)
    assert await append(rm, data(5), acks=1) == (0, 0)  # type: ignore[arg-type]
    now = int(time.time() * 1000)
    p.update_follower_fetch_state(1, 5, now)
    p.update_follower_fetch_state(2, 2, now)  # replica 2 has only 0-1: HW 2, LEO 5
    assert (p.high_watermark, p.log_end_offset) == (2, 5)
    for isolation in IsolationLevel:
        assert p.fetch_offset_for_timestamp(-1, isolation=isolation, current_leader_epoch=-1,
                                            replica_id=-1)[:3] == (ErrorCode.NO_ERROR, -1, 2)
    assert p.fetch_offset_for_timestamp(-1, isolation=IsolationLevel.READ_UNCOMMITTED,
                                        current_leader_epoch=-1, replica_id=-2)[:3] == (
        ErrorCode.NO_ERROR, -1, 5)
    close_rm(rm)  # type: ignore[arg-type]

"""The leader side of replication in ``broker.partition``: follower fetch state, the HW
over the maximal ISR while an ISR change is pending, shrink after replica.lag.time.max.ms,
expansion once a follower reaches the HW, and the controller's answer (Kafka's
Partition.updateFollowerFetchState / maybeExpandIsr / maybeShrinkIsr / maybeIncrementLeaderHW)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.partition import Partition
from protocol.errors import ErrorCode
from tests.unit.test_replica_manager import append, close_rm, data, make_leader, new_rm

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

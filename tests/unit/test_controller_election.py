"""controller.election against Kafka's PartitionLeaderElectionAlgorithms semantics."""

from __future__ import annotations

from controller.election import (
    controlled_shutdown_leader,
    elect_controlled_shutdown,
    elect_new_partition,
    elect_offline,
    elect_preferred,
    elect_reassign,
    offline_partition_leader,
    preferred_replica_leader,
    reassign_partition_leader,
)
from controller.leader_and_isr import LeaderAndIsr, LeaderRecoveryState


def test_offline_prefers_assignment_order_within_the_isr() -> None:
    assert offline_partition_leader([1, 2, 3], isr=[3, 2], live_replicas={2, 3},
                                    unclean_leader_election=False) == 2
    assert offline_partition_leader([1, 2, 3], isr=[1], live_replicas={2, 3},
                                    unclean_leader_election=False) is None
    assert offline_partition_leader([1, 2, 3], isr=[1], live_replicas={3, 2},
                                    unclean_leader_election=True) == 2
    assert offline_partition_leader([1, 2, 3], isr=[1], live_replicas=set(),
                                    unclean_leader_election=True) is None


def test_reassign_uses_the_target_replicas() -> None:
    assert reassign_partition_leader([4, 5, 1], isr=[1, 5], live_replicas={1, 4, 5}) == 5
    assert reassign_partition_leader([4, 5], isr=[1], live_replicas={1, 4, 5}) is None


def test_preferred_is_only_the_first_replica() -> None:
    assert preferred_replica_leader([1, 2], isr=[1, 2], live_replicas={1, 2}) == 1
    assert preferred_replica_leader([1, 2], isr=[2], live_replicas={1, 2}) is None
    assert preferred_replica_leader([1, 2], isr=[1, 2], live_replicas={2}) is None
    assert preferred_replica_leader([], isr=[], live_replicas=set()) is None


def test_controlled_shutdown_skips_brokers_going_down() -> None:
    assert controlled_shutdown_leader([1, 2, 3], isr=[1, 2, 3], live_replicas={1, 2, 3},
                                      shutting_down={1}) == 2
    assert controlled_shutdown_leader([1, 2], isr=[1], live_replicas={1, 2},
                                      shutting_down={1}) is None


def test_elect_offline_keeps_live_isr_and_bumps_epoch() -> None:
    current = LeaderAndIsr(1, 4, (1, 2, 3), partition_epoch=9)
    result = elect_offline([1, 2, 3], current, live_brokers={2, 3},
                           unclean_leader_election=False)
    assert result.leader_and_isr == LeaderAndIsr(2, 5, (2, 3), partition_epoch=9)
    assert result.live_replicas == (2, 3)


def test_elect_offline_unclean_starts_a_recovering_isr_of_one() -> None:
    current = LeaderAndIsr(1, 4, (1,))
    clean = elect_offline([1, 2], current, live_brokers={2}, unclean_leader_election=False)
    assert clean.leader_and_isr is None and clean.live_replicas == (2,)
    unclean = elect_offline([1, 2], current, live_brokers={2}, unclean_leader_election=True)
    assert unclean.leader_and_isr == LeaderAndIsr(
        2, 5, (2,), LeaderRecoveryState.RECOVERING)
    assert unclean.unclean and not clean.unclean
    from_isr = elect_offline([1, 2], LeaderAndIsr(1, 4, (1, 2)), live_brokers={2},
                             unclean_leader_election=True)
    assert from_isr.leader_and_isr is not None and not from_isr.unclean


def test_elect_new_partition_starts_at_epoch_zero_with_live_replicas() -> None:
    result = elect_new_partition([3, 1, 2], live_brokers={1, 2})
    assert result.leader_and_isr == LeaderAndIsr(1, 0, (1, 2))
    assert elect_new_partition([3], live_brokers={1}).leader_and_isr is None


def test_elect_preferred_and_reassign_change_only_the_leader() -> None:
    current = LeaderAndIsr(2, 7, (1, 2))
    assert elect_preferred([1, 2], current, {1, 2}).leader_and_isr == LeaderAndIsr(1, 8, (1, 2))
    assert elect_preferred([1, 2], current, {2}).leader_and_isr is None
    assert elect_reassign([3, 1], current, {1, 3}).leader_and_isr == LeaderAndIsr(1, 8, (1, 2))


def test_elect_controlled_shutdown_drops_shutting_down_from_isr() -> None:
    current = LeaderAndIsr(1, 2, (1, 2, 3))
    result = elect_controlled_shutdown([1, 2, 3], current, {1, 2, 3}, shutting_down={1})
    assert result.leader_and_isr == LeaderAndIsr(2, 3, (2, 3))
    assert elect_controlled_shutdown([1], LeaderAndIsr(1, 0, (1,)), {1}, {1}).leader_and_isr is None

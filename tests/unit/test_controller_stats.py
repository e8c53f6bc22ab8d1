"""controller.stats: Kafka's ControllerState values and the leader election histogram's
slots."""

from __future__ import annotations

from controller.stats import LEADER_ELECTION_BOUNDS_NS, ControllerState, ControllerStats


def test_controller_state_values_are_kafkas() -> None:
    assert ControllerState.IDLE == 0
    assert ControllerState.BROKER_CHANGE == 2
    assert ControllerState.CONTROLLED_SHUTDOWN == 8
    assert ControllerState.ISR_CHANGE == 9
    assert ControllerState.LIST_PARTITION_REASSIGNMENT == 15


def test_leader_election_times_land_in_their_slot() -> None:
    stats = ControllerStats()
    stats.record_leader_election(LEADER_ELECTION_BOUNDS_NS[0])  # at the bound: that slot
    stats.record_leader_election(LEADER_ELECTION_BOUNDS_NS[0] + 1)
    stats.record_leader_election(LEADER_ELECTION_BOUNDS_NS[-1] + 1)  # +Inf
    assert stats.leader_election_counts[0] == 1
    assert stats.leader_election_counts[1] == 1
    assert stats.leader_election_counts[-1] == 1
    assert sum(stats.leader_election_counts) == 3
    assert stats.leader_election_sum_ns == (2 * LEADER_ELECTION_BOUNDS_NS[0] + 1
                                            + LEADER_ELECTION_BOUNDS_NS[-1] + 1)

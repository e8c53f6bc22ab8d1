"""What the controller metrics read besides the controller's context (Kafka's
``ControllerState`` of ``KafkaController`` and ``ControllerStats``).

One ``ControllerStats`` per broker process, kept across controller tenures as Kafka's
``ControllerStats`` is: it counts since start-up whichever core was active.

- ``state``: Kafka's ControllerState value of the event being processed (0 Idle between
  events); the values are Kafka's (``kafka.controller.ControllerState``);
- ``unclean_leader_elections``: leaders chosen from outside the ISR (Kafka marks
  UncleanLeaderElectionsPerSec in its offline-partition election when it takes a live
  replica that is not in the ISR);
- ``leader_election``: time spent processing broker changes, as a histogram (Kafka's
  LeaderElectionRateAndTimeMs is the BrokerChange state's rate-and-time timer, named so
  for compatibility with the metric that preceded ControllerState);
- ``state_times``: the same timer for every other state Kafka times
  (``ControllerState.rateAndTimeMetricName``: TopicChangeRateAndTimeMs, ...), for the
  states processed at least once since start-up.

Layout of ``leader_election_counts``: ``len(LEADER_ELECTION_BOUNDS_NS) + 1`` slots, slot
``i`` counts times ``<= bounds[i]`` (and ``> bounds[i-1]``), the last one those above every
bound; ``leader_election_sum_ns`` is their total. Updated on the event loop only.
"""

from __future__ import annotations

import enum
from bisect import bisect_left
from typing import Final

LEADER_ELECTION_BOUNDS_MS: Final[tuple[float, ...]] = (
    0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
)
LEADER_ELECTION_BOUNDS_NS: Final[tuple[int, ...]] = tuple(
    int(b * 1_000_000) for b in LEADER_ELECTION_BOUNDS_MS)


class ControllerState(enum.IntEnum):
    """Kafka's ``ControllerState`` values (ZooKeeper mode)."""

    IDLE = 0
    CONTROLLER_CHANGE = 1
    BROKER_CHANGE = 2
    TOPIC_CHANGE = 3
    TOPIC_DELETION = 4
    ALTER_PARTITION_REASSIGNMENT = 5
    AUTO_LEADER_BALANCE = 6
    MANUAL_LEADER_BALANCE = 7
    CONTROLLED_SHUTDOWN = 8
    ISR_CHANGE = 9
    LEADER_AND_ISR_RESPONSE_RECEIVED = 10
    LOG_DIR_CHANGE = 11
    CONTROLLER_SHUTDOWN = 12
    UNCLEAN_LEADER_ELECTION_ENABLE = 13
    TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = 14
    LIST_PARTITION_REASSIGNMENT = 15
    UPDATE_METADATA_RESPONSE_RECEIVED = 16
    UPDATE_FEATURES = 17


# Kafka's ControllerState.rateAndTimeMetricName of each timed state besides BrokerChange
# (LeaderElectionRateAndTimeMs); Idle has none.
RATE_AND_TIME_NAMES: Final[dict[ControllerState, str]] = {
    ControllerState.CONTROLLER_CHANGE: "ControllerChangeRateAndTimeMs",
    ControllerState.TOPIC_CHANGE: "TopicChangeRateAndTimeMs",
    ControllerState.TOPIC_DELETION: "TopicDeletionRateAndTimeMs",
    ControllerState.ALTER_PARTITION_REASSIGNMENT: "PartitionReassignmentRateAndTimeMs",
    ControllerState.AUTO_LEADER_BALANCE: "AutoLeaderBalanceRateAndTimeMs",
    ControllerState.MANUAL_LEADER_BALANCE: "ManualLeaderBalanceRateAndTimeMs",
    ControllerState.CONTROLLED_SHUTDOWN: "ControlledShutdownRateAndTimeMs",
    ControllerState.ISR_CHANGE: "IsrChangeRateAndTimeMs",
    ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED: "LeaderAndIsrResponseReceivedRateAndTimeMs",
    ControllerState.LOG_DIR_CHANGE: "LogDirChangeRateAndTimeMs",
    ControllerState.CONTROLLER_SHUTDOWN: "ControllerShutdownRateAndTimeMs",
    ControllerState.UNCLEAN_LEADER_ELECTION_ENABLE: "UncleanLeaderElectionEnableRateAndTimeMs",
    ControllerState.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE:
        "TopicUncleanLeaderElectionEnableRateAndTimeMs",
    ControllerState.LIST_PARTITION_REASSIGNMENT: "ListPartitionReassignmentRateAndTimeMs",
    ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED:
        "UpdateMetadataResponseReceivedRateAndTimeMs",
    ControllerState.UPDATE_FEATURES: "UpdateFeaturesRateAndTimeMs",
}


class StateTimer:
    """Slot counts (layout as ``leader_election_counts``) and total ns of one state."""

    __slots__ = ("counts", "sum_ns")

    def __init__(self) -> None:
        self.counts = [0] * (len(LEADER_ELECTION_BOUNDS_NS) + 1)
        self.sum_ns = 0


class ControllerStats:
    def __init__(self) -> None:
        self.state = ControllerState.IDLE
        self.unclean_leader_elections = 0
        self.leader_election_counts = [0] * (len(LEADER_ELECTION_BOUNDS_NS) + 1)
        self.leader_election_sum_ns = 0
        self.state_times: dict[ControllerState, StateTimer] = {}

    def record_leader_election(self, elapsed_ns: int) -> None:
        self.leader_election_counts[bisect_left(LEADER_ELECTION_BOUNDS_NS, elapsed_ns)] += 1
        self.leader_election_sum_ns += elapsed_ns

    def record_state(self, state: ControllerState, elapsed_ns: int) -> None:
        """``state`` was processed for ``elapsed_ns`` (Kafka's per-state rate-and-time
        timers; Idle is not timed)."""
        if state is ControllerState.BROKER_CHANGE:
            self.record_leader_election(elapsed_ns)
            return
        if state not in RATE_AND_TIME_NAMES:
            return
        timer = self.state_times.get(state)
        if timer is None:
            timer = self.state_times[state] = StateTimer()
        timer.counts[bisect_left(LEADER_ELECTION_BOUNDS_NS, elapsed_ns)] += 1
        timer.sum_ns += elapsed_ns

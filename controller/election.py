"""Leader election: Kafka's ``PartitionLeaderElectionAlgorithms`` and ``Election``, pure.

The four algorithms choose a leader (or none) from a partition's replica list, in order,
so the first replica (the preferred leader) wins whenever it may:

- offline (a new partition, or its leader died): the first live replica in the ISR; with
  unclean leader election, else the first live replica at all; else none;
- reassignment: the first live replica of the *target* replica list that is in the ISR;
- preferred: the first replica of the assignment, if it is live and in the ISR, else none;
- controlled shutdown: the first live replica in the ISR that is not shutting down.

The ``elect_*`` functions wrap them as Kafka's ``Election`` does: the new ``LeaderAndIsr``
(leader epoch + 1) with the ISR each case calls for, or ``None`` when no leader can be
chosen (the partition stays as it is; offline election leaves it leaderless).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from controller.leader_and_isr import LeaderAndIsr
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

# ElectLeaders' answer per partition: its error code and message.
ElectionOutcome = dict[TopicPartition, tuple[ErrorCode, str | None]]


class NotControllerError(Exception):
    """The request reached a broker that is not (or no longer) the controller."""


def offline_partition_leader(assignment: Sequence[int], isr: Collection[int],
                             live_replicas: Collection[int],
                             unclean_leader_election: bool) -> int | None:
    for broker in assignment:
        if broker in live_replicas and broker in isr:
            return broker
    if unclean_leader_election:
        for broker in assignment:
            if broker in live_replicas:
                return broker
    return None


def reassign_partition_leader(target_replicas: Sequence[int], isr: Collection[int],
                              live_replicas: Collection[int]) -> int | None:
    for broker in target_replicas:
        if broker in live_replicas and broker in isr:
            return broker
    return None


def preferred_replica_leader(assignment: Sequence[int], isr: Collection[int],
                             live_replicas: Collection[int]) -> int | None:
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Collection[int],
                               live_replicas: Collection[int],
                               shutting_down: Collection[int]) -> int | None:
    for broker in assignment:
        if broker in live_replicas and broker in isr and broker not in shutting_down:
            return broker
    return None


@dataclass(frozen=True, slots=True)
class ElectionResult:
    leader_and_isr: LeaderAndIsr | None  # None: no leader could be elected
    live_replicas: tuple[int, ...]  # the replicas the controller sends LeaderAndIsr to
    unclean: bool = False  # the leader is not from the ISR (unclean leader election)


def elect_offline(assignment: Sequence[int], current: LeaderAndIsr,
                  live_brokers: Collection[int], unclean_leader_election: bool) -> ElectionResult:
    """A leader for a partition whose leader is gone. The ISR keeps its live members
    when the leader came from it; an unclean leader starts a new ISR of itself alone and
    is RECOVERING."""
    live = tuple(b for b in assignment if b in live_brokers)
    leader = offline_partition_leader(assignment, current.isr, live, unclean_leader_election)
    if leader is None:
        return ElectionResult(None, live)
    if leader in current.isr:
        return ElectionResult(current.new_leader_and_isr(
            leader, [b for b in current.isr if b in live_brokers]), live)
    return ElectionResult(current.new_recovering_leader_and_isr(leader, [leader]), live,
                          unclean=True)


def elect_new_partition(assignment: Sequence[int],
                        live_brokers: Collection[int]) -> ElectionResult:
    """A new partition: the first live replica leads, every live replica is in the ISR,
    leader epoch 0 (Kafka's ``initializeLeaderAndIsrForPartitions``)."""
    live = tuple(b for b in assignment if b in live_brokers)
    if not live:
        return ElectionResult(None, live)
    return ElectionResult(LeaderAndIsr.initial(live[0], live), live)


def elect_reassign(target_replicas: Sequence[int], current: LeaderAndIsr,
                   live_brokers: Collection[int]) -> ElectionResult:
    live = tuple(b for b in target_replicas if b in live_brokers)
    leader = reassign_partition_leader(target_replicas, current.isr, live)
    return ElectionResult(None if leader is None else current.new_leader(leader),
                          tuple(target_replicas))


def elect_preferred(assignment: Sequence[int], current: LeaderAndIsr,
                    live_brokers: Collection[int]) -> ElectionResult:
    live = tuple(b for b in assignment if b in live_brokers)
    leader = preferred_replica_leader(assignment, current.isr, live)
    return ElectionResult(None if leader is None else current.new_leader(leader),
                          tuple(assignment))


def elect_controlled_shutdown(assignment: Sequence[int], current: LeaderAndIsr,
                              live_or_shutting_down: Collection[int],
                              shutting_down: Collection[int]) -> ElectionResult:
    """Moves leadership off brokers that are shutting down; they also leave the ISR."""
    live = tuple(b for b in assignment if b in live_or_shutting_down)
    leader = controlled_shutdown_leader(assignment, current.isr, live, shutting_down)
    if leader is None:
        return ElectionResult(None, live)
    new_isr = [b for b in current.isr if b not in shutting_down]
    return ElectionResult(current.new_leader_and_isr(leader, new_isr), live)

"""Replica placement: Kafka's ``AdminUtils.assignReplicasToBrokers``, as pure functions.

Three goals, in Kafka's words: spread the replicas evenly among brokers; for the
partitions led by one broker, spread their other replicas over the other brokers; when
every broker has a rack, put each partition's replicas on different racks where possible.

Rack-unaware (no broker has a rack): the first replica of each partition goes round-robin
over the broker list from a start index; the others follow at an increasing shift, which
grows by one each time the partition id wraps around the broker list. Five brokers, ten
partitions, three replicas, start index and shift 0::

    broker-0  broker-1  broker-2  broker-3  broker-4
    p0        p1        p2        p3        p4        (1st replica)
    p5        p6        p7        p8        p9        (1st replica)
    p4        p0        p1        p2        p3        (2nd replica)
    p8        p9        p5        p6        p7        (2nd replica)
    p3        p4        p0        p1        p2        (3rd replica)
    p7        p8        p9        p5        p6        (3rd replica)

Rack-aware (every broker has a rack): the same round robin over a *rack-alternated* list
(``{0: rack1, 1: rack3, 2: rack3, 3: rack2, 4: rack2, 5: rack1}`` -> ``[0, 3, 1, 5, 4, 2]``);
each further replica skips brokers on racks that already hold one while some rack holds
none, and brokers that already hold one while some broker holds none.

Some brokers with a rack and some without: ``AssignmentError`` (Kafka's
AdminOperationException). The start index and shift are random unless fixed (Kafka's
``fixedStartIndex``); callers pass the brokers sorted by id, as Kafka does.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode


class AssignmentError(Exception):
    """A placement that cannot be made, with the error code Kafka answers."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """A broker as placement sees it (Kafka's ``BrokerMetadata``)."""

    broker_id: int
    rack: str | None = None


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    num_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Partition id -> replica broker ids (the first is the preferred leader).

    ``start_partition_id`` numbers the new partitions (CreatePartitions adds partitions
    from the current count); ``fixed_start_index`` >= 0 makes the placement deterministic.
    """
    if num_partitions <= 0:
        raise AssignmentError(ErrorCode.INVALID_PARTITIONS,
                              "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError(ErrorCode.INVALID_REPLICATION_FACTOR,
                              "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}.")
    draw = rng if rng is not None else random.Random()
    if all(b.rack is None for b in brokers):
        return _rack_unaware(num_partitions, replication_factor, [b.broker_id for b in brokers],
                             fixed_start_index, start_partition_id, draw)
    racks: dict[int, str] = {}
    for b in brokers:
        if b.rack is None:
            raise AssignmentError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                "Not all brokers have rack information for replica rack aware assignment.")
        racks[b.broker_id] = b.rack
    return _rack_aware(num_partitions, replication_factor, racks, fixed_start_index,
                       start_partition_id, draw)


def replica_index(first_replica_index: int, second_replica_shift: int, replica: int,
                  num_brokers: int) -> int:
    """Where the ``replica``-th follower of a partition goes (Kafka's ``replicaIndex``)."""
    shift = 1 + (second_replica_shift + replica) % (num_brokers - 1)
    return (first_replica_index + shift) % num_brokers


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one rack at a time, racks in name order, brokers in id order:
    rack1: 0, 1, 2; rack2: 3, 4, 5; rack3: 6, 7, 8 -> 0, 3, 6, 1, 4, 7, 2, 5, 8."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(broker_racks):  # bounded: each pass takes >= 1 broker
        for queue in queues:
            if depth < len(queue):
                result.append(queue[depth])
        depth += 1
    return result


def _start(fixed_start_index: int, count: int, rng: random.Random) -> int:
    return fixed_start_index if fixed_start_index >= 0 else rng.randrange(count)


def _rack_unaware(num_partitions: int, replication_factor: int, broker_list: list[int],
                  fixed_start_index: int, start_partition_id: int,
                  rng: random.Random) -> dict[int, list[int]]:
    n = len(broker_list)
    start_index = _start(fixed_start_index, n, rng)
    next_replica_shift = _start(fixed_start_index, n, rng)
    partition_id = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            next_replica_shift += 1
        first = (partition_id + start_index) % n
        replicas = [broker_list[first]]
        for j in range(replication_factor - 1):
            replicas.append(broker_list[replica_index(first, next_replica_shift, j, n)])
        assignment[partition_id] = replicas
        partition_id += 1
    return assignment


def _rack_aware(num_partitions: int, replication_factor: int, broker_racks: dict[int, str],
                fixed_start_index: int, start_partition_id: int,
                rng: random.Random) -> dict[int, list[int]]:
    num_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_brokers(broker_racks)
    n = len(arranged)
    start_index = _start(fixed_start_index, n, rng)
    next_replica_shift = _start(fixed_start_index, n, rng)
    partition_id = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            next_replica_shift += 1
        first = (partition_id + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {broker_racks[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _j in range(replication_factor - 1):
            # Bounded: within n - 1 steps k visits every other broker, and one of them is
            # always acceptable (replication_factor <= n was checked).
            for _step in range(n * n):
                broker = arranged[replica_index(first, next_replica_shift * num_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                if ((rack not in racks_with_replicas or len(racks_with_replicas) == num_racks)
                        and (broker not in brokers_with_replicas
                             or len(brokers_with_replicas) == n)):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        assignment[partition_id] = replicas
        partition_id += 1
    return assignment

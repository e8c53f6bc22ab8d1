"""controller.assignment against Kafka's documented placements (AdminUtils' javadoc and
AdminRackAwareTest's expectations) and its distribution properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from controller.assignment import (
    AssignmentError,
    BrokerMetadata,
    assign_replicas_to_brokers,
    rack_alternated_brokers,
)
from protocol.errors import ErrorCode


def brokers(racks: dict[int, str]) -> list[BrokerMetadata]:
    return [BrokerMetadata(b, racks[b]) for b in sorted(racks)]


def plain(n: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(b) for b in range(n)]


def test_rack_unaware_matches_kafkas_javadoc_table() -> None:
    got = assign_replicas_to_brokers(plain(5), 10, 3, fixed_start_index=0, start_partition_id=0)
    # AdminUtils' table: columns are brokers, rows are which partitions hold a replica there.
    assert got == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }
    first = {b: sorted(p for p, r in got.items() if r[0] == b) for b in range(5)}
    assert first == {0: [0, 5], 1: [1, 6], 2: [2, 7], 3: [3, 8], 4: [4, 9]}
    second = {b: sorted(p for p, r in got.items() if r[1] == b) for b in range(5)}
    assert second == {0: [4, 8], 1: [0, 9], 2: [1, 5], 3: [2, 6], 4: [3, 7]}
    third = {b: sorted(p for p, r in got.items() if r[2] == b) for b in range(5)}
    assert third == {0: [3, 7], 1: [4, 8], 2: [0, 9], 3: [1, 5], 4: [2, 6]}


def test_rack_alternated_list() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    del racks[5]
    assert rack_alternated_brokers(racks) == [0, 3, 1, 4, 2]
    three = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_brokers(three) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_matches_kafkas_example() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    got = assign_replicas_to_brokers(brokers(racks), 7, 3, fixed_start_index=0,
                                     start_partition_id=0)
    assert got == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0],
                   5: [2, 0, 3], 6: [0, 4, 2]}


def check_distribution(assignment: dict[int, list[int]], racks: dict[int, str], rf: int,
                       *, even: bool = True) -> None:
    """AdminRackAwareTest's checks: every partition on min(rf, #racks) racks, no broker
    twice; with ``even``, leaders and replicas spread evenly over brokers."""
    num_racks = len(set(racks.values()))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert len({racks[b] for b in replicas}) == min(rf, num_racks)
    if even:
        leaders = Counter(r[0] for r in assignment.values())
        counts = Counter(b for r in assignment.values() for b in r)
        assert len(set(leaders.values())) == 1 and len(leaders) == len(racks)
        assert len(set(counts.values())) == 1


@pytest.mark.parametrize(("partitions", "rf", "start"), [(6, 3, 2), (6, 3, -1), (12, 2, -1),
                                                         (6, 2, -1)])
def test_rack_aware_spreads_evenly(partitions: int, rf: int, start: int) -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    got = assign_replicas_to_brokers(brokers(racks), partitions, rf, fixed_start_index=start,
                                     start_partition_id=0, rng=random.Random(7))
    check_distribution(got, racks, rf)


def test_rack_aware_expansion_numbers_partitions_from_start_id() -> None:
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    got = assign_replicas_to_brokers(brokers(racks), 12, 2, start_partition_id=12,
                                     rng=random.Random(1))
    assert sorted(got) == list(range(12, 24))
    check_distribution(got, racks, 2)


def test_more_and_fewer_replicas_than_racks_and_one_rack() -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    five = assign_replicas_to_brokers(brokers(racks), 6, 5, rng=random.Random(3))
    assert all(len({racks[b] for b in r}) == 3 for r in five.values())
    two = assign_replicas_to_brokers(brokers(racks), 6, 2, rng=random.Random(3))
    assert all(len({racks[b] for b in r}) == 2 for r in two.values())
    single = {b: "rack1" for b in range(6)}
    one = assign_replicas_to_brokers(brokers(single), 6, 3, rng=random.Random(3))
    assert Counter(r[0] for r in one.values()) == dict.fromkeys(range(6), 1)


def test_skips_a_broker_that_already_has_a_replica() -> None:
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    got = assign_replicas_to_brokers(brokers(racks), 6, 4, fixed_start_index=2)
    for replicas in got.values():
        assert len(set(replicas)) == 4
        assert {racks[b] for b in replicas} == {"a", "b", "c"}


def test_single_broker_places_everything_on_it() -> None:
    assert assign_replicas_to_brokers([BrokerMetadata(7)], 3, 1) == {0: [7], 1: [7], 2: [7]}


@pytest.mark.parametrize(("n", "rf", "code", "message"), [
    (0, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
    (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."),
    (1, 4, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor: 4 larger than available brokers: 3."),
])
def test_refusals_carry_kafkas_codes(n: int, rf: int, code: ErrorCode, message: str) -> None:
    with pytest.raises(AssignmentError) as info:
        assign_replicas_to_brokers(plain(3), n, rf)
    assert info.value.error_code == code and info.value.message == message


def test_partial_rack_information_is_refused() -> None:
    with pytest.raises(AssignmentError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers([BrokerMetadata(0, "r1"), BrokerMetadata(1)], 2, 1)

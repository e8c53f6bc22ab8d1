"""controller.channel.ControlRequestBatch: one decision's LeaderAndIsr requests, each
partition's state built once and shared by its replicas' requests, and still the state each
broker was given when a later update in the same batch names only some of them."""

from __future__ import annotations

import uuid

from controller.channel import (
    LEADER_AND_ISR_VERSION,
    BrokerEndpoint,
    BrokerRegistration,
    ControlRequest,
    ControlRequestBatch,
)
from controller.leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.topic_partition import TopicPartition

TID = uuid.uuid4()
LIVE = {b: BrokerRegistration(b, (BrokerEndpoint("PLAINTEXT", f"h{b}", 9000 + b),), None, 10 + b)
        for b in (1, 2, 3)}


class Capture:
    def __init__(self) -> None:
        self.sent: list[tuple[int, ControlRequest]] = []

    def send(self, broker_id: int, request: ControlRequest) -> None:
        self.sent.append((broker_id, request))


def leader_and_isr(batch: ControlRequestBatch) -> dict[int, LeaderAndIsrRequest]:
    capture = Capture()
    batch.send_all(capture, LIVE, lambda t: TID)  # type: ignore[arg-type]
    return {b: r for b, r in capture.sent if isinstance(r, LeaderAndIsrRequest)}


def wire(request: LeaderAndIsrRequest) -> LeaderAndIsrRequest:
    """As the broker reads it."""
    return LeaderAndIsrRequest.decode(request.encode(LEADER_AND_ISR_VERSION),
                                      LEADER_AND_ISR_VERSION)


def states(request: LeaderAndIsrRequest) -> dict[int, tuple[int, int, list[int], bool]]:
    return {p.partition_index: (p.leader, p.leader_epoch, p.isr, p.is_new)
            for t in wire(request).topic_states for p in t.partition_states}


def test_a_partition_state_is_built_once_for_all_its_replicas() -> None:
    batch = ControlRequestBatch(1, 5, "PLAINTEXT")
    for i in range(3):
        state = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(i + 1, (1, 2, 3)), 5)
        batch.add_leader_and_isr((1, 2, 3), TopicPartition("t", i), state, (1, 2, 3),
                                 is_new=True)
    requests = leader_and_isr(batch)
    assert sorted(requests) == [1, 2, 3]
    parts = {b: r.topic_states[0].partition_states for b, r in requests.items()}
    for i in range(3):
        assert parts[1][i] is parts[2][i] is parts[3][i]
    for b, request in requests.items():
        assert request.broker_epoch == 10 + b
        assert states(request) == {i: (i + 1, 0, [1, 2, 3], True) for i in range(3)}
        assert [leader.broker_id for leader in wire(request).live_leaders] == [1, 2, 3]


def test_a_later_update_for_some_replicas_reaches_only_them() -> None:
    batch = ControlRequestBatch(1, 5, "PLAINTEXT")
    tp = TopicPartition("t", 0)
    first = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1, 2, 3)), 5)
    batch.add_leader_and_isr((1, 2, 3), tp, first, (1, 2, 3))
    later = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 5, (2, 3)), 5)
    batch.add_leader_and_isr((2,), tp, later, (1, 2, 3))
    requests = leader_and_isr(batch)
    assert states(requests[1]) == states(requests[3]) == {0: (1, 4, [1, 2, 3], False)}
    assert states(requests[2]) == {0: (2, 5, [2, 3], False)}

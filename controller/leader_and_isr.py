"""``LeaderAndIsr``: a partition's leadership as the controller decides and stores it.

Kafka's ``org.apache.kafka.metadata.LeaderAndIsr``: the leader (or ``NO_LEADER``), the
leader epoch (bumped by every leader change and by every new election, never reused),
the ISR, the leader recovery state and the partition epoch (ZooKeeper's zkVersion of the
partition state znode: the version-checked writes' expected version). In ZooKeeper it is
``/brokers/topics/<t>/partitions/<p>/state``::

    {"controller_epoch": 1, "leader": 0, "version": 1, "leader_epoch": 0, "isr": [0]}

Immutable: every change builds a new value (``new_leader``, ``new_leader_and_isr``, ...).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Final

INITIAL_LEADER_EPOCH: Final = 0
INITIAL_PARTITION_EPOCH: Final = 0
NO_LEADER: Final = -1
NO_EPOCH: Final = -1
# UpdateMetadata carries these for a partition being deleted: brokers drop it from their
# metadata cache; StopReplica carries EPOCH_DURING_DELETE so the epoch check lets it pass.
LEADER_DURING_DELETE: Final = -2
EPOCH_DURING_DELETE: Final = -2
INITIAL_CONTROLLER_EPOCH: Final = 0  # what a broker knows before any controller spoke


class LeaderRecoveryState(enum.IntEnum):
    """0: the leader has every committed record; 1: elected uncleanly, still recovering."""

    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int = INITIAL_LEADER_EPOCH
    isr: tuple[int, ...] = ()
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    partition_epoch: int = INITIAL_PARTITION_EPOCH

    @classmethod
    def initial(cls, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """A new partition's first leadership: epoch 0, partition epoch 0."""
        return cls(leader, INITIAL_LEADER_EPOCH, tuple(isr))

    @classmethod
    def during_delete(cls, isr: Iterable[int]) -> LeaderAndIsr:
        return cls(LEADER_DURING_DELETE, INITIAL_LEADER_EPOCH, tuple(isr))

    @property
    def has_leader(self) -> bool:
        return self.leader >= 0

    def new_leader(self, leader: int) -> LeaderAndIsr:
        """Another leader, same ISR, next leader epoch."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1)

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))

    def new_recovering_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """An unclean election: the new leader was not in the ISR."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr),
                       leader_recovery_state=LeaderRecoveryState.RECOVERING)

    def new_epoch(self) -> LeaderAndIsr:
        """Same leader and ISR, next leader epoch (fences the old epoch's requests)."""
        return replace(self, leader_epoch=self.leader_epoch + 1)

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        """After a write: the stored version the next version-checked write expects."""
        return replace(self, partition_epoch=partition_epoch)


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    """A partition's leadership and the epoch of the controller that decided it."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int

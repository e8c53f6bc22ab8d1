"""What brokers ask of the controller: ControlledShutdown, ElectLeaders, AlterPartition.

``ClusterOps`` is the broker's view of it (``Broker.cluster``): in a cluster the
``controller.zk.ZkController`` of this broker, which answers NOT_CONTROLLER unless it is
the active controller (the asker then finds the controller from its metadata and asks
again, as Kafka's clients and brokers do); on a single node ``LocalClusterOps``, whose
answers follow from having one replica per partition:

- ControlledShutdown of this broker: nothing to move (no other replica), NONE; of another
  id: BROKER_NOT_AVAILABLE; an older broker epoch: STALE_BROKER_EPOCH.
- ElectLeaders: every known partition already has its only (preferred) replica as leader,
  ELECTION_NOT_NEEDED; an unknown one UNKNOWN_TOPIC_OR_PARTITION.
- AlterPartition: first the sender, as Kafka's controller checks it: another broker id or
  not this broker's current epoch (-1 too) is STALE_BROKER_EPOCH; else, since a single
  node's ISR is the node itself and nothing asks to change it, NOT_CONTROLLER, as a
  broker that cannot process it answers.
- AlterPartitionReassignments: the only possible target is this broker alone (already so:
  NONE); any other is INVALID_REPLICA_ASSIGNMENT; nothing is ever in motion.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from broker.metadata_cache import MetadataCache
from controller.election import ElectionOutcome, NotControllerError
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    # Types only: a single node's start-up does not load the reassignment state machine
    # (and its controller core) or the AlterPartition codec, which it rarely needs.
    from controller.reassignment import Reassignment, ReassignmentOutcome
    from protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse

__all__ = ["ClusterOps", "ElectionOutcome", "LocalClusterOps", "NotControllerError"]


class ClusterOps(Protocol):
    async def controlled_shutdown(self, broker_id: int, broker_epoch: int
                                  ) -> tuple[ErrorCode, list[TopicPartition]]: ...

    async def elect_leaders(self, election_type: int,
                            partitions: frozenset[TopicPartition] | None) -> ElectionOutcome:
        """Raises NotControllerError on a broker that is not the active controller."""
        ...

    async def alter_partition(self, request: AlterPartitionRequest,
                              version: int) -> AlterPartitionResponse: ...

    async def alter_reassignments(self, targets: Mapping[TopicPartition, tuple[int, ...] | None]
                                  ) -> ReassignmentOutcome:
        """Raises NotControllerError on a broker that is not the active controller."""
        ...

    async def list_reassignments(self, partitions: frozenset[TopicPartition] | None
                                 ) -> dict[TopicPartition, Reassignment]:
        """Raises NotControllerError on a broker that is not the active controller."""
        ...


class LocalClusterOps:
    """The single node's answers (see the module docstring)."""

    def __init__(self, broker_id: int, broker_epoch: int, metadata_cache: MetadataCache) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.metadata_cache = metadata_cache

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int
                                  ) -> tuple[ErrorCode, list[TopicPartition]]:
        if broker_id != self.broker_id:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, []
        return ErrorCode.NO_ERROR, []

    async def elect_leaders(self, election_type: int,
                            partitions: frozenset[TopicPartition] | None) -> ElectionOutcome:
        cache = self.metadata_cache
        if partitions is None:
            partitions = frozenset(TopicPartition(t, p) for t in cache.topic_names()
                                   for p in (cache.partitions(t) or {}))
        out: ElectionOutcome = {}
        for tp in partitions:
            if cache.partition_info(tp.topic, tp.partition) is None:
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            else:
                out[tp] = (ErrorCode.ELECTION_NOT_NEEDED,
                           "Leader election not needed for topic partition.")
        return out

    async def alter_partition(self, request: AlterPartitionRequest,
                              version: int) -> AlterPartitionResponse:
        from protocol.messages.alter_partition import AlterPartitionResponse

        if request.broker_id != self.broker_id or request.broker_epoch != self.broker_epoch:
            return AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)

    async def alter_reassignments(self, targets: Mapping[TopicPartition, tuple[int, ...] | None]
                                  ) -> ReassignmentOutcome:
        out: ReassignmentOutcome = {}
        for tp, target in targets.items():
            if self.metadata_cache.partition_info(tp.topic, tp.partition) is None:
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif target is None:
                out[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                           f"Unable to cancel reassignment of {tp}: no reassignment is in "
                           "progress.")
            elif list(target) != [self.broker_id]:
                out[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"Replica assignment has brokers that are not alive. Replica list: "
                           f"{list(target)}, live broker list: [{self.broker_id}]")
            else:
                out[tp] = (ErrorCode.NO_ERROR, None)
        return out

    async def list_reassignments(self, partitions: frozenset[TopicPartition] | None
                                 ) -> dict[TopicPartition, Reassignment]:
        return {}

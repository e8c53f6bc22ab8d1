"""The broker's side of the controller's requests: LeaderAndIsr, UpdateMetadata, StopReplica
(Kafka's ``KafkaApis.handleLeaderAndIsrRequest`` and its two siblings).

Whether a request comes over the network (``broker.handlers.leader_and_isr`` and the two
others) or from the single node's controller in process (``controller.local``), it lands
here:

- Broker epoch first: a request naming an older epoch of this broker than its current one
  (meant for a previous incarnation) is answered STALE_BROKER_EPOCH and not applied; -1
  (unknown) and newer epochs pass, as in Kafka.
- LeaderAndIsr -> ``ReplicaManager.become_leader_or_follower``; the partitions that became
  leader or follower go to the group coordinator (``__consumer_offsets`` loading).
- UpdateMetadata -> ``ReplicaManager.maybe_update_metadata_cache`` (STALE_CONTROLLER_EPOCH
  for an older controller); deleted partitions go to the group coordinator; admin
  requests waiting in the topic purgatory for the topics it names are retried.
- StopReplica -> ``ReplicaManager.stop_replicas``; a deleted ``__consumer_offsets``
  partition is unloaded by the group coordinator.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from broker.replica_manager import (
    ReplicaManager,
    StaleControllerEpochError,
    leader_and_isr_error,
)
from controller.channel import ControlRequest, ControlResponse
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.admin_manager import AdminManager
    from broker.group.service import GroupService

log = logging.getLogger(__name__)

UNKNOWN_BROKER_EPOCH = -1
# Refusals of an UpdateMetadata that its controller does not follow with another one by
# itself: it logs the answer and sends again only on its next change (Kafka's controller
# does the same); a stale epoch, by contrast, is followed by the current controller's.
FINAL_REFUSALS: Final = frozenset({ErrorCode.CLUSTER_AUTHORIZATION_FAILED})


class ControlRequestHandler:
    def __init__(self, *, replica_manager: ReplicaManager, admin: AdminManager,
                 groups: GroupService, broker_epoch: int) -> None:
        self.replica_manager = replica_manager
        self.admin = admin
        self.groups = groups
        self.broker_epoch = broker_epoch
        # The broker epoch the last successful UpdateMetadata was sent to (this broker's
        # when the request has none): ``broker_epoch`` or later once the controller has
        # told this registration of the cluster.
        self.metadata_broker_epoch: int | None = None
        # The error this broker answered the latest UpdateMetadata with (None: applied).
        self.update_metadata_error: ErrorCode | None = None
        # Set whenever an UpdateMetadata was answered, either way (start-up waits on it).
        self.update_metadata_answered = asyncio.Event()

    @property
    def has_current_metadata(self) -> bool:
        """An UpdateMetadata reached this registration (not only an earlier one)."""
        epoch = self.metadata_broker_epoch
        return epoch is not None and epoch >= self.broker_epoch

    def is_broker_epoch_stale(self, broker_epoch: int) -> bool:
        return broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < self.broker_epoch

    async def handle(self, request: ControlRequest) -> ControlResponse:
        """Any of the three (the in-process channel's entry point)."""
        if isinstance(request, LeaderAndIsrRequest):
            return await self.leader_and_isr(request)
        if isinstance(request, UpdateMetadataRequest):
            return await self.update_metadata(request)
        return await self.stop_replica(request)

    async def leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        if self.is_broker_epoch_stale(request.broker_epoch):
            self._stale("LeaderAndIsr", request.broker_epoch, request.controller_id)
            return leader_and_isr_error(request, ErrorCode.STALE_BROKER_EPOCH)
        return await self.replica_manager.become_leader_or_follower(
            request, self.groups.on_leadership_change)

    def refuse_update_metadata(self, error: ErrorCode) -> UpdateMetadataResponse:
        """Answer an UpdateMetadata with ``error``, nothing applied."""
        self.update_metadata_error = error
        self.update_metadata_answered.set()
        return UpdateMetadataResponse(error_code=error)

    async def update_metadata(self, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
        if self.is_broker_epoch_stale(request.broker_epoch):
            self._stale("UpdateMetadata", request.broker_epoch, request.controller_id)
            return self.refuse_update_metadata(ErrorCode.STALE_BROKER_EPOCH)
        try:
            deleted = await self.replica_manager.maybe_update_metadata_cache(request)
        except StaleControllerEpochError as exc:
            return self.refuse_update_metadata(exc.error_code)
        self.update_metadata_error = None
        self.update_metadata_answered.set()
        self.metadata_broker_epoch = (self.broker_epoch
                                      if request.broker_epoch == UNKNOWN_BROKER_EPOCH
                                      else request.broker_epoch)
        if deleted:
            self.groups.on_partitions_deleted(deleted)
        self.admin.try_complete_delayed_topic_operations(
            [t.topic_name for t in request.topic_states]
            + [s.topic_name for s in request.ungrouped_partition_states])
        return UpdateMetadataResponse(error_code=ErrorCode.NO_ERROR)

    async def stop_replica(self, request: StopReplicaRequest) -> StopReplicaResponse:
        _R = StopReplicaResponse
        if self.is_broker_epoch_stale(request.broker_epoch):
            self._stale("StopReplica", request.broker_epoch, request.controller_id)
            # the request's error alone, no partition errors: Kafka's answer (unlike
            # LeaderAndIsr's, which lists every partition)
            return _R(error_code=ErrorCode.STALE_BROKER_EPOCH, partition_errors=[])
        errors, error = await self.replica_manager.stop_replicas(request)
        deleting = {TopicPartition(t.topic_name, p.partition_index): p.delete_partition
                    for t in request.topic_states for p in t.partition_states}
        for tp, partition_error in errors.items():
            if partition_error is ErrorCode.NO_ERROR:
                self.groups.on_replica_stopped(tp, deleting.get(tp, False))
        return _R(error_code=error, partition_errors=[
            _R.StopReplicaPartitionError(tp.topic, tp.partition, e) for tp, e in errors.items()])

    def _stale(self, api: str, broker_epoch: int, controller_id: int) -> None:
        log.info("Received %s with broker epoch %d smaller than the current broker epoch %d "
                 "from controller %d: ignored", api, broker_epoch, self.broker_epoch,
                 controller_id)

"""AlterPartitionReassignments: v0

Behavior:
- Answered by the active controller (``controller.reassignment``): for each partition a
  target replica list starts (or replaces) its reassignment, a null list cancels it; per
  partition NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT or
  NO_REASSIGNMENT_IN_PROGRESS with Kafka's messages. The answer comes once the
  reassignment started, not when it completes (ListPartitionReassignments follows it).
- A broker that is not the active controller answers NOT_CONTROLLER (the admin client finds
  the controller and asks again).
- A single node: the only target is the node itself.

Version notes:
- v0 is flexible.
"""

from __future__ import annotations

from collections import defaultdict

from broker.cluster_ops import NotControllerError
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from protocol.errors import ErrorCode
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from protocol.topic_partition import TopicPartition

_R = AlterPartitionReassignmentsResponse


@api(AlterPartitionReassignmentsRequest.API_KEY, min_version=0, max_version=0,
     request=AlterPartitionReassignmentsRequest)
async def handle_alter_partition_reassignments(
        ctx: RequestContext, request: AlterPartitionReassignmentsRequest) -> HandlerResult:
    targets = {TopicPartition(t.name, p.partition_index):
               None if p.replicas is None else tuple(p.replicas)
               for t in request.topics for p in t.partitions}
    try:
        outcome = await ctx.broker.cluster.alter_reassignments(targets)
    except NotControllerError:
        return Respond(_R(error_code=ErrorCode.NOT_CONTROLLER,
                          error_message="This is not the correct controller for this cluster."))
    by_topic: dict[str, list[_R.ReassignablePartitionResponse]] = defaultdict(list)
    for tp, (error, message) in outcome.items():
        by_topic[tp.topic].append(_R.ReassignablePartitionResponse(
            partition_index=tp.partition, error_code=error, error_message=message))
    return Respond(_R(error_code=ErrorCode.NO_ERROR, error_message="", responses=[
        _R.ReassignableTopicResponse(name=topic, partitions=parts)
        for topic, parts in by_topic.items()]))

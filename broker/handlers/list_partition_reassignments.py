"""ListPartitionReassignments: v0

Behavior:
- Answered by the active controller: the partitions in motion (all of them for a null
  topic list, else those asked for that are moving), each with its full replica set and
  the replicas being added and removed (Kafka's OngoingPartitionReassignment).
- A broker that is not the active controller answers NOT_CONTROLLER.

Version notes:
- v0 is flexible.
"""

from __future__ import annotations

from collections import defaultdict

from broker.cluster_ops import NotControllerError
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from protocol.errors import ErrorCode
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from protocol.topic_partition import TopicPartition

_R = ListPartitionReassignmentsResponse


@api(ListPartitionReassignmentsRequest.API_KEY, min_version=0, max_version=0,
     request=ListPartitionReassignmentsRequest)
async def handle_list_partition_reassignments(
        ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> HandlerResult:
    wanted = None if request.topics is None else frozenset(
        TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes)
    try:
        moving = await ctx.broker.cluster.list_reassignments(wanted)
    except NotControllerError:
        return Respond(_R(error_code=ErrorCode.NOT_CONTROLLER,
                          error_message="This is not the correct controller for this cluster."))
    by_topic: dict[str, list[_R.OngoingPartitionReassignment]] = defaultdict(list)
    for tp, r in sorted(moving.items()):
        by_topic[tp.topic].append(_R.OngoingPartitionReassignment(
            partition_index=tp.partition, replicas=list(r.replicas),
            adding_replicas=list(r.adding), removing_replicas=list(r.removing)))
    return Respond(_R(error_code=ErrorCode.NO_ERROR, error_message="", topics=[
        _R.OngoingTopicReassignment(name=topic, partitions=parts)
        for topic, parts in by_topic.items()]))

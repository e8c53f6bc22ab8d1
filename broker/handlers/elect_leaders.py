"""ElectLeaders: v0-2

Behavior:
- Preferred (type 0) or unclean (type 1) leader election, by the active controller
  (``controller.zk_core``): per partition NONE, ELECTION_NOT_NEEDED,
  PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE or
  UNKNOWN_TOPIC_OR_PARTITION with Kafka's messages; a null partition list means every
  partition, and the answer then lists those where something was done or went wrong (as
  Kafka leaves out ELECTION_NOT_NEEDED there).
- A broker that is not the active controller answers NOT_CONTROLLER for the request (the
  admin client finds the controller and asks again).
- A single node's partitions have one replica: ELECTION_NOT_NEEDED for each.

Version notes:
- v1 adds the election type and the top-level error code (v0: preferred only); v2 is
  flexible.
"""

from __future__ import annotations

from collections import defaultdict

from broker.cluster_ops import NotControllerError
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from protocol.topic_partition import TopicPartition

_R = ElectLeadersResponse


@api(ElectLeadersRequest.API_KEY, min_version=0, max_version=2, request=ElectLeadersRequest)
async def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> HandlerResult:
    election_type = request.election_type if ctx.api_version >= 1 else 0
    if election_type not in (0, 1):
        return Respond(_R(error_code=ErrorCode.INVALID_REQUEST))
    wanted = None if request.topic_partitions is None else frozenset(
        TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions)
    try:
        outcome = await ctx.broker.cluster.elect_leaders(election_type, wanted)
    except NotControllerError:
        return Respond(_R(error_code=ErrorCode.NOT_CONTROLLER))
    by_topic: dict[str, list[ElectLeadersResponse.PartitionResult]] = defaultdict(list)
    for tp, (error, message) in sorted(outcome.items()):
        if wanted is None and error == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        by_topic[tp.topic].append(_R.PartitionResult(partition_id=tp.partition,
                                                     error_code=error, error_message=message))
    return Respond(_R(replica_election_results=[
        _R.ReplicaElectionResult(topic=topic, partition_result=results)
        for topic, results in sorted(by_topic.items())]))

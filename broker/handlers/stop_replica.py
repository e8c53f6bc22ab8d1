"""StopReplica: v3-4

Behavior:
- Sent by the controller only: stops this broker's replicas of the partitions listed (no
  more fetching; parked requests answered) and, with DeletePartition, removes them and
  deletes their logs (renamed ``-delete``, removed after ``file.delete.delay.ms``).
- A broker epoch older than this broker's -> STALE_BROKER_EPOCH for the request, with no
  partition errors (as Kafka); an older controller epoch -> STALE_CONTROLLER_EPOCH; nothing
  applied then.
- Per partition: a replica in a failed (offline) log dir -> KAFKA_STORAGE_ERROR, left as it
  is even with DeletePartition (Kafka's ``HostedPartition.Offline``: the files stay in the
  failed dir); a leader epoch older than the current one -> FENCED_LEADER_EPOCH
  (-2, the epoch during deletion, and -1 always pass); a partition not hosted here is
  answered NONE (its log, if any, deleted).
- With an authorizer, the sender needs CLUSTER_ACTION on the cluster (the brokers'
  principal, a super user), else CLUSTER_AUTHORIZATION_FAILED for the request and every
  partition (Kafka's ``getErrorResponse``) and nothing applied, as Kafka checks.

Version notes:
- v3 carries a leader epoch and the delete flag per partition; v4 isKRaftController
  (never set by our controllers). v0-2 are not served.
"""

from __future__ import annotations

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation as Op
from protocol.errors import ErrorCode
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse


@api(StopReplicaRequest.API_KEY, min_version=3, max_version=4, request=StopReplicaRequest)
async def handle_stop_replica(ctx: RequestContext, request: StopReplicaRequest) -> HandlerResult:
    if not authorize_cluster(ctx, Op.CLUSTER_ACTION):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return Respond(StopReplicaResponse(error_code=error, partition_errors=[
            StopReplicaResponse.StopReplicaPartitionError(
                topic_name=t.topic_name, partition_index=p.partition_index, error_code=error)
            for t in request.topic_states for p in t.partition_states]))
    return Respond(await ctx.broker.control.stop_replica(request))

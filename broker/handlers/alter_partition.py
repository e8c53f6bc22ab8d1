"""AlterPartition: v0-3

Behavior:
- Sent by a partition's leader to the controller to change its ISR (the controller's side
  is ``controller.zk_core``, Kafka's processAlterPartition): the broker epoch must be the
  leader's registered one (else STALE_BROKER_EPOCH), and per partition the leader epoch
  (FENCED_LEADER_EPOCH), the partition epoch (INVALID_UPDATE_VERSION) and the new members
  (INELIGIBLE_REPLICA; v0-1 OPERATION_NOT_ATTEMPTED) are checked; the answer carries the
  state now stored.
- A broker that is not the active controller answers NOT_CONTROLLER.
- With an authorizer, the sender needs CLUSTER_ACTION on the cluster (the brokers'
  principal), else CLUSTER_AUTHORIZATION_FAILED, as Kafka checks.

Version notes:
- v2 names topics by id (UNKNOWN_TOPIC_ID for an unknown one); v3 gives each new ISR
  member with its broker epoch (``new_isr_with_epochs``). All versions are flexible.
"""

from __future__ import annotations

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation as Op
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse


@api(AlterPartitionRequest.API_KEY, min_version=0, max_version=3, request=AlterPartitionRequest)
async def handle_alter_partition(ctx: RequestContext,
                                 request: AlterPartitionRequest) -> HandlerResult:
    if not authorize_cluster(ctx, Op.CLUSTER_ACTION):
        return Respond(AlterPartitionResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    return Respond(await ctx.broker.cluster.alter_partition(request, ctx.api_version))

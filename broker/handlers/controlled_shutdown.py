"""ControlledShutdown: v1-3

Behavior:
- Sent by a broker that is shutting down to the controller, which moves that broker's
  leaderships to other in-sync replicas and takes it out of the ISRs first
  (``controller.zk_core``); the answer lists the partitions it still leads (the broker
  asks again until there are none, or gives up after ``controlled.shutdown.max.retries``).
- A broker that is not the active controller answers NOT_CONTROLLER; an unknown broker id
  BROKER_NOT_AVAILABLE; an older broker epoch than the registered one STALE_BROKER_EPOCH.
- With an authorizer, the sender needs CLUSTER_ACTION on the cluster (the brokers'
  principal, a super user), else CLUSTER_AUTHORIZATION_FAILED and nothing applied, as
  Kafka checks.

Version notes:
- v2 adds the broker epoch (v1 means "any": -1); v3 is flexible. v0 (a different request
  header) is not served, as Kafka 3.9 no longer does.
"""

from __future__ import annotations

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation as Op
from protocol.errors import ErrorCode
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)


@api(ControlledShutdownRequest.API_KEY, min_version=1, max_version=3,
     request=ControlledShutdownRequest)
async def handle_controlled_shutdown(ctx: RequestContext,
                                     request: ControlledShutdownRequest) -> HandlerResult:
    if not authorize_cluster(ctx, Op.CLUSTER_ACTION):
        return Respond(ControlledShutdownResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    epoch = request.broker_epoch if ctx.api_version >= 2 else -1
    error, remaining = await ctx.broker.cluster.controlled_shutdown(request.broker_id, epoch)
    return Respond(ControlledShutdownResponse(
        error_code=error,
        remaining_partitions=[ControlledShutdownResponse.RemainingPartition(
            topic_name=tp.topic, partition_index=tp.partition) for tp in remaining]))

"""UpdateMetadata: v7-8

Behavior:
- Sent by the controller only: replaces the live brokers and updates the partitions it
  lists in this broker's metadata cache (a partition with leader -2 is removed); the only
  writer of the cache (``broker.metadata_cache``). Admin requests waiting for the topics it
  names are retried; deleted partitions' committed offsets are removed.
- A broker epoch older than this broker's -> STALE_BROKER_EPOCH; an older controller
  epoch -> STALE_CONTROLLER_EPOCH; nothing is applied then.
- With an authorizer, the sender needs CLUSTER_ACTION on the cluster (the brokers'
  principal, a super user), else CLUSTER_AUTHORIZATION_FAILED and nothing applied, as
  Kafka checks.

Version notes:
- v7 adds topic ids (v6 flexible); v8 isKRaftController and the tagged Type (never set by
  our controllers). Older versions are not served.
"""

from __future__ import annotations

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation as Op
from protocol.errors import ErrorCode
from protocol.messages.update_metadata import UpdateMetadataRequest


@api(UpdateMetadataRequest.API_KEY, min_version=7, max_version=8, request=UpdateMetadataRequest)
async def handle_update_metadata(ctx: RequestContext,
                                 request: UpdateMetadataRequest) -> HandlerResult:
    if not authorize_cluster(ctx, Op.CLUSTER_ACTION):
        return Respond(ctx.broker.control.refuse_update_metadata(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    return Respond(await ctx.broker.control.update_metadata(request))

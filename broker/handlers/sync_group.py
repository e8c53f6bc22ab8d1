"""SyncGroup: v0-5

Behavior:
- The leader sends the assignment of the generation; it is stored in ``__consumer_offsets``
  (GroupMetadataValue) and then every member's SyncGroup is answered with its own assignment
  and the group becomes Stable. Members left out by the leader get an empty assignment.
- A follower's SyncGroup waits for the leader's; in Stable it returns the stored assignment.
- Errors: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS
  (a rebalance started, or the coordinator reloaded), INCONSISTENT_GROUP_PROTOCOL,
  COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR.

Version notes:
- v1 throttle time; v3 group_instance_id; v4+ flexible; v5 protocol_type and protocol_name,
  which must both be present (INCONSISTENT_GROUP_PROTOCOL otherwise) and match the group.
"""

from __future__ import annotations

from broker.group.results import SyncResult
from broker.handlers.authz import authorize
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.group_support import CallbackFuture, group_service
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

# The leader's assignment waits for a __consumer_offsets append (offsets.commit.timeout.ms),
# a follower for the leader (at most the rebalance timeout): a generous safety bound.
_WAIT_BOUND_MS = 30 * 60 * 1000


def _response(result: SyncResult) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


@api(SyncGroupRequest.API_KEY, min_version=0, max_version=5, request=SyncGroupRequest)
async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> HandlerResult:
    version = ctx.api_version
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return Respond(_response(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)))
    if not authorize(ctx, Op.READ, RT.GROUP, request.group_id):
        return Respond(_response(SyncResult(ErrorCode.GROUP_AUTHORIZATION_FAILED)))
    service = await group_service(ctx)
    if service is None:
        return Respond(_response(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)))
    reply: CallbackFuture[SyncResult] = CallbackFuture()
    service.coordinator.sync_group(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
        callback=reply,
    )
    result = await reply.wait_bounded(_WAIT_BOUND_MS, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
    return Respond(_response(result))

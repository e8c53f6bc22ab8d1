"""Heartbeat: v0-4

Behavior:
- A member of the current generation keeps its session alive (group.min/max.session.timeout.ms
  bound it; a member silent for its session timeout is removed and the group rebalances).
- Answers: NONE; REBALANCE_IN_PROGRESS while the group prepares a rebalance (rejoin);
  ILLEGAL_GENERATION for another generation; UNKNOWN_MEMBER_ID; FENCED_INSTANCE_ID for a
  replaced static member; COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR; NONE while loading
  (Kafka answers blindly then).

Version notes:
- v1 throttle time; v3 group_instance_id; v4+ flexible.
"""

from __future__ import annotations

from broker.handlers.authz import authorize
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.group_support import group_service
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse


@api(HeartbeatRequest.API_KEY, min_version=0, max_version=4, request=HeartbeatRequest)
async def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HandlerResult:
    if not authorize(ctx, Op.READ, RT.GROUP, request.group_id):
        return Respond(HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
    service = await group_service(ctx)
    if service is None:
        return Respond(HeartbeatResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))
    error = service.coordinator.heartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if ctx.api_version >= 3 else None,
        generation_id=request.generation_id,
    )
    return Respond(HeartbeatResponse(error_code=error))

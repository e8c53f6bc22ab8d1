"""LeaveGroup: v0-5

Behavior:
- Removes members at once (no session timeout wait) and starts a rebalance for the others;
  the last member leaving empties the group (its offsets stay).
- A member given only by group_instance_id (member id "") is removed administratively.
- Per member: NONE, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID; top level: COORDINATOR_NOT_AVAILABLE,
  NOT_COORDINATOR, INVALID_GROUP_ID, COORDINATOR_LOAD_IN_PROGRESS.

Version notes:
- v0-2: one member_id; the answer has one error code (the top-level error, else the member's).
- v1 throttle time; v3+ batched ``members`` with per-member answers (KIP-345); v4+ flexible;
  v5 per-member reason.
"""

from __future__ import annotations

from broker.group.coordinator import LeavingMember
from broker.handlers.authz import authorize
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.group_support import group_service
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse


@api(LeaveGroupRequest.API_KEY, min_version=0, max_version=5, request=LeaveGroupRequest)
async def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> HandlerResult:
    version = ctx.api_version
    if version >= 3:
        leaving = [
            LeavingMember(m.member_id, m.group_instance_id, m.reason if version >= 5 else None)
            for m in request.members
        ]
    else:
        leaving = [LeavingMember(request.member_id)]
    if not authorize(ctx, Op.READ, RT.GROUP, request.group_id):
        return Respond(LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
    service = await group_service(ctx)
    if service is None:
        return Respond(LeaveGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))
    result = service.coordinator.leave_group(request.group_id, leaving)
    if version < 3:
        error = result.error
        if error is ErrorCode.NO_ERROR:
            error = next((e for _, e in result.members if e is not ErrorCode.NO_ERROR), error)
        return Respond(LeaveGroupResponse(error_code=error))
    return Respond(LeaveGroupResponse(
        error_code=result.error,
        members=[
            LeaveGroupResponse.MemberResponse(m.member_id, m.group_instance_id, e)
            for m, e in result.members
        ],
    ))

"""DescribeGroups: v0-5

Behavior:
- Per group: state, protocol type, protocol (assignor) name and members (member id, group
  instance id, client id, client host, and for a Stable group the member's subscription and
  assignment bytes). An unknown group answers NONE with state "Dead" and no members.
- Errors per group: INVALID_GROUP_ID (null), COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS.
- include_authorized_operations (v3+): no authorizer here, so every group operation
  (READ, DELETE, DESCRIBE: bits 3, 6, 8) is reported as allowed.

Version notes:
- v1 throttle time; v3 authorized operations; v4 group_instance_id of members; v5+ flexible.
"""

from __future__ import annotations

from broker.group.admin import describe_group
from broker.handlers.authz import authorize
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.group_support import group_service
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse

_R = DescribeGroupsResponse
# AclOperation codes READ=3, DELETE=6, DESCRIBE=8: the operations a group supports.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
NOT_REQUESTED = -2147483648


@api(DescribeGroupsRequest.API_KEY, min_version=0, max_version=5, request=DescribeGroupsRequest)
async def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> HandlerResult:
    version = ctx.api_version
    service = await group_service(ctx)
    include_ops = version >= 3 and request.include_authorized_operations
    groups = []
    for group_id in request.groups:
        if not authorize(ctx, Op.DESCRIBE, RT.GROUP, group_id):
            groups.append(_R.DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                            group_id=group_id))
            continue
        if service is None:
            groups.append(_R.DescribedGroup(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, group_id=group_id))
            continue
        error, summary = describe_group(service.coordinator, group_id)
        groups.append(_R.DescribedGroup(
            error_code=error,
            group_id=group_id,
            group_state=summary.state,
            protocol_type=summary.protocol_type,
            protocol_data=summary.protocol,
            members=[
                _R.DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id if version >= 4 else None,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in summary.members
            ],
            authorized_operations=(
                GROUP_AUTHORIZED_OPERATIONS if include_ops and error is ErrorCode.NO_ERROR
                else NOT_REQUESTED
            ),
        ))
    return Respond(DescribeGroupsResponse(groups=groups))

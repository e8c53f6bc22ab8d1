"""ListGroups: v0-5

Behavior:
- Every group this broker coordinates, with its protocol type ("" for standalone-commit
  groups) and state; COORDINATOR_LOAD_IN_PROGRESS while ``__consumer_offsets`` loads.
- states_filter (v4+): state names, case-insensitive (Empty, Stable, PreparingRebalance,
  CompletingRebalance, Dead); types_filter (v5+): only "classic" groups exist here.

Version notes:
- v1 throttle time; v3+ flexible; v4 states filter and group_state; v5 types filter and
  group_type ("classic").
"""

from __future__ import annotations

from broker.group.admin import list_groups
from broker.handlers.authz import authorize_cluster, filter_authorized
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.group_support import group_service
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse


@api(ListGroupsRequest.API_KEY, min_version=0, max_version=5, request=ListGroupsRequest)
async def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> HandlerResult:
    version = ctx.api_version
    service = await group_service(ctx)
    if service is None:
        return Respond(ListGroupsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))
    error, groups = list_groups(
        service.coordinator,
        states=request.states_filter if version >= 4 else (),
        types=request.types_filter if version >= 5 else (),
    )
    if not authorize_cluster(ctx, Op.DESCRIBE, log_denied=False):
        # Without DESCRIBE on the cluster, only the groups the principal may describe.
        visible = filter_authorized(ctx, Op.DESCRIBE, RT.GROUP, [g.group_id for g in groups],
                                    log_denied=False)
        groups = [g for g in groups if g.group_id in visible]
    return Respond(ListGroupsResponse(
        error_code=error,
        groups=[
            ListGroupsResponse.ListedGroup(g.group_id, g.protocol_type, g.state, g.group_type)
            for g in groups
        ],
    ))

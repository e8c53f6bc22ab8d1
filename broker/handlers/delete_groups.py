"""DeleteGroups: v0-2

Behavior:
- Deletes Empty groups: their committed offsets and the group get tombstones in
  ``__consumer_offsets``, so they stay gone after a restart.
- Per group: NONE, NON_EMPTY_GROUP (members remain), GROUP_ID_NOT_FOUND,
  COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS.

Version notes:
- v1 changes nothing here (throttling on quota violation); v2+ flexible.
"""

from __future__ import annotations

from broker.group.admin import delete_groups
from broker.handlers.authz import authorize
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.group_support import group_service
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse

_R = DeleteGroupsResponse


@api(DeleteGroupsRequest.API_KEY, min_version=0, max_version=2, request=DeleteGroupsRequest)
async def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> HandlerResult:
    service = await group_service(ctx)
    names = list(dict.fromkeys(request.groups_names))
    allowed = [n for n in names if authorize(ctx, Op.DELETE, RT.GROUP, n)]
    results = dict.fromkeys(names, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if service is None:
        results.update(dict.fromkeys(allowed, ErrorCode.COORDINATOR_NOT_AVAILABLE))
    else:
        results.update(delete_groups(service.coordinator, allowed))
    return Respond(DeleteGroupsResponse(
        results=[_R.DeletableGroupResult(name, results[name]) for name in names]
    ))

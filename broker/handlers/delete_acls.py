"""DeleteAcls: v0-3.

Behavior:
- Needs ALTER on the cluster (else every filter answers CLUSTER_AUTHORIZATION_FAILED).
- Without an authorizer: SECURITY_DISABLED, "No Authorizer is configured." per filter.
- Every ACL matching a filter is deleted (one atomic update of the local ACL file; in a
  cluster each pattern's znode, as for CreateAcls); each
  filter answers the bindings it deleted (a binding matched by several filters is reported
  for the first).

Version notes:
- v0: a pattern type filter ANY reads as LITERAL; anything but LITERAL/ANY, or UNKNOWN
  codes in any version, is refused as Kafka's request parser refuses it (connection closed).
- v1 adds pattern types; v2+ flexible.
"""

from __future__ import annotations

from broker.handlers.acl_changes import Refused, change_acls
from broker.handlers.base import CloseConnection, HandlerResult, RequestContext, Respond, api
from broker.handlers.describe_acls import binding_filter
from broker.security.acl import AclBindingFilter
from protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse

FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = DeleteAclsResponse.DeleteAclsMatchingAcl


def _all(code: int, message: str, count: int) -> Respond:
    return Respond(DeleteAclsResponse(filter_results=[
        FilterResult(error_code=code, error_message=message) for _ in range(count)]))


@api(DeleteAclsRequest.API_KEY, min_version=0, max_version=3, request=DeleteAclsRequest)
async def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> HandlerResult:
    filters: list[AclBindingFilter] = []
    for f in request.filters:
        parsed = binding_filter(ctx.api_version, f.resource_type_filter, f.resource_name_filter,
                                f.pattern_type_filter, f.principal_filter, f.host_filter,
                                f.operation, f.permission_type)
        if isinstance(parsed, str):
            return CloseConnection(f"DeleteAcls: {parsed}")
        filters.append(parsed)
    deleted = await change_acls(ctx, lambda authorizer: authorizer.plan_delete(filters))
    if isinstance(deleted, Refused):
        return _all(deleted.code, deleted.message, len(filters))
    return Respond(DeleteAclsResponse(filter_results=[
        FilterResult(error_code=0, error_message=None, matching_acls=[
            Matching(error_code=0, error_message=None, resource_type=b.pattern.resource_type,
                     resource_name=b.pattern.name, pattern_type=b.pattern.pattern_type,
                     principal=b.entry.principal, host=b.entry.host, operation=b.entry.operation,
                     permission_type=b.entry.permission) for b in bindings])
        for bindings in deleted]))

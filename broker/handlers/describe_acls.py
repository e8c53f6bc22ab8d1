"""DescribeAcls: v0-3.

Behavior:
- Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
- Without an authorizer: SECURITY_DISABLED, "No Authorizer is configured on the broker".
- The ACLs matching the filter (broker.security.acl: ANY, MATCH, LITERAL, PREFIXED
  pattern filters; null fields match everything), grouped by resource pattern.

Version notes:
- v0: a pattern type filter ANY reads as LITERAL, anything but LITERAL/ANY is refused
  (connection closed, as Kafka's request parser does); UNKNOWN codes likewise.
- v1 adds pattern types; v2+ flexible.
"""

from __future__ import annotations

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import CloseConnection, HandlerResult, RequestContext, Respond, api
from broker.security.acl import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    from_code,
)
from protocol.errors import ErrorCode
from protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse


def binding_filter(version: int, resource_type: int, name: str | None, pattern_type: int,
                   principal: str | None, host: str | None, operation: int,
                   permission: int) -> AclBindingFilter | str:
    """A request's filter, or why Kafka's parser refuses it (v0 pattern types, UNKNOWN)."""
    pattern = from_code(PatternType, pattern_type)
    if version == 0:
        if pattern == PatternType.ANY:
            pattern = PatternType.LITERAL
        elif pattern != PatternType.LITERAL:
            return f"version 0 does not support pattern type {pattern.name}"
    result = AclBindingFilter(
        ResourcePatternFilter(from_code(ResourceType, resource_type), name, pattern),
        AccessControlEntryFilter(principal, host, from_code(AclOperation, operation),
                                 from_code(AclPermissionType, permission)))
    if result.is_unknown():
        return "the filter contains UNKNOWN elements"
    return result


def _resources(bindings: list[AclBinding]) -> list[DescribeAclsResponse.DescribeAclsResource]:
    grouped: dict[ResourcePattern, list[DescribeAclsResponse.AclDescription]] = {}
    for b in sorted(bindings, key=lambda b: (b.pattern.resource_type, b.pattern.pattern_type,
                                             b.pattern.name, b.entry.principal, b.entry.host,
                                             b.entry.operation, b.entry.permission)):
        grouped.setdefault(b.pattern, []).append(DescribeAclsResponse.AclDescription(
            principal=b.entry.principal, host=b.entry.host, operation=b.entry.operation,
            permission_type=b.entry.permission))
    return [DescribeAclsResponse.DescribeAclsResource(
        resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type, acls=acls)
        for p, acls in grouped.items()]


@api(DescribeAclsRequest.API_KEY, min_version=0, max_version=3, request=DescribeAclsRequest)
async def handle_describe_acls(ctx: RequestContext, request: DescribeAclsRequest) -> HandlerResult:
    acl_filter = binding_filter(ctx.api_version, request.resource_type_filter,
                                request.resource_name_filter, request.pattern_type_filter,
                                request.principal_filter, request.host_filter, request.operation,
                                request.permission_type)
    if isinstance(acl_filter, str):
        return CloseConnection(f"DescribeAcls: {acl_filter}")
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return Respond(DescribeAclsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                            error_message="Cluster authorization failed."))
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return Respond(DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED,
                                            error_message="No Authorizer is configured on the broker"))
    return Respond(DescribeAclsResponse(error_code=0, error_message="",
                                        resources=_resources(authorizer.acls(acl_filter))))

"""CreateAcls: v0-3.

Behavior:
- Needs ALTER on the cluster (else every creation answers CLUSTER_AUTHORIZATION_FAILED).
- Without an authorizer (``authorizer.class.name`` unset): SECURITY_DISABLED, "No
  Authorizer is configured." for every creation.
- Each creation is checked as Kafka does (broker.security.authorizer.plan_create): unknown
  elements, a CLUSTER resource not named ``kafka-cluster``, an empty name, a name with
  ``/``, a principal not ``Type:name`` -> INVALID_REQUEST; the valid ones are written to the
  ACL store (one atomic update of the local file; in a cluster each pattern's znode, as
  Kafka's AclAuthorizer writes them), then take effect at once here and on the other
  brokers when their notification arrives. The store failing -> UNKNOWN_SERVER_ERROR.

Version notes:
- v0 carries LITERAL patterns only (a v0 request with another pattern type, or any version
  with UNKNOWN codes, is refused as Kafka's request parser refuses it: connection closed).
- v1 adds the pattern type; v2+ flexible.
"""

from __future__ import annotations

from broker.handlers.acl_changes import Refused, change_acls
from broker.handlers.base import CloseConnection, HandlerResult, RequestContext, Respond, api
from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_code,
)
from protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse

Result = CreateAclsResponse.AclCreationResult


def _binding(c: CreateAclsRequest.AclCreation) -> AclBinding:
    return AclBinding(
        ResourcePattern(from_code(ResourceType, c.resource_type), c.resource_name,
                        from_code(PatternType, c.resource_pattern_type)),
        AccessControlEntry(c.principal, c.host, from_code(AclOperation, c.operation),
                           from_code(AclPermissionType, c.permission_type)))


def _all(code: int, message: str, count: int) -> Respond:
    return Respond(CreateAclsResponse(results=[Result(error_code=code, error_message=message)
                                               for _ in range(count)]))


@api(CreateAclsRequest.API_KEY, min_version=0, max_version=3, request=CreateAclsRequest)
async def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest) -> HandlerResult:
    bindings = [_binding(c) for c in request.creations]
    if ctx.api_version == 0 and any(b.pattern.pattern_type != PatternType.LITERAL for b in bindings):
        return CloseConnection("CreateAcls v0 only supports literal resource pattern types")
    if any(b.pattern.resource_type == ResourceType.UNKNOWN or b.pattern.pattern_type == PatternType.UNKNOWN
           or b.entry.operation == AclOperation.UNKNOWN or b.entry.permission == AclPermissionType.UNKNOWN
           for b in bindings):
        return CloseConnection("CreateAcls: creations contain unknown elements")
    errors = await change_acls(ctx, lambda authorizer: authorizer.plan_create(bindings))
    if isinstance(errors, Refused):
        return _all(errors.code, errors.message, len(bindings))
    return Respond(CreateAclsResponse(results=[
        Result(error_code=0, error_message="") if e is None
        else Result(error_code=e.code, error_message=e.message) for e in errors]))

"""DescribeClientQuotas: v0-1.

Behavior:
- Needs DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
- The user / client-id quota entities matching the filter, with their quota values
  (broker.quota.admin.describe: Kafka's exact / default / any matching and ``strict``);
  a bad filter answers INVALID_REQUEST with Kafka's message and no entries.

Version notes:
- v1 is the flexible version.
"""

from __future__ import annotations

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.quota import admin
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

_R = DescribeClientQuotasResponse


@api(DescribeClientQuotasRequest.API_KEY, min_version=0, max_version=1,
     request=DescribeClientQuotasRequest)
async def handle_describe_client_quotas(ctx: RequestContext,
                                        request: DescribeClientQuotasRequest) -> HandlerResult:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return Respond(_R(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                          error_message="Cluster authorization failed.", entries=None))
    components = [admin.Component(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = admin.describe(ctx.broker.credentials.entities, components, request.strict)
    except admin.QuotaRequestError as exc:
        return Respond(_R(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc), entries=None))
    return Respond(_R(error_code=0, error_message="", entries=[
        _R.EntryData(entity=[_R.EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
                     values=[_R.ValueData(key=k, value=v) for k, v in sorted(values.items())])
        for entity, values in found]))

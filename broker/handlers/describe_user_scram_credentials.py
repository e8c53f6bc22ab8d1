"""DescribeUserScramCredentials: v0.

Behavior:
- Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED for the request).
- The users' SCRAM mechanisms and iteration counts (never salts or keys), from the
  credential store; checks and messages as Kafka's (broker.security.scram_admin).

Version notes:
- v0 only (flexible).
"""

from __future__ import annotations

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security import scram_admin
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)


@api(DescribeUserScramCredentialsRequest.API_KEY, min_version=0, max_version=0,
     request=DescribeUserScramCredentialsRequest)
async def handle_describe_user_scram_credentials(
        ctx: RequestContext, request: DescribeUserScramCredentialsRequest) -> HandlerResult:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return Respond(DescribeUserScramCredentialsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed."))
    users = None if request.users is None else [u.name for u in request.users]
    results = scram_admin.describe(ctx.broker.credentials, users)
    return Respond(DescribeUserScramCredentialsResponse(error_code=0, error_message="",
                                                        results=results))

"""AlterUserScramCredentials: v0.

Behavior:
- Needs ALTER on the cluster (else every user answers CLUSTER_AUTHORIZATION_FAILED).
- Upsertions carry the salted password (the client ran PBKDF2); the broker derives and
  stores the stored and server keys (Kafka's credential string) as the user's config.
  Deletions remove a mechanism's credential. Per-user checks and error codes as Kafka's
  (broker.security.scram_admin); the valid users' changes are written in one atomic update
  of the store (a thread: it fsyncs).
- Connections already authenticated keep their session; new authentications use the new
  credentials at once.

Version notes:
- v0 only (flexible).
"""

from __future__ import annotations

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security import scram_admin
from broker.security.acl import AclOperation
from broker.security.entity_store import EntityStoreWriteError
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)

Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


@api(AlterUserScramCredentialsRequest.API_KEY, min_version=0, max_version=0,
     request=AlterUserScramCredentialsRequest)
async def handle_alter_user_scram_credentials(
        ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> HandlerResult:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return Respond(AlterUserScramCredentialsResponse(results=[
            Result(user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                   error_message="Cluster authorization failed.") for u in users]))
    store = ctx.broker.credentials
    async with store.alter_lock:  # each plan is made against the state it writes over
        failed, changes, altered = scram_admin.plan_alter(store, request.deletions,
                                                          request.upsertions)
        results = [Result(user=f.user, error_code=f.error_code, error_message=f.error_message)
                   for f in failed]
        if changes:
            try:
                await store.entities.alter(changes)
            except EntityStoreWriteError as exc:
                results += [Result(user=u, error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                   error_message=f"cannot store the credentials: {exc}")
                            for u in altered]
                return Respond(AlterUserScramCredentialsResponse(results=results))
        results += [Result(user=u, error_code=0, error_message="") for u in altered]
    return Respond(AlterUserScramCredentialsResponse(results=results))

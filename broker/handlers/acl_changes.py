"""What CreateAcls and DeleteAcls share: the checks before an ACL change and its write.

Both need ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization
failed.") and an authorizer (else SECURITY_DISABLED, "No Authorizer is configured."); then,
under the authorizer's ``alter_lock``, the request's plan is made against the authorizer's
cache and its changes written to the ACL store (the store failing -> UNKNOWN_SERVER_ERROR,
"cannot store the ACLs: ..."). A refusal applies to every creation or filter of the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import RequestContext
from broker.security.acl import AclOperation
from broker.security.acl_store import AclStoreWriteError
from broker.security.authorizer import AclAuthorizer, Changes
from protocol.errors import ErrorCode

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Refused:
    """The whole request is answered with this error, per creation or filter."""

    code: ErrorCode
    message: str


async def change_acls(ctx: RequestContext,
                      plan: Callable[[AclAuthorizer], tuple[T, Changes]]) -> T | Refused:
    """``plan(authorizer)``'s answer once its changes are stored, or why nothing was done."""
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return Refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return Refused(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    async with authorizer.alter_lock:
        answer, changes = plan(authorizer)
        if changes:
            try:
                await authorizer.store_changes(changes)
            except AclStoreWriteError as exc:
                return Refused(ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot store the ACLs: {exc}")
    return answer

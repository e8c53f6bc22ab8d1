"""AlterClientQuotas: v0-1.

Behavior:
- Needs ALTER_CONFIGS on the cluster (else every entry CLUSTER_AUTHORIZATION_FAILED).
- Each entry sets or removes quota keys of one user / client-id entity (checks and messages
  as Kafka's: broker.quota.admin); the valid entries are written in one atomic update of the
  entity store (a thread: it fsyncs) and take effect at once for every connection.
- ``validate_only`` checks and writes nothing.

Version notes:
- v1 is the flexible version.
"""

from __future__ import annotations

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.quota import admin
from broker.security.acl import AclOperation
from broker.security.entity_store import Entity, EntityStoreWriteError
from protocol.errors import ErrorCode
from protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)

_R = AlterClientQuotasResponse


def _result(entry: AlterClientQuotasRequest.EntryData, code: int, message: str | None) -> _R.EntryData:
    return _R.EntryData(error_code=code, error_message=message, entity=[
        _R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])


@api(AlterClientQuotasRequest.API_KEY, min_version=0, max_version=1,
     request=AlterClientQuotasRequest)
async def handle_alter_client_quotas(ctx: RequestContext,
                                     request: AlterClientQuotasRequest) -> HandlerResult:
    if not authorize_cluster(ctx, AclOperation.ALTER_CONFIGS):
        return Respond(_R(entries=[_result(e, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                           "Cluster authorization failed.") for e in request.entries]))
    store = ctx.broker.credentials
    results: list[_R.EntryData] = []
    changes: dict[Entity, dict[str, str | None]] = {}
    async with store.alter_lock:
        for entry in request.entries:
            try:
                entity = admin.entity_of([(e.entity_type, e.entity_name) for e in entry.entity])
                planned = admin.plan_ops([(o.key, o.value, o.remove) for o in entry.ops])
            except admin.QuotaRequestError as exc:
                results.append(_result(entry, ErrorCode.INVALID_REQUEST, str(exc)))
                continue
            changes.setdefault(entity, {}).update(planned)
            results.append(_result(entry, 0, None))
        if changes and not request.validate_only:
            try:
                await store.entities.alter(changes)
            except EntityStoreWriteError as exc:
                return Respond(_R(entries=[_result(e, ErrorCode.UNKNOWN_SERVER_ERROR,
                                                   f"cannot store the quotas: {exc}")
                                           for e in request.entries]))
            ctx.broker.quotas.refresh()
    return Respond(_R(entries=results))

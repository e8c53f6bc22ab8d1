"""InitProducerId: v0-5

Behavior:
- transactional_id null (idempotent producer): a fresh producer id from the durable id
  blocks (broker.producer_ids), epoch 0. As in Kafka's TransactionCoordinator, the
  producer_id/producer_epoch a v3+ client sends to "bump" its epoch are ignored for
  idempotent producers: it always gets a new id.
- transactional_id "" -> INVALID_REQUEST (Kafka's rule).
- any other transactional_id -> COORDINATOR_NOT_AVAILABLE: transactions are not
  implemented (no transaction coordinator; the transaction APIs are not advertised).
- the id block file cannot be written (full or failing disk) -> COORDINATOR_NOT_AVAILABLE,
  which clients retry; one log line per minute.
- producer id, epoch -1 with every error.

Version notes:
- v2+ flexible; v3 adds producer_id/producer_epoch (ignored, see above); v4 and v5 only
  add error codes (PRODUCER_FENCED, TRANSACTION_ABORTABLE) that this broker never sends.
"""

from __future__ import annotations

import logging

from broker.handlers.authz import authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.producer_ids import ProducerIdError
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from storage.throttled_log import ThrottledLog

log = logging.getLogger(__name__)
_throttled = ThrottledLog(log)


def _error(code: ErrorCode) -> Respond:
    return Respond(InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1))


@api(InitProducerIdRequest.API_KEY, min_version=0, max_version=5, request=InitProducerIdRequest)
async def handle_init_producer_id(
    ctx: RequestContext, request: InitProducerIdRequest
) -> HandlerResult:
    if request.transactional_id is not None:
        if request.transactional_id == "":
            return _error(ErrorCode.INVALID_REQUEST)
        log.info("InitProducerId for transactional id %r from %s: transactions not available",
                 request.transactional_id, ctx.client_id)
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    authorizer = ctx.broker.authorizer
    if not authorize_cluster(ctx, Op.IDEMPOTENT_WRITE, log_denied=False) and not (
            authorizer is not None and authorizer.allowed_by_resource_type(
                ctx.principal, ctx.client_host, Op.WRITE, RT.TOPIC)):
        # Kafka: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        producer_id = await ctx.broker.producer_ids.generate()
    except ProducerIdError as exc:  # retriable for the client: the next block may work
        _throttled.error("block", "InitProducerId: no producer id: %s", exc)
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return Respond(InitProducerIdResponse(error_code=ErrorCode.NO_ERROR,
                                          producer_id=producer_id, producer_epoch=0))

"""InitProducerId: v0-5

Behavior:
- transactional_id null (idempotent producer): a fresh producer id from the durable id
  blocks (broker.producer_ids), epoch 0. As in Kafka's TransactionCoordinator, the
  producer_id/producer_epoch a v3+ client sends to "bump" its epoch are ignored for
  idempotent producers: it always gets a new id.
- transactional_id "" -> INVALID_REQUEST (Kafka's rule).
- any other transactional_id -> COORDINATOR_NOT_AVAILABLE: transactions are not
  implemented (no transaction coordinator; the transaction APIs are not advertised).
- producer id, epoch -1 with every error.

Version notes:
- v2+ flexible; v3 adds producer_id/producer_epoch (ignored, see above); v4 and v5 only
  add error codes (PRODUCER_FENCED, TRANSACTION_ABORTABLE) that this broker never sends.
"""

from __future__ import annotations

import logging

from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

log = logging.getLogger(__name__)


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
    producer_id = await ctx.broker.producer_ids.generate()
    return Respond(InitProducerIdResponse(error_code=ErrorCode.NO_ERROR,
                                          producer_id=producer_id, producer_epoch=0))

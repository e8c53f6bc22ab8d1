"""FindCoordinator: v0-6

Behavior:
- Group keys (key_type 0): the coordinator is the leader of the group's ``__consumer_offsets``
  partition (``abs(hashCode(group)) % offsets.topic.num.partitions``); on this single broker,
  this broker. ``__consumer_offsets`` is created on first use; when that fails the answer is
  COORDINATOR_NOT_AVAILABLE (clients retry).
- Transaction keys (key_type 1): COORDINATOR_NOT_AVAILABLE (no transaction coordinator here).
- Share keys (key_type 2) and unknown key types: INVALID_REQUEST, as Kafka answers them.

Version notes:
- v0 has no key_type (group); v1 adds key_type, throttle_time_ms, error_message; v3+ flexible;
  v4+ batches keys in ``coordinator_keys`` with one result each (KIP-699); v5 and v6 change
  nothing for groups (new error codes, share keys).
"""

from __future__ import annotations

from broker import topic_admin
from broker.group.handler_support import group_service
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _lookup(ctx: RequestContext, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) for one key."""
    if key_type == TRANSACTION_KEY_TYPE:
        return (ErrorCode.COORDINATOR_NOT_AVAILABLE, "transactions are not supported", -1, "", -1)
    if key_type != GROUP_KEY_TYPE:
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator type {key_type}", -1, "", -1
    if group_service(ctx) is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    host, port = topic_admin.advertised_endpoint(ctx.broker, ctx.listener_name)
    return ErrorCode.NO_ERROR, None, ctx.broker.broker_id, host, port


@api(FindCoordinatorRequest.API_KEY, min_version=0, max_version=6, request=FindCoordinatorRequest)
async def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> HandlerResult:
    key_type = request.key_type if ctx.api_version >= 1 else GROUP_KEY_TYPE
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message, node_id, host, port = _lookup(ctx, key_type)
            coordinators.append(FindCoordinatorResponse.Coordinator(
                key=key, node_id=node_id, host=host, port=port, error_code=error,
                error_message=message,
            ))
        return Respond(FindCoordinatorResponse(coordinators=coordinators))
    error, message, node_id, host, port = _lookup(ctx, key_type)
    return Respond(FindCoordinatorResponse(
        error_code=error, error_message=message, node_id=node_id, host=host, port=port,
    ))

"""FindCoordinator: v0-6

Behavior:
- Group keys (key_type 0): the coordinator is the leader of the group's ``__consumer_offsets``
  partition (``abs(hashCode(group)) % offsets.topic.num.partitions``), from the metadata
  cache; its leader's endpoint on this listener. ``__consumer_offsets`` is created on first
  use (the request waits, bounded, without holding up other clients); when that fails, or
  the partition has no live leader, the answer is COORDINATOR_NOT_AVAILABLE (clients retry).
- Transaction keys (key_type 1): COORDINATOR_NOT_AVAILABLE (no transaction coordinator here).
- Share keys (key_type 2) and unknown key types: INVALID_REQUEST, as Kafka answers them.

Version notes:
- v0 has no key_type (group); v1 adds key_type, throttle_time_ms, error_message; v3+ flexible;
  v4+ batches keys in ``coordinator_keys`` with one result each (KIP-699); v5 and v6 change
  nothing for groups (new error codes, share keys).
"""

from __future__ import annotations

from broker.handlers.authz import authorize
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.group_support import GROUP_METADATA_TOPIC, group_service
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


async def _lookup(ctx: RequestContext, key_type: int,
                  key: str) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) for one key."""
    if key_type == GROUP_KEY_TYPE and not authorize(ctx, Op.DESCRIBE, RT.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, -1, "", -1
    if key_type == TRANSACTION_KEY_TYPE:
        return (ErrorCode.COORDINATOR_NOT_AVAILABLE, "transactions are not supported", -1, "", -1)
    if key_type != GROUP_KEY_TYPE:
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator type {key_type}", -1, "", -1
    service = await group_service(ctx)
    if service is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    partition = service.coordinator.manager.partition_for(key)
    cache = ctx.broker.metadata_cache
    info = cache.partition_info(GROUP_METADATA_TOPIC, partition)
    leader = None if info is None else cache.alive_broker(info.leader)
    endpoint = None if leader is None else leader.endpoint(ctx.listener_name)
    if leader is None or endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    return ErrorCode.NO_ERROR, None, leader.broker_id, endpoint.host, endpoint.port


# v1-3: Kafka sets error_message to the error's own message (Errors.message()), which for
# NONE is its name; v4+ leaves it at the default "" unless the lookup failed with a reason
_OLD_MESSAGES: dict[int, str] = {
    ErrorCode.NO_ERROR: "NONE",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
}


@api(FindCoordinatorRequest.API_KEY, min_version=0, max_version=6, request=FindCoordinatorRequest)
async def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> HandlerResult:
    key_type = request.key_type if ctx.api_version >= 1 else GROUP_KEY_TYPE
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message, node_id, host, port = await _lookup(ctx, key_type, key)
            coordinators.append(FindCoordinatorResponse.Coordinator(
                key=key, node_id=node_id, host=host, port=port, error_code=error,
                error_message="" if message is None else message,
            ))
        return Respond(FindCoordinatorResponse(coordinators=coordinators))
    error, message, node_id, host, port = await _lookup(ctx, key_type, request.key)
    if message is None:  # v1-3 carry Kafka's text for the code, "NONE" included
        message = _OLD_MESSAGES.get(error)
    return Respond(FindCoordinatorResponse(
        error_code=error, error_message=message, node_id=node_id, host=host, port=port,
    ))

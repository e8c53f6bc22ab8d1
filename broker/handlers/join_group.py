"""JoinGroup: v0-9

Behavior:
- Classic group membership (``broker.group.coordinator``): a join triggers or joins a
  rebalance; the answer waits until every member rejoined or the rebalance timeout passed
  (the first rebalance of an empty group waits ``group.initial.rebalance.delay.ms`` more).
  The leader's answer lists every member's subscription; the others get an empty list.
- Errors as Kafka: INVALID_GROUP_ID (empty id), INVALID_SESSION_TIMEOUT (outside
  group.min/max.session.timeout.ms), INCONSISTENT_GROUP_PROTOCOL (no protocol type, no
  protocols, or none in common with the group), UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
  GROUP_MAX_SIZE_REACHED, MEMBER_ID_REQUIRED, COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR.

Version notes:
- v0: rebalance timeout = session timeout. v1 adds rebalance_timeout_ms; v2 throttle time.
- v4+: a new dynamic member first gets MEMBER_ID_REQUIRED with its member id, and rejoins.
- v5+: group_instance_id (static membership): a static member rejoining with an unknown member
  id replaces its old id, keeps its assignment and causes no rebalance when nothing changed.
- v6+ flexible; v7+ protocol_type/protocol_name in the answer (nullable); v8 reason;
  v9 skip_assignment (a restarted static leader is told it leads but skips assigning).
"""

from __future__ import annotations

from broker.group.join import NEW_MEMBER_JOIN_TIMEOUT_MS
from broker.group.results import JoinResult
from broker.handlers.authz import authorize
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.group_support import CallbackFuture, group_service
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse

_WAIT_SLACK_MS = 10_000


def _response(result: JoinResult, version: int) -> JoinGroupResponse:
    protocol_name = result.protocol_name
    if version < 7 and protocol_name is None:
        protocol_name = ""
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(m.member_id, m.group_instance_id, m.metadata)
            for m in result.members
        ],
    )


@api(JoinGroupRequest.API_KEY, min_version=0, max_version=9, request=JoinGroupRequest)
async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> HandlerResult:
    version = ctx.api_version
    if not authorize(ctx, Op.READ, RT.GROUP, request.group_id):
        return Respond(_response(JoinResult(request.member_id, ErrorCode.GROUP_AUTHORIZATION_FAILED), version))
    service = await group_service(ctx)
    if service is None:
        return Respond(_response(JoinResult(request.member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE), version))
    rebalance_timeout_ms = request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms
    instance_id = request.group_instance_id if version >= 5 else None
    reply: CallbackFuture[JoinResult] = CallbackFuture()
    service.coordinator.join_group(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=instance_id,
        require_known_member_id=version >= 4 and instance_id is None,
        supports_skip_assignment=version >= 9,
        client_id=ctx.client_id or "",
        client_host=f"/{ctx.client_host}",
        rebalance_timeout_ms=rebalance_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        callback=reply,
        reason=request.reason if version >= 8 else None,
    )
    bound_ms = max(rebalance_timeout_ms, 0) + NEW_MEMBER_JOIN_TIMEOUT_MS + _WAIT_SLACK_MS
    result = await reply.wait_bounded(
        bound_ms, JoinResult(request.member_id, ErrorCode.REBALANCE_IN_PROGRESS)
    )
    return Respond(_response(result, version))

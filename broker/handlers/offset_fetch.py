"""OffsetFetch: v1-9

Behavior:
- The committed offset, leader epoch and metadata of each asked partition; -1 / -1 / "" with
  NONE when nothing is committed (or the group is unknown). ``topics`` null: every partition
  the group has committed.
- require_stable: UNSTABLE_OFFSET_COMMIT for a partition whose commit is still being written.
- Authorization: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED); a partition of a
  topic the principal may not describe -> TOPIC_AUTHORIZATION_FAILED, or left out when
  ``topics`` is null.
- Group errors: INVALID_GROUP_ID (null id), COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS.

Version notes:
- v0 (ZooKeeper offsets in Kafka) is not supported. v1: a group error is put on every
  partition. v2+: top-level error_code; topics may be null. v3 throttle time. v5
  committed_leader_epoch. v6+ flexible. v7 require_stable. v8+: several groups per request,
  each answered in ``groups`` with its own error. v9 (KIP-848): member_id / member_epoch are
  accepted and ignored for classic groups, as Kafka's classic coordinator does.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.group.offsets import INVALID_OFFSET, FetchedOffset, fetch_offsets
from broker.group.service import GroupService
from broker.handlers.authz import authorize, filter_authorized
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.group_support import group_service
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.topic_partition import TopicPartition

_R = OffsetFetchResponse


def _fetch(
    ctx: RequestContext, service: GroupService | None, group_id: str,
    wanted: list[TopicPartition] | None, stable: bool,
) -> tuple[ErrorCode, dict[TopicPartition, FetchedOffset]]:
    if not authorize(ctx, Op.DESCRIBE, RT.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}
    if service is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
    if wanted is None:  # every committed topic: the ones the principal may not describe left out
        error, offsets = fetch_offsets(service.coordinator, group_id, None, require_stable=stable)
        visible = filter_authorized(ctx, Op.DESCRIBE, RT.TOPIC, {tp[0] for tp in offsets},
                                    log_denied=False)
        return error, {tp: f for tp, f in offsets.items() if tp[0] in visible}
    visible = filter_authorized(ctx, Op.DESCRIBE, RT.TOPIC, {tp[0] for tp in wanted})
    error, offsets = fetch_offsets(service.coordinator, group_id,
                                   [tp for tp in wanted if tp[0] in visible], require_stable=stable)
    if error is ErrorCode.NO_ERROR:
        denied = FetchedOffset(INVALID_OFFSET, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        offsets = {tp: offsets[tp] if tp[0] in visible else denied for tp in wanted}
    return error, offsets


def _by_topic(offsets: dict[TopicPartition, FetchedOffset]) -> dict[str, list[tuple[int, FetchedOffset]]]:
    out: dict[str, list[tuple[int, FetchedOffset]]] = {}
    for (topic, partition), fetched in offsets.items():
        out.setdefault(topic, []).append((partition, fetched))
    return out


def _wanted(topics: Sequence[OffsetFetchRequest.OffsetFetchRequestTopic] | Sequence[
        OffsetFetchRequest.OffsetFetchRequestTopics] | None) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]


@api(OffsetFetchRequest.API_KEY, min_version=1, max_version=9, request=OffsetFetchRequest)
async def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> HandlerResult:
    version = ctx.api_version
    service = await group_service(ctx)
    stable = request.require_stable if version >= 7 else False
    if version >= 8:
        groups = []
        for g in request.groups:
            error, offsets = _fetch(ctx, service, g.group_id, _wanted(g.topics), stable)
            groups.append(_R.OffsetFetchResponseGroup(
                group_id=g.group_id, error_code=error,
                topics=[
                    _R.OffsetFetchResponseTopics(topic, [
                        _R.OffsetFetchResponsePartitions(p, f.offset, f.leader_epoch, f.metadata, f.error)
                        for p, f in parts
                    ])
                    for topic, parts in _by_topic(offsets).items()
                ],
            ))
        return Respond(OffsetFetchResponse(groups=groups))
    wanted = _wanted(request.topics)
    error, offsets = _fetch(ctx, service, request.group_id, wanted, stable)
    if error is not ErrorCode.NO_ERROR:
        if version < 2:  # v1 has no top-level error: every partition carries it
            failed = FetchedOffset(INVALID_OFFSET, -1, "", error)
            offsets = dict.fromkeys(wanted or [], failed)
        else:
            offsets = {}
    topics = [
        _R.OffsetFetchResponseTopic(topic, [
            _R.OffsetFetchResponsePartition(p, f.offset, f.leader_epoch, f.metadata, f.error)
            for p, f in parts
        ])
        for topic, parts in _by_topic(offsets).items()
    ]
    return Respond(OffsetFetchResponse(topics=topics, error_code=error))

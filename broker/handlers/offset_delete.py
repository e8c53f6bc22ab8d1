"""OffsetDelete: v0

Behavior:
- Deletes committed offsets of a group (tombstones in ``__consumer_offsets``): any partition
  of an Empty group; for a consumer group with members, only partitions of topics it does not
  subscribe to (GROUP_SUBSCRIBED_TO_TOPIC for the others).
- Group errors: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a non-consumer group with members),
  INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS;
  then no partitions are listed. UNKNOWN_TOPIC_OR_PARTITION for partitions the metadata cache does not know.

Version notes:
- v0 only (KIP-496).
"""

from __future__ import annotations

from broker.group.offsets import delete_offsets
from broker.handlers.authz import authorize, filter_authorized
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.group_support import group_service
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from protocol.topic_partition import TopicPartition

_R = OffsetDeleteResponse


@api(OffsetDeleteRequest.API_KEY, min_version=0, max_version=0, request=OffsetDeleteRequest)
async def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> HandlerResult:
    if not authorize(ctx, Op.DELETE, RT.GROUP, request.group_id):
        return Respond(OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
    service = await group_service(ctx)
    if service is None:
        return Respond(OffsetDeleteResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))
    cache = ctx.broker.metadata_cache
    requested = [TopicPartition(t.name, p.partition_index)
                 for t in request.topics for p in t.partitions]
    readable = filter_authorized(ctx, Op.READ, RT.TOPIC, {t.name for t in request.topics})
    denied = {tp for tp in requested if tp[0] not in readable}
    unknown = {tp for tp in requested if tp not in denied and not cache.contains(tp)}
    error, results = delete_offsets(
        service.coordinator, request.group_id,
        [tp for tp in requested if tp not in unknown and tp not in denied]
    )
    if error is not ErrorCode.NO_ERROR:
        return Respond(OffsetDeleteResponse(error_code=error))
    results.update(dict.fromkeys(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    results.update(dict.fromkeys(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    by_topic: dict[str, list[_R.OffsetDeleteResponsePartition]] = {}
    for topic, partition in dict.fromkeys(requested):
        by_topic.setdefault(topic, []).append(
            _R.OffsetDeleteResponsePartition(partition, results[TopicPartition(topic, partition)])
        )
    return Respond(OffsetDeleteResponse(
        error_code=ErrorCode.NO_ERROR,
        topics=[_R.OffsetDeleteResponseTopic(t, parts) for t, parts in by_topic.items()],
    ))

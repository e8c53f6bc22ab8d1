"""ListOffsets: v1-9

Behavior:
- timestamp -2 (EARLIEST): the log start offset; -4 (EARLIEST_LOCAL, v8): the same (no
  tiered storage here); -1 (LATEST): the high watermark for READ_UNCOMMITTED consumers, the
  last stable offset (= HW) for READ_COMMITTED, the log end offset for replica id >= 0 or
  the debug id -2; timestamp -1 in the answer.
- -3 (MAX_TIMESTAMP, v7): the offset and timestamp of the record with the largest timestamp.
- -5 (LATEST_TIERED, v9): offset -1, timestamp -1, epoch -1 (no tiered storage, as Kafka
  answers when remote storage is disabled).
- Any other timestamp: the first offset whose record timestamp is >= it (from the time
  index); none, or one at/above the fetch bound: offset -1, timestamp -1 and NO_ERROR.
- leader_epoch (v4+): the epoch of the returned offset (the current epoch for LATEST).
- Errors per partition: UNKNOWN_TOPIC_OR_PARTITION (unknown to the metadata cache),
  NOT_LEADER_OR_FOLLOWER (not led by this broker; the debug replica id -2 may read a
  follower), FENCED_LEADER_EPOCH /
  UNKNOWN_LEADER_EPOCH for a stale or future current_leader_epoch, INVALID_REQUEST for a
  partition listed twice.

Version notes:
- v0 (several "old style" offsets) is not supported. v2 adds isolation_level; v4
  current_leader_epoch and leader_epoch; v6+ flexible; v7 -3; v8 -4; v9 -5.
"""

from __future__ import annotations

from broker.handlers.authz import filter_authorized
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.partition import IsolationLevel
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse

_R = ListOffsetsResponse
LEADER_EPOCH_MIN_VERSION = 4


@api(ListOffsetsRequest.API_KEY, min_version=1, max_version=9, request=ListOffsetsRequest)
async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> HandlerResult:
    rm = ctx.broker.replica_manager
    with_epoch = ctx.api_version >= LEADER_EPOCH_MIN_VERSION  # not ignorable: only v4+
    try:
        isolation = IsolationLevel(request.isolation_level)
    except ValueError:
        isolation = IsolationLevel.READ_UNCOMMITTED
    seen: dict[tuple[str, int], int] = {}
    for topic in request.topics:
        for part in topic.partitions:
            key = (topic.name, part.partition_index)
            seen[key] = seen.get(key, 0) + 1
    describable = filter_authorized(ctx, Op.DESCRIBE, RT.TOPIC, {t.name for t in request.topics})
    topics: list[ListOffsetsResponse.ListOffsetsTopicResponse] = []
    for topic in request.topics:
        parts: list[ListOffsetsResponse.ListOffsetsPartitionResponse] = []
        for part in topic.partitions:
            index = part.partition_index
            partition = rm.get_partition(topic.name, index)
            if topic.name not in describable:
                parts.append(_R.ListOffsetsPartitionResponse(
                    index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif seen[(topic.name, index)] > 1:
                parts.append(_R.ListOffsetsPartitionResponse(index, ErrorCode.INVALID_REQUEST))
            elif partition is None:
                parts.append(_R.ListOffsetsPartitionResponse(
                    index, rm.unknown_partition_error(topic.name, index)))
            else:
                error, timestamp, offset, epoch = partition.fetch_offset_for_timestamp(
                    part.timestamp, isolation=isolation,
                    current_leader_epoch=part.current_leader_epoch,
                    replica_id=request.replica_id,
                )
                parts.append(_R.ListOffsetsPartitionResponse(
                    partition_index=index, error_code=error, timestamp=timestamp,
                    offset=offset, leader_epoch=epoch if with_epoch else -1,
                ))
        topics.append(_R.ListOffsetsTopicResponse(topic.name, parts))
    return Respond(ListOffsetsResponse(throttle_time_ms=0, topics=topics))

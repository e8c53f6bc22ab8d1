"""OffsetForLeaderEpoch: v0-4

Behavior:
- For each partition: the largest leader epoch <= the requested one that the log knows
  (its leader-epoch-checkpoint) and that epoch's end offset: the start offset of the next
  epoch, or the log end offset for the current epoch. An epoch below every known one:
  leader_epoch -1, end_offset -1, NO_ERROR (Kafka's UNDEFINED_EPOCH / UNDEFINED_OFFSET).
- Errors: UNKNOWN_TOPIC_OR_PARTITION (unknown to the metadata cache);
  NOT_LEADER_OR_FOLLOWER (not led by this broker: only the leader answers);
  FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when current_leader_epoch (v2+) is older /
  newer than the partition's (checked first).
- Consumers (replica id -1, used by clients validating positions after a leader change,
  KIP-320) and the debug id -2 are answered like followers.

Version notes:
- v1 adds leader_epoch to the answer; v2 current_leader_epoch; v3 replica_id; v4+ flexible.
"""

from __future__ import annotations

from broker.handlers.authz import authorize_cluster, filter_authorized
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

_R = OffsetForLeaderEpochResponse


@api(OffsetForLeaderEpochRequest.API_KEY, min_version=0, max_version=4,
     request=OffsetForLeaderEpochRequest)
async def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> HandlerResult:
    rm = ctx.broker.replica_manager
    # Kafka (KIP-320): CLUSTER_ACTION (followers) covers every topic, else DESCRIBE on each.
    if authorize_cluster(ctx, Op.CLUSTER_ACTION, log_denied=False):
        allowed = {t.topic for t in request.topics}
    else:
        allowed = filter_authorized(ctx, Op.DESCRIBE, RT.TOPIC, {t.topic for t in request.topics})
    topics: list[OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult] = []
    for topic in request.topics:
        parts: list[OffsetForLeaderEpochResponse.EpochEndOffset] = []
        for part in topic.partitions:
            partition = rm.get_partition(topic.topic, part.partition)
            if topic.topic not in allowed:
                parts.append(_R.EpochEndOffset(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                               part.partition, -1, -1))
                continue
            if partition is None:
                parts.append(_R.EpochEndOffset(rm.unknown_partition_error(topic.topic, part.partition),
                                               part.partition, -1, -1))
                continue
            error, epoch, end_offset = partition.last_offset_for_leader_epoch(
                part.current_leader_epoch, part.leader_epoch)
            parts.append(_R.EpochEndOffset(error, part.partition,
                                           epoch if ctx.api_version >= 1 else -1, end_offset))
        topics.append(_R.OffsetForLeaderTopicResult(topic.topic, parts))
    return Respond(OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics))

"""OffsetCommit: v1-9

Behavior:
- Offsets are written to the group's ``__consumer_offsets`` partition (OffsetCommitKey v1 /
  OffsetCommitValue v3 records, as Kafka writes them) and answered once the append is
  acknowledged; OffsetFetch sees them from then on, also after a broker restart.
- Only the current generation's members commit to a group with members (UNKNOWN_MEMBER_ID,
  ILLEGAL_GENERATION, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS while CompletingRebalance);
  generation -1 with no member id commits for a group without members (standalone consumers).
- Per partition: UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata cache does not know,
  OFFSET_METADATA_TOO_LARGE above offset.metadata.max.bytes, INVALID_COMMIT_OFFSET_SIZE when
  the records are too large for the log, COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR.
- A null committed_metadata is stored as "".

Version notes:
- v0 (offsets in ZooKeeper in Kafka) is not supported. v1: per-partition commit_timestamp
  (-1 = now). v2-v4: retention_time_ms (-1 = broker default, else an explicit expiry,
  stored as an OffsetCommitValue v1 record). v3 throttle time. v5 drops retention. v6
  committed_leader_epoch. v7 group_instance_id. v8+ flexible. v9 (KIP-848) has the same
  fields; for classic groups the generation field is the generation id.
"""

from __future__ import annotations

from broker.group.metadata import CommittedOffset
from broker.group.offsets import commit_offsets
from broker.handlers.authz import authorize, filter_authorized
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.group_support import CallbackFuture, group_service
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from protocol.topic_partition import TopicPartition

_R = OffsetCommitResponse
_WAIT_BOUND_MS = 5 * 60 * 1000  # appends time out after offsets.commit.timeout.ms; a safety net


def _response(request: OffsetCommitRequest, errors: dict[TopicPartition, ErrorCode]) -> OffsetCommitResponse:
    return OffsetCommitResponse(topics=[
        _R.OffsetCommitResponseTopic(t.name, [
            _R.OffsetCommitResponsePartition(
                p.partition_index, errors[TopicPartition(t.name, p.partition_index)])
            for p in t.partitions
        ])
        for t in request.topics
    ])


@api(OffsetCommitRequest.API_KEY, min_version=1, max_version=9, request=OffsetCommitRequest)
async def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> HandlerResult:
    version = ctx.api_version
    all_tps = [TopicPartition(t.name, p.partition_index)
               for t in request.topics for p in t.partitions]
    if not authorize(ctx, Op.READ, RT.GROUP, request.group_id):
        return Respond(_response(request, dict.fromkeys(all_tps, ErrorCode.GROUP_AUTHORIZATION_FAILED)))
    service = await group_service(ctx)
    if service is None:
        return Respond(_response(request, dict.fromkeys(all_tps, ErrorCode.COORDINATOR_NOT_AVAILABLE)))
    readable = filter_authorized(ctx, Op.READ, RT.TOPIC, {t.name for t in request.topics})
    now_ms = service.coordinator.timers.now_ms()
    retention_ms = request.retention_time_ms if 2 <= version <= 4 else -1
    expire_ms = None if retention_ms == -1 else now_ms + retention_ms
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, CommittedOffset] = {}
    cache = ctx.broker.metadata_cache
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not cache.contains(tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            commit_ts = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now_ms
            offsets[tp] = CommittedOffset(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                metadata=p.committed_metadata or "",
                commit_timestamp_ms=commit_ts,
                expire_timestamp_ms=expire_ms,
            )
    reply: CallbackFuture[dict[TopicPartition, ErrorCode]] = CallbackFuture()
    commit_offsets(
        service.coordinator,
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 7 else None,
        generation_id=request.generation_id_or_member_epoch,
        offsets=offsets,
        callback=reply,
    )
    result = await reply.wait_bounded(
        _WAIT_BOUND_MS, dict.fromkeys(offsets, ErrorCode.REQUEST_TIMED_OUT)
    )
    errors.update(result)
    return Respond(_response(request, errors))

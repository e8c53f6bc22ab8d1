"""DeleteRecords: v0-2

Behavior:
- For each partition, advance the log start offset to ``offset`` (-1 means the high
  watermark): records below it are no longer readable (Fetch answers OFFSET_OUT_OF_RANGE
  below it), whole segments below it are deleted by the log. The answer's low_watermark is
  the log start offset afterwards. An offset at or below the current start changes nothing.
- Errors per partition: OFFSET_OUT_OF_RANGE for an offset above the high watermark or
  negative (other than -1); UNKNOWN_TOPIC_OR_PARTITION (unknown to the metadata cache);
  NOT_LEADER_OR_FOLLOWER (not led by this broker); POLICY_VIOLATION when the topic's
  cleanup.policy does not include delete (compact only), as in Kafka. low_watermark -1
  with an error.
- Single node: the low watermark is reached as soon as the leader's log start moves, so
  no DelayedDeleteRecords is needed (replication will add one that waits for followers).

Version notes:
- v2+ flexible; no other change.
"""

from __future__ import annotations

from broker.handlers.authz import authorize
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse

_R = DeleteRecordsResponse


@api(DeleteRecordsRequest.API_KEY, min_version=0, max_version=2, request=DeleteRecordsRequest)
async def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> HandlerResult:
    rm = ctx.broker.replica_manager
    topics: list[DeleteRecordsResponse.DeleteRecordsTopicResult] = []
    for topic in request.topics:
        parts: list[DeleteRecordsResponse.DeleteRecordsPartitionResult] = []
        allowed = authorize(ctx, Op.DELETE, RT.TOPIC, topic.name)
        for part in topic.partitions:
            partition = rm.get_partition(topic.name, part.partition_index)
            if not allowed:
                parts.append(_R.DeleteRecordsPartitionResult(
                    part.partition_index, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if partition is None:
                parts.append(_R.DeleteRecordsPartitionResult(
                    part.partition_index, -1,
                    rm.unknown_partition_error(topic.name, part.partition_index)))
                continue
            error, low_watermark = partition.delete_records(part.offset)
            parts.append(_R.DeleteRecordsPartitionResult(part.partition_index, low_watermark,
                                                         error))
        topics.append(_R.DeleteRecordsTopicResult(topic.name, parts))
    return Respond(DeleteRecordsResponse(throttle_time_ms=0, topics=topics))

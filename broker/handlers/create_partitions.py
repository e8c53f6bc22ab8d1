"""CreatePartitions: v0-3

Behavior:
- Grows each topic to Count partitions: the new assignment goes to the topic store
  (placed over the live brokers as Kafka places them, unless given); the controller elects
  the new partitions' leaders and tells the brokers; the answer goes out once this
  broker's metadata cache shows them led, within TimeoutMs (else REQUEST_TIMED_OUT; the
  partitions stay). Partitions are never removed.
- A topic listed twice -> INVALID_REQUEST; unknown topic -> UNKNOWN_TOPIC_OR_PARTITION;
  Count equal to the current count or lower -> INVALID_PARTITIONS (Kafka's messages);
  assignments (when given) must number Count - current, each naming live brokers once,
  as many as the topic's replication factor -> else INVALID_REPLICA_ASSIGNMENT.
- ValidateOnly: every check, nothing changed.

Version notes:
- v0 baseline; v1 throttling semantics only; v2 flexible; v3 same as v2.
"""

from __future__ import annotations

import logging
from collections import Counter

from broker.admin_manager import AdminManager
from broker.handlers.authz import authorize
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from broker.topics import TopicError
from protocol.errors import ErrorCode
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse

log = logging.getLogger(__name__)

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


@api(CreatePartitionsRequest.API_KEY, min_version=0, max_version=3, request=CreatePartitionsRequest)
async def handle_create_partitions(
    ctx: RequestContext, request: CreatePartitionsRequest
) -> HandlerResult:
    counts = Counter(t.name for t in request.topics)
    results: list[Result] = []
    answered: set[str] = set()
    for topic in request.topics:
        if topic.name in answered:
            continue
        result = Result(name=topic.name, error_code=ErrorCode.NO_ERROR, error_message=None)
        try:
            if counts[topic.name] > 1:
                answered.add(topic.name)
                raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            if not authorize(ctx, Op.ALTER, RT.TOPIC, topic.name):
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            result.error_code = await _grow(ctx.broker.admin, topic, request.validate_only,
                                            request.timeout_ms)
        except TopicError as exc:
            log.info("CreatePartitions %s from %s refused: %s %s", topic.name, ctx.client_id,
                     exc.error_code.name, exc.message)
            result.error_code, result.error_message = exc.error_code, exc.message
        results.append(result)
    return Respond(CreatePartitionsResponse(results=results))


async def _grow(admin: AdminManager, topic: CreatePartitionsRequest.CreatePartitionsTopic,
                validate_only: bool, timeout_ms: int) -> ErrorCode:
    current = await admin.check_add_partitions(topic.name, topic.count)
    assignments: list[list[int]] | None = None
    if topic.assignments is not None:
        added = topic.count - current.num_partitions
        if len(topic.assignments) != added:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {added} but {len(topic.assignments)}"
                " assignments provided.")
        live = admin.live_broker_ids()
        for a in topic.assignments:
            if not a.broker_ids or len(set(a.broker_ids)) != len(a.broker_ids):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Invalid replica assignment {a.broker_ids}.")
            unknown = sorted(b for b in a.broker_ids if b not in live)
            if unknown:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Unknown broker(s) in replica assignment: {unknown}.")
            if len(a.broker_ids) != current.replication_factor:
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Inconsistent replication factor between partitions, partition 0 has"
                    f" {current.replication_factor} while partitions {a.broker_ids} have"
                    f" replication factors {len(a.broker_ids)}, respectively.")
        assignments = [list(a.broker_ids) for a in topic.assignments]
    if validate_only:
        return ErrorCode.NO_ERROR
    return await admin.add_partitions(topic.name, topic.count, timeout_ms=timeout_ms,
                                      assignments=assignments)

"""DeleteTopics: v1-6

Behavior:
- Each topic (by name; by topic id from v6) is marked for deletion in the topic store; the
  controller has every replica deleted (StopReplica: storage renames each directory to
  ``<topic>-<partition>.<uuid>-delete`` and removes it later), removes the topic from the
  store, then tells the brokers. The answer goes out once this broker's metadata cache no
  longer has the topic, within TimeoutMs (else REQUEST_TIMED_OUT; the deletion goes on).
  A topic listed twice is answered once.
- Name and id are resolved by the metadata cache: unknown name ->
  UNKNOWN_TOPIC_OR_PARTITION; unknown id -> UNKNOWN_TOPIC_ID; both a name and an id in one
  entry -> INVALID_REQUEST; neither -> INVALID_REQUEST.
- As Kafka 3.9 in ZooKeeper mode answers: an entry's topic id is the one it was asked by
  (the zero UUID for an entry by name), and an unknown topic or topic id, a denied topic
  and disabled deletion carry no error message (null), only the code; the broker's log line
  says why.
- ``delete.topic.enable=false`` -> TOPIC_DELETION_DISABLED for every topic.
- Internal topics (``__consumer_offsets``, ``__transaction_state``) -> INVALID_TOPIC_EXCEPTION:
  the broker's own state lives there (kafka-topics refuses them the same way).

Version notes:
- v1 throttle time (baseline); v4 flexible; v5 error message; v6 entries by name or id,
  and the answer carries the topic id (as asked).
"""

from __future__ import annotations

import logging
import uuid
from typing import Final

from broker.handlers.authz import authorize
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.metadata_cache import MetadataCache
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from broker.topics import INTERNAL_TOPICS, TopicError
from protocol.errors import ErrorCode
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse

log = logging.getLogger(__name__)

_ZERO_UUID: Final = uuid.UUID(int=0)
# Errors Kafka's ZooKeeper-mode handler answers without a message.
_CODE_ONLY: Final = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                               ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                               ErrorCode.TOPIC_DELETION_DISABLED})
Result = DeleteTopicsResponse.DeletableTopicResult


@api(DeleteTopicsRequest.API_KEY, min_version=1, max_version=6, request=DeleteTopicsRequest)
async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> HandlerResult:
    wanted: list[tuple[str | None, uuid.UUID]] = (
        [(t.name, t.topic_id) for t in request.topics] if ctx.api_version >= 6
        else [(name, _ZERO_UUID) for name in request.topic_names]
    )
    enabled = ctx.broker.config.get_bool("delete.topic.enable")
    results: list[Result] = []
    seen: set[tuple[str | None, uuid.UUID]] = set()
    for name, topic_id in wanted:
        if (name, topic_id) in seen:
            continue
        seen.add((name, topic_id))
        result = Result(name=name, topic_id=topic_id, error_code=ErrorCode.NO_ERROR, error_message=None)
        try:
            if not enabled:
                raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            if name is not None and not authorize(ctx, Op.DELETE, RT.TOPIC, name):
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            cache = ctx.broker.metadata_cache
            resolved = _resolve(cache, name, topic_id)
            if name is None and not authorize(ctx, Op.DELETE, RT.TOPIC, resolved):
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            result.name = resolved
            result.error_code = await ctx.broker.admin.delete_topic(
                resolved, timeout_ms=request.timeout_ms)
            log.info("DeleteTopics %s from %s: %s", resolved, ctx.client_id,
                     result.error_code.name)
        except TopicError as exc:
            log.info("DeleteTopics %s from %s refused: %s %s", name or topic_id, ctx.client_id,
                     exc.error_code.name, exc.message)
            result.error_code = exc.error_code
            if exc.error_code not in _CODE_ONLY:
                result.error_message = exc.message
        results.append(result)
    return Respond(DeleteTopicsResponse(responses=results))


def _resolve(cache: MetadataCache, name: str | None, topic_id: uuid.UUID) -> str:
    if name is not None and topic_id != _ZERO_UUID:
        raise TopicError(ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
    if name is None:
        if topic_id == _ZERO_UUID:
            raise TopicError(ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
        by_id = cache.topic_name(topic_id)
        if by_id is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        name = by_id
    if not cache.contains_topic(name):
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         "This server does not host this topic-partition.")
    if name in INTERNAL_TOPICS:
        raise TopicError(
            ErrorCode.INVALID_TOPIC,
            f"Topic {name} is a kafka internal topic and is not allowed to be marked for deletion.")
    return name

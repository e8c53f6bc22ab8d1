"""Metadata: v1-12

Behavior:
- Everything comes from the metadata cache (what the controller last sent in
  UpdateMetadata): the live brokers at their endpoints for this listener (with
  ``broker.rack``), the controller id (-1 when none is known), the cluster id from
  meta.properties.
- Topics null (v1+): every topic the cache knows, internal ones included. Otherwise each
  requested topic (duplicates answered once): known -> its partitions with leader, leader
  epoch, replicas, ISR and offline replicas as the controller decided; a partition whose
  leader is not alive -> LEADER_NOT_AVAILABLE, leader -1; a leader without an endpoint on
  this listener -> LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before).
- Unknown topic: auto-created with ``num.partitions`` / ``default.replication.factor`` when
  ``auto.create.topics.enable`` and the request's AllowAutoTopicCreation (v4+; always for
  v1-3) are both true; the answer waits (bounded) until the controller has given its
  partitions leaders, so there is usually no LEADER_NOT_AVAILABLE round trip (it is the
  answer when the wait runs out). An illegal name -> INVALID_TOPIC_EXCEPTION; auto-creation
  off -> UNKNOWN_TOPIC_OR_PARTITION. Internal topics (``__consumer_offsets``) are never
  auto-created here: their owner creates them.
- Before the first UpdateMetadata (a cluster broker whose controller has not told it of
  the cluster yet): every requested topic LEADER_NOT_AVAILABLE, nothing auto-created (this
  broker cannot tell whether a topic exists); no brokers, as Kafka answers then.
- By topic id (v12, name null): UNKNOWN_TOPIC_ID (name null) for an unknown id. A null
  name or a topic id before v12 -> INVALID_REQUEST for that topic (Kafka rejects it).
- Authorization (with an authorizer): an all-topics answer leaves out the topics the
  principal may not DESCRIBE; a named (or by-id) one it may not describe ->
  TOPIC_AUTHORIZATION_FAILED, whether it exists or not; auto-creation needs CREATE on the
  cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED).
- Authorized operations are not computed (no authorizer): -2147483648 ("not provided").
- A topic's entry is built and encoded once per metadata-cache snapshot, listener and
  version (``broker.handlers.metadata_entries``): a repeated answer is mostly copying, and
  the first answer after any UpdateMetadata is built afresh. Authorization and the
  requested subset are decided per request.

Version notes:
- v1 rack / controller / is_internal; v2 cluster id; v3 throttle time; v4 auto-creation
  flag; v5 offline replicas; v7 leader epoch; v8-10 authorized operations; v9+ flexible;
  v10 topic ids; v12 lookups by topic id. v0 (empty list = all topics) is not served.
"""

from __future__ import annotations

import logging
import uuid
from typing import Final

from broker.handlers.authz import authorize, authorize_cluster
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.handlers.metadata_entries import CachedMetadataResponse, encode_topic_entry
from broker.metadata_cache import MetadataSnapshot
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from broker.topics import INTERNAL_TOPICS, TopicError
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataResponse

log = logging.getLogger(__name__)

AUTHORIZED_OPERATIONS_OMITTED: Final = -2147483648
AUTO_CREATE_WAIT_MS: Final = 25_000  # a bound of ours, below the clients' request timeouts
_ZERO_UUID: Final = uuid.UUID(int=0)
_ENTRY_KEY: Final = "metadata.topic-entry"  # memo keys of this handler
_BUILT_KEY: Final = "metadata.topic-built"
LISTENER_NOT_FOUND_FROM: Final = 6  # versions before answer LEADER_NOT_AVAILABLE instead
_TOPIC_NAMES_KEY: Final = "metadata.topic-names"

Topic = MetadataResponse.MetadataResponseTopic
PartitionMeta = MetadataResponse.MetadataResponsePartition


@api(MetadataRequest.API_KEY, min_version=1, max_version=12, request=MetadataRequest)
async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> HandlerResult:
    broker = ctx.broker
    cache = broker.metadata_cache
    listener = ctx.listener_name
    brokers = []
    for b in cache.alive_brokers():
        endpoint = b.endpoint(listener)
        if endpoint is not None:
            brokers.append(MetadataResponse.MetadataResponseBroker(
                node_id=b.broker_id, host=endpoint.host, port=endpoint.port, rack=b.rack))
    controller_id = cache.controller_id
    response = CachedMetadataResponse(
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=-1 if controller_id is None else controller_id,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
    if request.topics is None:
        # Topics the principal may not describe are left out (Kafka: no error, no trace).
        snapshot = cache.snapshot()
        for name in _topic_names(snapshot):
            if authorize(ctx, Op.DESCRIBE, RT.TOPIC, name, log_denied=False):
                _add(response, _describe(ctx, name))
        return Respond(response)
    if not cache.updated:
        # No UpdateMetadata yet (a cluster broker serving before the controller told it of
        # the cluster): whether a topic exists is not known here; the retriable answer.
        nullable = ctx.api_version >= 12
        for t in request.topics:
            _add(response, _error(ctx, ErrorCode.LEADER_NOT_AVAILABLE,
                                  t.name if nullable else t.name or "", t.topic_id))
        return Respond(response)
    auto_create = broker.admin.auto_create_enabled and (
        ctx.api_version < 4 or request.allow_auto_topic_creation
    )
    seen_names: set[str] = set()
    seen_ids: set[uuid.UUID] = set()
    for wanted in request.topics:
        if (wanted.name is None or wanted.topic_id != _ZERO_UUID) and ctx.api_version < 12:
            # names are not nullable in the answer before v12
            _add(response, _error(ctx, ErrorCode.INVALID_REQUEST, wanted.name or "",
                                  wanted.topic_id))
            continue
        if wanted.name is None:
            if wanted.topic_id in seen_ids:
                continue
            seen_ids.add(wanted.topic_id)
            by_id = cache.topic_name(wanted.topic_id)
            if by_id is not None and not authorize(ctx, Op.DESCRIBE, RT.TOPIC, by_id):
                _add(response, _error(ctx, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None,
                                      wanted.topic_id))
                continue
            _add(response,
                 _describe(ctx, by_id) if by_id is not None
                 else _error(ctx, ErrorCode.UNKNOWN_TOPIC_ID, None, wanted.topic_id))
            continue
        if wanted.name in seen_names:
            continue
        seen_names.add(wanted.name)
        if not authorize(ctx, Op.DESCRIBE, RT.TOPIC, wanted.name):
            # Whether it exists or not: the principal learns nothing of it.
            _add(response, _error(ctx, ErrorCode.TOPIC_AUTHORIZATION_FAILED, wanted.name))
            continue
        _add(response, await _lookup(ctx, wanted.name, auto_create))
    return Respond(response)


def _add(response: CachedMetadataResponse, entry: tuple[Topic, bytes]) -> None:
    response.topics.append(entry[0])
    response.encoded_topics.append(entry[1])


def _topic_names(snapshot: MetadataSnapshot) -> list[str]:
    """Every topic of the snapshot, sorted (once per snapshot)."""
    names: list[str] | None = snapshot.memo_get(_TOPIC_NAMES_KEY)
    if names is None:
        names = sorted(snapshot.partitions)
        snapshot.memo_put(_TOPIC_NAMES_KEY, names)
    return names


async def _lookup(ctx: RequestContext, name: str, auto_create: bool) -> tuple[Topic, bytes]:
    broker = ctx.broker
    if broker.metadata_cache.contains_topic(name):
        return _describe(ctx, name)
    if not auto_create or name.startswith("__"):
        return _error(ctx, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
    if not (authorize_cluster(ctx, Op.CREATE, log_denied=False)
            or authorize(ctx, Op.CREATE, RT.TOPIC, name)):
        return _error(ctx, ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
    admin = broker.admin
    try:
        _, _, error = await admin.create_topic(
            name, admin.default_num_partitions, admin.default_replication_factor, {},
            timeout_ms=AUTO_CREATE_WAIT_MS)
    except TopicError as exc:
        if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and (
                broker.metadata_cache.contains_topic(name)):
            return _describe(ctx, name)
        log.info("auto-creating topic %r for %s failed: %s", name, ctx.client_id, exc.message)
        code = (ErrorCode.LEADER_NOT_AVAILABLE
                if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS else exc.error_code)
        return _error(ctx, code, name)
    if error is not ErrorCode.NO_ERROR:  # created, but no leaders yet
        return _error(ctx, ErrorCode.LEADER_NOT_AVAILABLE, name)
    log.info("auto-created topic %s for client %s", name, ctx.client_id)
    return _describe(ctx, name)


def _error(ctx: RequestContext, code: ErrorCode, name: str | None,
           topic_id: uuid.UUID = _ZERO_UUID) -> tuple[Topic, bytes]:
    topic = Topic(error_code=code, name=name, topic_id=topic_id, is_internal=False,
                  partitions=[], topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
    return topic, encode_topic_entry(topic, ctx.api_version)


def _describe(ctx: RequestContext, name: str) -> tuple[Topic, bytes]:
    """The topic's entry as the metadata cache holds it now, built and encoded once per
    cache snapshot, listener and version (``broker.handlers.metadata_entries``)."""
    snapshot = ctx.broker.metadata_cache.snapshot()
    version = ctx.api_version
    key = (_ENTRY_KEY, ctx.listener_name, version, name)
    entry: tuple[Topic, bytes] | None = snapshot.memo_get(key)
    if entry is None:
        # The built entry is the same for every version on either side of v6; only its
        # encoding differs. So one is kept per listener and side, shared by the versions.
        built_key = (_BUILT_KEY, ctx.listener_name, version >= LISTENER_NOT_FOUND_FROM, name)
        topic: Topic | None = snapshot.memo_get(built_key)
        if topic is None:
            topic = _build(snapshot, ctx.listener_name, version, name)
            snapshot.memo_put(built_key, topic)
        entry = (topic, encode_topic_entry(topic, version))
        snapshot.memo_put(key, entry)
    return entry


def _build(snapshot: MetadataSnapshot, listener: str, version: int, name: str) -> Topic:
    partitions = []
    for index, info in sorted((snapshot.partitions.get(name) or {}).items()):
        leader = snapshot.brokers.get(info.leader)
        error = ErrorCode.NO_ERROR
        leader_id = info.leader
        if leader is None:
            error, leader_id = ErrorCode.LEADER_NOT_AVAILABLE, -1
        elif leader.endpoint(listener) is None:
            error = (ErrorCode.LISTENER_NOT_FOUND if version >= LISTENER_NOT_FOUND_FROM
                     else ErrorCode.LEADER_NOT_AVAILABLE)
            leader_id = -1
        partitions.append(PartitionMeta(
            error_code=error, partition_index=index, leader_id=leader_id,
            leader_epoch=info.leader_epoch, replica_nodes=list(info.replicas),
            isr_nodes=list(info.isr), offline_replicas=list(info.offline_replicas)))
    return Topic(
        error_code=ErrorCode.NO_ERROR, name=name,
        topic_id=snapshot.topic_ids.get(name, _ZERO_UUID),
        is_internal=name in INTERNAL_TOPICS, partitions=partitions,
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )

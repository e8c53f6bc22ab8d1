"""Metadata: v1-12

Behavior:
- One broker (this one, at its advertised endpoint, with ``broker.rack``); it is the
  controller; cluster id from meta.properties.
- Topics null (v1+): every topic, internal ones included. Otherwise each requested topic
  (duplicates answered once): known -> its partitions, each led by this broker with its
  current leader epoch, replicas = isr = [this broker], no offline replicas; a partition
  not open (yet) -> LEADER_NOT_AVAILABLE.
- Unknown topic: auto-created with ``num.partitions`` / ``default.replication.factor`` when
  ``auto.create.topics.enable`` and the request's AllowAutoTopicCreation (v4+; always for
  v1-3) are both true, and then answered at once with its partitions (creation is
  synchronous here, so there is no LEADER_NOT_AVAILABLE round trip). An illegal name ->
  INVALID_TOPIC_EXCEPTION; auto-creation off -> UNKNOWN_TOPIC_OR_PARTITION. Internal
  topics (``__consumer_offsets``) are never auto-created here: their owner creates them.
- By topic id (v12, name null): UNKNOWN_TOPIC_ID (name null) for an unknown id. A null
  name or a topic id before v12 -> INVALID_REQUEST for that topic (Kafka rejects it).
- Authorized operations are not computed (no authorizer): -2147483648 ("not provided").

Version notes:
- v1 rack / controller / is_internal; v2 cluster id; v3 throttle time; v4 auto-creation
  flag; v5 offline replicas; v7 leader epoch; v8-10 authorized operations; v9+ flexible;
  v10 topic ids; v12 lookups by topic id. v0 (empty list = all topics) is not served.
"""

from __future__ import annotations

import logging
import uuid
from typing import Final

from broker import topic_admin
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.services import Broker
from broker.topics import TopicError, TopicInfo
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataResponse

log = logging.getLogger(__name__)

AUTHORIZED_OPERATIONS_OMITTED: Final = -2147483648
_ZERO_UUID: Final = uuid.UUID(int=0)

Topic = MetadataResponse.MetadataResponseTopic
PartitionMeta = MetadataResponse.MetadataResponsePartition


@api(MetadataRequest.API_KEY, min_version=1, max_version=12, request=MetadataRequest)
async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> HandlerResult:
    broker = ctx.broker
    node_id = topic_admin.broker_id(broker)
    host, port = topic_admin.advertised_endpoint(broker, ctx.listener_name)
    response = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(
            node_id=node_id, host=host, port=port, rack=topic_admin.broker_rack(broker))],
        cluster_id=broker.cluster_id,
        controller_id=node_id,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
    if request.topics is None:
        response.topics = [_describe(broker, info) for info in broker.topics.all()]
        return Respond(response)
    auto_create = topic_admin.auto_create_enabled(broker) and (
        ctx.api_version < 4 or request.allow_auto_topic_creation
    )
    seen_names: set[str] = set()
    seen_ids: set[uuid.UUID] = set()
    for wanted in request.topics:
        if (wanted.name is None or wanted.topic_id != _ZERO_UUID) and ctx.api_version < 12:
            # names are not nullable in the answer before v12
            response.topics.append(
                _error(ErrorCode.INVALID_REQUEST, wanted.name or "", wanted.topic_id))
            continue
        if wanted.name is None:
            if wanted.topic_id in seen_ids:
                continue
            seen_ids.add(wanted.topic_id)
            by_id = broker.topics.by_id(wanted.topic_id)
            response.topics.append(
                _describe(broker, by_id) if by_id is not None
                else _error(ErrorCode.UNKNOWN_TOPIC_ID, None, wanted.topic_id)
            )
            continue
        if wanted.name in seen_names:
            continue
        seen_names.add(wanted.name)
        response.topics.append(await _lookup(ctx, wanted.name, auto_create))
    return Respond(response)


async def _lookup(ctx: RequestContext, name: str, auto_create: bool) -> Topic:
    broker = ctx.broker
    info = broker.topics.get(name)
    if info is not None:
        return _describe(broker, info)
    if not auto_create or name.startswith("__"):
        return _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
    try:
        info = await topic_admin.create_topic_async(
            broker, name, topic_admin.default_num_partitions(broker),
            topic_admin.default_replication_factor(broker), {},
        )
    except TopicError as exc:
        if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            existing = broker.topics.get(name)
            if existing is not None:
                return _describe(broker, existing)
        log.info("auto-creating topic %r for %s failed: %s", name, ctx.client_id, exc.message)
        return _error(exc.code, name)
    log.info("auto-created topic %s for client %s", name, ctx.client_id)
    return _describe(broker, info)


def _error(code: ErrorCode, name: str | None, topic_id: uuid.UUID = _ZERO_UUID) -> Topic:
    return Topic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[],
                 topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _describe(broker: Broker, info: TopicInfo) -> Topic:
    node_id = topic_admin.broker_id(broker)
    partitions = []
    for index in range(info.num_partitions):
        partition = broker.replica_manager.get_partition(info.name, index)
        if partition is None:
            partitions.append(PartitionMeta(
                error_code=ErrorCode.LEADER_NOT_AVAILABLE, partition_index=index, leader_id=-1,
                leader_epoch=-1, replica_nodes=[node_id], isr_nodes=[], offline_replicas=[]))
        else:
            partitions.append(PartitionMeta(
                error_code=ErrorCode.NO_ERROR, partition_index=index, leader_id=node_id,
                leader_epoch=partition.leader_epoch, replica_nodes=[node_id], isr_nodes=[node_id],
                offline_replicas=[]))
    return Topic(
        error_code=ErrorCode.NO_ERROR, name=info.name, topic_id=info.topic_id,
        is_internal=info.is_internal, partitions=partitions,
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )

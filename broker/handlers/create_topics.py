"""CreateTopics: v2-7

Behavior:
- Each topic is checked in Kafka's order: a name given twice in one request ->
  INVALID_REQUEST for it; replica assignments together with NumPartitions or
  ReplicationFactor other than -1 -> INVALID_REQUEST; then the name (Kafka's legal
  characters ``[a-zA-Z0-9._-]``, at most 249, not ``.``/``..``, no ``.``/``_`` collision with
  an existing topic) -> INVALID_TOPIC_EXCEPTION; an existing topic -> TOPIC_ALREADY_EXISTS;
  partitions < 1 -> INVALID_PARTITIONS; replication factor < 1 or above the live
  brokers -> INVALID_REPLICATION_FACTOR; a replica assignment naming a broker that is not
  alive, a repeated broker, uneven sizes or partition indexes not 0..n-1 ->
  INVALID_REPLICA_ASSIGNMENT; an unknown config name, a null or invalid value ->
  INVALID_CONFIG. Every error carries Kafka's message text.
- NumPartitions -1 -> ``num.partitions``; ReplicationFactor -1 -> ``default.replication.factor``.
  Replicas are placed over the live brokers as Kafka places them (rack-aware with
  ``broker.rack``), unless assigned.
- ValidateOnly: every check, nothing created; the answer is what creation would return.
- Created topics are written to the topic store (durable); the controller elects their
  leaders and tells the brokers, and the answer goes out once this broker's metadata cache
  shows every partition with a leader (the topic purgatory), within TimeoutMs; after it,
  REQUEST_TIMED_OUT (the topic stays created).
- TimeoutMs <= 0: as Kafka's ZooKeeper-mode controller, the topic is created but the
  answer is REQUEST_TIMED_OUT (the caller asked not to wait for it).
- Authorization: CREATE on the cluster, else on each topic (TOPIC_AUTHORIZATION_FAILED).
  The partitions, replication factor, configs and topic id of the answer are only for a
  principal allowed DESCRIBE_CONFIGS on the topic; without it they are left out (-1, -1,
  no configs, the zero id) and TopicConfigErrorCode is TOPIC_AUTHORIZATION_FAILED, as
  Kafka's KafkaApis does. A topic whose creation failed (REQUEST_TIMED_OUT included)
  answers no configs and -1, -1 (Kafka resets them).

Version notes:
- v2 throttle time (baseline served); v4 allows -1 defaults (accepted for every version
  here); v5+ flexible, and the answer carries the partitions, replication factor and every
  config with its source; v6 may throttle (never here); v7 returns the topic id.
"""

from __future__ import annotations

import logging
from collections import Counter

from broker.admin_manager import AdminManager
from broker.handlers.authz import authorize, authorize_cluster, filter_authorized
from broker.handlers.base import HandlerResult, RequestContext, Respond, api
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from broker.topics import TopicError
from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse

log = logging.getLogger(__name__)

Result = CreateTopicsResponse.CreatableTopicResult


@api(CreateTopicsRequest.API_KEY, min_version=2, max_version=7, request=CreateTopicsRequest)
async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> HandlerResult:
    counts = Counter(t.name for t in request.topics)
    # CREATE on the cluster covers every topic; else CREATE on each topic.
    cluster_create = authorize_cluster(ctx, Op.CREATE, log_denied=False)
    describable = filter_authorized(ctx, Op.DESCRIBE_CONFIGS, RT.TOPIC, counts, log_denied=False)
    results: list[Result] = []
    answered: set[str] = set()
    failed: set[str] = set()  # creation attempted and failed: Kafka resets the config error
    for topic in request.topics:
        if counts[topic.name] > 1:
            if topic.name not in answered:
                answered.add(topic.name)
                results.append(_failed(topic.name, TopicError(
                    ErrorCode.INVALID_REQUEST,
                    f"Create topics request from client `{ctx.client_id}` contains multiple"
                    f" entries for the following topics: {topic.name}")))
            continue
        if not (cluster_create or authorize(ctx, Op.CREATE, RT.TOPIC, topic.name)):
            results.append(_failed(topic.name, TopicError(
                ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")))
            continue
        try:
            result = await _create(ctx.broker.admin, topic, request)
        except TopicError as exc:
            log.info("CreateTopics %s from %s refused: %s %s", topic.name, ctx.client_id,
                     exc.error_code.name, exc.message)
            results.append(_failed(topic.name, exc))
            failed.add(topic.name)
            continue
        if result.error_code != ErrorCode.NO_ERROR:
            failed.add(topic.name)
        elif topic.name not in describable:
            result = Result(name=result.name, error_code=result.error_code,
                            error_message=result.error_message, configs=[])
        results.append(result)
    for result in results:
        if result.name not in describable and result.name not in failed:
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return Respond(CreateTopicsResponse(topics=results))


def _failed(name: str, exc: TopicError) -> Result:
    """No partitions, replication factor nor configs (an empty list, not null, at v5+):
    Kafka 3.9.1's answer for a refused or failed topic."""
    return Result(name=name, error_code=exc.error_code, error_message=exc.message, configs=[])


async def _create(
    admin: AdminManager, topic: CreateTopicsRequest.CreatableTopic, request: CreateTopicsRequest
) -> Result:
    num_partitions, replication_factor, assignment = _shape(admin, topic)
    configs = {c.name: c.value for c in topic.configs}
    if request.validate_only:
        _, clean = await admin.check_create(topic.name, num_partitions, replication_factor,
                                            configs, assignment)
        return _success(admin, topic.name, num_partitions, replication_factor, clean)
    record, clean, error = await admin.create_topic(
        topic.name, num_partitions, replication_factor, configs, timeout_ms=request.timeout_ms,
        assignment=assignment)
    result = _success(admin, record.name, record.num_partitions, record.replication_factor, clean)
    result.topic_id = record.topic_id
    if error is not ErrorCode.NO_ERROR:  # created; the leaders were not there in time
        # Kafka answers it as a failure: no partitions, replication factor nor configs.
        result = Result(name=record.name, topic_id=record.topic_id, error_code=error,
                        error_message=None, configs=[])
    return result


def _success(
    admin: AdminManager, name: str, num_partitions: int, replication_factor: int,
    configs: dict[str, str],
) -> Result:
    entries = [
        CreateTopicsResponse.CreatableTopicConfigs(
            name=c.name, value=c.value, read_only=False, config_source=c.source, is_sensitive=False)
        for c in admin.topic_configs(configs)
    ]
    return Result(name=name, error_code=ErrorCode.NO_ERROR, error_message=None,
                  num_partitions=num_partitions, replication_factor=replication_factor,
                  configs=entries)


def _shape(admin: AdminManager, topic: CreateTopicsRequest.CreatableTopic
           ) -> tuple[int, int, dict[int, list[int]] | None]:
    """(partitions, replication factor, manual assignment) from the counts or the
    assignment."""
    if not topic.assignments:
        partitions = topic.num_partitions
        factor = topic.replication_factor
        if partitions == -1:
            partitions = admin.default_num_partitions
        if factor == -1:
            factor = admin.default_replication_factor
        return partitions, factor, None
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set."
            " Both cannot be used at the same time.")
    live = admin.live_broker_ids()
    indexes = sorted(a.partition_index for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "Partitions should be a consecutive 0-based integer sequence")
    sizes = {len(a.broker_ids) for a in topic.assignments}
    for a in topic.assignments:
        if not a.broker_ids:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Empty replica list specified in partition {a.partition_index}.")
        if len(set(a.broker_ids)) != len(a.broker_ids):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Duplicate brokers not allowed in replica assignment: {a.broker_ids}"
                             f" for partition id {a.partition_index}.")
        unknown = sorted(b for b in a.broker_ids if b not in live)
        if unknown:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Unknown broker(s) in replica assignment: {unknown}.")
    if len(sizes) != 1:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "All partitions should have the same number of replicas")
    assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
    return len(indexes), sizes.pop(), assignment

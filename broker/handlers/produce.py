"""Produce: v3-11

Behavior:
- acks must be -1, 0 or 1, else every partition gets INVALID_REQUIRED_ACKS.
- Each partition's records must be one magic-2 batch; the checks and their error codes
  are in broker/record_validation.py (CORRUPT_MESSAGE for a bad CRC, MESSAGE_TOO_LARGE
  above max.message.bytes, INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE, ...). A partition
  this broker does not lead: NOT_LEADER_OR_FOLLOWER when the metadata cache knows it (or
  this broker follows it), else UNKNOWN_TOPIC_OR_PARTITION (Produce never auto-creates).
- Idempotent producers: a resent batch (same producer, epoch and sequence range as one of
  the last 5) is answered with its original base offset and NO_ERROR;
  OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH otherwise (broker/producer_state.py).
- Disk errors are per partition: KAFKA_STORAGE_ERROR (retriable) when the append failed on a
  full disk (nothing of it was kept: the log is as before) or the partition's log dir is
  offline; the other partitions of the request are answered as they went.
- acks=-1 waits (DelayedProduce in the purgatory) until the high watermark covers the
  append or timeout_ms passes (REQUEST_TIMED_OUT); acks=1 answers after the local append.
- acks=0: no response; if any partition failed, the connection is closed instead, as Kafka
  does, so the producer notices and refreshes its metadata.
- log_append_time_ms is the broker time for LogAppendTime topics, else -1 (for a duplicate
  batch of an idempotent producer: the retained batch's max timestamp, as Kafka answers);
  log_start_offset is the partition's log start offset.
- Client quotas: the request's size counts against ``producer_byte_rate``; over it, the
  response carries throttle_time_ms and the connection is muted that long (acks=0: muted).
- transactional batches are refused with INVALID_TXN_STATE (no transaction support).
- clients may not write to internal topics (__consumer_offsets): INVALID_TOPIC_EXCEPTION.

Fast path (``produce_fast``): a request of one batch for one partition of one topic with
acks=1 and no transactional id, on a broker without an authorizer, metrics, fault
injection or request quotas, is served at once from its frame: the same append and quota
calls, the response frame written directly for a plain success (protocol.produce_fast);
it answers byte for byte as the general path does, which serves everything else. The first
such request of a turn of the event loop is appended at once; those read after it in the
same turn are appended together at its end (broker/produce_appends.py), each answered as if
alone.

Version notes:
- v0-v2 (magic 0/1 message sets) are not supported. v3 adds transactional_id; v5
  log_start_offset; v7 allows zstd; v8 record_errors and error_message; v9+ flexible;
  v10 adds tagged current_leader/node_endpoints (KIP-951 hints, not sent: clients refresh
  their metadata on NOT_LEADER_OR_FOLLOWER); v11 changes nothing for non-transactional
  producers.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.handlers.authz import filter_authorized
from broker.handlers.base import (
    CloseConnection,
    HandlerResult,
    Parked,
    RequestContext,
    api,
    no_response,
)
from broker.handlers.produce_answer import PendingProduce, respond
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.produce_fast import decode_single, encode_single_response
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.security.principal import KafkaPrincipal
    from broker.services import Broker
    from protocol.frames import RequestHeader

log = logging.getLogger(__name__)

_Resp = ProduceResponse
_new_tuple = tuple.__new__  # a NamedTuple's own __new__ is Python code; this is C
# Enum members read on the per-request path, looked up once: on Python 3.11 a class
# attribute of an Enum costs a metaclass __getattr__ hook call (~10x a global read).
_NO_ERROR = ErrorCode.NO_ERROR


def produce_fast(broker: Broker, header: RequestHeader, frame: bytes, offset: int,
                 principal: KafkaPrincipal) -> HandlerResult | bytes | Parked | None:
    """``handle_produce`` for the request nearly every producer sends: one batch for one
    partition of one topic, acks=1, no transactional id, no authorizer. The body is read
    from the frame and the response frame written without the message classes
    (protocol.produce_fast) where the answer is a plain success; the append, its checks and
    the quota are the same calls. A request read while the loop's turn holds answers for
    its end is appended at the end of the turn, together with the others read meanwhile for
    the partition (broker.produce_appends: the same checks and answers as one by one), and
    answered after that (``PendingProduce``). None: not such a request (nothing done)."""
    if broker.authorizer is not None:
        return None
    single = decode_single(frame, offset, header.api_version)
    if single is None or single[0] != 1:  # acks 0 and -1 answer differently
        return None
    topic, index, records = single[2], single[3], single[4]
    appends = broker.produce_appends
    if appends.deferring():
        pending = PendingProduce(records, broker, header, topic, index, principal,
                                 len(frame) + 4)
        appends.add(topic, index, header.api_version, pending)
        return pending
    tp = _new_tuple(TopicPartition, (topic, index))
    r = broker.replica_manager.append_single(tp, records, header.api_version, 1)
    # producer_byte_rate: the request's bytes count against the client's quota.
    quota = broker.quotas.produce
    throttle_ms = (quota.record(principal.name, header.client_id or "", len(frame) + 4)
                   if quota.enabled else 0)  # (record() answers 0 at once when not enabled)
    if r.error is _NO_ERROR and not r.record_errors and not throttle_ms:
        response = encode_single_response(header.correlation_id, header.api_version, topic,
                                          index, r.error, r.base_offset, r.log_append_time_ms,
                                          r.log_start_offset, 0)
        if response is not None:
            return response
    return respond({tp: r}, [], throttle_ms)


@api(ProduceRequest.API_KEY, min_version=3, max_version=11, request=ProduceRequest,
     fast=produce_fast)
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> HandlerResult:
    entries: dict[TopicPartition, memoryview | bytes | None] = {}
    for topic in request.topic_data:
        for part in topic.partition_data:
            records = part.records
            if records is not None and not isinstance(records, memoryview | bytes):
                records = memoryview(records) if isinstance(records, bytearray) else None
            entries[_new_tuple(TopicPartition, (topic.name, part.index))] = records
    denied: list[TopicPartition] = []
    if ctx.broker.authorizer is not None:  # without one every topic is allowed
        allowed = filter_authorized(ctx, Op.WRITE, RT.TOPIC, {tp.topic for tp in entries})
        denied = [tp for tp in entries if tp.topic not in allowed]
        for tp in denied:
            del entries[tp]
    results = await ctx.broker.replica_manager.append_records(
        timeout_ms=request.timeout_ms,
        required_acks=request.acks,
        produce_version=ctx.api_version,
        entries=entries.items(),
        internal_topics_allowed=False,
    )
    # producer_byte_rate: the request's bytes count against the client's quota.
    throttle_ms = ctx.broker.quotas.produce.record(ctx.principal.name, ctx.client_id or "",
                                                   ctx.request_size_bytes)
    if request.acks == 0:
        failed = [(tp, r.error) for tp, r in results.items() if r.error is not ErrorCode.NO_ERROR]
        failed += [(tp, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for tp in denied]
        if failed:
            (name, index), error = failed[0]
            return CloseConnection(
                f"acks=0 produce failed for {len(failed)} partition(s), e.g. "
                f"{name}-{index}: {error.name}"
            )
        return no_response(throttle_ms)
    return respond(results, denied, throttle_ms)

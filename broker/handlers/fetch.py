"""Fetch: v4-17

Behavior:
- Reads each requested partition from fetch_offset: the record data is a FileSlice of the
  segment (sent with sendfile by the network layer, never copied), starting at the batch
  holding fetch_offset and ending at a batch boundary below the bound: the high watermark
  for consumers (replica id -1) with READ_UNCOMMITTED, the last stable offset (= HW, no
  transactions) with READ_COMMITTED, the log end offset for followers (replica id >= 0).
- Limits (KIP-74): partitions in request order, each up to partition_max_bytes and what is
  left of max_bytes (capped by the broker's fetch.max.bytes, 55 MiB); the first partition
  with data returns at least one whole batch even when it is larger than both limits, so a
  consumer never stalls.
- Long poll: when fewer than min_bytes are available and max_wait_ms > 0, the request waits
  in the fetch purgatory and is answered as soon as an append brings min_bytes (or a
  partition errors), else after max_wait_ms with whatever there is.
- Errors per partition: OFFSET_OUT_OF_RANGE (fetch_offset below the log start or above the
  log end; log_start_offset is in the response), UNKNOWN_TOPIC_OR_PARTITION (v4-12 by name,
  unknown to the metadata cache), UNKNOWN_TOPIC_ID (v13+), NOT_LEADER_OR_FOLLOWER (known,
  but not led by this broker), FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
  (current_leader_epoch), KAFKA_STORAGE_ERROR (the partition's log dir is offline),
  CORRUPT_MESSAGE (a batch whose header or CRC is broken at the fetch position; the
  batches before it are returned).
- Fetch sessions (KIP-227, broker/fetch_session.py): epoch 0 creates a session (its id in
  the answer; session id 0 when the bounded cache has no room), epoch > 0 is incremental
  (only changed partitions in the request; only partitions with news in the answer),
  epoch -1 is sessionless. Errors at the top level: FETCH_SESSION_ID_NOT_FOUND,
  INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR (ids used differently than
  when the session was made).
- Fetch from the closest replica (KIP-392, v11+): a consumer may fetch from a follower,
  which answers up to its own HW; with ``replica.selector.class`` set (Kafka's
  RackAwareReplicaSelector), a leader whose consumer names a rack_id (client.rack) other
  than its own answers preferred_read_replica = an alive in-sync follower in that rack
  holding the fetch offset (the most caught-up), and no records; else -1.
- aborted_transactions empty for READ_COMMITTED, null otherwise.
- Client quotas (consumers, not followers): max_bytes is capped at what the client's
  ``consumer_byte_rate`` window holds; the response's record bytes count against it, and
  over it the answer is empty with throttle_time_ms (the bytes not counted), as Kafka does.

Fast path (``fetch_fast``): a sessionless consumer fetch of one partition of one topic
known to the metadata cache (no rack id, no forgotten topics, no tagged fields: what
librdkafka sends), on a broker without an authorizer, metrics, fault injection, request
quotas or fetch quotas, is served at once from its frame: the same read, long poll and
purgatory, the response frame written directly (protocol.fetch_fast); a fetch that waits is
parked as a DelayedFetch whose completion writes the answer. It answers byte for byte as
the general path does, which serves everything else.

Version notes:
- v4 adds isolation_level and last_stable_offset; v5 log_start_offset; v7 sessions;
  v9 current_leader_epoch; v11 rack_id/preferred_read_replica; v12+ flexible (tagged
  diverging_epoch/current_leader/snapshot_id); v13 topic ids replace names; v15 replica_id
  moves to the tagged replica_state; v16 node_endpoints; v17 replica_directory_id.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.delayed_ops import DelayedFetch, FetchParams, FetchPartitionStatus, ReadAll
from broker.fetch_session import (
    INVALID_SESSION_ID,
    CachedPartition,
    ContextKind,
    PartitionKey,
)
from broker.handlers.authz import authorize_cluster, filter_authorized
from broker.handlers.base import (
    CloseConnection,
    FastResult,
    HandlerResult,
    Parked,
    RequestContext,
    Respond,
    api,
)
from broker.loop_slice import LoopSlice
from broker.partition import IsolationLevel, Partition, ReadResult
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from protocol.errors import ErrorCode
from protocol.fetch_fast import (
    FLEXIBLE_FROM,
    FLEXIBLE_TAIL,
    decode_single,
    encode_single_response_head,
)
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:

    from broker.security.principal import KafkaPrincipal
    from broker.services import Broker
    from protocol.fileslice import ResponseParts
    from protocol.frames import RequestHeader

log = logging.getLogger(__name__)

_R = FetchResponse
_new_tuple = tuple.__new__  # a NamedTuple's own __new__ is Python code; this is C
# Enum members read on the per-request path, looked up once: on Python 3.11 a class
# attribute of an Enum costs a metaclass __getattr__ hook call (~10x a global read).
_NO_ERROR = ErrorCode.NO_ERROR
_READ_COMMITTED = IsolationLevel.READ_COMMITTED
_READ_UNCOMMITTED = IsolationLevel.READ_UNCOMMITTED
TOPIC_IDS_MIN_VERSION = 13
REPLICA_STATE_MIN_VERSION = 15
FOLLOWER_READS_MIN_VERSION = 11  # rack_id / preferred_read_replica (KIP-392)
MAX_WAIT_CAP_MS = 300_000  # a bound of ours on one long poll (Kafka's clients use <= 30 s)
# A response frame of at most this much is copied into one write by the network layer
# anyway (broker.network.sendfile.SMALL_COPY_BYTES, equal: tests/unit/test_fetch_fast.py);
# the fast path reads its records itself and answers bytes.
SMALL_ANSWER_BYTES = 16 * 1024
_EMPTY = b""
SLICE_MIN = 64  # a fetch of more partitions gives the loop back in its loops over them
SLICE_CHECK = 16  # partitions between two looks at the clock (LoopSlice.pause)


def _answer_of(correlation_id: int, version: int, topic: str, topic_id: uuid.UUID,
               partition: int, isolation: IsolationLevel, r: ReadResult) -> FastResult:
    """The response to the read ``r``, as handle_fetch answers it where no fetch quota is
    enabled: the frame's bytes (records up to 16 KiB read here) or parts (record data for
    sendfile), or the message the general path builds where protocol.fetch_fast does not
    write the frame."""
    records = r.records
    aborted_empty = isolation is _READ_COMMITTED
    head = encode_single_response_head(
        correlation_id, version, topic, topic_id, partition, r.error, r.high_watermark,
        r.last_stable_offset, r.log_start_offset, aborted_empty, r.preferred_read_replica,
        0 if records is None else records.length)
    if head is None:
        return Respond(FetchResponse(
            throttle_time_ms=0, error_code=_NO_ERROR, session_id=INVALID_SESSION_ID,
            responses=[_R.FetchableTopicResponse(topic=topic, topic_id=topic_id, partitions=[
                _R.PartitionData(
                    partition_index=partition, error_code=r.error,
                    high_watermark=r.high_watermark, last_stable_offset=r.last_stable_offset,
                    log_start_offset=r.log_start_offset,
                    aborted_transactions=[] if aborted_empty else None,
                    preferred_read_replica=r.preferred_read_replica,
                    records=records if records is not None else _EMPTY)])]))
    flexible = version >= FLEXIBLE_FROM
    if records is None:
        return head + FLEXIBLE_TAIL if flexible else head
    n = records.length
    if len(head) + n <= SMALL_ANSWER_BYTES:
        # What the network layer does with a small response (one pread, one write),
        # done here: the frame leaves as bytes, without the parts' handling.
        try:
            data = os.pread(records.fileno(), n, records.position)
        except (OSError, ValueError):
            data = b""  # the network layer meets the error again, and reports it
        if len(data) == n:
            if log.isEnabledFor(logging.DEBUG):  # as the network layer logs its copies
                log.debug("copy: %d bytes of fd %d at %d", n, records.fileno(),
                          records.position)
            return head + data + FLEXIBLE_TAIL if flexible else head + data
    parts: ResponseParts = [head, records, FLEXIBLE_TAIL] if flexible else [head, records]
    return parts


class _FastAnswer:
    """What the answer of a fast-path fetch that waits needs besides the read."""

    __slots__ = ("broker", "client_id", "correlation_id", "isolation", "partition", "topic",
                 "topic_id", "user", "version")

    def __init__(self, broker: Broker, header: RequestHeader, principal: KafkaPrincipal,
                 topic: str, topic_id: uuid.UUID, partition: int,
                 isolation: IsolationLevel) -> None:
        self.broker = broker
        self.correlation_id = header.correlation_id
        self.version = header.api_version
        self.client_id = header.client_id or ""
        self.user = principal.name
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.isolation = isolation

    def of(self, r: ReadResult) -> FastResult:
        """``_answer_of`` ``r``; with a fetch quota enabled while the fetch waited, first
        what handle_fetch does then: the bytes counted, over the quota an empty answer."""
        quotas = self.broker.quotas.fetch
        if quotas.enabled:
            response_bytes = r.size_bytes
            throttle_ms = quotas.record(self.user, self.client_id, response_bytes)
            if throttle_ms > 0:
                quotas.unrecord(self.user, self.client_id, response_bytes)
                return Respond(FetchResponse(throttle_time_ms=throttle_ms,
                                             error_code=_NO_ERROR, session_id=INVALID_SESSION_ID,
                                             responses=[]), throttle_ms=throttle_ms)
        return _answer_of(self.correlation_id, self.version, self.topic, self.topic_id,
                          self.partition, self.isolation, r)


class _ParkedFetch(DelayedFetch):
    """The fast path's DelayedFetch: its completion answers the request (``Parked``)."""

    awaited = False  # no request awaits it: on_complete hands the answer over

    def __init__(self, params: FetchParams, statuses: list[FetchPartitionStatus],
                 get_partition: Callable[[str, int], Partition | None], read_all: ReadAll,
                 answer: _FastAnswer) -> None:
        super().__init__(params, statuses, get_partition, read_all)
        self.parked = Parked()
        self._answer = answer

    def on_complete(self) -> None:
        parked = self.parked
        routed = parked.answer_via is not None
        try:
            super().on_complete()
            if not routed:  # completed before it was parked: the fast path answers
                return
            result = self._answer.of(self.results[0])
        except Exception:
            if not routed:
                raise
            log.exception("Fetch of %s-%d (correlation id %d) failed on completion",
                          self._answer.topic, self._answer.partition,
                          self._answer.correlation_id)
            result = CloseConnection("handler error")
        # The answer goes out from a callback of its own (as a handler task would resume),
        # not inside the append or the timer that completed the fetch: a response frame of
        # bytes straight to the connection's writer, anything else through the request
        # channel (a throttle time, record data for sendfile, a message to encode).
        loop = self.loop
        assert loop is not None  # routed: the purgatory had watched it
        send = parked.send_frame
        if send is not None and type(result) is bytes:
            loop.call_soon(send, result)
        else:
            loop.call_soon(parked.deliver, result)


def fetch_fast(broker: Broker, header: RequestHeader, frame: bytes, offset: int,
               principal: KafkaPrincipal) -> FastResult | Parked | None:
    """``handle_fetch`` at once, for a sessionless consumer fetch of one partition of a
    known topic (protocol.fetch_fast reads it), where no authorizer, topic stats or fetch
    quota are on: the same read, long poll (parked in the purgatory) and answer, the
    response frame written without the message classes. None: not such a request
    (nothing done)."""
    if broker.authorizer is not None:
        return None
    version = header.api_version
    single = decode_single(frame, offset, version)
    if single is None:
        return None
    rm = broker.replica_manager
    if rm.topic_stats is not None or broker.quotas.fetch.enabled:
        return None
    (max_wait_ms, min_bytes, max_bytes, isolation_level, topic, topic_id, partition,
     current_leader_epoch, fetch_offset, partition_max_bytes) = single
    cache = broker.metadata_cache
    if version >= TOPIC_IDS_MIN_VERSION:
        name = cache.topic_name(topic_id)
        if name is None:
            return None
        topic = name
    if not cache.contains((topic, partition)):
        return None  # answered UNKNOWN_TOPIC_*, at once: the general path
    # The general path's limits (handle_fetch, read_all), without min/max calls: the
    # response limit capped by fetch.max.bytes, min_bytes by that limit, the partition's by
    # both, the wait by MAX_WAIT_CAP_MS.
    broker_max = broker.config.get_int("fetch.max.bytes")
    if max_bytes > broker_max:
        max_bytes = broker_max
    if max_bytes < 0:
        max_bytes = 0
    if min_bytes > max_bytes:
        min_bytes = max_bytes
    if min_bytes < 0:
        min_bytes = 0
    if max_wait_ms > MAX_WAIT_CAP_MS:
        max_wait_ms = MAX_WAIT_CAP_MS
    limit = partition_max_bytes if partition_max_bytes < max_bytes else max_bytes
    if limit < 0:
        limit = 0
    isolation = _READ_COMMITTED if isolation_level == 1 else _READ_UNCOMMITTED
    follower_reads = version >= FOLLOWER_READS_MIN_VERSION
    r = rm.read_consumer(topic, partition, fetch_offset, limit, isolation,
                         current_leader_epoch, follower_reads)
    if max_wait_ms <= 0 or r.size_bytes >= min_bytes or r.error is not _NO_ERROR:
        # (no fetch quota is enabled: checked above, and nothing ran since)
        return _answer_of(header.correlation_id, version, topic, topic_id, partition,
                          isolation, r)
    # It waits: parked as the general path parks it (read_all's parameters, from here on).
    params = FetchParams(-1, max_wait_ms, min_bytes, max_bytes, isolation, follower_reads, "")
    statuses = [FetchPartitionStatus(topic, partition, fetch_offset,
                                     max(0, partition_max_bytes), current_leader_epoch)]
    answer = _FastAnswer(broker, header, principal, topic, topic_id, partition, isolation)
    op = _ParkedFetch(params, statuses, rm.get_partition, rm.read_all, answer)
    keys = (_new_tuple(TopicPartition, (topic, partition)),)
    # The read just made is the one try_complete would make (op.reusable: the same
    # offset, limit and bound, nothing ran in between) and found less than min_bytes and
    # no error: trying once more before watching could only find the same.
    purgatory = rm.fetch_purgatory
    if (purgatory.watch(op, keys) if op.reusable
            else purgatory.try_complete_else_watch(op, keys)):
        return answer.of(op.results[0])
    return op.parked


@api(FetchRequest.API_KEY, min_version=4, max_version=17, request=FetchRequest, fast=fetch_fast)
async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> HandlerResult:
    version = ctx.api_version
    rm = ctx.broker.replica_manager
    cache = ctx.broker.metadata_cache
    use_ids = version >= TOPIC_IDS_MIN_VERSION
    replica_id = (request.replica_state.replica_id if version >= REPLICA_STATE_MIN_VERSION
                  else request.replica_id)
    try:
        isolation = IsolationLevel(request.isolation_level)
    except ValueError:
        isolation = IsolationLevel.READ_UNCOMMITTED  # Kafka treats unknown levels this way

    # A fetch of many partitions (a follower's) gives the loop back every few ms of its
    # loops over them (LoopSlice), checked every SLICE_CHECK partitions.
    work = LoopSlice() if sum(len(t.partitions) for t in request.topics) > SLICE_MIN else None
    requested: list[tuple[PartitionKey, CachedPartition]] = []
    for topic in request.topics:
        name = cache.topic_name(topic.topic_id) if use_ids else topic.topic
        key_topic: uuid.UUID | str = topic.topic_id if use_ids else topic.topic
        for part in topic.partitions:
            if work is not None and len(requested) % SLICE_CHECK == 0:
                await work.pause()
            requested.append(((key_topic, part.partition), CachedPartition(
                name, topic.topic_id, part.partition, part.fetch_offset,
                max(0, part.partition_max_bytes), part.current_leader_epoch)))
    forgotten: list[PartitionKey] = []
    for ft in request.forgotten_topics_data:
        ft_key: uuid.UUID | str = ft.topic_id if use_ids else ft.topic
        forgotten.extend((ft_key, index) for index in ft.partitions)

    sessions = rm.fetch_sessions
    context = sessions.new_context(request.session_id, request.session_epoch, use_ids,
                                   requested, forgotten)
    if context.error is not ErrorCode.NO_ERROR:
        return Respond(FetchResponse(error_code=context.error, session_id=INVALID_SESSION_ID,
                                     responses=[]))
    if work is None and len(context.partitions) > SLICE_MIN:  # an incremental fetch's session
        work = LoopSlice()
    if work is not None:
        await work.pause()
    if context.kind is ContextKind.INCREMENTAL:
        for _key, cached in context.partitions:  # names may have changed (deleted topics)
            cached.topic = cache.topic_name(cached.topic_id) if use_ids else cached.topic

    unknown = ErrorCode.UNKNOWN_TOPIC_ID if use_ids else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # Consumers need READ on each topic; followers CLUSTER_ACTION on the cluster.
    readable: set[str] | None
    if replica_id < 0:
        readable = filter_authorized(ctx, Op.READ, RT.TOPIC,
                                     {c.topic for _k, c in context.partitions if c.topic is not None})
    else:
        readable = None if authorize_cluster(ctx, Op.CLUSTER_ACTION) else set()
    statuses: list[FetchPartitionStatus] = []
    # Each partition's place in ``statuses``, or the answer to an error read. Not an
    # ``int | ErrorCode`` union: ErrorCode is an int, and code compiled by mypyc keeps such a
    # union as a plain int, which loses the enum (isinstance could not tell them apart).
    slots: list[int | ReadResult] = []
    for _key, cached in context.partitions:
        if work is not None and len(slots) % SLICE_CHECK == 0:
            await work.pause()
        if readable is not None and cached.topic not in readable and (
                cached.topic is not None or replica_id >= 0):
            slots.append(ReadResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        if cached.topic is None or not cache.contains((cached.topic, cached.partition)):
            slots.append(ReadResult(unknown))
            continue
        slots.append(len(statuses))
        statuses.append(FetchPartitionStatus(cached.topic, cached.partition, cached.fetch_offset,
                                             cached.max_bytes, cached.current_leader_epoch))
    # Kafka: the response limit is also capped by the broker's fetch.max.bytes, and
    # min_bytes by that limit.
    max_bytes = max(0, min(request.max_bytes, ctx.broker.config.get_int("fetch.max.bytes")))
    quotas = ctx.broker.quotas.fetch
    user, client_id = ctx.principal.name, ctx.client_id or ""
    consumer = replica_id < 0  # followers are not subject to client quotas
    if consumer:
        # consumer_byte_rate: one response may not exceed what the quota window holds.
        window_bytes = quotas.max_value_in_window(user, client_id)
        if window_bytes is not None:
            max_bytes = min(max_bytes, int(window_bytes))
    # An unknown partition is an error read: Kafka answers at once instead of waiting.
    any_unknown = any(isinstance(slot, ReadResult) for slot in slots)
    params = FetchParams(
        replica_id=replica_id,
        max_wait_ms=0 if any_unknown else min(max(0, request.max_wait_ms), MAX_WAIT_CAP_MS),
        min_bytes=max(0, min(request.min_bytes, max_bytes)),
        max_bytes=max_bytes,
        isolation=isolation,
        follower_reads=replica_id < 0 and version >= FOLLOWER_READS_MIN_VERSION,
        client_rack=request.rack_id if replica_id < 0 and version >= FOLLOWER_READS_MIN_VERSION
        else "",
    )
    results = await rm.fetch_messages(params, statuses)
    if consumer and quotas.enabled:
        response_bytes = sum(r.size_bytes for r in results)
        throttle_ms = quotas.record(user, client_id, response_bytes)
        if throttle_ms > 0:
            # Over the quota: answered empty (the bytes are not counted), as Kafka does.
            quotas.unrecord(user, client_id, response_bytes)
            session = context.session.id if context.session is not None else INVALID_SESSION_ID
            return Respond(FetchResponse(throttle_time_ms=throttle_ms, error_code=ErrorCode.NO_ERROR,
                                         session_id=session, responses=[]),
                           throttle_ms=throttle_ms)

    aborted_empty = isolation is IsolationLevel.READ_COMMITTED
    answered: list[tuple[PartitionKey, CachedPartition, FetchResponse.PartitionData]] = []
    for i, ((key, cached), slot) in enumerate(zip(context.partitions, slots, strict=True)):
        if work is not None and i % SLICE_CHECK == 0:
            await work.pause()
        r = slot if isinstance(slot, ReadResult) else results[slot]
        data = _R.PartitionData(
            partition_index=cached.partition,
            error_code=r.error,
            high_watermark=r.high_watermark,
            last_stable_offset=r.last_stable_offset,
            log_start_offset=r.log_start_offset,
            aborted_transactions=[] if aborted_empty else None,
            preferred_read_replica=r.preferred_read_replica,
            records=r.records if r.records is not None else _EMPTY,
        )
        news = cached.must_respond(r.error, r.size_bytes, r.high_watermark,
                                   r.last_stable_offset, r.log_start_offset)
        if context.kind is not ContextKind.INCREMENTAL or news:
            answered.append((key, cached, data))

    session_id = INVALID_SESSION_ID
    if context.kind is ContextKind.FULL:
        session_id = sessions.create(use_ids, context.partitions)
    elif context.session is not None:
        session_id = context.session.id
        for key, _cached, _data in answered:
            context.session.move_to_end(key)

    responses: list[FetchResponse.FetchableTopicResponse] = []
    for _key, cached, data in answered:  # consecutive partitions of one topic share an entry
        last = responses[-1] if responses else None
        if last is not None and last.topic_id == cached.topic_id and (
            use_ids or last.topic == (cached.topic or "")
        ):
            last.partitions.append(data)
        else:
            responses.append(_R.FetchableTopicResponse(topic=cached.topic or "",
                                                       topic_id=cached.topic_id,
                                                       partitions=[data]))
    return Respond(FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR,
                                 session_id=session_id, responses=responses))

"""Fetch one partition from its leader: one request, the partition's answer as it came.

The version is the highest both sides support; from v13 topics travel by id (taken from the
metadata) and from v15 the replica id travels in ``replica_state`` (KIP-903), both handled
here. Sessionless (session id 0, epoch -1); ``client.fetch_session`` keeps incremental
sessions. Partition errors come back in ``FetchedPartition.error_code`` for the caller to
act on (OFFSET_OUT_OF_RANGE needs a new position, not a retry); one that says the cluster
changed also marks the topic's metadata stale. A failed exchange raises ``ClientError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from client.errors import ClientError, check
from client.kafka_client import KafkaClient
from protocol.errors import ErrorCode
from protocol.fileslice import FileSlice
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.primitives import ZERO_UUID, Records
from protocol.topic_partition import TopicPartition

CONSUMER_REPLICA_ID: Final = -1
TOPIC_IDS_SINCE: Final = 13
REPLICA_STATE_SINCE: Final = 15


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition of a Fetch answer: its error, watermarks and raw record bytes."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes
    preferred_read_replica: int = -1


def records_bytes(records: Records | None) -> bytes:
    if records is None:
        return b""
    if isinstance(records, FileSlice):
        return records.read_bytes()
    return bytes(records)


def set_replica_id(request: FetchRequest, version: int, replica_id: int, replica_epoch: int = -1) -> None:
    """Where the replica id goes at ``version``: the top-level field, or ``replica_state``."""
    if version >= REPLICA_STATE_SINCE:
        request.replica_state = FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=replica_epoch)
    else:
        request.replica_id = replica_id


async def fetch(client: KafkaClient, tp: TopicPartition, offset: int, *, max_bytes: int = 1 << 20,
                max_wait_ms: int = 500, min_bytes: int = 1, isolation_level: int = 0,
                current_leader_epoch: int = -1, replica_id: int = CONSUMER_REPLICA_ID,
                timeout_ms: int | None = None) -> FetchedPartition:
    tp = TopicPartition(*tp)
    node = await client.leader_for(tp, timeout_ms=timeout_ms)
    conn = await client.connection(node)
    topic = client.cluster.topics.get(tp.topic)
    topic_id = ZERO_UUID if topic is None else topic.topic_id
    version = conn.version_for(FetchRequest, None if topic_id != ZERO_UUID else TOPIC_IDS_SINCE - 1)
    request = FetchRequest(
        max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation_level, session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=tp.topic, topic_id=topic_id, partitions=[
            FetchRequest.FetchPartition(partition=tp.partition, fetch_offset=offset,
                                        current_leader_epoch=current_leader_epoch,
                                        partition_max_bytes=max_bytes)])])
    set_replica_id(request, version, replica_id)
    wait_ms = client.config.request_timeout_ms + max_wait_ms
    try:
        response = await conn.send(request, version=version, timeout_ms=wait_ms)
    except ClientError as exc:
        if exc.needs_metadata:
            client.invalidate([tp.topic])
        raise
    check(response.error_code, None, f"Fetch of {tp}")
    got = partition_of(response, tp, topic_id, version)
    if got.error_code and ClientError.from_code(got.error_code, None, "").needs_metadata:
        client.invalidate([tp.topic])
    return got


def partition_of(response: FetchResponse, tp: TopicPartition, topic_id: object,
                 version: int) -> FetchedPartition:
    for t in response.responses:
        same = t.topic_id == topic_id if version >= TOPIC_IDS_SINCE else t.topic == tp.topic
        if not same:
            continue
        for p in t.partitions:
            if p.partition_index == tp.partition:
                return FetchedPartition(p.error_code, p.high_watermark, p.last_stable_offset,
                                        p.log_start_offset, records_bytes(p.records),
                                        p.preferred_read_replica)
    return FetchedPartition(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1, b"")

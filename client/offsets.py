"""ListOffsets, routed to each partition's leader, retried while the cluster settles.

Timestamps: ``EARLIEST_TIMESTAMP`` (-2, the log start), ``LATEST_TIMESTAMP`` (-1, the log
end: next offset to be written), ``MAX_TIMESTAMP`` (-3, the record with the largest
timestamp; ListOffsets v7+), or ms since the epoch (the first offset whose timestamp is at
or after it; offset -1 when there is none, as Kafka answers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from client.errors import ClientError
from client.kafka_client import KafkaClient
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.topic_partition import TopicPartition

EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
MAX_TIMESTAMP: Final = -3
READ_UNCOMMITTED: Final = 0
READ_COMMITTED: Final = 1


@dataclass(frozen=True, slots=True)
class ListedOffset:
    offset: int
    timestamp: int
    leader_epoch: int


async def list_offsets(client: KafkaClient, wanted: Mapping[TopicPartition, int], *,
                       isolation_level: int = READ_UNCOMMITTED,
                       timeout_ms: int | None = None) -> dict[TopicPartition, ListedOffset]:
    """``{tp: timestamp}`` -> ``{tp: ListedOffset}``; ClientError when a partition keeps
    failing (a non-retriable error at once, a retriable one when the time runs out)."""
    out: dict[TopicPartition, ListedOffset] = {}
    pending = {TopicPartition(*tp): ts for tp, ts in wanted.items()}

    async def attempt() -> dict[TopicPartition, ListedOffset]:
        retriable: ClientError | None = None
        for node, tps in (await client.leaders_now(pending)).items():
            try:
                answers = await _list_at(client, node, {tp: pending[tp] for tp in tps}, isolation_level)
            except ClientError as exc:
                if not exc.retriable:
                    raise
                client.invalidate({tp.topic for tp in tps})
                retriable = exc
                continue
            for tp, result in answers.items():
                if isinstance(result, ClientError):
                    if not result.retriable:
                        raise result
                    if result.needs_metadata:
                        client.invalidate([tp.topic])
                    retriable = result
                else:
                    out[tp] = result
                    pending.pop(tp, None)
        if pending:
            raise retriable or ClientError("UNKNOWN_TOPIC_OR_PARTITION", f"no answer for {sorted(pending)}")
        return out

    if not pending:
        return out
    return await client.retry(attempt, what="ListOffsets", timeout_ms=timeout_ms)


async def _list_at(client: KafkaClient, node: int, wanted: dict[TopicPartition, int],
                   isolation_level: int) -> dict[TopicPartition, ListedOffset | ClientError]:
    topics: dict[str, list[ListOffsetsRequest.ListOffsetsPartition]] = {}
    for tp, ts in sorted(wanted.items()):
        topics.setdefault(tp.topic, []).append(
            ListOffsetsRequest.ListOffsetsPartition(partition_index=tp.partition, timestamp=ts))
    request = ListOffsetsRequest(
        replica_id=-1, isolation_level=isolation_level,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=n, partitions=p) for n, p in topics.items()])
    response = await client.send(node, request)
    out: dict[TopicPartition, ListedOffset | ClientError] = {}
    for t in response.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if tp not in wanted:
                continue
            if p.error_code:
                out[tp] = ClientError.from_code(p.error_code, None, f"ListOffsets of {tp}")
            else:
                out[tp] = ListedOffset(p.offset, p.timestamp, p.leader_epoch)
    return out

"""Produce one record batch to one partition's leader, retried on retriable errors.

As Kafka's producer without idempotence: a retry after a lost answer can write the batch
twice. ``acks=0`` sends and returns None (the broker answers nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from client.errors import ClientError
from client.kafka_client import KafkaClient
from protocol.messages.produce import ProduceRequest
from protocol.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class ProducedBatch:
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int


def produce_request(tp: TopicPartition, records: bytes, acks: int, timeout_ms: int,
                    transactional_id: str | None = None) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
        topic_data=[ProduceRequest.TopicProduceData(name=tp.topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=tp.partition, records=records)])])


async def produce(client: KafkaClient, tp: TopicPartition, records: bytes, *, acks: int = -1,
                  timeout_ms: int = 30_000, transactional_id: str | None = None,
                  retry_timeout_ms: int | None = None) -> ProducedBatch | None:
    """Append ``records`` (one or more encoded batches) to ``tp``."""
    tp = TopicPartition(*tp)
    request = produce_request(tp, records, acks, timeout_ms, transactional_id)

    async def attempt() -> ProducedBatch | None:
        node = (await client.leaders_now([tp])).popitem()[0]
        if acks == 0:
            await client.send_no_response(node, request)
            return None
        try:
            response = await client.send(node, request, timeout_ms=client.config.request_timeout_ms + timeout_ms)
        except ClientError as exc:
            if exc.needs_metadata:
                client.invalidate([tp.topic])
            raise
        for t in response.responses:
            for p in t.partition_responses:
                if p.error_code:
                    error = ClientError.from_code(p.error_code, p.error_message, f"Produce to {tp}")
                    if error.needs_metadata:
                        client.invalidate([tp.topic])
                    raise error
                return ProducedBatch(p.base_offset, p.log_append_time_ms, p.log_start_offset)
        raise ClientError("UNKNOWN_SERVER_ERROR", f"Produce to {tp}: the answer names no partition")

    return await client.retry(attempt, what=f"Produce to {tp}", timeout_ms=retry_timeout_ms)

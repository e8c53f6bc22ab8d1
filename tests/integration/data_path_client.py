"""Raw Produce / Fetch / ListOffsets calls for the data-path tests, over client.sync.

Built on the project client's blocking ``SyncClient`` (our frames + generated messages, bounded
timeouts). Record batches are built with protocol.records.build_batch and read back with
iter_batches / RecordBatch.records, so the tests check the bytes a client would see.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from client.sync import SyncClient
from protocol.fileslice import FileSlice
from protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.records import NewRecord, Record, build_batch, iter_batches
from tests.integration.netclient import RawClient

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 configs: dict[str, str] | None = None) -> uuid.UUID:
    with SyncClient(bootstrap, timeout_ms=10_000) as admin:
        admin.create_topic(name, partitions, 1, configs or {})
        (meta,) = admin.describe_topics([name])
        return meta.topic_id


def batch(values: list[bytes | None], *, key: bytes | None = b"k", producer_id: int = -1,
          producer_epoch: int = -1, base_sequence: int = -1, timestamp_ms: int | None = None) -> bytes:
    return build_batch([NewRecord(key, v, (), timestamp_ms) for v in values],
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence)


@dataclass(frozen=True, slots=True)
class ProduceResult:
    error_code: int
    base_offset: int
    log_start_offset: int
    log_append_time_ms: int
    error_message: str | None
    record_errors: list[tuple[int, str | None]]


def produce_request(topic: str, records: bytes, *, partition: int = 0, acks: int = 1,
                    timeout_ms: int = 10_000) -> ProduceRequest:
    """A Produce request of ``records`` (a batch's bytes) to one partition."""
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(topic, [
            ProduceRequest.PartitionProduceData(partition, records)])])


def set_producer_byte_rate(bootstrap: str, client_id: str, rate: float) -> None:
    """A producer_byte_rate quota for ``client_id`` (AlterClientQuotas v1); the broker must
    accept it."""
    with RawClient(bootstrap) as admin:
        _, body = admin.request(49, 1, AlterClientQuotasRequest(validate_only=False, entries=[
            AlterClientQuotasRequest.EntryData(
                entity=[AlterClientQuotasRequest.EntityData("client-id", client_id)],
                ops=[AlterClientQuotasRequest.OpData("producer_byte_rate", rate, False)])]))
    assert isinstance(body, AlterClientQuotasResponse) and body.entries[0].error_code == 0


def produce(client: SyncClient, topic: str, partition: int, records: bytes | None, *,
            acks: int = -1, timeout_ms: int = 5000, version: int | None = None) -> ProduceResult:
    v = client.version_for(ProduceRequest) if version is None else version
    req = ProduceRequest(
        transactional_id=None, acks=acks, timeout_ms=timeout_ms,
        topic_data=[ProduceRequest.TopicProduceData(
            topic, [ProduceRequest.PartitionProduceData(partition, records)])],
    )
    resp: ProduceResponse = client.send(req, v)
    (t,) = resp.responses
    (p,) = t.partition_responses
    return ProduceResult(p.error_code, p.base_offset, p.log_start_offset, p.log_append_time_ms,
                         p.error_message,
                         [(e.batch_index, e.batch_index_error_message) for e in p.record_errors])


def fetch_request(topic: str, partition: int, offset: int, *,
                  max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 50 * 1024 * 1024,
                  partition_max_bytes: int = 1024 * 1024, session_id: int = 0,
                  session_epoch: int = -1, isolation_level: int = 0) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation_level, session_id=session_id, session_epoch=session_epoch,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes)])],
    )


def fetch(client: SyncClient, topic: str, partition: int, offset: int, *,
          max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 50 * 1024 * 1024,
          partition_max_bytes: int = 1024 * 1024, session_id: int = 0, session_epoch: int = -1,
          version: int = 12, isolation_level: int = 0) -> FetchResponse:
    req = fetch_request(topic, partition, offset, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                        max_bytes=max_bytes, partition_max_bytes=partition_max_bytes,
                        session_id=session_id, session_epoch=session_epoch,
                        isolation_level=isolation_level)
    resp: FetchResponse = client.send(req, version)
    return resp


def broker_read_what_was_sent(bootstrap: str, idle_topic: str, witness_wait_ms: int = 300) -> None:
    """Return once the broker has read and dispatched every request already written to its
    sockets (e.g. a long poll that should be parked before the test appends).

    An ordering, not a guess at timing: a witness long poll at the log end of ``idle_topic``
    (partition 0; nothing may be produced to it meanwhile), sent now on a new connection,
    comes back only after the broker's event loop has turned for ``witness_wait_ms``, and
    every turn serves every socket with data to read; requests are dispatched in the order
    they were read."""
    with SyncClient(bootstrap, timeout_ms=60_000) as client:
        error, _, end, _ = list_offset(client, idle_topic, 0, LATEST)
        assert error == 0
        witness = fetch(client, idle_topic, 0, end, max_wait_ms=witness_wait_ms).responses[0]
    assert witness.partitions[0].error_code == 0 and not raw(witness.partitions[0].records)


RecordsField = bytes | bytearray | memoryview | FileSlice | None


def raw(data: RecordsField) -> bytes:
    """The bytes of a decoded records field (None -> b"")."""
    if data is None:
        return b""
    if isinstance(data, FileSlice):
        return data.read_bytes()
    return bytes(data)


def records_of(data: RecordsField) -> list[Record]:
    return [r for b in iter_batches(raw(data)) for r in b.records()]


def list_offset(client: SyncClient, topic: str, partition: int, timestamp: int,
                version: int | None = None) -> tuple[int, int, int, int]:
    """(error, timestamp, offset, leader_epoch)."""
    v = client.version_for(ListOffsetsRequest) if version is None else version
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(topic, [
            ListOffsetsRequest.ListOffsetsPartition(partition, -1, timestamp)])])
    resp = client.send(req, v)
    p = resp.topics[0].partitions[0]
    return p.error_code, p.timestamp, p.offset, p.leader_epoch


def init_producer_id(client: SyncClient) -> tuple[int, int, int]:
    resp = client.send(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
                       client.version_for(InitProducerIdRequest))
    return resp.error_code, resp.producer_id, resp.producer_epoch

"""Every advertised version of the data-path APIs answers correctly (ApiVersions is built from
what the handlers register, so each version in the range is exercised here).

For each version: Produce appends and answers the base offset; Fetch returns the records;
ListOffsets finds the latest offset (leader epoch only from v4); OffsetForLeaderEpoch,
DeleteRecords and InitProducerId answer without error. Versions outside the ranges are
not advertised.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.messages.delete_records import DeleteRecordsRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from protocol.messages.produce import ProduceRequest
from tests.integration.data_path_client import (
    LATEST,
    batch,
    create_topic,
    list_offset,
    produce,
    records_of,
)

pytestmark = pytest.mark.timeout(60)

RANGES: dict[Any, tuple[int, int]] = {
    ProduceRequest: (3, 11),
    FetchRequest: (4, 17),
    ListOffsetsRequest: (1, 9),
    DeleteRecordsRequest: (0, 2),
    InitProducerIdRequest: (0, 5),
    OffsetForLeaderEpochRequest: (0, 4),
}


@pytest.fixture(scope="module")
def topic(module_broker: Any) -> tuple[str, uuid.UUID]:
    return "versions", create_topic(module_broker.bootstrap, "versions")


def test_advertised_ranges(module_broker: Any) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        for cls, (low, high) in RANGES.items():
            assert c.api_versions()[cls.API_KEY] == (low, high), cls.__name__


def test_produce_and_fetch_every_version(module_broker: Any, topic: tuple[str, uuid.UUID]) -> None:
    name, topic_id = topic
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        offsets: list[int] = []
        for v in range(3, 12):
            r = produce(c, name, 0, batch([b"v%d" % v]), version=v)
            assert r.error_code == ErrorCode.NO_ERROR, v
            offsets.append(r.base_offset)
        assert offsets == list(range(9))
        for v in range(4, 18):
            ft = FetchRequest.FetchTopic(topic=name, topic_id=topic_id, partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                            partition_max_bytes=1 << 20)])
            resp = c.send(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1,
                                       topics=[ft]), v)
            (t,) = resp.responses
            assert (t.topic == name) if v < 13 else (t.topic_id == topic_id), v
            (p,) = t.partitions
            assert p.error_code == 0, v
            assert [r.value for r in records_of(p.records)] == [b"v%d" % i for i in range(3, 12)]
        # v13+: an unknown topic id is UNKNOWN_TOPIC_ID
        ft = FetchRequest.FetchTopic(topic_id=uuid.uuid4(), partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=100)])
        resp = c.send(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, topics=[ft]), 13)
        assert resp.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_other_apis_every_version(module_broker: Any, topic: tuple[str, uuid.UUID]) -> None:
    name, _ = topic
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        end = list_offset(c, name, 0, LATEST)[2]
        for v in range(1, 10):
            err, _ts, offset, epoch = list_offset(c, name, 0, LATEST, version=v)
            assert (err, offset, epoch) == (0, end, 0 if v >= 4 else -1), v
        for v in range(0, 5):
            req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic(name, [
                    OffsetForLeaderEpochRequest.OffsetForLeaderPartition(0, -1, 0)])])
            p = c.send(req, v).topics[0].partitions[0]
            assert (p.error_code, p.end_offset) == (0, end), v
        for v in range(0, 6):
            resp = c.send(InitProducerIdRequest(transactional_id=None,
                                                transaction_timeout_ms=1000), v)
            assert resp.error_code == 0 and resp.producer_id >= 0, v
        for v in range(0, 3):
            dreq = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(
                name, [DeleteRecordsRequest.DeleteRecordsPartition(0, v)])], timeout_ms=1000)
            p = c.send(dreq, v).topics[0].partitions[0]
            assert (p.error_code, p.low_watermark) == (0, v), v

"""Metadata answers spliced from cached topic entries: byte for byte what the generated
codec writes for the same answer, at every version the broker serves."""

from __future__ import annotations

import uuid

import pytest

from broker.handlers.metadata_entries import CachedMetadataResponse, encode_topic_entry
from protocol.messages.metadata import MetadataResponse

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition
Broker = MetadataResponse.MetadataResponseBroker


def _topics(version: int) -> list[Topic]:
    ok = Topic(error_code=0, name="orders", topic_id=uuid.UUID(int=7), is_internal=False,
               partitions=[Partition(error_code=0, partition_index=i, leader_id=i % 2,
                                     leader_epoch=3 + i, replica_nodes=[0, 1],
                                     isr_nodes=[i % 2], offline_replicas=[1] if i else [])
                           for i in range(300)])  # an entry above 127 bytes (varint sizes)
    internal = Topic(error_code=0, name="__consumer_offsets", topic_id=uuid.UUID(int=9),
                     is_internal=True,
                     partitions=[Partition(error_code=5, partition_index=0, leader_id=-1,
                                           leader_epoch=0, replica_nodes=[2], isr_nodes=[])])
    unknown = Topic(error_code=3, name="nope", partitions=[])
    topics = [ok, internal, unknown]
    if version >= 12:
        topics.append(Topic(error_code=100, name=None, topic_id=uuid.UUID(int=5)))
    return topics


@pytest.mark.parametrize("version", range(1, 13))
@pytest.mark.parametrize("count", [0, 1, 3, 200])
def test_spliced_answer_is_the_codecs(version: int, count: int) -> None:
    topics = (_topics(version) * 70)[:count]
    fields = dict(throttle_time_ms=250 if version >= 3 else 0,
                  brokers=[Broker(node_id=0, host="127.0.0.1", port=9092, rack="r1"),
                           Broker(node_id=1, host="h" * 200, port=9093, rack=None)],
                  cluster_id="c-1" if version >= 2 else None, controller_id=1)
    cached = CachedMetadataResponse(
        **fields, topics=list(topics),  # type: ignore[arg-type]
        encoded_topics=[encode_topic_entry(t, version) for t in topics])
    plain = MetadataResponse(**fields, topics=list(topics))  # type: ignore[arg-type]
    expected = plain.encode(version)
    assert bytes(cached.encode_parts(version)[0]) == expected
    if version >= 12:  # every field is on the wire
        assert MetadataResponse.decode(expected, version) == plain


def test_lists_that_disagree_are_encoded_in_full() -> None:
    topics = _topics(12)
    cached = CachedMetadataResponse(topics=topics, encoded_topics=[])
    assert bytes(cached.encode_parts(12)[0]) == MetadataResponse(topics=topics).encode(12)

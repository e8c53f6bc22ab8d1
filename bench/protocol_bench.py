"""Micro-benchmark of the generated protocol codecs: ``python -m bench.protocol_bench``.

Prints the median (and 90th percentile) time in microseconds of:

- decoding a ProduceRequest v9 frame carrying one 1 MiB batch (request header + body with
  topic/partition structure; the batch is a view, never copied; no CRC check here);
- encoding a ProduceResponse, decoding a FetchRequest for 100 partitions (v12, v15);
- encoding a FetchResponse for 100 partitions whose records are FileSlices (v12 and v16),
  size prefix and header included (target < 1 ms);
- decode + encode of ApiVersions, Metadata (100 topics) and OffsetCommit request/response.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable

from protocol.fileslice import FileSlice
from protocol.frames import RequestHeader, decode_request_header, encode_request, encode_response
from protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    ProduceRequest,
    ProduceResponse,
)


def measure(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median, p90) of ``repeat`` timed calls, in microseconds, after a short warm-up."""
    for _ in range(min(50, repeat)):
        fn()
    samples: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9) - 1]


def bench_produce(repeat: int) -> tuple[float, float]:
    batch = os.urandom(1 << 20)
    req = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                "topic", [ProduceRequest.PartitionProduceData(0, batch)]
            )
        ],
    )
    frame = memoryview(encode_request(RequestHeader(0, 9, 1, "producer-1"), req))[4:]

    def run() -> object:
        header, offset = decode_request_header(frame)
        body, _ = ProduceRequest.decode_at(frame, header.api_version, offset)
        records = body.topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview) and len(records) == 1 << 20
        return body

    return measure(run, repeat)


def bench_fetch(repeat: int, version: int) -> tuple[float, float]:
    with tempfile.TemporaryFile() as f:
        f.write(b"\0" * (100 * 4096))
        f.flush()
        parts = [
            FetchResponse.PartitionData(
                partition_index=i,
                high_watermark=10_000,
                last_stable_offset=10_000,
                log_start_offset=0,
                records=FileSlice(f, i * 4096, 4096),
            )
            for i in range(100)
        ]
        resp = FetchResponse(
            session_id=0,
            responses=[
                FetchResponse.FetchableTopicResponse(
                    topic="topic",
                    topic_id=uuid.uuid4() if version >= 13 else uuid.UUID(int=0),
                    partitions=parts,
                )
            ],
        )
        return measure(lambda: encode_response(7, 1, version, resp), repeat)


def bench_fetch_request(repeat: int, version: int) -> tuple[float, float]:
    req = FetchRequest(
        replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
        topics=[FetchRequest.FetchTopic(
            topic="topic", topic_id=uuid.uuid4() if version >= 13 else uuid.UUID(int=0),
            partitions=[FetchRequest.FetchPartition(
                partition=i, current_leader_epoch=3, fetch_offset=1000 + i,
                partition_max_bytes=1 << 20) for i in range(100)])]).encode(version)
    return measure(lambda: FetchRequest.decode(req, version), repeat)


def bench_produce_response(repeat: int) -> tuple[float, float]:
    resp = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="topic", partition_responses=[ProduceResponse.PartitionProduceResponse(
            index=0, base_offset=12345)])])
    return measure(lambda: encode_response(1, 0, 9, resp), repeat)


def bench_api_versions(repeat: int) -> tuple[float, float]:
    req = ApiVersionsRequest(
        client_software_name="apache-kafka-java", client_software_version="3.9.1"
    ).encode(3)
    resp = ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(k, 0, 9) for k in range(60)]
    )

    def run() -> object:
        ApiVersionsRequest.decode(req, 3)
        return encode_response(1, 18, 3, resp)

    return measure(run, repeat)


def bench_metadata(repeat: int) -> tuple[float, float]:
    names = [f"topic-{i}" for i in range(100)]
    req = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    ).encode(12)
    brokers = [
        MetadataResponse.MetadataResponseBroker(i, "127.0.0.1", 9092 + i, None) for i in range(3)
    ]
    topics = [
        MetadataResponse.MetadataResponseTopic(
            name=n,
            topic_id=uuid.uuid4(),
            partitions=[
                MetadataResponse.MetadataResponsePartition(
                    partition_index=0,
                    leader_id=0,
                    leader_epoch=1,
                    replica_nodes=[0, 1, 2],
                    isr_nodes=[0, 1, 2],
                )
            ],
        )
        for n in names
    ]
    resp = MetadataResponse(brokers=brokers, cluster_id="c", controller_id=0, topics=topics)

    def run() -> object:
        MetadataRequest.decode(req, 12)
        return encode_response(1, 3, 12, resp)

    return measure(run, repeat)


def bench_offset_commit(repeat: int) -> tuple[float, float]:
    req = OffsetCommitRequest(
        group_id="group",
        generation_id_or_member_epoch=3,
        member_id="member-1",
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name="topic",
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=i, committed_offset=1000 + i
                    )
                    for i in range(3)
                ],
            )
        ],
    ).encode(8)
    resp = OffsetCommitResponse(
        topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(
                name="topic",
                partitions=[
                    OffsetCommitResponse.OffsetCommitResponsePartition(i, 0) for i in range(3)
                ],
            )
        ]
    )

    def run() -> object:
        OffsetCommitRequest.decode(req, 8)
        return encode_response(1, 8, 8, resp)

    return measure(run, repeat)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.protocol_bench")
    ap.add_argument("--repeat", type=int, default=2000)
    args = ap.parse_args(argv)
    rows = [
        ("ProduceRequest v9 decode, 1 MiB batch (header+body)", bench_produce(args.repeat)),
        ("ProduceResponse v9 encode (1 partition, framed)", bench_produce_response(args.repeat)),
        ("FetchRequest v12 decode, 100 partitions", bench_fetch_request(args.repeat, 12)),
        ("FetchRequest v15 decode, 100 partitions", bench_fetch_request(args.repeat, 15)),
        ("FetchResponse v12 encode, 100 FileSlice partitions", bench_fetch(args.repeat, 12)),
        ("FetchResponse v16 encode, 100 FileSlice partitions", bench_fetch(args.repeat, 16)),
        ("ApiVersions v3 request decode + response encode", bench_api_versions(args.repeat)),
        ("Metadata v12 100 topics: request decode + response encode", bench_metadata(args.repeat)),
        ("OffsetCommit v8 request decode + response encode", bench_offset_commit(args.repeat)),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'operation':<{width}}  median_us     p90_us")
    for name, (median_us, p90_us) in rows:
        print(f"{name:<{width}}  {median_us:9.1f}  {p90_us:9.1f}")


if __name__ == "__main__":
    main()

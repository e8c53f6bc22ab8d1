"""Helpers of the replication tests: the cluster's view of a partition (kafka-python's admin
client), reading one replica's records directly (Fetch with the debugging replica id -2,
which any replica answers up to its own HW), and comparing replicas' segment files byte for
byte and through Apache Kafka's DumpLogSegments."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from client.config import ClientConfig
from client.connection import BrokerConnection
from client.fetch import records_bytes
from devcluster.apache_kafka import kafka_tool
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchRequest
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.records import iter_batches
from tests.integration.broker_process import BrokerProcess

DEBUG_REPLICA_ID = -2
FETCH_VERSION = 11  # topics by name, replica id at the top level


async def _metadata(address: str, topic: str | None) -> MetadataResponse:
    """Metadata from the first broker of ``address`` that answers within 5 s (a paused
    broker is skipped, which kafka-python's admin client cannot promise)."""
    last: Exception | None = None
    for hostport in address.split(","):
        host, port = hostport.rsplit(":", 1)
        try:
            async with asyncio.timeout(5):
                connection = await BrokerConnection.open(
                    host, int(port), ClientConfig(client_id="state-reader",
                                                  request_timeout_ms=5000))
                try:
                    topics = None if topic is None else [
                        MetadataRequest.MetadataRequestTopic(name=topic)]
                    return await connection.send(
                        MetadataRequest(topics=topics, allow_auto_topic_creation=False),
                        version=9)
                finally:
                    await connection.close()
        except Exception as exc:  # not reachable now: try the next
            last = exc
    raise AssertionError(f"no broker of {address} answered Metadata: {last}")


def partition_state(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, list[int]]:
    """(leader, sorted ISR) as the brokers' metadata says."""
    response = asyncio.run(_metadata(bootstrap, topic))
    for t in response.topics:
        for p in t.partitions:
            if p.partition_index == partition:
                return int(p.leader_id), sorted(p.isr_nodes)
    raise AssertionError(f"{topic}-{partition} not in the metadata")


def controller_id(bootstrap: str) -> int:
    return int(asyncio.run(_metadata(bootstrap, None)).controller_id)


def alive_brokers(bootstrap: str) -> set[int]:
    return {int(b.node_id) for b in asyncio.run(_metadata(bootstrap, None)).brokers}


async def _read_replica(host: str, port: int, topic: str, partition: int
                        ) -> tuple[list[tuple[int, bytes | None]], int]:
    connection = await BrokerConnection.open(host, port, ClientConfig(client_id="replica-reader"))
    out: list[tuple[int, bytes | None]] = []
    hw = -1
    try:
        offset = 0
        for _ in range(100_000):  # bounded: each turn moves past at least one batch
            request = FetchRequest(
                replica_id=DEBUG_REPLICA_ID, max_wait_ms=0, min_bytes=0, max_bytes=4 << 20,
                isolation_level=0, session_id=0, session_epoch=-1,
                topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                    FetchRequest.FetchPartition(partition=partition, fetch_offset=offset,
                                                partition_max_bytes=4 << 20)])])
            response = await connection.send(request, version=FETCH_VERSION)
            data = response.responses[0].partitions[0]
            if data.error_code != ErrorCode.NO_ERROR:
                raise AssertionError(f"{host}:{port} {topic}-{partition} at {offset}: "
                                     f"{ErrorCode(data.error_code).name}")
            hw = data.high_watermark
            raw = records_bytes(data.records)
            if not raw:
                break
            for batch in iter_batches(raw):
                for record in batch.records():
                    if record.offset >= offset:
                        out.append((record.offset, record.value))
                offset = max(offset, batch.next_offset)
            if offset >= hw:
                break
    finally:
        await connection.close()
    return out, hw


def read_replica(broker: BrokerProcess, topic: str, partition: int = 0
                 ) -> tuple[list[tuple[int, bytes | None]], int]:
    """Every record of one replica below its HW: ([(offset, value)], HW)."""
    return asyncio.run(_read_replica(broker.host, broker.port, topic, partition))


def segment_files(broker: BrokerProcess, topic: str, partition: int = 0) -> dict[str, bytes]:
    directory = broker.log_dir / f"{topic}-{partition}"
    return {f.name: f.read_bytes() for f in sorted(directory.glob("*.log"))}


def dump_log_segments(path: Path, work_dir: Path) -> str:
    """Kafka's DumpLogSegments of one segment, without the line naming the file."""
    result = kafka_tool("kafka.tools.DumpLogSegments", "--deep-iteration", "--print-data-log",
                        "--files", str(path), work_dir=work_dir)
    return "\n".join(line for line in result.stdout.splitlines()
                     if not re.match(r"^(Dumping|Log starting offset)", line))

"""Batches made by stock clients' record builders decode with protocol.records, and back.

- kafka-python (``kafka.record.DefaultRecordBatchBuilder``) and aiokafka
  (``aiokafka.record.default_records.DefaultRecordBatchBuilder``) build batches in
  memory with every codec; we verify the CRC and decode them to what was appended.
- librdkafka (confluent-kafka) builds batches only inside its producer, so a tiny
  broker stand-in on 127.0.0.1:0 answers ApiVersions, Metadata and Produce (encoded with
  kafka-python's protocol classes, an independent implementation) and keeps the records
  bytes of each Produce request.
- The reverse: batches built by ``build_batch`` are read and CRC-checked by kafka-python's
  and aiokafka's readers (``MemoryRecords``), and by a librdkafka consumer (check.crcs)
  that the same stand-in serves with Fetch answers.
"""

from __future__ import annotations

import queue
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import (
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from protocol.compression import XERIAL_MAGIC
from protocol.records import (
    HEADER_SIZE_BYTES,
    CompressionType,
    NewRecord,
    Record,
    RecordBatch,
    build_batch,
    iter_batches,
    scan_batches,
)

pytestmark = pytest.mark.timeout(60)

CODECS = list(CompressionType)
TS0 = 1_700_000_000_000

# key, value, headers, timestamp: covers null key, null value, empty bytes, null header value
SENT: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = [
    (b"key-0", b"value-0" * 40, [("trace", b"abc"), ("empty", b"")], TS0),
    (None, b"no key", [], TS0 + 7),
    (b"tombstone", None, [("h", None)], TS0 + 3),
    (b"", b"", [], TS0 + 1000),
]


def expected(base_offset: int) -> list[Record]:
    return [Record(base_offset + i, ts, k, v, list(h)) for i, (k, v, h, ts) in enumerate(SENT)]


def check_batch(raw: bytes, codec: CompressionType, base_offset: int = 0) -> None:
    scan = scan_batches(raw)
    assert scan.stop_reason is None, scan.message
    (batch,) = scan.batches
    assert batch.verify_crc()
    assert batch.compression is codec
    assert batch.records_count == len(SENT)
    assert batch.last_offset_delta == len(SENT) - 1
    assert batch.max_timestamp == max(ts for *_, ts in SENT)
    assert list(batch.records()) == expected(base_offset)


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_kafka_python_builder_batches_decode(codec: CompressionType) -> None:
    builder = KpBuilder(
        magic=2, compression_type=int(codec), is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    for offset, (key, value, headers, ts) in enumerate(SENT):
        assert builder.append(offset, timestamp=ts, key=key, value=value, headers=headers) is not None
    check_batch(bytes(builder.build()), codec)


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_aiokafka_builder_batches_decode(codec: CompressionType) -> None:
    builder = AioBuilder(2, int(codec), 0, 1234, 5, 100, 1 << 20)
    for offset, (key, value, headers, ts) in enumerate(SENT):
        assert builder.append(offset, ts, key, value, headers) is not None
    raw = bytes(builder.build())
    check_batch(raw, codec)
    batch = RecordBatch(raw)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1234, 5, 100)


def our_batches(codec: CompressionType) -> bytes:
    recs = [NewRecord(k, v, h, ts) for k, v, h, ts in SENT]
    return build_batch(recs, base_offset=10, compression=codec) + build_batch(
        recs, base_offset=14, compression=codec, producer_id=9, producer_epoch=1, base_sequence=4
    )


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@pytest.mark.parametrize("reader", [KpMemoryRecords, AioMemoryRecords], ids=["kafka_python", "aiokafka"])
def test_client_reads_our_batches(reader: Any, codec: CompressionType) -> None:
    """kafka-python's and aiokafka's ``MemoryRecords`` read our batches back."""
    records = reader(our_batches(codec))
    got: list[Record] = []
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        assert batch.compression_type == int(codec)
        got += [Record(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == expected(10) + expected(14)


# ------------------------------------------------------------ librdkafka capture

MAX_FRAME_BYTES = 16 << 20
# Produce, Fetch, Metadata, FindCoordinator, ApiVersions. librdkafka derives features from
# what is advertised: magic 2 needs Produce >= 3 and Fetch >= 4, zstd Produce >= 7 and
# Fetch >= 10, lz4 FindCoordinator.
ADVERTISED = {0: (3, 9), 1: (4, 12), 3: (0, 12), 10: (0, 4), 18: (0, 3)}
EMPTY_FETCH_WAIT_S = 0.05  # an empty Fetch answer waits a little, as a broker's max.wait does


class CaptureBroker:
    """A single-partition broker stand-in that records the Produce requests' records bytes."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.captured: queue.Queue[bytes] = queue.Queue(maxsize=100)
        self.produce_versions: list[int] = []
        self.fetch_data: dict[str, bytes] = {}  # topic -> its whole log, served to any Fetch
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        self._thread.join(5)

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        with conn:
            try:
                while not self._stop.is_set():
                    head = self._read(conn, 4)
                    if head is None:
                        return
                    (size,) = struct.unpack(">i", head)
                    assert 0 < size <= MAX_FRAME_BYTES, size
                    frame = self._read(conn, size)
                    assert frame is not None
                    reply = self._answer(frame)
                    if reply is not None:
                        conn.sendall(reply)
            except ConnectionError:
                return  # the client went away mid-answer (e.g. closed during a fetch wait)
            except Exception as exc:  # a stand-in: record anything, the test asserts none
                if not self._stop.is_set():
                    self.errors.append(exc)

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _answer(self, frame: bytes) -> bytes | None:
        api_key, version = struct.unpack_from(">hh", frame, 0)
        resp: Any
        if api_key == 18:
            (correlation_id,) = struct.unpack_from(">i", frame, 4)
            keys = [
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in ADVERTISED.items()
            ]
            if version > ADVERTISED[18][1]:  # Kafka answers v0 with UNSUPPORTED_VERSION
                resp, version = ApiVersionsResponse(error_code=35, api_keys=keys), 0
            else:
                resp = ApiVersionsResponse(error_code=0, api_keys=keys, throttle_time_ms=0)
            resp.API_VERSION = version
            resp.with_header(correlation_id=correlation_id)
            return bytes(resp.encode(header=True, framed=True))
        if api_key == 3:
            req = MetadataRequest.decode(frame, version=version, header=True)
            names = [t.name for t in req.topics] if req.topics else []
            P = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition
            resp = MetadataResponse(
                throttle_time_ms=0,
                brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port)],
                cluster_id="capture",
                controller_id=1,
                topics=[
                    MetadataResponse.MetadataResponseTopic(
                        error_code=0, name=n, is_internal=False,
                        partitions=[P(error_code=0, partition_index=0, leader_id=1, leader_epoch=0,
                                      replica_nodes=[1], isr_nodes=[1], offline_replicas=[])],
                    )
                    for n in names
                ],
            )
        elif api_key == 0:
            req = ProduceRequest.decode(frame, version=version, header=True)
            self.produce_versions.append(version)
            T = ProduceResponse.TopicProduceResponse
            out = []
            for topic in req.topic_data:
                for part in topic.partition_data:
                    self.captured.put_nowait(bytes(part.records))
                out.append(T(name=topic.name, partition_responses=[
                    T.PartitionProduceResponse(index=p.index, error_code=0, base_offset=0)
                    for p in topic.partition_data
                ]))
            if req.acks == 0:
                return None
            resp = ProduceResponse(responses=out, throttle_time_ms=0)
        elif api_key == 1:
            req = FetchRequest.decode(frame, version=version, header=True)
            resp = _fetch_response(self, req)
        elif api_key == 10:
            req = FindCoordinatorRequest.decode(frame, version=version, header=True)
            if version >= 4:
                resp = FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
                    FindCoordinatorResponse.Coordinator(
                        key=k, node_id=1, host="127.0.0.1", port=self.port, error_code=0
                    )
                    for k in req.coordinator_keys
                ])
            else:
                resp = FindCoordinatorResponse(
                    throttle_time_ms=0, error_code=0, node_id=1, host="127.0.0.1", port=self.port
                )
        else:
            raise ValueError(f"unexpected api key {api_key}")
        resp.API_VERSION = version  # set before the header: kafka-python wants that order
        resp.with_header(correlation_id=req.header.correlation_id)
        return bytes(resp.encode(header=True, framed=True))


def _fetch_response(broker: CaptureBroker, req: Any) -> Any:
    P = FetchResponse.FetchableTopicResponse.PartitionData
    topics = []
    served = False
    for t in req.topics:
        parts = []
        for p in t.partitions:
            data = broker.fetch_data.get(t.topic, b"")
            end = max((b.next_offset for b in iter_batches(data)), default=0)
            records = data if p.fetch_offset < end else b""
            served = served or bool(records)
            parts.append(P(partition_index=p.partition, error_code=0, high_watermark=end,
                           last_stable_offset=end, log_start_offset=0, records=records))
        topics.append(FetchResponse.FetchableTopicResponse(topic=t.topic, partitions=parts))
    if not served:
        broker._stop.wait(EMPTY_FETCH_WAIT_S)
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)


@pytest.fixture(scope="module")
def capture_broker() -> Iterator[CaptureBroker]:
    broker = CaptureBroker()
    yield broker
    broker.close()


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_librdkafka_produced_batches_decode(capture_broker: CaptureBroker, codec: CompressionType) -> None:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{capture_broker.port}",
        "compression.codec": codec.name.lower(),
        "enable.idempotence": False,
        "acks": 1,
        "linger.ms": 200,  # all four records in one batch
        "message.timeout.ms": 10_000,
        "broker.address.family": "v4",
    })
    topic = f"capture-{codec.name.lower()}"
    for key, value, headers, ts in SENT:
        hdrs: list[tuple[str, str | bytes | None]] = list(headers)
        producer.produce(topic, key=key, value=value, headers=hdrs, timestamp=ts, partition=0)
    assert producer.flush(15) == 0
    raw = capture_broker.captured.get(timeout=5)
    assert not capture_broker.errors, capture_broker.errors
    check_batch(raw, codec)
    batch = RecordBatch(raw)
    assert batch.producer_id == -1 and not batch.is_transactional
    if codec is CompressionType.SNAPPY:  # librdkafka writes raw snappy, not xerial framing
        assert not bytes(batch.buffer[HEADER_SIZE_BYTES:]).startswith(XERIAL_MAGIC)


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_librdkafka_consumer_reads_our_batches(capture_broker: CaptureBroker, codec: CompressionType) -> None:
    topic = f"serve-{codec.name.lower()}"
    capture_broker.fetch_data[topic] = our_batches(codec)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": f"127.0.0.1:{capture_broker.port}",
        "group.id": "records-test",
        "enable.auto.commit": False,
        "check.crcs": True,  # librdkafka verifies each batch's CRC32C
        "broker.address.family": "v4",
    })
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 10)])
        got: list[Record] = []
        for _ in range(100):  # bounded: 100 polls of at most 0.1 s
            msg = consumer.poll(0.1)
            if msg is None:
                if len(got) == 2 * len(SENT):
                    break
                continue
            assert msg.error() is None, msg.error()
            ts_type, ts = msg.timestamp()
            assert ts_type == confluent_kafka.TIMESTAMP_CREATE_TIME
            offset = msg.offset()
            assert offset is not None
            headers = msg.headers() or []
            assert isinstance(headers, list)
            got.append(Record(offset, ts, msg.key(), msg.value(), [(k, v) for k, v in headers if not isinstance(v, str)]))
    finally:
        consumer.close()
    assert not capture_broker.errors, capture_broker.errors
    assert got == expected(10) + expected(14)

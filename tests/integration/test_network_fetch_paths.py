"""Fetch responses through the real broker: record data sent with sendfile and with the
copying path (MINIKAFKA_FETCH_COPY=1) are byte-identical on the wire; a small response (a
consumer at the tail) is copied into one write on the sendfile path too, a big one is not;
a long-poll fetch in flight at SIGTERM is answered at once, and the broker exits 0."""

from __future__ import annotations

import select
import signal
import struct
from pathlib import Path

import pytest

from protocol.frames import decode_response
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.records import NewRecord, build_batch, iter_batches
from tests.integration.broker_process import BrokerProcess, register_topic
from tests.integration.data_path_client import broker_read_what_was_sent
from tests.integration.netclient import RawClient

pytestmark = pytest.mark.timeout(90)

TOPIC = "paths"


def broker_with_topic(tmp_path: Path, env: dict[str, str] | None = None) -> BrokerProcess:
    proc = BrokerProcess(tmp_path, env=env)
    register_topic(proc.log_dir, TOPIC)  # registered before start-up
    return proc


def fetch_request(offset: int, *, max_wait_ms: int = 0, max_bytes: int = 50 << 20) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)])])


def produce(client: RawClient, records: bytes) -> int:
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(TOPIC, [ProduceRequest.PartitionProduceData(0, records)])])
    _cid, response = client.request(0, 9, request)
    assert isinstance(response, ProduceResponse)
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == 0, partition
    return int(partition.base_offset)


def raw_fetch(client: RawClient, offset: int) -> bytes:
    _cid, data = client.frame(1, 12, fetch_request(offset), correlation_id=77)
    client.send(data)
    return client.recv_frame()


def test_sendfile_and_copy_fetch_responses_are_byte_identical(tmp_path: Path) -> None:
    proc = broker_with_topic(tmp_path, env={"MINIKAFKA_LOG_LEVEL": "DEBUG"})
    payloads = [bytes([i % 251]) * (1000 + 37 * i) for i in range(300)]  # ~1.9 MB in 30 batches
    with proc:
        with RawClient(proc.bootstrap) as client:
            for start in range(0, len(payloads), 10):
                produce(client, build_batch([NewRecord(b"k%d" % i, payloads[i], (), 1_700_000_000_000)
                                             for i in range(start, start + 10)]))
            zero_copy = [raw_fetch(client, offset) for offset in (0, 5, 150, 299)]
        proc.stop()
        first_run = proc.stderr_text()
        proc.env["MINIKAFKA_FETCH_COPY"] = "1"
        proc.start()
        with RawClient(proc.bootstrap) as client:
            copied = [raw_fetch(client, offset) for offset in (0, 5, 150, 299)]
    second_run = proc.stderr_text()[len(first_run):]
    # The record data left through os.sendfile the first time, through copies the second.
    assert first_run.count("sendfile: ") == 4 and "copy: " not in first_run
    assert "sent by copying (MINIKAFKA_FETCH_COPY=1)" in second_run
    assert second_run.count("copy: ") == 4 and "sendfile: " not in second_run
    assert zero_copy == copied
    # And the data is what was produced, from the batch holding the offset to the end.
    _cid, body = decode_response(zero_copy[0], 1, 12)
    assert isinstance(body, FetchResponse)
    records = body.responses[0].partitions[0].records
    assert isinstance(records, bytes | bytearray | memoryview)
    values = [r.value for b in iter_batches(bytes(records)) for r in b.records()]
    assert values == payloads
    assert len(zero_copy[0]) > 1_900_000


def test_small_fetch_response_is_copied_in_one_write_and_a_big_one_sent_with_sendfile(
        tmp_path: Path) -> None:
    proc = broker_with_topic(tmp_path, env={"MINIKAFKA_LOG_LEVEL": "DEBUG"})
    big = [bytes([i]) * 2000 for i in range(20)]  # 40 kB: over SMALL_COPY_BYTES
    small = [b"tail-%d" % i for i in range(3)]
    with proc, RawClient(proc.bootstrap) as client:
        produce(client, build_batch([NewRecord(None, v, (), 1_700_000_000_000) for v in big]))
        last = produce(client, build_batch([NewRecord(None, v, (), 1_700_000_000_000)
                                            for v in small]))
        at_tail = raw_fetch(client, last)
        whole = raw_fetch(client, 0)
    log = proc.stderr_text()
    copied = [int(line.split("copy: ")[1].split()[0]) for line in log.splitlines()
              if "copy: " in line]
    sent = [int(line.split("sendfile: ")[1].split()[0]) for line in log.splitlines()
            if "sendfile: " in line]
    assert len(copied) == 1 and copied[0] < 200 and len(sent) == 1 and sent[0] > 40_000
    for frame, values in ((at_tail, small), (whole, big + small)):
        _cid, body = decode_response(frame, 1, 12)
        assert isinstance(body, FetchResponse)
        records = body.responses[0].partitions[0].records
        assert isinstance(records, bytes | bytearray | memoryview)
        assert [r.value for b in iter_batches(bytes(records)) for r in b.records()] == values


def test_long_poll_fetch_in_flight_is_answered_at_sigterm(tmp_path: Path) -> None:
    """A parked fetch is answered by the shutdown, not by its max_wait_ms (which outlasts the
    client's 30 s timeout), and the broker exits 0."""
    proc = broker_with_topic(tmp_path)
    with proc, RawClient(proc.bootstrap, timeout_s=30) as client:
        cid, data = client.frame(1, 12, fetch_request(0, max_wait_ms=120_000))
        client.send(data)
        broker_read_what_was_sent(proc.bootstrap, TOPIC)  # the fetch is parked now
        assert select.select([client.sock], [], [], 0)[0] == []  # nothing came back yet
        proc.signal(signal.SIGTERM)
        frame = client.recv_frame()
        assert struct.unpack_from(">i", frame)[0] == cid
        _cid, body = decode_response(frame, 1, 12)
        assert isinstance(body, FetchResponse)
        assert body.error_code == 0 and body.responses[0].partitions[0].error_code == 0
        assert client.is_closed_by_peer(timeout_s=10)
        assert proc.wait() == 0
    log = proc.stderr_text()
    assert log.index("Received SIGTERM") < log.index("Shutdown step 2/4") < log.index("Shutdown step 4/4")

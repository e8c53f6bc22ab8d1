"""Large request frames read in pieces (broker/network/connection.py, ``_take_frame``).

A frame of at least ``GATHER_MIN_BYTES`` that arrives over several reads is gathered as
those reads and joined once; what the last read holds beyond it is the next frame's
start. Against a real broker on a raw socket: produces of 300 KB batches sent in small
pieces with pauses (many reads each), two such frames and a small one pipelined in one
write, and a peer that closes in the middle of a gathered frame. Every answer comes back
in order, the records read back are the bytes produced, and the broker keeps serving.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from broker.network.connection import GATHER_MIN_BYTES
from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.frames import decode_response
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.records import NewRecord, build_batch
from tests.integration.broker_process import BrokerProcess
from tests.integration.data_path_client import create_topic, fetch, records_of
from tests.integration.netclient import RawClient
from tests.integration.test_network_bad_input import api_versions_ok, wait_for_log

pytestmark = pytest.mark.timeout(60)

PRODUCE_VERSION = 9
RECORDS = 3000  # 100-byte values: a ~320 KB batch, over GATHER_MIN_BYTES


def _values(tag: int) -> list[bytes]:
    return [tag.to_bytes(2, "big") + os.urandom(98) for _ in range(RECORDS)]


def _produce_frame(client: RawClient, topic: str, values: list[bytes]) -> tuple[int, bytes]:
    batch = build_batch([NewRecord(None, v, (), None) for v in values])
    assert len(batch) > GATHER_MIN_BYTES
    body = ProduceRequest(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(topic, [ProduceRequest.PartitionProduceData(0, batch)])])
    return client.frame(0, PRODUCE_VERSION, body)


def _base_offset(client: RawClient, cid: int) -> int:
    got_cid, response = decode_response(client.recv_frame(), 0, PRODUCE_VERSION)
    assert got_cid == cid and isinstance(response, ProduceResponse)
    (part,) = response.responses[0].partition_responses
    assert part.error_code == ErrorCode.NO_ERROR, part
    return int(part.base_offset)


def _stored(broker: BrokerProcess, topic: str, offset: int, count: int) -> list[bytes | None]:
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
        got: list[bytes | None] = []
        while len(got) < count:
            f = fetch(c, topic, 0, offset + len(got))
            recs = [r for r in records_of(f.responses[0].partitions[0].records)
                    if r.offset >= offset + len(got)]
            assert recs, f"nothing fetched at {offset + len(got)}"
            got += [r.value for r in recs]
        return got[:count]


def test_large_frames_in_small_pieces_and_pipelined(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "large-frames")
    first, second, third = _values(1), _values(2), _values(3)
    with RawClient(module_broker.bootstrap) as client:
        # One frame in 1,000-byte pieces with pauses: the broker reads it in many reads.
        cid, data = _produce_frame(client, "large-frames", first)
        for i in range(0, len(data), 1000):
            client.send(data[i:i + 1000])
            if i % 50_000 == 0:
                time.sleep(0.01)
        offsets = [_base_offset(client, cid)]
        # Two large frames and a small one in one write, then cut mid-frame by a pause.
        (cid2, data2), (cid3, data3) = (_produce_frame(client, "large-frames", v)
                                        for v in (second, third))
        cid4, data4 = client.frame(18, 3, ApiVersionsRequest(client_software_name="t",
                                                              client_software_version="1"))
        stream = data2 + data3 + data4
        cut = len(data2) + len(data3) // 2
        client.send(stream[:cut])
        time.sleep(0.05)
        client.send(stream[cut:])
        offsets += [_base_offset(client, cid2), _base_offset(client, cid3)]
        got_cid, versions = decode_response(client.recv_frame(), 18, 3)
        assert got_cid == cid4 and isinstance(versions, ApiVersionsResponse)
        assert versions.error_code == ErrorCode.NO_ERROR
    assert offsets == [offsets[0], offsets[0] + RECORDS, offsets[0] + 2 * RECORDS]
    assert _stored(module_broker, "large-frames", offsets[0], 3 * RECORDS) == first + second + third


def test_peer_closing_inside_a_gathered_frame(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "large-cut")
    mark = len(module_broker.stderr_text())
    with RawClient(module_broker.bootstrap) as client:
        _cid, data = _produce_frame(client, "large-cut", _values(4))
        client.send(data[:100_000])
        time.sleep(0.05)
        client.send(data[100_000:200_000])
    size = len(data) - 4
    text = f"closed after 199996 of a {size}-byte request frame"
    assert text in wait_for_log(module_broker, text, mark)
    with RawClient(module_broker.bootstrap) as fresh:
        assert api_versions_ok(fresh)
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        f = fetch(c, "large-cut", 0, 0)
        assert records_of(f.responses[0].partitions[0].records) == []  # nothing appended


def _minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_pipelined_frames_are_read_no_further_ahead_than_the_bound(
        module_broker: BrokerProcess) -> None:
    """A client that pipelines 8 MB of produces in one write: the broker serves one frame a
    turn and stops reading while frames wait for their turn beyond the connection's bound
    (2 x 64 KiB), so its buffer never grows to where the allocator maps fresh pages for it:
    its minor page faults stay under 32 per MB (the buffer grown without a bound: ~1,000
    per MB). The answers come back in order."""
    create_topic(module_broker.bootstrap, "pipelined-large")
    frames: list[tuple[int, bytes]] = []
    with RawClient(module_broker.bootstrap, timeout_s=30) as client:
        values = [os.urandom(100) for _ in range(1000)]  # ~110 KB frames
        for _ in range(2):  # warm-up
            cid, data = _produce_frame(client, "pipelined-large", values)
            client.send(data)
            _base_offset(client, cid)
        frames = [_produce_frame(client, "pipelined-large", values) for _ in range(80)]
        stream = b"".join(data for _cid, data in frames)
        before = _minor_faults(module_broker.pid)
        sender = threading.Thread(target=client.send, args=(stream,))
        sender.start()
        offsets = [_base_offset(client, cid) for cid, _data in frames]
        sender.join(30)
        faults = _minor_faults(module_broker.pid) - before
    assert offsets == [offsets[0] + 1000 * i for i in range(80)]
    mb = len(stream) / 1e6
    assert faults / mb < 32, f"{faults} minor page faults for {mb:.1f} MB pipelined"

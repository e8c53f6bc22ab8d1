"""Fetch, ListOffsets, DeleteRecords and OffsetForLeaderEpoch against a real broker.

Long polls: a fetch at the log end parks and is woken by another connection's append (its
max_wait_ms outlasts the test, so no timer answered it); one with nothing to wait for
returns empty, not before max_wait_ms.
"""

from __future__ import annotations

import select
import time
from typing import Any

import pytest

from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.frames import decode_response
from protocol.messages.delete_records import DeleteRecordsRequest
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from protocol.records import iter_batches
from tests.integration.data_path_client import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    batch,
    broker_read_what_was_sent,
    create_topic,
    fetch,
    fetch_request,
    list_offset,
    produce,
    raw,
    records_of,
)
from tests.integration.netclient import RawClient

pytestmark = pytest.mark.timeout(60)
LONGER_THAN_TEST_MS = 120_000  # a max_wait_ms no test here lives to see expire


def fill(c: SyncClient, topic: str, batches: int, per_batch: int = 10, size: int = 100,
         ts0: int = 1_000_000) -> None:
    for b in range(batches):
        values: list[bytes | None] = [b"%06d" % (b * per_batch + i) + b"x" * size
                                      for i in range(per_batch)]
        r = produce(c, topic, 0, batch(values, timestamp_ms=ts0 + b * 1000))
        assert r.error_code == ErrorCode.NO_ERROR


@pytest.fixture(scope="module")
def filled(module_broker: Any) -> str:
    create_topic(module_broker.bootstrap, "fetch-data")
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        fill(c, "fetch-data", 20)
    return "fetch-data"


def test_fetch_from_middle_of_batch_and_hw(module_broker: Any, filled: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        resp = fetch(c, filled, 0, 15)
        p = resp.responses[0].partitions[0]
        assert (resp.error_code, resp.session_id, p.error_code) == (0, 0, 0)
        assert (p.high_watermark, p.last_stable_offset, p.log_start_offset) == (200, 200, 0)
        assert p.preferred_read_replica == -1
        got = records_of(p.records)
        assert got[0].offset == 10  # the whole batch holding offset 15 comes back
        assert [r.offset for r in got] == list(range(10, 200))


def test_partition_max_bytes_returns_one_whole_batch(module_broker: Any, filled: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        p = fetch(c, filled, 0, 0, partition_max_bytes=10).responses[0].partitions[0]
        batches = list(iter_batches(raw(p.records)))
        assert len(batches) == 1 and batches[0].base_offset == 0
        p = fetch(c, filled, 0, 0, partition_max_bytes=3000).responses[0].partitions[0]
        assert 1 < len(list(iter_batches(raw(p.records)))) < 20
        assert len(raw(p.records)) <= 3000
        p = fetch(c, filled, 0, 0, max_bytes=10).responses[0].partitions[0]
        assert len(list(iter_batches(raw(p.records)))) == 1


def test_read_committed_has_empty_aborted_list(module_broker: Any, filled: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        p = fetch(c, filled, 0, 190, isolation_level=1).responses[0].partitions[0]
        assert p.aborted_transactions == []
        assert records_of(p.records)[-1].offset == 199
        p = fetch(c, filled, 0, 190).responses[0].partitions[0]
        assert p.aborted_transactions is None


def test_offset_out_of_range_and_unknown(module_broker: Any, filled: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        p = fetch(c, filled, 0, 500).responses[0].partitions[0]
        assert (p.error_code, p.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, 0)
        # An error read is answered at once: max_wait_ms outlasts the client's 10 s timeout.
        p = fetch(c, "nope", 0, 0, max_wait_ms=LONGER_THAN_TEST_MS).responses[0].partitions[0]
        assert p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        p = fetch(c, filled, 0, 200).responses[0].partitions[0]  # at the end: empty, no error
        assert p.error_code == 0 and records_of(p.records) == []


def _session_fetch(c: SyncClient, session_id: int, epoch: int,
                   parts: list[tuple[str, int, int]],
                   forgotten: tuple[tuple[str, int], ...] = ()) -> FetchResponse:
    by_topic: dict[str, list[FetchRequest.FetchPartition]] = {}
    for topic, index, offset in parts:
        by_topic.setdefault(topic, []).append(FetchRequest.FetchPartition(
            partition=index, fetch_offset=offset, partition_max_bytes=1 << 20))
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24,
                       session_id=session_id, session_epoch=epoch,
                       topics=[FetchRequest.FetchTopic(topic=t, partitions=p)
                               for t, p in by_topic.items()],
                       forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=t, partitions=[i])
                                              for t, i in forgotten])
    resp: FetchResponse = c.send(req, 12)
    return resp


def _answered(resp: FetchResponse) -> dict[tuple[str, int], Any]:
    return {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}


def test_incremental_fetch_session(module_broker: Any) -> None:
    create_topic(module_broker.bootstrap, "sess", partitions=3)
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        for index in range(3):
            produce(c, "sess", index, batch([b"first-%d" % index]))
        full = _session_fetch(c, 0, 0, [("sess", i, 0) for i in range(3)])
        assert full.error_code == 0 and full.session_id != 0
        assert sorted(_answered(full)) == [("sess", 0), ("sess", 1), ("sess", 2)]
        sid = full.session_id
        # nothing new, client moved its positions to 1 for all three
        inc = _session_fetch(c, sid, 1, [("sess", i, 1) for i in range(3)])
        assert (inc.error_code, inc.session_id) == (0, sid)
        assert _answered(inc) == {}
        # new data on partition 1 only: only it is answered, from the cached position
        produce(c, "sess", 1, batch([b"second"]))
        inc = _session_fetch(c, sid, 2, [])
        got = _answered(inc)
        assert list(got) == [("sess", 1)]
        assert [r.value for r in records_of(got[("sess", 1)].records)] == [b"second"]
        assert got[("sess", 1)].high_watermark == 2
        # forget partition 1; produce to it: it is no longer answered
        inc = _session_fetch(c, sid, 3, [], forgotten=(("sess", 1),))
        produce(c, "sess", 1, batch([b"third"]))
        assert _answered(_session_fetch(c, sid, 4, [])) == {}
        # wrong epoch, unknown id
        assert _session_fetch(c, sid, 9, []).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        assert _session_fetch(c, 12345, 1, []).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # epoch -1 closes the session and answers sessionless
        final = _session_fetch(c, sid, -1, [("sess", 0, 0)])
        assert (final.error_code, final.session_id) == (0, 0)
        assert _session_fetch(c, sid, 5, []).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_fetch_session_of_many_partitions(module_broker: Any) -> None:
    """A session over more partitions than the broker reads in one slice (it gives the loop
    back in between): the full fetch answers every partition, an incremental one only the
    partition that got data once the client moved past what it had, and a long poll over all
    of them is woken by an append to its last partition (its max_wait_ms outlasts the
    test)."""
    count = 200
    create_topic(module_broker.bootstrap, "sess-many", partitions=count)
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        for index in (0, count // 2):
            produce(c, "sess-many", index, batch([b"first-%d" % index]))
        full = _session_fetch(c, 0, 0, [("sess-many", i, 0) for i in range(count)])
        assert full.error_code == 0 and full.session_id != 0
        got = _answered(full)
        assert sorted(got) == [("sess-many", i) for i in range(count)]
        assert [i for (_t, i), p in got.items() if records_of(p.records)] == [0, count // 2]
        sid = full.session_id
        moved = _session_fetch(c, sid, 1, [("sess-many", i, 1) for i in (0, count // 2)])
        assert (moved.error_code, _answered(moved)) == (0, {})
        produce(c, "sess-many", 150, batch([b"second"]))
        inc = _session_fetch(c, sid, 2, [])
        got = _answered(inc)
        assert list(got) == [("sess-many", 150)]
        assert [r.value for r in records_of(got[("sess-many", 150)].records)] == [b"second"]
    create_topic(module_broker.bootstrap, "sess-many-idle")
    offsets = {0: 1, count // 2: 1, 150: 1}
    request = FetchRequest(
        replica_id=-1, max_wait_ms=LONGER_THAN_TEST_MS, min_bytes=1, max_bytes=1 << 24,
        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
            topic="sess-many", partitions=[FetchRequest.FetchPartition(
                partition=i, fetch_offset=offsets.get(i, 0), partition_max_bytes=1 << 20)
                for i in range(count)])])
    with RawClient(module_broker.bootstrap, timeout_s=30) as poller:
        cid, frame = poller.frame(1, 12, request)
        poller.send(frame)
        broker_read_what_was_sent(module_broker.bootstrap, "sess-many-idle")  # parked now
        assert select.select([poller.sock], [], [], 0)[0] == []  # and not answered
        with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
            produce(c, "sess-many", count - 1, batch([b"wake"]))
        got_cid, body = decode_response(poller.recv_frame(), 1, 12)
    assert got_cid == cid and isinstance(body, FetchResponse)
    got = _answered(body)
    assert len(got) == count
    assert [i for (_t, i), p in got.items() if records_of(p.records)] == [count - 1]


def test_long_poll_returns_when_data_arrives(module_broker: Any) -> None:
    """A fetch at the log end parks (nothing comes back), and the append wakes it: its
    max_wait_ms outlasts the test, so any answer at all is the append's doing."""
    bs = module_broker.bootstrap
    create_topic(bs, "longpoll")
    with RawClient(bs, timeout_s=30) as poller:
        cid, frame = poller.frame(1, 12, fetch_request("longpoll", 0, 0, max_wait_ms=LONGER_THAN_TEST_MS))
        poller.send(frame)
        broker_read_what_was_sent(bs, "longpoll")  # the fetch is parked at the broker now
        assert select.select([poller.sock], [], [], 0)[0] == []  # and not answered
        with SyncClient(bs, timeout_ms=10_000) as producer:
            produce(producer, "longpoll", 0, batch([b"wake up"]))
        got_cid, body = decode_response(poller.recv_frame(), 1, 12)
    assert got_cid == cid and isinstance(body, FetchResponse)
    assert [r.value for r in records_of(body.responses[0].partitions[0].records)] == [b"wake up"]


def test_long_poll_expires_after_max_wait(module_broker: Any, filled: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        start = time.monotonic()
        p = fetch(c, filled, 0, 200, max_wait_ms=400).responses[0].partitions[0]
        assert time.monotonic() - start >= 0.35  # not answered before max_wait_ms
        assert p.error_code == 0 and records_of(p.records) == []
        # min_bytes larger than what exists: waits the full time, then returns what there is
        start = time.monotonic()
        p = fetch(c, filled, 0, 190, max_wait_ms=300, min_bytes=10**7).responses[0].partitions[0]
        assert time.monotonic() - start >= 0.25
        assert len(records_of(p.records)) == 10


def test_list_offsets(module_broker: Any, filled: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        assert list_offset(c, filled, 0, EARLIEST) == (0, -1, 0, 0)
        assert list_offset(c, filled, 0, LATEST) == (0, -1, 200, 0)
        # batch b has timestamp 1_000_000 + b*1000 for all its records
        assert list_offset(c, filled, 0, 1_000_000 + 5 * 1000) == (0, 1_005_000, 50, 0)
        assert list_offset(c, filled, 0, 1_000_000 + 5 * 1000 + 1)[2] == 60
        assert list_offset(c, filled, 0, 10**13)[1:3] == (-1, -1)
        err, ts, off, _ = list_offset(c, filled, 0, MAX_TIMESTAMP)
        assert (err, ts, off) == (0, 1_019_000, 190)  # first record with the max timestamp
        assert list_offset(c, "nope", 0, LATEST)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_offset_for_leader_epoch(module_broker: Any, filled: str) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(filled, [
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(0, -1, 0),
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(1, -1, 0)])])
        resp = c.send(req, c.version_for(OffsetForLeaderEpochRequest))
        ok, missing = resp.topics[0].partitions
        assert (ok.error_code, ok.leader_epoch, ok.end_offset) == (0, 0, 200)
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        req.topics[0].partitions = [OffsetForLeaderEpochRequest.OffsetForLeaderPartition(0, 5, 0)]
        resp = c.send(req, c.version_for(OffsetForLeaderEpochRequest))
        assert resp.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_delete_records(module_broker: Any) -> None:
    create_topic(module_broker.bootstrap, "delrec")
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        fill(c, "delrec", 5)

        def delete(offset: int) -> tuple[int, int]:
            req = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(
                "delrec", [DeleteRecordsRequest.DeleteRecordsPartition(0, offset)])],
                timeout_ms=5000)
            p = c.send(req, c.version_for(DeleteRecordsRequest)).topics[0].partitions[0]
            return p.error_code, p.low_watermark

        assert delete(25) == (0, 25)
        assert list_offset(c, "delrec", 0, EARLIEST)[2] == 25
        p = fetch(c, "delrec", 0, 10).responses[0].partitions[0]
        assert (p.error_code, p.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, 25)
        got = records_of(fetch(c, "delrec", 0, 25).responses[0].partitions[0].records)
        assert got[0].offset <= 25 and got[-1].offset == 49
        assert delete(51)[0] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert delete(10) == (0, 25)  # below the start: no change
        assert delete(-1) == (0, 50)  # -1: up to the high watermark
    module_broker.restart()  # last in the module: restarts the shared broker
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as c:
        assert list_offset(c, "delrec", 0, EARLIEST)[2] == 50

"""``__consumer_offsets`` is compacted: a group that commits again and again keeps a small
log, and the records replayed when the broker restarts do not grow with the commits.

The bound (stated and checked): once the cleaner has caught up, the partition holding the
group is at most ``offsets.topic.segment.bytes`` (the active segment, never cleaned) plus
one record per live key (here ``PARTITIONS`` offsets); a restart replays at most that.

CI runs 100,000 commits (10,000 OffsetCommit requests of 10 partitions each, pipelined on
one connection). ``MINIKAFKA_FULL_COMMIT_TEST=1`` runs the full 10^6 commits as 10^6
single-partition requests.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from protocol.frames import decode_response
from protocol.messages.offset_commit import OffsetCommitRequest
from storage.checkpoints import read_offset_checkpoint
from storage.naming import CLEANER_CHECKPOINT
from storage.naming import TopicPartition as StorageTP
from tests.integration.broker_process import BrokerProcess
from tests.integration.netclient import RawClient
from tests.integration.test_compaction import create_topic, wait_until

FULL = os.environ.get("MINIKAFKA_FULL_COMMIT_TEST") == "1"
COMMITS = 1_000_000 if FULL else 100_000
PARTITIONS = 1 if FULL else 10  # offsets per OffsetCommit request
SEGMENT_BYTES = 1024 * 1024
WINDOW = 200  # requests in flight on the connection
GROUP = "busy-group"
TOPIC = "input"
pytestmark = pytest.mark.timeout(3000 if FULL else 300)


def _commit_request(round_no: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=round_no, committed_metadata="")
            for p in range(PARTITIONS)])])


def commit_many(bootstrap: str, rounds: int, first_round: int = 0) -> None:
    """``rounds`` OffsetCommit requests (offset = round number), ``WINDOW`` in flight."""
    with RawClient(bootstrap, timeout_s=60) as c:
        for _ in range(100):  # the first commit creates __consumer_offsets
            _, resp = c.request(OffsetCommitRequest.API_KEY, 8, _commit_request(first_round))
            if resp.topics[0].partitions[0].error_code == 0:
                break
            time.sleep(0.2)
        sent = received = 1
        pending: dict[int, int] = {}
        while received < rounds:
            while sent < rounds and sent - received < WINDOW:
                cid, data = c.frame(OffsetCommitRequest.API_KEY, 8,
                                    _commit_request(first_round + sent))
                c.send(data)
                pending[cid] = sent
                sent += 1
            cid, resp = decode_response(c.recv_frame(), OffsetCommitRequest.API_KEY, 8)
            assert pending.pop(cid) is not None
            assert all(p.error_code == 0 for p in resp.topics[0].partitions), resp
            received += 1


def partition_bytes(broker: BrokerProcess) -> int:
    part = broker.log_dir / "__consumer_offsets-0"
    return sum(p.stat().st_size for p in part.glob("*.log"))


def caught_up(broker: BrokerProcess) -> bool:
    """The cleaner's checkpoint reached the active segment of __consumer_offsets-0."""
    part = broker.log_dir / "__consumer_offsets-0"
    bases = sorted(int(p.name[:20]) for p in part.glob("*.log"))
    try:
        done = read_offset_checkpoint(broker.log_dir / CLEANER_CHECKPOINT)
    except (OSError, ValueError):
        return False
    # never cleaned counts as cleaned up to the first segment (nothing before the active)
    return done.get(StorageTP("__consumer_offsets", 0), bases[0]) >= bases[-1]


def replayed_at_start(broker: BrokerProcess) -> int:
    found = re.findall(r"from __consumer_offsets-0 \((\d+) records read",
                       broker.stderr_text())
    assert found, "no group load line"
    return int(found[-1])


def restart_s(broker: BrokerProcess) -> float:
    assert broker.stop() == 0
    start = time.monotonic()
    broker.start()
    return time.monotonic() - start


def test_a_group_committing_again_and_again_keeps_a_bounded_log(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, {
        "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": str(SEGMENT_BYTES),
        "log.cleaner.backoff.ms": "200"})
    broker.start()
    try:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        rounds = COMMITS // PARTITIONS
        tenth = rounds // 10
        started = time.monotonic()
        commit_many(broker.bootstrap, tenth)
        wait_until("the cleaner to catch up", lambda: caught_up(broker), 120)
        small_restart = restart_s(broker)
        small_replay = replayed_at_start(broker)
        commit_many(broker.bootstrap, rounds - tenth, first_round=tenth)
        commit_s = time.monotonic() - started
        wait_until("the cleaner to catch up", lambda: caught_up(broker), 300)
        size = partition_bytes(broker)
        bound = SEGMENT_BYTES + 64 * 1024
        big_restart = restart_s(broker)
        big_replay = replayed_at_start(broker)
        print(f"\n{COMMITS} commits ({rounds} requests) in {commit_s:.1f} s; "
              f"__consumer_offsets-0: {size} bytes (bound {bound}); restart after "
              f"{tenth * PARTITIONS} commits {small_restart:.2f} s ({small_replay} records "
              f"replayed), after {COMMITS} commits {big_restart:.2f} s ({big_replay} replayed)")
        assert size <= bound
        # the replay is the active segment plus the live offsets, whatever the commit count
        max_replay = SEGMENT_BYTES // 50 + PARTITIONS + 1  # a stored commit is > 50 bytes
        assert small_replay <= max_replay and big_replay <= max_replay
        # committed offsets survive compaction and restarts
        from protocol.messages.offset_fetch import OffsetFetchRequest

        with RawClient(broker.bootstrap) as c:
            _, resp = c.request(OffsetFetchRequest.API_KEY, 7, OffsetFetchRequest(
                group_id=GROUP, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                    TOPIC, list(range(PARTITIONS)))]))
        assert [p.committed_offset for p in resp.topics[0].partitions] == [rounds - 1] * PARTITIONS
    finally:
        broker.kill9()

"""broker.replica_manager over a real storage LogManager (real files in a temp dir).

The produce path (acks 0/1/-1 through the purgatory), duplicates, the fetch path with its
byte limits and long poll, and producer state across a clean close and an abandoned one.
Partitions are hosted the only way there is: a LeaderAndIsr request.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from broker.delayed_ops import FetchParams, FetchPartitionStatus
from broker.heap import FREEZE_EVERY_PARTITIONS
from broker.metadata_cache import MetadataCache
from broker.partition import IsolationLevel, Partition
from broker.producer_state import LOAD_THREADS
from broker.replica_manager import SNAPSHOT_THREADS, ReplicaManager
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.records import NewRecord, build_batch, iter_batches
from storage import fileio
from storage.config import LogConfig
from storage.manager import LogManager
from tests.waiting import async_wait_for

pytestmark = pytest.mark.timeout(60)
TID = uuid.uuid4()
HANG_S = 30  # bound on a wait for something that takes milliseconds: only a hang reaches it
LONGER_THAN_TEST_MS = 120_000  # a wait no test here lives to see expire


def new_rm(log_dir: Path, config: LogConfig | None = None, **kwargs: int) -> ReplicaManager:
    lm = LogManager(log_dir)
    lm.startup()

    async def log_config(topic: str) -> LogConfig:
        return config or LogConfig()

    return ReplicaManager(lm, MetadataCache(0), broker_id=0, log_config=log_config, **kwargs)


async def make_leader(rm: ReplicaManager, partition: int, *, isr: tuple[int, ...] = (0,),
                      epoch: int = 0) -> Partition:
    """Host t-<partition> led by broker 0, as the controller would say."""
    state = LeaderAndIsrRequest.LeaderAndIsrPartitionState(
        partition_index=partition, controller_epoch=1, leader=0, leader_epoch=epoch,
        isr=list(isr), partition_epoch=0, replicas=sorted(set(isr) | {0}))
    response = await rm.become_leader_or_follower(LeaderAndIsrRequest(
        controller_id=0, controller_epoch=1, topic_states=[LeaderAndIsrRequest.LeaderAndIsrTopicState(
            topic_name="t", topic_id=TID, partition_states=[state])]))
    assert [e.error_code for t in response.topics for e in t.partition_errors] == [0]
    p = rm.get_partition("t", partition)
    assert p is not None and p.is_leader
    return p


async def open_rm(log_dir: Path) -> ReplicaManager:
    rm = new_rm(log_dir)
    await make_leader(rm, 0)
    return rm


def close_rm(rm: ReplicaManager) -> None:
    rm.shutdown()
    rm.log_manager.shutdown(rm.high_watermarks())


def data(n: int, pid: int = -1, seq: int = -1, size: int = 10) -> bytes:
    return build_batch([NewRecord(b"k", b"v" * size) for _ in range(n)], producer_id=pid,
                       producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)


async def append(rm: ReplicaManager, records: bytes, acks: int = -1) -> tuple[int, int]:
    results = await rm.append_records(timeout_ms=1000, required_acks=acks, produce_version=9,
                                      entries=[(("t", 0), memoryview(records))])
    r = results[("t", 0)]
    return r.error, r.base_offset


def params(max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 1 << 20) -> FetchParams:
    return FetchParams(-1, max_wait_ms, min_bytes, max_bytes, IsolationLevel.READ_UNCOMMITTED)


def status(offset: int, max_bytes: int = 1 << 20) -> FetchPartitionStatus:
    return FetchPartitionStatus("t", 0, offset, max_bytes, -1)


async def test_append_all_acks_and_hw(tmp_path: Path) -> None:
    rm = await open_rm(tmp_path)
    assert await append(rm, data(3), acks=1) == (0, 0)
    assert await append(rm, data(2), acks=-1) == (0, 3)
    assert await append(rm, data(1), acks=0) == (0, 5)
    p = rm.get_partition("t", 0)
    assert p is not None and (p.high_watermark, p.log_end_offset) == (6, 6)
    assert len(rm.produce_purgatory) == 0
    bad = await rm.append_records(timeout_ms=1000, required_acks=3, produce_version=9,
                                  entries=[(("t", 0), memoryview(data(1)))])
    assert bad[("t", 0)].error == ErrorCode.INVALID_REQUIRED_ACKS
    unknown = await rm.append_records(timeout_ms=1000, required_acks=1, produce_version=9,
                                      entries=[(("u", 0), memoryview(data(1)))])
    assert unknown[("u", 0)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    close_rm(rm)


async def test_fetch_limits_and_out_of_range(tmp_path: Path) -> None:
    rm = await open_rm(tmp_path)
    for _ in range(10):
        await append(rm, data(5, size=100))
    (r,) = await rm.fetch_messages(params(), [status(7)])
    assert r.error == 0 and r.records is not None
    offsets = [b.base_offset for b in iter_batches(r.records.read_bytes())]
    assert offsets == list(range(5, 50, 5))  # from the batch holding 7
    (r,) = await rm.fetch_messages(params(), [status(0, max_bytes=1)])
    assert r.records is not None and len(list(iter_batches(r.records.read_bytes()))) == 1
    (r,) = await rm.fetch_messages(params(), [status(51)])
    assert r.error == ErrorCode.OFFSET_OUT_OF_RANGE
    # KIP-74: max_bytes spent by the first partition leaves nothing for the second
    await make_leader(rm, 1)
    a, b = await rm.fetch_messages(params(max_bytes=10), [status(0), FetchPartitionStatus(
        "t", 1, 0, 1 << 20, -1)])
    assert a.size_bytes > 0 and b.size_bytes == 0
    close_rm(rm)


async def test_long_poll_completes_on_append(tmp_path: Path) -> None:
    """Parked until the append wakes it: max_wait_ms is longer than this test may run, so an
    answer at all means the append woke it. Nothing arriving: answered empty, not before
    max_wait_ms."""
    rm = await open_rm(tmp_path)
    task = asyncio.create_task(rm.fetch_messages(params(max_wait_ms=LONGER_THAN_TEST_MS), [status(0)]))
    await async_wait_for(lambda: len(rm.fetch_purgatory) == 1, HANG_S, "the fetch parked")
    assert not task.done()
    await append(rm, data(2))
    (r,) = await asyncio.wait_for(task, HANG_S)
    assert r.size_bytes > 0 and len(rm.fetch_purgatory) == 0
    # expiry: nothing arrives
    start = time.monotonic()
    (r,) = await rm.fetch_messages(params(max_wait_ms=200), [status(2)])
    assert time.monotonic() - start >= 0.18 and r.size_bytes == 0
    close_rm(rm)


async def test_producer_state_across_clean_and_unclean_restart(tmp_path: Path) -> None:
    rm = await open_rm(tmp_path)
    assert await append(rm, data(2, pid=9, seq=0)) == (0, 0)
    assert await append(rm, data(2, pid=9, seq=2)) == (0, 2)
    close_rm(rm)  # snapshot at offset 4
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.snapshot")) == [
        f"{4:020d}.snapshot"]
    rm = await open_rm(tmp_path)
    assert await append(rm, data(2, pid=9, seq=2)) == (0, 2)  # duplicate after restart
    assert await append(rm, data(2, pid=9, seq=4)) == (0, 4)
    rm.log_manager.abandon()  # crash: no new snapshot, seq 4 only in the log
    rm = await open_rm(tmp_path)
    assert await append(rm, data(2, pid=9, seq=4)) == (0, 4)  # replayed from the log
    assert (await append(rm, data(1, pid=9, seq=9)))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    close_rm(rm)


async def test_clean_stop_snapshots_every_partition_for_a_restart_without_replay(
        tmp_path: Path) -> None:
    """More partitions than snapshot writer threads: after a clean stop (snapshots written
    in threads, off the loop) each partition has its snapshot at its log end, the restart
    replays no batch, and every producer's state is there (a resent batch is a duplicate)."""
    count = 3 * SNAPSHOT_THREADS + 1
    rm = new_rm(tmp_path)
    for i in range(count):
        await make_leader(rm, i)
        results = await rm.append_records(
            timeout_ms=1000, required_acks=1, produce_version=9,
            entries=[(("t", i), memoryview(data(i + 1, pid=100 + i, seq=0)))])
        assert results[("t", i)].error == 0
    with fileio.recording() as calls:
        await rm.shutdown_off_loop()
        rm.log_manager.shutdown(rm.high_watermarks())
    # Every partition directory is fsynced once, after the last file renamed into it (the
    # snapshot, the leader epoch checkpoint); the log dir after the partitions' closes.
    for i in range(count):
        d = str(tmp_path / f"t-{i}")
        syncs = [n for n, c in enumerate(calls) if c.op is fileio.Op.FSYNC and c.path == d]
        renames = [n for n, c in enumerate(calls)
                   if c.op is fileio.Op.RENAME and c.path.startswith(d + "/")]
        assert len(syncs) == 1 and len(renames) == 2 and max(renames) < syncs[0], i
    log_dir_syncs = [n for n, c in enumerate(calls)
                     if c.op is fileio.Op.FSYNC and c.path == str(tmp_path)]
    last_close = max(n for n, c in enumerate(calls) if c.path.startswith(str(tmp_path / "t-")))
    assert log_dir_syncs and log_dir_syncs[-1] > last_close
    for i in range(count):
        assert [p.name for p in (tmp_path / f"t-{i}").glob("*.snapshot")] == [
            f"{i + 1:020d}.snapshot"]
        assert not list((tmp_path / f"t-{i}").glob("*.tmp"))
    rm = new_rm(tmp_path)
    assert rm.log_manager.had_clean_shutdown
    for i in range(count):
        p = await make_leader(rm, i)
        assert p.producer_state.snapshot_offset == i + 1
        assert p.producer_state.load(p.log_start_offset, p.log_end_offset, p.batches_from) == 0
        entry = p.producer_state.last_entry(100 + i)
        assert entry is not None and entry.last_seq == i and entry.last_offset == i
        results = await rm.append_records(  # the same batch again: found, not appended
            timeout_ms=1000, required_acks=1, produce_version=9,
            entries=[(("t", i), memoryview(data(i + 1, pid=100 + i, seq=0)))])
        assert (results[("t", i)].error, results[("t", i)].base_offset) == (0, 0)
        assert p.log_end_offset == i + 1
    close_rm(rm)


async def test_producer_state_of_opened_partitions_loads_in_worker_threads(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Partitions a LeaderAndIsr opens over existing logs (start-up: all of them in one
    request) load their producer state in worker threads, not on the event loop. Every
    snapshot here is cut short: each load deletes it (a warning from the thread that
    loads) and replays its log, and every partition ends with the state it had."""
    count = 2 * LOAD_THREADS + 1
    rm = new_rm(tmp_path)
    for i in range(count):
        await make_leader(rm, i)
        for seq in (0, 2):
            results = await rm.append_records(
                timeout_ms=1000, required_acks=1, produce_version=9,
                entries=[(("t", i), memoryview(data(2, pid=100 + i, seq=seq)))])
            assert (results[("t", i)].error, results[("t", i)].base_offset) == (0, seq)
    close_rm(rm)
    for i in range(count):
        (snapshot,) = (tmp_path / f"t-{i}").glob("*.snapshot")
        snapshot.write_bytes(snapshot.read_bytes()[:-1])
    rm = new_rm(tmp_path)
    caplog.set_level(logging.INFO)
    response = await rm.become_leader_or_follower(LeaderAndIsrRequest(
        controller_id=0, controller_epoch=1, topic_states=[
            LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name="t", topic_id=TID, partition_states=[
                LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                    partition_index=i, controller_epoch=1, leader=0, leader_epoch=1, isr=[0],
                    partition_epoch=0, replicas=[0])
                for i in range(count)])]))
    assert [e.error_code for t in response.topics for e in t.partition_errors] == [0] * count
    deleted = [r for r in caplog.records if "deleting unreadable producer snapshot" in r.message]
    assert len(deleted) == count
    loop_thread = threading.current_thread().name
    assert {r.threadName for r in deleted} <= {f"producer-state-load_{n}" for n in range(LOAD_THREADS)}
    assert loop_thread not in {r.threadName for r in deleted}
    replayed = [r.message for r in caplog.records if "producer state rebuilt" in r.message]
    assert sorted(replayed) == sorted(f"t-{i}: producer state rebuilt, 2 batches replayed from "
                                      "the log" for i in range(count))
    for i in range(count):
        p = rm.get_partition("t", i)
        assert p is not None and p.producer_state.snapshot_offset == -1
        entry = p.producer_state.last_entry(100 + i)
        assert entry is not None and (entry.producer_epoch, entry.last_seq, entry.last_offset) == (0, 3, 3)
        results = await rm.append_records(  # the last batch again: found, not appended
            timeout_ms=1000, required_acks=1, produce_version=9,
            entries=[(("t", i), memoryview(data(2, pid=100 + i, seq=2)))])
        assert (results[("t", i)].error, results[("t", i)].base_offset) == (0, 2)
        assert p.log_end_offset == 4
    close_rm(rm)


async def test_delete_records_and_list_offsets(tmp_path: Path) -> None:
    rm = await open_rm(tmp_path)
    for _ in range(4):
        await append(rm, data(5))
    p = rm.get_partition("t", 0)
    assert p is not None
    assert p.delete_records(30) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    assert p.delete_records(7) == (0, 7)
    assert p.fetch_offset_for_timestamp(-2, isolation=IsolationLevel.READ_UNCOMMITTED,
                                        current_leader_epoch=-1, replica_id=-1)[2] == 7
    assert p.fetch_offset_for_timestamp(-1, isolation=IsolationLevel.READ_UNCOMMITTED,
                                        current_leader_epoch=0, replica_id=-1) == (0, -1, 20, 0)
    assert p.fetch_offset_for_timestamp(-1, isolation=IsolationLevel.READ_UNCOMMITTED,
                                        current_leader_epoch=3, replica_id=-1)[0] == (
        ErrorCode.UNKNOWN_LEADER_EPOCH)
    assert p.last_offset_for_leader_epoch(-1, 0) == (0, 0, 20)
    (r,) = await rm.fetch_messages(params(), [status(3)])
    assert r.error == ErrorCode.OFFSET_OUT_OF_RANGE and r.log_start_offset == 7
    close_rm(rm)


async def test_snapshot_on_roll_bounds_replay_after_crash(tmp_path: Path) -> None:
    rm = new_rm(tmp_path, LogConfig(segment_bytes=2048))
    lm = rm.log_manager
    await make_leader(rm, 0)
    for seq in range(0, 40, 2):
        assert (await append(rm, data(2, pid=5, seq=seq, size=100)))[0] == 0
    await async_wait_for(lambda: bool(list((tmp_path / "t-0").glob("*.snapshot"))), HANG_S,
                         "a snapshot after segment rolls")
    # The background flush/snapshot jobs (one per partition at a time) have all finished.
    await async_wait_for(lambda: not rm._flushing, HANG_S, "background writes done")
    lm.abandon()  # crash: no shutdown snapshot
    rm = new_rm(tmp_path, LogConfig(segment_bytes=2048))
    p = await make_leader(rm, 0)
    assert 0 < p.producer_state.snapshot_offset < 40
    assert await append(rm, data(2, pid=5, seq=38, size=100)) == (0, 38)  # duplicate found
    assert await append(rm, data(2, pid=5, seq=40, size=100)) == (0, 40)
    close_rm(rm)


async def test_acks_all_waits_for_the_isr_like_replication_will(tmp_path: Path) -> None:
    """A second ISR member (as replication will add) holds the HW back: acks=-1 waits in the
    purgatory until the follower's position moves the HW, or times out."""
    rm = new_rm(tmp_path)
    p = await make_leader(rm, 0, isr=(0, 1))
    assert p.follower_states[1].log_end_offset == -1  # nothing fetched yet
    start = time.monotonic()
    results = await rm.append_records(timeout_ms=200, required_acks=-1, produce_version=9,
                                      entries=[(("t", 0), memoryview(data(2)))])
    assert results[("t", 0)].error == ErrorCode.REQUEST_TIMED_OUT  # appended, not replicated
    assert time.monotonic() - start >= 0.18  # waited its timeout
    assert (p.log_end_offset, p.high_watermark) == (2, 0)
    assert await append(rm, data(1), acks=1) == (0, 2)  # acks=1 does not wait
    task = asyncio.create_task(rm.append_records(
        timeout_ms=LONGER_THAN_TEST_MS, required_acks=-1, produce_version=9,
        entries=[(("t", 0), memoryview(data(1)))]))
    await async_wait_for(lambda: len(rm.produce_purgatory) == 1, HANG_S, "the produce parked")
    assert not task.done()
    p.follower_states[1].log_end_offset = 4  # the follower fetched up to the log end
    assert p.maybe_increment_high_watermark() and p.high_watermark == 4
    rm.on_high_watermark_moved(("t", 0))
    results = await asyncio.wait_for(task, HANG_S)  # completed by the HW move, not a timeout
    assert (results[("t", 0)].error, results[("t", 0)].base_offset) == (0, 3)
    # min.insync.replicas above the ISR size: refused before the append
    p.isr.discard(1)
    p.log.update_config(replace(p.log.config, min_insync_replicas=2))
    assert (await append(rm, data(1)))[0] == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log_end_offset == 4
    close_rm(rm)


async def test_producer_expiration_from_the_produce_path(tmp_path: Path) -> None:
    rm = new_rm(tmp_path, producer_id_expiration_ms=1, producer_id_expiration_check_interval_ms=0)
    p = await make_leader(rm, 0)
    assert await append(rm, data(1, pid=3, seq=0)) == (0, 0)
    await asyncio.sleep(0.01)  # the clock passes producer.id.expiration.ms (1 ms)
    await append(rm, data(1))  # any append runs the due check: producer 3 expired
    assert p.producer_state.last_entry(3) is None
    assert (await append(rm, data(1, pid=3, seq=77)))[0] == 0  # unknown: any sequence
    close_rm(rm)


def corrupt(records: bytes) -> bytes:
    out = bytearray(records)
    out[-1] ^= 0x40
    return bytes(out)


async def test_corrupt_batch_is_corrupt_message_on_every_path(tmp_path: Path) -> None:
    """The CRC is computed once on the normal path (by the log); the duplicate and the
    producer-state error paths check it themselves, so CORRUPT_MESSAGE always wins."""
    rm = await open_rm(tmp_path)
    assert await append(rm, data(2, pid=4, seq=0)) == (0, 0)
    assert (await append(rm, corrupt(data(1))))[0] == ErrorCode.CORRUPT_MESSAGE  # log's check
    assert (await append(rm, corrupt(data(2, pid=4, seq=0))))[0] == ErrorCode.CORRUPT_MESSAGE
    assert (await append(rm, corrupt(data(1, pid=4, seq=9))))[0] == ErrorCode.CORRUPT_MESSAGE
    assert (await append(rm, data(1, pid=4, seq=9)))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert await append(rm, data(2, pid=4, seq=0)) == (0, 0)  # the real duplicate
    p = rm.get_partition("t", 0)
    assert p is not None and p.log_end_offset == 2
    close_rm(rm)


async def test_truncation_cuts_log_and_producer_state_together(tmp_path: Path) -> None:
    """Partition.truncate_to: the log and the producer state go back to the same offset,
    so a batch cut from the log is not a duplicate afterwards (as a follower needs)."""
    rm = await open_rm(tmp_path)
    for seq in (0, 2, 4):
        assert (await append(rm, data(2, pid=7, seq=seq)))[0] == 0
    p = rm.get_partition("t", 0)
    assert p is not None and p.log_end_offset == 6
    assert await append(rm, data(2, pid=7, seq=4)) == (0, 4)  # a duplicate while it is there
    assert p.log_end_offset == 6
    p.truncate_to(4)
    assert (p.log_end_offset, p.high_watermark) == (4, 4)
    entry = p.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 3
    assert await append(rm, data(2, pid=7, seq=4)) == (0, 4)  # appended anew at offset 4
    assert p.log_end_offset == 6
    p.truncate_fully_and_start_at(10)
    assert (p.log_start_offset, p.log_end_offset, p.high_watermark) == (10, 10, 10)
    assert p.producer_state.last_entry(7) is None
    close_rm(rm)


class _Ticker:
    """A task that sleeps 1 ms at a time and keeps the most CPU the loop's thread used
    between two of its wake-ups: the longest the loop ran in one go. (CPU, not wall time:
    on a loaded machine a process also waits for a core, which no code here can shorten.)"""

    def __init__(self) -> None:
        self.ticks = 0
        self.longest_cpu_s = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            cpu = time.thread_time()
            await asyncio.sleep(0.001)
            self.ticks += 1
            self.longest_cpu_s = max(self.longest_cpu_s, time.thread_time() - cpu)

    async def __aenter__(self) -> _Ticker:
        self._task = asyncio.get_running_loop().create_task(self._run())
        await asyncio.sleep(0)  # its first sleep is under way
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def test_leader_and_isr_of_many_partitions_gives_the_loop_back(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A LeaderAndIsr over thousands of hosted partitions (a new leader epoch for each:
    checks, role changes, their lines (at DEBUG), the answer) runs in slices of a few
    ms: a task on the same loop keeps waking up meanwhile, and the loop never runs more
    than a third of the request's CPU in one go. Before, it held the loop from the first
    partition to the answer."""
    count = 2000
    rm = new_rm(tmp_path)

    def request(epoch: int) -> LeaderAndIsrRequest:
        return LeaderAndIsrRequest(controller_id=0, controller_epoch=1, topic_states=[
            LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name="t", topic_id=TID, partition_states=[
                LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                    partition_index=i, controller_epoch=1, leader=0, leader_epoch=epoch,
                    isr=[0], partition_epoch=epoch, replicas=[0])
                for i in range(count)])])

    await rm.become_leader_or_follower(request(0))
    caplog.set_level(logging.INFO)  # as a broker logs
    # No garbage collection meanwhile: a full one over the test process's heap (every test
    # before this one) is tens of ms in one go, whatever the request does.
    gc.collect()
    gc.disable()
    try:
        async with _Ticker() as ticker:
            cpu0 = time.thread_time()
            response = await rm.become_leader_or_follower(request(1))
            took_cpu_s = time.thread_time() - cpu0
    finally:
        gc.enable()
    assert [e.error_code for t in response.topics for e in t.partition_errors] == [0] * count
    assert all(p.leader_epoch == 1 for p in rm.partitions.values())
    assert ticker.ticks >= 5, f"{ticker.ticks} wake-ups in a LeaderAndIsr of {took_cpu_s:.3f} s"
    assert ticker.longest_cpu_s < took_cpu_s / 3, (
        f"the loop ran {ticker.longest_cpu_s * 1000:.1f} ms of CPU in one go, of the "
        f"LeaderAndIsr's {took_cpu_s * 1000:.1f} ms")
    close_rm(rm)


async def test_truncation_runs_in_a_worker_thread_and_role_changes_wait_for_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Partition.truncate_off_loop (a follower's): the log is cut and the producer state
    rebuilt in a worker thread (here: a snapshot above the cut is deleted there), with the
    same result as truncate_to; a LeaderAndIsr arriving meanwhile waits for it, so the new
    leader epoch starts at the cut log's end, not at the old one."""
    rm = await open_rm(tmp_path)
    for seq in (0, 2, 4):
        assert (await append(rm, data(2, pid=7, seq=seq)))[0] == 0
    p = rm.get_partition("t", 0)
    assert p is not None and p.log_end_offset == 6
    p.producer_state.take_snapshot(6)
    caplog.set_level(logging.INFO)
    await p.truncate_off_loop(4)
    assert (p.log_end_offset, p.high_watermark) == (4, 4)
    entry = p.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 3
    (deleted,) = [r for r in caplog.records if "above the log end 4" in r.getMessage()]
    assert deleted.threadName != threading.current_thread().name
    assert await append(rm, data(2, pid=7, seq=4)) == (0, 4)  # appended anew at offset 4
    # A role change waits for a truncation under way.
    truncation = asyncio.get_running_loop().create_task(p.truncate_off_loop(2))
    await asyncio.sleep(0)  # the truncation's thread is started
    await make_leader(rm, 0, epoch=1)
    assert truncation.done()
    assert p.leader_epoch_start_offset == 2 and p.log.latest_epoch() == 1
    assert p.log.end_offset_for_epoch(1) == (1, 2)
    await p.truncate_off_loop(10, fully=True)
    assert (p.log_start_offset, p.log_end_offset, p.high_watermark) == (10, 10, 10)
    assert p.producer_state.last_entry(7) is None
    assert not list((tmp_path / "t-0").glob("*.snapshot"))
    close_rm(rm)


def _full_collection_cpu_s() -> float:
    cpu = time.thread_time()
    gc.collect()
    return time.thread_time() - cpu


async def test_hosted_partitions_are_frozen_out_of_full_collections(tmp_path: Path) -> None:
    """Once FREEZE_EVERY_PARTITIONS partitions are opened, every tracked object is frozen:
    a full collection then skips the partitions' objects (and everything older), and costs
    a fraction of one over the same heap unfrozen. Deleting a partition unfreezes them, so
    its objects are collectable again; a LeaderAndIsr that opens fewer freezes at its end."""
    count = 2 * FREEZE_EVERY_PARTITIONS
    gc.unfreeze()  # whatever an earlier test in this process froze
    rm = new_rm(tmp_path)
    try:
        response = await rm.become_leader_or_follower(LeaderAndIsrRequest(
            controller_id=0, controller_epoch=1, topic_states=[
                LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name="t", topic_id=TID, partition_states=[
                    LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                        partition_index=i, controller_epoch=1, leader=0, leader_epoch=0,
                        isr=[0], partition_epoch=0, replicas=[0], is_new=True)
                    for i in range(count)])]))
        assert [e.error_code for t in response.topics for e in t.partition_errors] == [0] * count
        p = rm.get_partition("t", 0)
        assert p is not None and gc.is_tracked(p)
        assert rm.heap.freezes == 2
        assert gc.get_freeze_count() > count
        assert not any(o is p for o in gc.get_objects())  # not in any generation: frozen
        frozen_cpu_s = min(_full_collection_cpu_s() for _ in range(3))

        gc.unfreeze()
        unfrozen_cpu_s = min(_full_collection_cpu_s() for _ in range(3))
        assert frozen_cpu_s < unfrozen_cpu_s / 3, (
            f"a full collection took {frozen_cpu_s * 1000:.1f} ms of CPU frozen, "
            f"{unfrozen_cpu_s * 1000:.1f} ms unfrozen")

        gc.freeze()
        stopped = await rm.stop_replicas(StopReplicaRequest(
            controller_id=0, controller_epoch=1, broker_epoch=-1, topic_states=[
                StopReplicaRequest.StopReplicaTopicState("t", [
                    StopReplicaRequest.StopReplicaPartitionState(
                        partition_index=0, leader_epoch=-2, delete_partition=True)])]))
        assert stopped == ({("t", 0): ErrorCode.NO_ERROR}, ErrorCode.NO_ERROR)
        assert gc.get_freeze_count() == 0
        assert any(o is p for o in gc.get_objects())
        # A LeaderAndIsr that opens a few partitions freezes them once it is done.
        await make_leader(rm, count)
        assert rm.heap.freezes == 3 and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        close_rm(rm)


async def host_many(rm: ReplicaManager, count: int, isr: tuple[int, ...] = (0,)) -> None:
    """Host t-0 .. t-<count - 1>, led by broker 0."""
    response = await rm.become_leader_or_follower(LeaderAndIsrRequest(
        controller_id=0, controller_epoch=1, topic_states=[
            LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name="t", topic_id=TID, partition_states=[
                LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                    partition_index=i, controller_epoch=1, leader=0, leader_epoch=0,
                    isr=list(isr), partition_epoch=0, replicas=list(isr))
                for i in range(count)])]))
    assert [e.error_code for t in response.topics for e in t.partition_errors] == [0] * count


def _read(r: object) -> tuple[object, ...]:
    from broker.partition import ReadResult
    assert isinstance(r, ReadResult)
    records = None if r.records is None else (r.records.position, r.records.length)
    return r.error, r.high_watermark, r.log_start_offset, records


async def test_fetch_of_many_partitions_reads_as_one_read(tmp_path: Path) -> None:
    """A fetch of more partitions than a slice is read a slice at a time, with the KIP-74
    limits carried across slices: the answer is read_all's in one go, with the response
    limit met in a later slice, and with a limit of 0 (the first partition with data gives
    one batch, no other any)."""
    count = 300
    rm = new_rm(tmp_path)
    await host_many(rm, count)
    for i in range(0, count, 3):  # data in every third partition, none in the others
        results = await rm.append_records(timeout_ms=1000, required_acks=1, produce_version=9,
                                          entries=[(("t", i), memoryview(data(2, size=100)))])
        assert results[("t", i)].error == 0
    statuses = [FetchPartitionStatus("t", i, 0, 1 << 20, -1) for i in range(count)]
    batch_bytes = len(data(2, size=100))
    for max_bytes in (1 << 20, 150 * batch_bytes // 3, 0):
        expected = rm.read_all(params(max_bytes=max_bytes), statuses)
        got = await rm.fetch_messages(params(max_bytes=max_bytes), statuses)
        assert [_read(r) for r in got] == [_read(r) for r in expected]
    # the middle limit runs out in a later slice: some partitions with data answer none
    sizes = [r.size_bytes for r in got]
    assert sizes[0] > 0 and not any(sizes[1:])
    close_rm(rm)


async def test_parked_fetch_of_many_partitions_answers_the_append_that_woke_it(
        tmp_path: Path) -> None:
    """A long poll over many partitions parks; an append to one of its last partitions
    completes it, and its request then reads every partition (a slice at a time), the new
    records included. Nothing arriving: answered empty once max_wait_ms passed."""
    count = 200
    rm = new_rm(tmp_path)
    await host_many(rm, count)
    statuses = [FetchPartitionStatus("t", i, 0, 1 << 20, -1) for i in range(count)]
    task = asyncio.create_task(rm.fetch_messages(params(max_wait_ms=LONGER_THAN_TEST_MS),
                                                 statuses))
    await async_wait_for(lambda: len(rm.fetch_purgatory) == 1, HANG_S, "the fetch parked")
    results = await rm.append_records(timeout_ms=1000, required_acks=1, produce_version=9,
                                      entries=[(("t", count - 3), memoryview(data(2)))])
    assert results[("t", count - 3)].error == 0
    got = await asyncio.wait_for(task, HANG_S)
    assert [i for i, r in enumerate(got) if r.size_bytes > 0] == [count - 3]
    assert all(r.error == 0 for r in got) and len(rm.fetch_purgatory) == 0
    start = time.monotonic()
    got = await rm.fetch_messages(params(max_wait_ms=200), [
        FetchPartitionStatus("t", i, 2 if i == count - 3 else 0, 1 << 20, -1)
        for i in range(count)])
    assert time.monotonic() - start >= 0.18
    assert len(got) == count and not any(r.size_bytes for r in got)
    close_rm(rm)


class _TimerTicker:
    """A timer callback the loop runs every 1 ms, keeping the most CPU the loop's thread used
    between two of its runs: the longest the loop ran in one go. A timer's callback runs in
    the first turn of the loop after its time, where a task's sleep resumes a turn later
    (the timer completes a future, whose callback then steps the task): with work that gives
    the loop back every 2 ms, this sees each slice, a sleeping task two or three together."""

    def __init__(self) -> None:
        self.ticks = 0
        self.longest_cpu_s = 0.0
        self._last = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def _tick(self) -> None:
        now = time.thread_time()
        self.longest_cpu_s = max(self.longest_cpu_s, now - self._last)
        self._last = now
        self.ticks += 1
        self._handle = asyncio.get_running_loop().call_later(0.001, self._tick)

    def __enter__(self) -> _TimerTicker:
        self._last = time.thread_time()
        self._handle = asyncio.get_running_loop().call_later(0.001, self._tick)
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._handle is not None
        self._handle.cancel()


async def test_follower_fetch_of_many_partitions_gives_the_loop_back(tmp_path: Path) -> None:
    """A follower's fetch over thousands of partitions led here (its offsets recorded, every
    partition read) runs in slices of a few ms: a timer on the same loop keeps running
    meanwhile, and the loop never runs more than a third of the fetch's CPU in one go."""
    count = 2000
    rm = new_rm(tmp_path)
    await host_many(rm, count, isr=(0, 1))
    one = memoryview(data(1))
    appended = await rm.append_records(timeout_ms=1000, required_acks=1, produce_version=9,
                                       entries=[(("t", i), one) for i in range(count)])
    assert all(r.error == 0 for r in appended.values())
    statuses = [FetchPartitionStatus("t", i, 0, 1 << 20, 0) for i in range(count)]
    follower = FetchParams(1, 0, 1, 10 << 20, IsolationLevel.READ_UNCOMMITTED)
    # No garbage collection meanwhile: a full one over the test process's heap (every test
    # before this one) is tens of ms in one go, whatever the fetch does.
    gc.collect()
    gc.disable()
    try:
        with _TimerTicker() as ticker:
            cpu0 = time.thread_time()
            got = await rm.fetch_messages(follower, statuses)
            took_cpu_s = time.thread_time() - cpu0
    finally:
        gc.enable()
    assert len(got) == count and all(r.error == 0 and r.size_bytes == len(one) for r in got)
    assert all(p.follower_states[1].log_end_offset == 0 for p in rm.partitions.values())
    assert ticker.ticks >= 3, f"{ticker.ticks} timer runs in a fetch of {took_cpu_s:.3f} s"
    assert ticker.longest_cpu_s < took_cpu_s / 3, (
        f"the loop ran {ticker.longest_cpu_s * 1000:.1f} ms of CPU in one go, of the "
        f"fetch's {took_cpu_s * 1000:.1f} ms")
    close_rm(rm)


async def test_role_changes_of_many_partitions_are_summed_up_at_info(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A LeaderAndIsr logs the role changes of its first PER_PARTITION_INFO_MAX partitions
    at INFO, the others' at DEBUG, and one INFO line that counts them all."""
    from broker.replica_manager import PER_PARTITION_INFO_MAX

    rm = new_rm(tmp_path)
    caplog.set_level(logging.DEBUG, logger="broker")
    many = PER_PARTITION_INFO_MAX + 5
    await host_many(rm, many)
    leader_lines = [r for r in caplog.records if ": leader at epoch 0 from offset 0" in r.getMessage()]
    assert [r.levelno for r in leader_lines] == (
        [logging.INFO] * PER_PARTITION_INFO_MAX + [logging.DEBUG] * 5)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(f"{many} partitions, {many} new leaders" in m for m in info), info
    close_rm(rm)

"""The broker's own disk writes under injected faults (``storage.fileio``), in process:

- the topic store: a write that fails changes neither the file nor the topics;
- the producer-id block: a failed write hands out no id (retriable) and no id twice;
- producer-state snapshots: a full disk skips the snapshot (no temp file left), EIO takes
  the log dir offline;
- produce to two partitions in two log dirs, one failing: only its partition fails;
- a fetch parked on a partition whose log dir fails is answered at once;
- a partition of a dir offline at start-up is neither recreated nor stopped (StopReplica).
"""

from __future__ import annotations

import asyncio
import errno
import uuid
from pathlib import Path

import pytest

from broker.delayed_ops import FetchParams, FetchPartitionStatus
from broker.metadata_cache import MetadataCache
from broker.partition import IsolationLevel, Partition
from broker.producer_ids import ProducerIdError, ProducerIdManager
from broker.replica_manager import ReplicaManager
from controller.local_store import STORE_FILE, LocalTopicStore
from controller.topic_store import TopicRecord, TopicStoreError
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.records import NewRecord, build_batch
from storage import fileio
from storage.config import LogConfig
from storage.manager import LogManager

pytestmark = pytest.mark.timeout(30)
TID = uuid.uuid4()


def _record(name: str) -> TopicRecord:
    return TopicRecord(name, uuid.uuid4(), {0: (0,)})


@pytest.mark.parametrize("op", [fileio.Op.CREATE, fileio.Op.WRITE, fileio.Op.FSYNC,
                                fileio.Op.RENAME])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
async def test_topic_store_write_that_fails_changes_nothing(tmp_path: Path, op: fileio.Op,
                                                            code: int) -> None:
    store = LocalTopicStore.load(tmp_path, 0)
    await store.create_topic(_record("a"), {})
    before = (tmp_path / STORE_FILE).read_bytes()
    with fileio.injected(fileio.FaultPlan(nth=1, op=op, errno=code,
                                          path=str(tmp_path / (STORE_FILE + ".tmp")))):
        with pytest.raises(TopicStoreError) as raised:
            await store.create_topic(_record("b"), {})
        assert raised.value.error_code is ErrorCode.KAFKA_STORAGE_ERROR
        assert fileio.faults_raised() == 1
        assert await store.topic_names() == {"a"}
        assert (tmp_path / STORE_FILE).read_bytes() == before
        assert not (tmp_path / (STORE_FILE + ".tmp")).exists()
    await store.create_topic(_record("b"), {})
    assert await LocalTopicStore.load(tmp_path, 0).topic_names() == {"a", "b"}


async def test_topic_store_whose_directory_sync_fails_keeps_the_new_state(tmp_path: Path) -> None:
    """The rename happened: the file holds the new topic, so the store does too."""
    store = LocalTopicStore.load(tmp_path, 0)
    with fileio.injected(fileio.FaultPlan(nth=1, op=fileio.Op.FSYNC, errno=errno.EIO,
                                          path=str(tmp_path))):
        with pytest.raises(TopicStoreError):
            await store.create_topic(_record("a"), {})
        assert await store.topic_names() == {"a"} == await LocalTopicStore.load(
            tmp_path, 0).topic_names()


async def test_producer_id_block_write_that_fails_hands_out_nothing(tmp_path: Path) -> None:
    ids = ProducerIdManager(tmp_path, block_size=10)
    assert await ids.generate() == 0
    for _ in range(9):
        await ids.generate()  # the block is used up: the next id needs a new block
    with (fileio.injected(fileio.FaultPlan(nth=1, op=fileio.Op.WRITE, errno=errno.ENOSPC)),
          pytest.raises(ProducerIdError, match="No space left")):
        await ids.generate()
    assert await ids.generate() == 10
    assert await ProducerIdManager(tmp_path, block_size=10).generate() == 20  # never twice


def _rm(dirs: list[Path], **props: str) -> ReplicaManager:
    config = LogConfig.from_properties(props)
    lm = LogManager(dirs, config)
    lm.startup()

    async def log_config(topic: str) -> LogConfig:
        return config

    return ReplicaManager(lm, MetadataCache(0), broker_id=0, log_config=log_config)


async def _lead(rm: ReplicaManager, partition: int, *, is_new: bool = True) -> Partition:
    """Host t-<partition> led by broker 0, as the controller says (LeaderAndIsr)."""
    state = LeaderAndIsrRequest.LeaderAndIsrPartitionState(
        partition_index=partition, controller_epoch=1, leader=0, leader_epoch=0, isr=[0],
        partition_epoch=0, replicas=[0], is_new=is_new)
    response = await rm.become_leader_or_follower(LeaderAndIsrRequest(
        controller_id=0, controller_epoch=1, topic_states=[
            LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name="t", topic_id=TID,
                                                       partition_states=[state])]))
    assert [e.error_code for t in response.topics for e in t.partition_errors] == [0]
    p = rm.get_partition("t", partition)
    assert p is not None
    return p


def _data(n: int, pid: int = -1, seq: int = -1) -> bytes:
    return build_batch([NewRecord(b"k", b"v" * 200) for _ in range(n)], producer_id=pid,
                       producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)


@pytest.mark.parametrize(("code", "offline"), [
    (errno.ENOSPC, False),
    pytest.param(errno.EIO, True, marks=pytest.mark.broker_errors(
        r"is offline: producer state snapshot of t-0 failed")),
])
async def test_producer_snapshot_fault(tmp_path: Path, code: int, offline: bool) -> None:
    """A roll snapshots the producer state in the background; when that write fails the
    snapshot is skipped (full disk) or the log dir goes offline (EIO)."""
    rm = _rm([tmp_path], **{"segment.bytes": "1500"})
    p = await _lead(rm, 0)
    size = len(_data(4, 7, 0))
    fits = 1
    while fits * size <= 1500 - size:  # Kafka's roll rule: the next batch does not fit
        fits += 1
    # The append that rolls makes the log end 4 * (fits + 1): the snapshot is named by it.
    snapshot = tmp_path / "t-0" / f"{4 * (fits + 1):020d}.snapshot"
    with fileio.injected(fileio.FaultPlan(nth=1, op=fileio.Op.CREATE, errno=code,
                                          path_prefix=f"{snapshot}.")):  # its temp file
        for seq in range(0, 4 * (fits + 1), 4):
            results = await rm.append_records(timeout_ms=1000, required_acks=1, produce_version=9,
                                              entries=[(("t", 0), memoryview(_data(4, 7, seq)))])
            assert results[("t", 0)].error is ErrorCode.NO_ERROR
        assert len(p.log.segment_base_offsets) == 2
        for _ in range(200):  # the background job (bounded wait)
            if not rm._flushing:
                break
            await asyncio.sleep(0.01)
        assert fileio.faults_raised() == 1
    assert not list((tmp_path / "t-0").glob("*.snapshot"))
    assert not list((tmp_path / "t-0").glob("*.tmp"))
    assert p.log.offline is offline
    if not offline:
        results = await rm.append_records(timeout_ms=1000, required_acks=1, produce_version=9,
                                          entries=[(("t", 0), memoryview(_data(1)))])
        assert results[("t", 0)].error is ErrorCode.NO_ERROR
    rm.shutdown()
    rm.log_manager.shutdown(rm.high_watermarks())


@pytest.mark.broker_errors(r"d\d is offline: undoing a failed append")
async def test_one_failing_log_dir_fails_only_its_partition_of_a_request(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    rm = _rm([d1, d2])
    p0 = await _lead(rm, 0)
    p1 = await _lead(rm, 1)
    assert {p0.log.log_dir, p1.log.log_dir} == {d1, d2}  # least-loaded placement
    failing = p0.log.log_dir
    # A fetch parked (long poll) on the partition whose dir is about to fail.
    fetch = asyncio.ensure_future(rm.fetch_messages(
        FetchParams(-1, 10_000, 1, 1 << 20, IsolationLevel.READ_UNCOMMITTED),
        [FetchPartitionStatus("t", 0, 0, 1 << 20, -1)]))
    await asyncio.sleep(0.05)
    assert not fetch.done()
    with fileio.injected(fileio.FaultPlan(nth=1, errno=errno.EIO, times=0, path_prefix=str(failing))):
        results = await rm.append_records(timeout_ms=1000, required_acks=-1, produce_version=9,
                                          entries=[(("t", 0), memoryview(_data(2))),
                                                   (("t", 1), memoryview(_data(2)))])
        assert results[("t", 0)].error is ErrorCode.KAFKA_STORAGE_ERROR
        assert (results[("t", 1)].error, results[("t", 1)].base_offset) == (ErrorCode.NO_ERROR, 0)
        assert rm.log_manager.is_offline(failing) and p0.log.offline and not p1.log.offline
        rm.handle_log_dir_failure(failing)  # what the server does on the loop
        (answer,) = await asyncio.wait_for(fetch, 2)
        assert answer.error is ErrorCode.KAFKA_STORAGE_ERROR
        again = await rm.append_records(timeout_ms=1000, required_acks=1, produce_version=9,
                                        entries=[(("t", 0), memoryview(_data(1)))])
        assert again[("t", 0)].error is ErrorCode.KAFKA_STORAGE_ERROR
    rm.shutdown()
    rm.log_manager.shutdown(rm.high_watermarks())
    # Restarted on a healthy disk: both partitions are back, the failed one as it was.
    rm2 = _rm([d1, d2])
    q0 = await _lead(rm2, 0, is_new=False)
    q1 = await _lead(rm2, 1, is_new=False)
    assert (q0.log_end_offset, q1.log_end_offset) == (0, 2)
    rm2.shutdown()
    rm2.log_manager.shutdown(rm2.high_watermarks())


def test_two_writers_of_one_snapshot_both_succeed(tmp_path: Path) -> None:
    """A background snapshot and the shutdown's can name the same offset: each writes a
    temp file of its own (one shared temp name made the second rename fail)."""
    import threading

    from broker.producer_state import ProducerStateManager, list_snapshots

    state = ProducerStateManager(tmp_path)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(200):
                state.write_snapshot(21, state.snapshot_bytes())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)  # 400 fsynced writes: seconds on a quiet machine, far more at load 12
    assert not any(t.is_alive() for t in threads), "the writers did not finish in 120 s"
    assert not errors and [o for o, _ in list_snapshots(tmp_path)] == [21]
    assert not list(tmp_path.glob("*.tmp"))


async def test_io_error_on_a_deleted_log_is_no_disk_failure(tmp_path: Path) -> None:
    """A background write that fails because its partition was deleted meanwhile (the
    directory renamed) must not take the log dir offline."""
    from storage.errors import LogClosedError
    from storage.naming import TopicPartition

    rm = _rm([tmp_path])
    p = await _lead(rm, 0)
    rm.log_manager.delete_log(TopicPartition("t", 0))
    error = p.log.io_failed("producer state snapshot", FileNotFoundError(2, "gone"))
    assert isinstance(error, LogClosedError)
    assert not rm.log_manager.is_offline(tmp_path)
    rm.shutdown()
    rm.log_manager.shutdown(rm.high_watermarks())


@pytest.mark.broker_errors(r"d2 is offline: loading the logs failed")
async def test_partition_of_a_dir_offline_at_start_up_is_not_recreated(tmp_path: Path) -> None:
    """Kafka's rule: a partition the controller says existed (not is_new) is not created
    afresh in another dir while a dir that may hold it is offline; it answers
    KAFKA_STORAGE_ERROR."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    rm = _rm([d1, d2])
    await _lead(rm, 0)  # d1 (the first, on a tie)
    p1 = await _lead(rm, 1)
    assert p1.log.log_dir == d2
    rm.shutdown()
    rm.log_manager.shutdown(rm.high_watermarks())
    with fileio.injected(fileio.FaultPlan(nth=1, errno=errno.EIO, times=0, path_prefix=str(d2))):
        rm2 = _rm([d1, d2])  # d2 fails while loading: offline
        assert rm2.log_manager.online_dirs() == [d1]
        state = LeaderAndIsrRequest.LeaderAndIsrPartitionState(
            partition_index=1, controller_epoch=1, leader=0, leader_epoch=0, isr=[0],
            partition_epoch=0, replicas=[0], is_new=False)
        response = await rm2.become_leader_or_follower(LeaderAndIsrRequest(
            controller_id=0, controller_epoch=1, topic_states=[
                LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name="t", topic_id=TID,
                                                           partition_states=[state])]))
        assert [e.error_code for t in response.topics for e in t.partition_errors] == [
            ErrorCode.KAFKA_STORAGE_ERROR]
        assert rm2.get_partition("t", 1) is None and not (d1 / "t-1").exists()
        results = await rm2.append_records(timeout_ms=1000, required_acks=1, produce_version=9,
                                           entries=[(("t", 1), memoryview(_data(1)))])
        assert results[("t", 1)].error is ErrorCode.KAFKA_STORAGE_ERROR
        # StopReplica (a topic deletion) for it: KAFKA_STORAGE_ERROR, as Kafka answers for an
        # offline replica, and still offline; the healthy partition is stopped as asked.
        stop = await rm2.stop_replicas(StopReplicaRequest(
            controller_id=0, controller_epoch=1, broker_epoch=-1, topic_states=[
                StopReplicaRequest.StopReplicaTopicState("t", [
                    StopReplicaRequest.StopReplicaPartitionState(
                        partition_index=i, leader_epoch=-2, delete_partition=True)
                    for i in (0, 1)])]))
        assert stop == ({("t", 0): ErrorCode.NO_ERROR, ("t", 1): ErrorCode.KAFKA_STORAGE_ERROR},
                        ErrorCode.NO_ERROR)
        assert rm2.unknown_partition_error("t", 1) is ErrorCode.KAFKA_STORAGE_ERROR
    rm2.shutdown()
    rm2.log_manager.shutdown(rm2.high_watermarks())

"""partition.metadata written after partition creation, as Kafka does (a LogManager on a
real log dir): creating logs makes no fsync; the batched write makes each file durable
and syncs the log dir once; the first append writes it if the batch has not; a crash
before it leaves no file (never a torn one) and the id is recorded again; another id is
refused."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from protocol.records import NewRecord, build_batch
from storage import fileio
from storage.checkpoints import read_partition_metadata
from storage.errors import InconsistentTopicIdError
from storage.manager import LogManager
from storage.naming import TopicPartition

pytestmark = pytest.mark.timeout(60)
TOPIC_ID = bytes(range(16))
OTHER_ID = bytes(range(1, 17))


def started(d: Path) -> LogManager:
    m = LogManager(d)
    m.startup()
    return m


def meta(d: Path, partition: int) -> Path:
    return d / f"t-{partition}" / "partition.metadata"


def test_creation_defers_and_batches_the_fsyncs(tmp_path: Path) -> None:
    m = started(tmp_path)
    with fileio.recording() as calls:
        logs = [m.get_or_create_log(TopicPartition("t", i), topic_id=TOPIC_ID)
                for i in range(20)]
        assert not [c for c in calls if c.op is fileio.Op.FSYNC]
        assert all(lg.topic_id == TOPIC_ID and lg.topic_id_unwritten for lg in logs)
        assert not any(meta(tmp_path, i).exists() for i in range(20))
        del calls[:]
        assert m.flush_partition_metadata() == 20
        fsynced = [c.path for c in calls if c.op is fileio.Op.FSYNC]
    # each file and its partition directory, and the log dir once for all of them
    assert sorted(fsynced) == sorted(
        [str(meta(tmp_path, i)) + ".tmp" for i in range(20)]
        + [str(tmp_path / f"t-{i}") for i in range(20)] + [str(tmp_path)])
    assert all(read_partition_metadata(meta(tmp_path, i)) == TOPIC_ID for i in range(20))
    assert m.flush_partition_metadata() == 0  # nothing left to write
    m.shutdown()


def test_first_append_writes_it_before_any_data(tmp_path: Path) -> None:
    m = started(tmp_path)
    lg = m.get_or_create_log(TopicPartition("t", 0), topic_id=TOPIC_ID)
    assert not meta(tmp_path, 0).exists()
    lg.append(build_batch([NewRecord(None, b"v")]), leader_epoch=0)
    assert read_partition_metadata(meta(tmp_path, 0)) == TOPIC_ID
    assert not lg.topic_id_unwritten
    m.abandon()


def test_crash_before_the_write_then_the_id_is_recorded_again(tmp_path: Path) -> None:
    m = started(tmp_path)
    m.get_or_create_log(TopicPartition("t", 0), topic_id=TOPIC_ID)
    m.get_or_create_log(TopicPartition("t", 1), topic_id=TOPIC_ID).write_topic_id()
    m.abandon()  # crash: t-0's file was never written, t-1's was
    assert not meta(tmp_path, 0).exists() and meta(tmp_path, 1).exists()
    assert not list(tmp_path.glob("t-*/*.tmp"))

    m = started(tmp_path)
    reopened = m.get_log(TopicPartition("t", 0))
    assert reopened is not None and reopened.topic_id is None
    kept = m.get_log(TopicPartition("t", 1))
    assert kept is not None and kept.topic_id == TOPIC_ID and not kept.topic_id_unwritten
    # the controller's next LeaderAndIsr gives the id again (Kafka's assignTopicId)
    assert m.get_or_create_log(TopicPartition("t", 0), topic_id=TOPIC_ID) is reopened
    assert reopened.topic_id == TOPIC_ID and reopened.topic_id_unwritten
    assert m.flush_partition_metadata() == 1
    assert read_partition_metadata(meta(tmp_path, 0)) == TOPIC_ID
    # another id for a log that has one is refused, in memory and on disk alike
    with pytest.raises(InconsistentTopicIdError):
        m.get_or_create_log(TopicPartition("t", 1), topic_id=OTHER_ID)
    m.shutdown()
    m = started(tmp_path)
    with pytest.raises(InconsistentTopicIdError):
        m.get_or_create_log(TopicPartition("t", 0), topic_id=OTHER_ID)
    lg = m.get_log(TopicPartition("t", 0))
    assert lg is not None and lg.topic_id == TOPIC_ID
    m.shutdown()


def test_close_writes_what_is_left(tmp_path: Path) -> None:
    m = started(tmp_path)
    m.get_or_create_log(TopicPartition("t", 0), topic_id=TOPIC_ID)
    m.shutdown()  # a clean stop leaves every file written
    assert read_partition_metadata(meta(tmp_path, 0)) == TOPIC_ID


@pytest.mark.broker_errors(r"partition\.metadata of t-1 failed")
def test_batched_write_on_a_full_disk_then_a_failed_one(tmp_path: Path) -> None:
    """A full disk leaves the id recorded (no temp file, the dir online) and the next
    batch writes it; any other error takes the log dir offline."""
    m = started(tmp_path)
    m.get_or_create_log(TopicPartition("t", 0), topic_id=TOPIC_ID)
    with fileio.injected(fileio.FaultPlan(nth=1, errno=errno.ENOSPC, op=fileio.Op.WRITE,
                                          path_prefix=str(meta(tmp_path, 0)))):
        assert m.flush_partition_metadata() == 0
    lg = m.get_log(TopicPartition("t", 0))
    assert lg is not None and lg.topic_id_unwritten and not lg.offline
    assert not m.is_offline(tmp_path) and not list(tmp_path.glob("t-0/*.tmp"))
    assert m.flush_partition_metadata() == 1
    assert read_partition_metadata(meta(tmp_path, 0)) == TOPIC_ID

    m.get_or_create_log(TopicPartition("t", 1), topic_id=TOPIC_ID)
    with fileio.injected(fileio.FaultPlan(nth=1, errno=errno.EIO, op=fileio.Op.FSYNC,
                                          path_prefix=str(meta(tmp_path, 1)))):
        assert m.flush_partition_metadata() == 0
    assert m.is_offline(tmp_path)
    failed = m.get_log(TopicPartition("t", 1))
    assert failed is not None and failed.offline
    m.abandon()

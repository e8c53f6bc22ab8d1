"""LogManager on a real log dir: start-up, shutdown, checkpoints, deletion, retention, bad input."""

from __future__ import annotations

import errno
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from protocol.records import NewRecord, build_batch, iter_batches
from storage import fileio
from storage.checkpoints import read_offset_checkpoint, read_partition_metadata
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log import now_ms
from storage.manager import LogDirInUseError, LogManager
from storage.naming import TopicPartition

pytestmark = pytest.mark.timeout(60)
A0 = TopicPartition("a", 0)
B3 = TopicPartition("b-x", 3)
REPO = Path(__file__).resolve().parents[2]


def batch(n: int = 2, ts: int = 1_000, value_bytes: int = 100) -> bytes:
    return build_batch(
        [NewRecord(None, b"v" * value_bytes, timestamp_ms=ts + i) for i in range(n)]
    )


def started(d: Path, cfg: LogConfig | None = None, clock: list[int] | None = None) -> LogManager:
    m = LogManager(d, cfg, clock_ms=(lambda: clock[0]) if clock is not None else now_ms)
    m.startup()
    return m


def test_clean_shutdown_and_restart(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    m = started(tmp_path)
    m.ensure_meta_properties(1, "clusterX")
    a = m.get_or_create_log(A0, topic_id=bytes(range(16)))
    b = m.get_or_create_log(B3)
    for _ in range(5):
        a.append(batch(), leader_epoch=0)
    b.append(batch(3), leader_epoch=2)
    m.shutdown(high_watermarks={A0: 10, B3: 3})
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {A0: 10, B3: 3}
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {A0: 0, B3: 0}
    assert read_offset_checkpoint(tmp_path / "replication-offset-checkpoint") == {A0: 10, B3: 3}
    assert read_partition_metadata(tmp_path / "a-0" / "partition.metadata") == bytes(range(16))
    assert (tmp_path / "b-x-3" / "leader-epoch-checkpoint").read_text() == "0\n1\n2 0\n"
    caplog.set_level(logging.INFO)
    m2 = started(tmp_path)
    assert m2.had_clean_shutdown and "unclean" not in caplog.text
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # a crash from now on is unclean
    a2 = m2.get_log(A0)
    assert a2 is not None and a2.log_end_offset == 10 and a2.topic_id == bytes(range(16))
    assert m2.read_high_watermarks() == {A0: 10, B3: 3}
    m2.ensure_meta_properties(1, "clusterX")
    with pytest.raises(StorageError, match=r"broker\.id"):
        m2.ensure_meta_properties(2, "clusterX")
    m2.shutdown()


def test_log_dir_lock(tmp_path: Path) -> None:
    m = started(tmp_path)
    with pytest.raises(LogDirInUseError):
        started(tmp_path)
    m.shutdown()
    started(tmp_path).shutdown()


def test_recovery_after_sigkill(tmp_path: Path) -> None:
    """A real crash: a child process appends, reports, and is killed with SIGKILL."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from pathlib import Path
        from protocol.records import NewRecord, build_batch
        from storage.manager import LogManager
        from storage.naming import TopicPartition
        m = LogManager(Path({str(tmp_path)!r}))
        m.startup()
        lg = m.get_or_create_log(TopicPartition("a", 0))
        for i in range(200):
            lg.append(build_batch([NewRecord(None, b"x" * 500)] * 3), leader_epoch=i // 50)
        m.write_checkpoints()
        print(lg.log_end_offset, flush=True)
        sys.stdin.read()
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        leo = int(child.stdout.readline())
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    assert leo == 600
    m = started(tmp_path)
    assert not m.had_clean_shutdown
    lg = m.get_log(A0)
    assert lg is not None and lg.log_end_offset == 600
    assert [e.epoch for e in lg.leader_epoch_cache.entries()] == [0, 1, 2, 3]
    data = lg.read(0, 1 << 30).read_bytes()
    assert sum(1 for _ in iter_batches(data)) == 200
    m.shutdown()


def test_bad_input_is_repaired_and_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = LogConfig.from_properties({"segment.bytes": "2000", "index.interval.bytes": "100"})
    m = started(tmp_path, cfg)
    lg = m.get_or_create_log(A0)
    for _ in range(20):
        lg.append(batch(2, value_bytes=200), leader_epoch=0)
    bases = lg.segment_base_offsets
    leo = lg.log_end_offset
    m.shutdown()
    d = tmp_path / "a-0"
    (tmp_path / "notes.txt").write_text("stray")
    (tmp_path / "not a partition").mkdir()
    (d / "README").write_text("stray in partition dir")
    (d / "00000000000000099999.index").write_bytes(b"\x00" * 16)  # orphan index
    (d / "00000000000000000000.log.deleted").write_bytes(b"old")
    (d / f"{bases[1]:020d}.index").write_bytes(b"\x01" * 13)  # wrong size
    with open(d / f"{bases[-1]:020d}.log", "ab") as f:  # garbage after the active tail
        f.write(os.urandom(333))
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n5\ngarbage\n")
    caplog.set_level(logging.INFO)
    m2 = started(tmp_path, cfg)
    text = caplog.text
    assert "stray file notes.txt" in text and "stray directory not a partition" in text
    assert "stray file README" in text and (d / "README").exists()
    assert "00000000000000099999.index" in text and not (d / "00000000000000099999.index").exists()
    assert "leftover file 00000000000000000000.log.deleted" in text
    assert f"{bases[1]:020d}.index: size 13" in text
    assert "log-start-offset-checkpoint" in text
    assert f"{bases[-1]:020d}.log" in text and "333 bytes" in text
    lg2 = m2.get_log(A0)
    assert lg2 is not None and lg2.log_end_offset == leo
    got = next(iter_batches(lg2.read(bases[1] + 1, 1).read_bytes()))  # rebuilt index works
    assert got.base_offset <= bases[1] + 1 <= got.last_offset
    m2.shutdown()


def test_delete_log_renames_then_removes(tmp_path: Path) -> None:
    clock = [1_000_000]
    m = started(tmp_path, clock=clock)
    m.get_or_create_log(A0).append(batch(), leader_epoch=0)
    assert m.delete_log(A0) and not m.delete_log(A0)
    (gone,) = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert gone.name.startswith("a-0.") and m.get_log(A0) is None
    assert m.delete_pending(clock[0] + 59_999) == 0 and gone.exists()  # file.delete.delay.ms
    assert m.delete_pending(clock[0] + 60_000) == 1 and not gone.exists()
    m.get_or_create_log(A0).append(batch(), leader_epoch=0)
    m.delete_log(A0)
    m.abandon()  # crash before the delay passed: start-up removes the -delete directory
    m2 = started(tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    m2.shutdown()


def test_retention_by_time_bytes_and_log_start_offset(tmp_path: Path) -> None:
    clock = [10_000_000]
    cfg = LogConfig.from_properties({"segment.bytes": "1500", "retention.ms": "100000",
                                     "file.delete.delay.ms": "1000"})
    m = started(tmp_path, cfg, clock=clock)
    lg = m.get_or_create_log(A0)
    for i in range(30):  # timestamps: 9_000_000 + 1000 i
        lg.append(batch(2, ts=9_000_000 + i * 1000, value_bytes=200), leader_epoch=0)
    bases = lg.segment_base_offsets
    assert len(bases) >= 6
    # Nothing is older than now - retention.ms = 9_900_000 except... all ts < 9_030_000: all
    # old, yet the active segment stays, and segments at or above the HW stay.
    early_slice = lg.read(0, 1 << 20)
    assert m.retention_pass(clock[0], lambda tp: bases[3]) == 3
    assert lg.segment_base_offsets == bases[3:] and lg.log_start_offset == bases[3]
    deleted = sorted(p.name for p in (tmp_path / "a-0").glob("*.deleted"))
    assert f"{0:020d}.log.deleted" in deleted
    assert early_slice.read_bytes()[:8] == bytes(8)  # the open file still serves the slice
    clock[0] += 1000
    assert m.retention_pass(clock[0], lambda tp: bases[3]) == 0
    assert not list((tmp_path / "a-0").glob("*.deleted"))  # file.delete.delay.ms passed
    assert m.retention_pass(clock[0]) == len(bases) - 4  # HW = LEO: all but the active
    assert lg.segment_base_offsets == bases[-1:]
    m.shutdown()


def test_retention_bytes_and_delete_records(tmp_path: Path) -> None:
    cfg = LogConfig.from_properties({"segment.bytes": "1500", "retention.bytes": "3000"})
    m = started(tmp_path, cfg)
    lg = m.get_or_create_log(A0)
    for _ in range(30):
        lg.append(batch(2, ts=2**42, value_bytes=200), leader_epoch=0)  # far future: no ms rule
    m.retention_pass()
    assert 3000 <= lg.size_bytes < 3000 + 1500
    lg2 = m.get_or_create_log(B3, LogConfig.from_properties({"segment.bytes": "1500"}))
    for _ in range(30):
        lg2.append(batch(2, ts=2**42, value_bytes=200), leader_epoch=0)
    bases = lg2.segment_base_offsets
    assert lg2.delete_records(bases[2] + 1) == bases[2] + 1
    m.retention_pass()
    assert lg2.segment_base_offsets[0] == bases[2] and lg2.log_start_offset == bases[2] + 1
    m.shutdown()
    m2 = started(tmp_path, cfg)
    restored = m2.get_log(B3)
    assert restored is not None and restored.log_start_offset == bases[2] + 1
    m2.shutdown()


def test_flush_ms(tmp_path: Path) -> None:
    clock = [5_000]
    m = started(tmp_path, LogConfig.from_properties({"flush.ms": "100"}), clock=clock)
    lg = m.get_or_create_log(A0)
    lg.append(batch(), leader_epoch=0)
    assert m.flush_due(clock[0] + 50) == 0 and lg.recovery_point == 0
    assert m.flush_due(clock[0] + 100) == 1 and lg.recovery_point == 2
    m.shutdown()


@pytest.mark.broker_errors(r"is offline: loading the logs failed")
def test_partitions_load_in_recovery_threads(tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """num.recovery.threads.per.data.dir: a dir's logs load (here: recover after a crash)
    that many at a time in worker threads, with the same result as one at a time; a disk
    error in one of them takes the dir offline and closes every log opened meanwhile."""
    m = started(tmp_path)
    tps = [TopicPartition("t", i) for i in range(7)]
    for i, tp in enumerate(tps):
        lg = m.get_or_create_log(tp)
        for _ in range(i + 1):
            lg.append(batch(), leader_epoch=0)
    m.abandon()  # a crash: every log recovers at the next start
    caplog.set_level(logging.INFO, logger="storage.loader")
    m2 = LogManager(tmp_path, recovery_threads_per_dir=3)
    m2.startup()
    assert {tp: lg.log_end_offset for tp, lg in m2.logs().items()} == {
        tp: 2 * (i + 1) for i, tp in enumerate(tps)}
    recovered = [r for r in caplog.records if "unclean shutdown, recovering" in r.getMessage()]
    assert len(recovered) == len(tps)
    threads = {r.threadName for r in recovered}
    assert threads <= {f"log-recovery-{tmp_path.name}_{n}" for n in range(3)}, threads
    m2.abandon()
    with fileio.injected(fileio.FaultPlan(nth=1, errno=errno.EIO, times=0,
                                          path_prefix=str(tmp_path / "t-4"))):
        m3 = LogManager(tmp_path, recovery_threads_per_dir=3)
        with pytest.raises(StorageError, match="every log dir failed"):
            m3.startup()
        assert m3.logs() == {} and m3.is_offline(tmp_path)
    m4 = LogManager(tmp_path, recovery_threads_per_dir=3)  # the lock was released
    m4.startup()
    assert len(m4.logs()) == len(tps)
    m4.shutdown()

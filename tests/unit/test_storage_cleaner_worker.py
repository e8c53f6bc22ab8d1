"""The log cleaner with its work in worker processes (``storage.cleaner_process`` /
``storage.cleaner_worker``): the same cleaned bytes as in process, the CPU spent in the
worker and not in the calling process, a worker killed in the middle of a cleaning
(its files removed, the log whole, a new worker, the log retried and cleaned; uncleanable
after repeated deaths), shutdown during a cleaning (aborted, worker exits 0), and a
reconfiguration (threads and workers restarted with the new settings)."""

from __future__ import annotations

import logging
import math
import os
import resource
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

import storage.cleaner as cleaner_module
import storage.cleaner_native as native
from storage.cleaner import (
    Cleaner,
    CleanerConfig,
    LogCleaner,
    LogHost,
    PartitionState,
    Throttler,
    WorkerCleaner,
)
from storage.cleaner_manager import CleanerManager
from storage.log import Log
from tests.unit.test_storage_cleaner import TP, Clock, fill, open_log, records_of
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)
WAIT_S = 90.0


class Lines(logging.Handler):
    """The messages of the cleaner's log records (threads and workers included)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def count(self, text: str) -> int:
        return sum(text in m for m in self.messages)


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger("storage.cleaner")
    old_level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def log_cleaner(lg: Log, clock: Clock, **config: object) -> LogCleaner:
    settings: dict[str, object] = {"dedupe_buffer_size": 8 << 20, "backoff_ms": 50, **config}
    manager = CleanerManager(lg.dir.parent, lambda: {TP: lg})
    return LogCleaner(CleanerConfig(**settings), manager,  # type: ignore[arg-type]
                      partition_states=lambda tps: {TP: PartitionState(lg.log_end_offset, {})},
                      clock_ms=clock)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def big_log(d: Path, clock: Clock, records: int = 40_000) -> Log:
    lg = open_log(d, clock, **{"segment.bytes": str(1 << 20)})
    fill(lg, clock, records, 500)
    lg.roll()
    return lg


def test_a_worker_cleans_to_the_same_bytes_spending_its_own_cpu(tmp_path: Path,
                                                                  lines: Lines) -> None:
    clock = Clock()
    here, there = big_log(tmp_path / "here", clock), big_log(tmp_path / "there", clock)
    in_process = log_cleaner(here, clock)
    start = resource.getrusage(resource.RUSAGE_SELF)
    assert in_process.clean_filthiest(
        Cleaner(0, in_process.config, Throttler(math.inf, in_process._stop),
                in_process._check_done))
    in_process_cpu = cpu(resource.getrusage(resource.RUSAGE_SELF)) - cpu(start)
    cleaner = log_cleaner(there, clock)
    worker = WorkerCleaner(0, cleaner.config, cleaner._check_done)
    worker.process.start()
    pid = worker.process.pid
    assert pid is not None and pid != os.getpid()
    assert lines.count(f"Log cleaner worker 0 started (pid {pid}, record scan ") == 1
    before_self = resource.getrusage(resource.RUSAGE_SELF)
    assert cleaner.clean_filthiest(worker)
    after_self = resource.getrusage(resource.RUSAGE_SELF)
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker.process.stop()
    after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert not alive(pid)
    assert cleaner.totals.cleanings == 1 and cleaner.totals.bytes_read > 3 << 20
    # byte for byte what the in-process cleaner wrote, file by file
    names = sorted(p.name for p in (tmp_path / "here" / "t-0").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "there" / "t-0").iterdir())
    for name in names:
        if name.endswith((".log", ".index", ".timeindex")):
            assert (tmp_path / "here" / "t-0" / name).read_bytes() == \
                (tmp_path / "there" / "t-0" / name).read_bytes(), name
    assert records_of(here) == records_of(there)
    # the cleaning's CPU was the worker's: the calling process served a few requests, a
    # small part of what the same cleaning costs in process
    worker_cpu = cpu(after_children) - cpu(before_children)
    caller_cpu = cpu(after_self) - cpu(before_self)
    assert 4 * caller_cpu < in_process_cpu < worker_cpu, (caller_cpu, in_process_cpu, worker_cpu)
    assert lines.count(f"Log cleaner worker 0 (pid {pid}) stopped (exited with code 0)") == 1
    here.close()
    there.close()


def test_a_worker_on_the_pure_python_scan_writes_the_same_bytes(
        tmp_path: Path, lines: Lines, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback of a machine without a C compiler, end to end: a worker told to run the
    pure module cleans to the bytes of the build this process runs (compiled where
    scripts/setup could build it)."""
    clock = Clock()
    here = open_log(tmp_path / "here", clock, **{"segment.bytes": "65536"})
    there = open_log(tmp_path / "there", clock, **{"segment.bytes": "65536"})
    for lg in (here, there):
        fill(lg, clock, 6000, 200)
        lg.roll()
    in_process = log_cleaner(here, clock)
    assert in_process.clean_filthiest(
        Cleaner(0, in_process.config, Throttler(math.inf, in_process._stop),
                in_process._check_done))
    monkeypatch.setenv(native.ENV_VAR, "pure")
    cleaner = log_cleaner(there, clock)
    worker = WorkerCleaner(0, cleaner.config, cleaner._check_done)
    worker.process.start()
    try:
        assert lines.count(f"record scan pure Python ({native.ENV_VAR}=pure))") == 1
        assert cleaner.clean_filthiest(worker)
    finally:
        worker.process.stop()
    assert cleaner.totals.cleanings == 1
    names = sorted(p.name for p in (tmp_path / "here" / "t-0").iterdir()
                   if p.name.endswith((".log", ".index", ".timeindex")))
    assert len(names) > 3
    assert names == sorted(p.name for p in (tmp_path / "there" / "t-0").iterdir()
                           if p.name.endswith((".log", ".index", ".timeindex")))
    for name in names:
        assert (tmp_path / "here" / "t-0" / name).read_bytes() == \
            (tmp_path / "there" / "t-0" / name).read_bytes(), name
    here.close()
    there.close()


class Killer:
    """SIGKILLs the worker when it asks for the ``nth`` segment descriptor of a cleaning
    (the map pass asks for each dirty segment, then each group for its own), in ``times``
    cleanings; records the pids and whether ``.cleaned`` files were there then."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cleaner: LogCleaner, nth: int,
                 times: int) -> None:
        self.killed: list[int] = []
        self.cleaned_files_at_kill: list[bool] = []
        self._calls = 0
        original = LogHost.segment_fd

        def segment_fd(host: LogHost, base_offset: int) -> int:
            self._calls += 1
            if self._calls == nth and len(self.killed) < times:
                self._calls = 0
                pid = cleaner.worker_pids()[0]
                assert pid is not None
                self.cleaned_files_at_kill.append(bool(list(host.ltc.log.dir.glob("*.cleaned"))))
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)
                wait_for(lambda: not alive(pid) or _zombie(pid), WAIT_S, "the worker to die")
            return original(host, base_offset)

        monkeypatch.setattr(LogHost, "segment_fd", segment_fd)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return False


def test_a_worker_killed_mid_cleaning_is_replaced_and_the_log_retried(
        tmp_path: Path, lines: Lines, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleaner_module, "WORKER_RESTART_BACKOFF_S", 0.05)
    clock = Clock()
    lg = open_log(tmp_path, clock, **{"segment.bytes": "65536"})
    latest = fill(lg, clock, 8000, 300)
    lg.roll()
    leo = lg.log_end_offset
    cleaner = log_cleaner(lg, clock)
    # the map pass asks for every segment once; then the first group for its first one:
    # the kill comes while the worker writes the first cleaned segment
    segments = len(lg.segment_base_offsets) - 1
    killer = Killer(monkeypatch, cleaner, segments + 1, times=1)
    killed = killer.killed
    cleaner.start()
    new_pid = None
    try:
        wait_for(lambda: cleaner.manager.checkpoints().get(TP) == leo, WAIT_S,
                 "the log to be cleaned after the worker's death")
        assert len(killed) == 1 and killer.cleaned_files_at_kill == [True]
        assert lines.count(f"log cleaner worker 0 (pid {killed[0]}) was killed by SIGKILL during "
                           "the cleaning of t-0") == 1
        assert lines.count("the cleaning is aborted and will be retried (1 of 3)") == 1
        assert lines.count("Restarting log cleaner worker 0") == 1
        assert cleaner.totals.aborted == 1 and cleaner.totals.cleanings == 1
        assert cleaner.totals.worker_restarts == 1 and cleaner.manager.uncleanable_count == 0
        new_pid = cleaner.worker_pids()[0]
        assert new_pid is not None and new_pid != killed[0]
        assert cleaner.dead_thread_count == 0
    finally:
        cleaner.shutdown()
    assert new_pid is not None and not alive(new_pid)
    assert not list(lg.dir.glob("*.cleaned")) and not list(lg.dir.glob("*.swap"))
    assert [(k, v) for _, k, v, _ in records_of(lg)] == [
        (k, v) for k, (_, v) in sorted(latest.items(), key=lambda kv: kv[1][0])]
    lg.close()


def test_a_log_whose_cleaning_kills_the_worker_three_times_is_uncleanable(
        tmp_path: Path, lines: Lines, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleaner_module, "WORKER_RESTART_BACKOFF_S", 0.05)
    clock = Clock()
    lg = open_log(tmp_path, clock)
    fill(lg, clock, 2000, 50)
    lg.roll()
    before = records_of(lg)
    cleaner = log_cleaner(lg, clock)
    killed = Killer(monkeypatch, cleaner, 1, times=3).killed
    cleaner.start()
    try:
        wait_for(lambda: cleaner.manager.uncleanable_count == 1, WAIT_S,
                 "the partition to be marked uncleanable")
        wait_for(lambda: cleaner.worker_pids()[0] is not None, WAIT_S, "a fourth worker")
        assert len(killed) == 3
        assert lines.count("3 cleanings of t-0 in a row ended so: marking it uncleanable") == 1
        assert cleaner.totals.failed == 1 and cleaner.totals.aborted == 2
        assert cleaner.totals.cleanings == 0
    finally:
        cleaner.shutdown()
    assert records_of(lg) == before
    assert not list(lg.dir.glob("*.cleaned"))
    lg.close()


def test_shutdown_aborts_a_running_cleaning_and_stops_the_worker(tmp_path: Path,
                                                                 lines: Lines) -> None:
    clock = Clock()
    lg = big_log(tmp_path, clock, records=20_000)
    before = records_of(lg)
    cleaner = log_cleaner(lg, clock, max_io_bytes_per_second=200_000.0)  # ~2 min a cleaning
    cleaner.start()
    wait_for(lambda: lines.count("Beginning cleaning of log t-0") == 1, WAIT_S,
             "the worker to begin cleaning")
    pid = cleaner.worker_pids()[0]
    assert pid is not None
    cleaner.shutdown()
    assert not alive(pid)
    assert lines.count("Cleaning of log t-0 stopped: the cleaner is shutting down") == 1
    assert lines.count(f"Log cleaner worker 0 (pid {pid}) stopped (exited with code 0)") == 1
    assert cleaner.totals.aborted == 1 and cleaner.totals.cleanings == 0
    assert TP not in cleaner.manager.checkpoints()
    assert not list(lg.dir.glob("*.cleaned"))
    assert records_of(lg) == before
    lg.close()


def test_a_paused_partition_stops_the_worker_s_cleaning_of_it(tmp_path: Path,
                                                              lines: Lines) -> None:
    """``abort_and_pause`` (what deletion and truncation use) returns once the worker has
    stopped; the log stays as it was."""
    clock = Clock()
    lg = big_log(tmp_path, clock, records=20_000)
    before = records_of(lg)
    cleaner = log_cleaner(lg, clock, max_io_bytes_per_second=200_000.0)
    cleaner.start()
    try:
        wait_for(lambda: lines.count("Beginning cleaning of log t-0") == 1, WAIT_S,
                 "the worker to begin cleaning")
        assert cleaner.manager.abort_and_pause(TP, timeout_s=WAIT_S)
        assert lines.count("Cleaning of log t-0 stopped: t-0: cleaning aborted") == 1
        assert not list(lg.dir.glob("*.cleaned"))
        assert records_of(lg) == before
        assert cleaner.worker_pids()[0] is not None  # the worker lives on for other logs
    finally:
        cleaner.shutdown()
    lg.close()


def test_worker_logs_reach_the_broker_log(tmp_path: Path, lines: Lines) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock)
    fill(lg, clock, 500, 20)
    lg.roll()
    cleaner = log_cleaner(lg, clock)
    worker = WorkerCleaner(0, cleaner.config, cleaner._check_done)
    worker.process.start()
    try:
        assert cleaner.clean_filthiest(worker)
    finally:
        worker.process.stop()
    # written by the worker, logged by the calling process
    assert lines.count("Beginning cleaning of log t-0") == 1
    assert lines.count("Cleaning log t-0: ") == 1
    assert lines.count("Log cleaner thread 0 cleaned log t-0") == 1
    lg.close()



def test_reconfigure_restarts_threads_and_workers_and_nothing_after_shutdown(
        tmp_path: Path, lines: Lines) -> None:
    """New settings (the dynamic broker configs): the threads and their workers stop and as
    many as the new settings say start, each worker with the new settings; after shutdown
    a reconfiguration starts nothing."""
    clock = Clock()
    lg = open_log(tmp_path / "p", clock)
    cleaner = log_cleaner(lg, clock)
    cleaner.start()
    try:
        wait_for(lambda: cleaner.worker_pids()[0] is not None, WAIT_S, "the first worker")
        (first,) = cleaner.worker_pids()
        faster = replace(cleaner.config, threads=2, max_io_bytes_per_second=1e6)
        cleaner.reconfigure(faster)
        assert cleaner.config == faster
        wait_for(lambda: None not in cleaner.worker_pids(), WAIT_S, "two new workers")
        pids = cleaner.worker_pids()
        assert len(pids) == 2 and first not in pids and first is not None and not alive(first)
        assert cleaner.throttler.rate == 1e6
        assert lines.count("Updating logCleanerIoMaxBytesPerSecond: 1000000.0") == 1
        assert lines.count("Starting the log cleaner (2 threads") == 1
    finally:
        cleaner.shutdown()
    assert not any(pid is not None and alive(pid) for pid in pids)
    cleaner.reconfigure(replace(cleaner.config, threads=1))
    assert cleaner.worker_pids() == [] and cleaner.config.threads == 2
    assert lines.count("Starting the log cleaner") == 2

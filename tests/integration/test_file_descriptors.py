"""Open files of a real broker: one descriptor per partition (its active segment's
``.log``), whatever the number of segments, plus a bounded number for the process.

The broker runs under an open-file limit of ``NOFILE`` (1,024, a common default), which
makes its budget of maps and sealed segments' files 128 (``storage.map_budget``: an eighth
of the limit). With five descriptors per segment (the ``.log``, and each index file plus
the duplicate Python's ``mmap`` keeps of it), 400 partitions would need 2,000 and the
broker would fail with EMFILE; held to one per partition they fit with room to spare, and
so do 1,100 segments of one partition. Counts are read from ``/proc/<pid>/fd``. The sealed
segments' lookups are checked after a clean restart (no index open) and after the budget
closed their files and maps: Fetch from old offsets, ListOffsets by timestamp, retention
by time.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from client.sync import SyncClient
from tests.integration.broker_process import BrokerProcess
from tests.integration.data_path_client import (
    EARLIEST,
    LATEST,
    batch,
    create_topic,
    fetch,
    list_offset,
    produce,
    records_of,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(240)

NOFILE = 1024
MAP_BUDGET = NOFILE // 8
SLACK = 40  # sockets, the log dir lock, pipes, epoll, files opened for a moment
# A flush under way (after a roll, in a thread pool) has the segment's .log and its two
# index files open for fsync, outside the budget: a moment's descriptors.
IN_FLIGHT = 3
WAIT_S = 60.0
_WITH_LIMIT = ("import os, resource, sys; n = int(sys.argv[1]); "
               "resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)); "
               "os.execvp(sys.argv[2], sys.argv[2:])")


class LimitedBroker(BrokerProcess):
    """A broker whose RLIMIT_NOFILE (soft and hard) is ``NOFILE``."""

    def command(self) -> list[str]:
        return [sys.executable, "-c", _WITH_LIMIT, str(NOFILE), *super().command()]


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[Callable[[], BrokerProcess]]:
    """Start a ``LimitedBroker`` (retention checked every 200 ms); stopped at teardown."""
    brokers: list[BrokerProcess] = []

    def start() -> BrokerProcess:
        proc = LimitedBroker(tmp_path, {"log.retention.check.interval.ms": "200"})
        brokers.append(proc)
        proc.start()
        assert open_file_limit(proc.pid) == (NOFILE, NOFILE)
        return proc

    yield start
    for proc in brokers:
        proc.stop()


def open_file_limit(pid: int) -> tuple[int, int]:
    """(soft, hard) "Max open files" of the process."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError(f"no open-file limit in /proc/{pid}/limits")


def open_files(proc: BrokerProcess) -> Counter[str]:
    """What the broker's descriptors point at, by kind: ``.log``, ``.index``, ``.timeindex``
    (segment files in its log dir), ``socket``, ``other``."""
    kinds: Counter[str] = Counter()
    fd_dir = Path(f"/proc/{proc.pid}/fd")
    log_dir = str(proc.log_dir.resolve()) + "/"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except FileNotFoundError:  # closed meanwhile
            continue
        target = target.removesuffix(" (deleted)")
        kind = next((s for s in (".log", ".index", ".timeindex")
                     if target.startswith(log_dir) and target.endswith(s)), None)
        kinds[kind or ("socket" if target.startswith("socket:") else "other")] += 1
    return kinds


def test_hundreds_of_partitions_hold_one_descriptor_each(
        limited: Callable[[], BrokerProcess]) -> None:
    proc = limited()
    partitions = 400  # at five descriptors each: 2,000, twice the limit
    idle = sum(open_files(proc).values())
    create_topic(proc.bootstrap, "many", partitions)
    with SyncClient(proc.bootstrap, timeout_ms=30_000) as client:
        for p in range(partitions):
            assert produce(client, "many", p, batch([b"v%d" % p]), acks=1).error_code == 0
        for p in range(partitions):  # every .log gets mapped once: the budget holds them
            part = fetch(client, "many", p, 0).responses[0].partitions[0]
            assert part.error_code == 0 and [r.value for r in records_of(part.records)] == [b"v%d" % p]
    files = open_files(proc)
    assert files[".index"] == files[".timeindex"] == 0  # active indexes hold no descriptor
    assert partitions <= files[".log"] <= partitions + MAP_BUDGET + IN_FLIGHT
    assert sum(files.values()) <= idle + partitions + MAP_BUDGET + SLACK, files

    proc.restart()  # clean stop and start: no map, no index open
    files = open_files(proc)
    assert files[".log"] == partitions and files[".index"] == files[".timeindex"] == 0, files
    with SyncClient(proc.bootstrap, timeout_ms=30_000) as client:
        for p in range(partitions):
            assert produce(client, "many", p, batch([b"w%d" % p]), acks=1).base_offset == 1
            part = fetch(client, "many", p, 0).responses[0].partitions[0]
            assert [r.value for r in records_of(part.records)] == [b"v%d" % p, b"w%d" % p]
    assert sum(open_files(proc).values()) <= idle + partitions + MAP_BUDGET + SLACK


def test_many_segments_stay_within_the_budget_and_sealed_lookups_work(
        limited: Callable[[], BrokerProcess]) -> None:
    """1,100 one-batch segments (more than the limit of open files): the active ``.log``
    plus at most the budget's files and maps, and the sealed segments (closed by a restart,
    then by the budget) still answer Fetch at old offsets, ListOffsets by timestamp and
    retention by time."""
    proc = limited()
    segments = 1100
    topic = "segs"
    create_topic(proc.bootstrap, topic, 1, {"segment.bytes": "1024", "file.delete.delay.ms": "0",
                                            "retention.ms": "-1"})  # until set below
    old_ms = int(time.time() * 1000) - 10 * 24 * 3_600_000  # ten days ago, a second apart
    value = b"x" * 600  # one batch fills a segment: every produce rolls the next one
    with SyncClient(proc.bootstrap, timeout_ms=30_000) as client:
        for i in range(segments):
            result = produce(client, topic, 0, batch([value + b"%d" % i],
                                                     timestamp_ms=old_ms + i * 1000), acks=1)
            assert (result.error_code, result.base_offset) == (0, i)
    log_dir = proc.log_dir / f"{topic}-0"
    assert len(list(log_dir.glob("*.log"))) == segments
    files = open_files(proc)
    segment_files = files[".log"] + files[".index"] + files[".timeindex"]
    assert 1 <= segment_files <= 1 + MAP_BUDGET + IN_FLIGHT, files

    proc.restart()
    files = open_files(proc)
    assert 1 <= files[".log"] <= 1 + MAP_BUDGET, files
    assert files[".index"] == files[".timeindex"] == 0, files
    with SyncClient(proc.bootstrap, timeout_ms=30_000) as client:
        for _ in range(2):  # the second pass finds the first one's maps evicted
            for i in range(segments):
                part = fetch(client, topic, 0, i).responses[0].partitions[0]
                (record,) = records_of(part.records)
                assert (record.offset, record.value) == (i, value + b"%d" % i)
        for i in range(0, segments, 37):
            assert list_offset(client, topic, 0, old_ms + i * 1000)[:3] == (0, old_ms + i * 1000, i)
            assert list_offset(client, topic, 0, old_ms + i * 1000 - 500)[2] == i
        files = open_files(proc)
        segment_files = files[".log"] + files[".index"] + files[".timeindex"]
        assert segment_files <= 1 + MAP_BUDGET + IN_FLIGHT, files

        # Retention by time reads every sealed segment's largest timestamp from its time index.
        client.alter_topic_configs(topic, {"retention.ms": str(24 * 3_600_000)})
        wait_for(lambda: len(list(log_dir.glob("*.log"))) == 1, WAIT_S, "only the active segment left")
        assert list_offset(client, topic, 0, EARLIEST)[2] == segments - 1
        assert list_offset(client, topic, 0, LATEST)[2] == segments
    files = open_files(proc)
    assert files[".log"] <= 2 and files[".index"] + files[".timeindex"] <= 2, files

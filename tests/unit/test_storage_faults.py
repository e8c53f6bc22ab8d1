"""Fault injection at every write site of storage (``storage.fileio``).

A deterministic workload drives a ``LogManager`` through every kind of write storage
makes: creating logs (directory, segment and index files), ``partition.metadata`` (written
by the first append), leader appends with index entries (also two clients' batches written
together, as the produce fast path groups them), rolls, flushes (fsync, msync,
directory fsync, leader epoch checkpoint), offset and high watermark checkpoints, DeleteRecords with a retention pass
(segment renames and unlinks), follower appends with a truncation, deleting a log, and a
clean shutdown (final index entries, trims, checkpoints, the clean-shutdown marker).

The workload is first run with ``fileio.record()`` to list every call. Then, for each
call (in CI: each distinct site's first call, and its last for ENOSPC; every call with
``MINIKAFKA_FAULTS_EXHAUSTIVE=1``), for ENOSPC and EIO, a forked child runs the workload with that one call failing and checks
the log right after the error; it then either shuts down cleanly or is killed with
SIGKILL by the parent. The parent reopens the directory and checks again. Each time:
every acknowledged record is there with its value, no offset is given twice (batches
follow each other, CRCs hold), nothing refused for a full disk was kept, and the
reopened log takes a new append at its end.
"""

from __future__ import annotations

import errno
import json
import os
import select
import shutil
import signal
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

from protocol.records import NewRecord, build_batch, iter_batches, read_single_batch
from storage import fileio
from storage.config import LogConfig
from storage.errors import LogDirOfflineError, LogIOError, StorageError
from storage.log import Log
from storage.manager import LogManager
from storage.naming import TopicPartition

pytestmark = pytest.mark.timeout(600)

A = TopicPartition("a", 0)  # leader appends, rolls, flushes, DeleteRecords, retention
B = TopicPartition("b", 0)  # follower appends, then a truncation, then leader appends
C = TopicPartition("c", 0)  # created, written, deleted
CLOCK_MS = 1_700_000_000_000
CFG = LogConfig.from_properties({
    "segment.bytes": "2600", "index.interval.bytes": "200", "file.delete.delay.ms": "0",
    "retention.ms": "-1",
})
CHILD_TIMEOUT_S = 30.0


def clock() -> int:
    return CLOCK_MS


LARGE_RECORDS = 36  # 4.7 KB


def value(tag: str, i: int, k: int) -> bytes:
    head = f"{tag}{i}#{k}|".encode()
    return head + b"v" * (120 - len(head))


@dataclass
class Outcome:
    """What the workload saw: acknowledged records, what was refused, where data may go."""

    acked: dict[str, dict[int, str]] = field(default_factory=dict)  # topic -> offset -> value
    refused_full: list[str] = field(default_factory=list)  # LogIOError: rolled back
    floor: dict[str, int] = field(default_factory=dict)  # offsets below may be deleted
    truncated_from: dict[str, int] = field(default_factory=dict)  # offsets at/above may go
    errors: list[str] = field(default_factory=list)
    startup_failed: bool = False

    def ack(self, tp: TopicPartition, first: int, values: list[bytes]) -> None:
        per = self.acked.setdefault(tp.topic, {})
        for k, v in enumerate(values):
            per[first + k] = v.decode()

    def refuse(self, exc: StorageError, values: list[bytes]) -> None:
        self.errors.append(type(exc).__name__)
        if isinstance(exc, LogIOError):
            self.refused_full.extend(v.decode() for v in values)


def _append(out: Outcome, lg: Log, tp: TopicPartition, tag: str, i: int, epoch: int) -> None:
    # One batch over HEADER_ONLY_MIN_BYTES (i 1, odd: appended without a copy, below)
    values = [value(tag, i, k) for k in range(LARGE_RECORDS if i == 1 else 2)]
    data = build_batch([NewRecord(None, v, timestamp_ms=CLOCK_MS + i) for v in values])
    if i % 5 == 3:  # two clients' batches appended together, as the produce fast path does
        _append_group(out, lg, tp, values, i, epoch)
        return
    try:
        if i % 2:  # a client's batch as the broker appends it (large: the header patched apart)
            single = read_single_batch(data)
            assert single is not None
            info = lg.append_client_batch(single[0], single[1], epoch)
        else:
            info = lg.append(data, leader_epoch=epoch)
    except StorageError as exc:
        out.refuse(exc, values)
        return
    out.ack(tp, info.first_offset, values)


def _append_group(out: Outcome, lg: Log, tp: TopicPartition, values: list[bytes], i: int,
                  epoch: int) -> None:
    """One batch per value, checked, then appended together (``append_client_batches``),
    or one by one where the log says they cannot be (a roll in between)."""
    pairs = []
    for v in values:
        single = read_single_batch(build_batch([NewRecord(None, v, timestamp_ms=CLOCK_MS + i)]))
        assert single is not None
        pairs.append(single)
    try:
        for view, head in pairs:
            lg.check_client_batch(view, head, clock())
        group = lg.append_client_batches([(view, head[1:]) for view, head in pairs], epoch,
                                         clock())
    except StorageError as exc:  # nothing of the group was kept
        out.refuse(exc, values)
        return
    if group is not None:
        for v, first in zip(values, group.first_offsets, strict=True):
            out.ack(tp, first, [v])
        return
    for v, (view, head) in zip(values, pairs, strict=True):
        try:
            info = lg.append_checked_client_batch(view, head, epoch, clock())
        except StorageError as exc:
            out.refuse(exc, [v])
            continue
        out.ack(tp, info.first_offset, [v])


def _quietly(out: Outcome, call: Callable[[], object]) -> None:
    try:
        call()
    except StorageError as exc:
        out.errors.append(type(exc).__name__)


def workload(d: Path, out: Outcome) -> LogManager | None:
    """Everything storage writes, in a fixed order; returns the (open) manager."""
    m = LogManager(d, CFG, clock_ms=clock)
    try:
        m.startup()
    except StorageError:
        out.startup_failed = True
        return None
    m.ensure_meta_properties(0, "faults")
    try:
        a = m.get_or_create_log(A, topic_id=bytes(range(16)))
    except StorageError as exc:
        out.errors.append(type(exc).__name__)
        return m
    for i in range(30):
        _append(out, a, A, "a", i, epoch=i // 12)
        if i % 9 == 8:
            _quietly(out, a.flush)
            m.write_checkpoints()
            m.write_high_watermarks({A: int(a.log_end_offset)})
        if i == 20 and not a.offline:
            base = a.segment_base_offsets[1]
            _quietly(out, lambda base=base: a.delete_records(base))  # type: ignore[misc]
            out.floor["a"] = base
            m.retention_pass(CLOCK_MS, lambda tp: None)
    try:
        b = m.get_or_create_log(B)
    except StorageError as exc:
        out.errors.append(type(exc).__name__)
        return m
    offset = 0
    for j in range(10):  # as a follower: the batches carry their offsets and epochs
        values = [value("f", j, k) for k in range(2)]
        data = build_batch([NewRecord(None, v, timestamp_ms=CLOCK_MS) for v in values],
                           base_offset=offset, partition_leader_epoch=3)
        try:
            b.append_as_follower(data)
        except StorageError as exc:
            out.refuse(exc, values)
            break
        out.ack(B, offset, values)
        offset += 2
    if not b.offline and b.log_end_offset > 8:
        out.truncated_from["b"] = 8
        try:
            b.truncate_to(8)
        except StorageError as exc:
            out.errors.append(type(exc).__name__)
        else:
            out.acked["b"] = {o: v for o, v in out.acked.get("b", {}).items() if o < 8}
            out.truncated_from.pop("b")
    for j in range(3):
        _append(out, b, B, "b", j, epoch=4)
    try:
        c = m.get_or_create_log(C)
        c.append(build_batch([NewRecord(None, b"c")]), leader_epoch=0)
        m.delete_log(C)
    except StorageError as exc:
        out.errors.append(type(exc).__name__)
    return m


# ------------------------------------------------------------------ checks


def check_log(lg: Log, topic: str, out: Outcome) -> None:
    """Batches follow each other (no offset twice, CRCs hold); every acknowledged record
    at or above the floor is there; nothing refused for a full disk is."""
    start, end = int(lg.log_start_offset), int(lg.log_end_offset)
    floor = out.floor.get(topic, 0)
    assert start <= max(floor, 0) or topic not in out.floor or start <= floor
    seen: dict[int, str] = {}
    position = start
    expected: int | None = None
    while position < end:  # one segment per read
        data = lg.read(position, 1 << 30).read_bytes()
        assert data, (topic, position, end)
        for batch in iter_batches(data):
            assert batch.verify_crc(), (topic, batch.base_offset)
            if expected is not None:
                assert batch.base_offset == expected, (topic, batch.base_offset, expected)
            expected = batch.last_offset + 1
            for record in batch.records():
                assert record.value is not None
                seen[record.offset] = bytes(record.value).decode()
        position = expected if expected is not None else end
    cut = out.truncated_from.get(topic)
    for o, v in out.acked.get(topic, {}).items():
        if o < max(start, floor) or (cut is not None and o >= cut):
            continue
        assert seen.get(o) == v, f"{topic}: acknowledged offset {o} lost ({seen.get(o)!r})"
    kept = set(seen.values()) & set(out.refused_full)
    assert not kept, f"{topic}: refused records stored: {sorted(kept)[:3]}"


def check_after_error(m: LogManager, out: Outcome) -> None:
    """In the child, right after the workload: online logs are whole and usable; offline
    ones refuse reads and writes with KAFKA_STORAGE_ERROR."""
    for tp in (A, B):
        lg = m.get_log(tp)
        if lg is None:
            continue
        if lg.offline:
            with pytest.raises(LogDirOfflineError):
                lg.read(int(lg.log_start_offset), 100)
            with pytest.raises(LogDirOfflineError):
                lg.append(build_batch([NewRecord(None, b"late")]), leader_epoch=9)
            continue
        check_log(lg, tp.topic, out)
        acked = out.acked.get(tp.topic, {})
        if tp == A and acked:
            assert int(lg.log_end_offset) == max(acked) + 1  # nothing refused moved the end


def check_reopened(d: Path, out: Outcome) -> None:
    m = LogManager(d, CFG, clock_ms=clock)
    m.startup()
    try:
        for tp in (A, B):
            lg = m.get_log(tp)
            if lg is None:
                assert not out.acked.get(tp.topic), f"{tp}: log with acknowledged data gone"
                continue
            assert not lg.offline
            check_log(lg, tp.topic, out)
            end = int(lg.log_end_offset)
            info = lg.append(build_batch([NewRecord(None, b"after restart")]), leader_epoch=9)
            assert info.first_offset == end
            got = next(iter_batches(lg.read(end, 1 << 20).read_bytes()))
            assert got.base_offset == end
    finally:
        m.shutdown()


# ------------------------------------------------------------------ running a case


def _run_child(d: Path, plan: fileio.FaultPlan | None, mode: str) -> dict[str, object]:
    """Fork: the workload with ``plan``, checks, then a clean shutdown or SIGKILL."""
    report_r, report_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 0
        try:
            os.close(report_r)
            os.close(hold_w)
            out = Outcome()
            if plan is not None:
                fileio.inject(plan)
            m = workload(d, out)
            if m is not None:
                check_after_error(m, out)
            if mode == "clean" and m is not None:
                m.shutdown()
            result: dict[str, object] = {"outcome": asdict(out), "raised": fileio.faults_raised()}
        except BaseException:
            result = {"failure": traceback.format_exc()}
            code = 1
        os.write(report_w, json.dumps(result).encode() + b"\n")
        if mode == "kill" and code == 0:
            os.read(hold_r, 1)  # wait for SIGKILL
        os._exit(code)
    os.close(report_w)
    os.close(hold_r)
    chunks: list[bytes] = []
    try:
        while not chunks or not chunks[-1].endswith(b"\n"):
            ready, _, _ = select.select([report_r], [], [], CHILD_TIMEOUT_S)
            assert ready, "the child did not report in time"
            chunk = os.read(report_r, 1 << 20)
            assert chunk, "the child died without a report"
            chunks.append(chunk)
    finally:
        os.close(report_r)
        if mode == "kill":
            os.kill(pid, signal.SIGKILL)
        os.close(hold_w)
        os.waitpid(pid, 0)
    result = json.loads(b"".join(chunks))
    assert "failure" not in result, result.get("failure")
    return result


def run_case(d: Path, plan: fileio.FaultPlan | None, mode: str) -> Outcome:
    result = _run_child(d, plan, mode)
    out = Outcome(**result["outcome"])  # type: ignore[arg-type]
    out.acked = {t: {int(o): v for o, v in per.items()} for t, per in out.acked.items()}
    if plan is not None:
        assert result["raised"] == 1, f"the planned fault was not hit: {plan}"
    check_reopened(d, out)
    return out


# ------------------------------------------------------------------ the cases


def _recorded_calls(tmp_path: Path) -> tuple[Path, list[fileio.Call], int]:
    """Every call of the workload, and how many of them come before the shutdown."""
    d = tmp_path / "recorded"
    with fileio.recording() as calls:
        m = workload(d, Outcome())
        assert m is not None
        before_shutdown = len(calls)
        m.shutdown()
    return d, list(calls), before_shutdown


def _kind(path: str) -> str:
    """What sort of file: a segment file's suffix, a checkpoint's name, or "dir"."""
    name = Path(path).name.removesuffix(".tmp")
    for suffix in (".log", ".index", ".timeindex", ".deleted"):
        if name.endswith(suffix):
            return suffix
    return "dir" if "." not in name and "-" in name and name[-1].isdigit() else name


def _plans(root: Path, calls: list[fileio.Call], before_shutdown: int, *, exhaustive: bool,
           last_too: bool) -> list[tuple[fileio.FaultPlan, bool]]:
    """(plan, in the shutdown) per call, or per distinct site (op, function, kind of file,
    during the shutdown or not): its first call (and its last with ``last_too``). A plan
    names the k-th call of its op on its file."""
    occurrence: dict[tuple[fileio.Op, str], int] = {}
    by_site: dict[tuple[fileio.Op, str, str, bool], list[fileio.FaultPlan]] = {}
    plans: list[tuple[fileio.FaultPlan, bool]] = []
    for i, call in enumerate(calls):
        key = (call.op, call.path)
        occurrence[key] = occurrence.get(key, 0) + 1
        plan = fileio.FaultPlan(nth=occurrence[key], op=call.op,
                                path=os.path.relpath(call.path, root))
        in_shutdown = i >= before_shutdown
        plans.append((plan, in_shutdown))
        by_site.setdefault((call.op, call.site, _kind(call.path), in_shutdown), []).append(plan)
    if exhaustive:
        return plans
    chosen = {id(p) for ps in by_site.values() for p in (ps[0], ps[-1] if last_too else ps[0])}
    return [(p, s) for p, s in plans if id(p) in chosen]


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on tmpfs (/dev/shm) when there is one: fsync costs nothing there, so
    hundreds of cases take seconds; the faults are injected above the file system."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    d = Path(tempfile.mkdtemp(prefix="storage-faults-", dir=shm))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_every_write_site_is_recorded(tmp_path: Path) -> None:
    _, calls, _ = _recorded_calls(tmp_path)
    seen = {(c.op, c.site.split(":")[1]) for c in calls}
    for expected in [
        (fileio.Op.WRITE, "LogSegment.append"),
        (fileio.Op.WRITE, "_Index._write_out"),  # index entries reach the file here
        (fileio.Op.WRITE, "_Index._truncate_to_entries"),  # zeroing truncated entries
        (fileio.Op.CREATE, "LogSegment.__init__"),
        (fileio.Op.CREATE, "_Index._open_writable"),
        (fileio.Op.TRUNCATE, "_Index._open_writable"),  # preallocation
        (fileio.Op.TRUNCATE, "_Index._write_out"),  # trim and resize
        (fileio.Op.TRUNCATE, "LogSegment.truncate_to_position"),
        (fileio.Op.FSYNC, "LogSegment.flush"),
        (fileio.Op.FSYNC, "_Index.sync"),
        (fileio.Op.RENAME, "LogSegment.mark_deleted"),
        (fileio.Op.RENAME, "atomic_write_bytes"),
        (fileio.Op.RENAME, "LogManager.delete_log"),
        (fileio.Op.WRITE, "atomic_write_bytes"),
    ]:
        assert expected in seen, f"the workload never reaches {expected}"


@pytest.mark.parametrize("errno_name", ["ENOSPC", "EIO"])
def test_fault_at_every_write_site(fast_dir: Path, errno_name: str) -> None:
    recorded_dir, calls, before_shutdown = _recorded_calls(fast_dir)
    exhaustive = os.environ.get("MINIKAFKA_FAULTS_EXHAUSTIVE") == "1"
    # A full disk, the case that must roll back and carry on, also at each site's last
    # call (a later segment, a fuller index); EIO takes the dir offline at any of them.
    plans = _plans(recorded_dir, calls, before_shutdown, exhaustive=exhaustive,
                   last_too=errno_name == "ENOSPC")
    assert len(plans) >= 20, len(plans)
    code = getattr(errno, errno_name)
    cases = 0
    for n, (plan, in_shutdown) in enumerate(plans):
        # A fault in the shutdown happens only on the clean path; a kill -9 comes after it.
        for mode in ("clean",) if in_shutdown else ("clean", "kill"):
            d = fast_dir / f"case{n}-{mode}"
            concrete = fileio.FaultPlan(nth=plan.nth, op=plan.op, errno=code,
                                        path=str(d / plan.path) if plan.path else None)
            try:
                run_case(d, concrete, mode)
            except AssertionError as exc:
                raise AssertionError(f"{errno_name} at {plan.op} #{plan.nth} of {plan.path} "
                                     f"({mode}): {exc}") from exc
            cases += 1
    print(f"\n{cases} fault cases ({len(plans)} calls of {len(calls)}, {errno_name})")


def test_no_fault_baseline(tmp_path: Path) -> None:
    """The workload and the checks themselves, without a fault, both ways."""
    for mode in ("clean", "kill"):
        out = run_case(tmp_path / mode, None, mode)
        assert not out.errors and len(out.acked["a"]) == 58 + LARGE_RECORDS and "b" in out.acked


def test_an_injected_or_recording_block_clears_however_it_ends(tmp_path: Path) -> None:
    """``fileio.injected`` fails the planned call inside its block only, and clears when
    the block raises too; ``fileio.recording`` lists the block's calls and stops after."""
    target = tmp_path / "f"
    plan = fileio.FaultPlan(nth=1, op=fileio.Op.CREATE, errno=errno.EIO, times=0)
    with pytest.raises(RuntimeError), fileio.injected(plan):
        with pytest.raises(OSError) as failed:
            fileio.open_new(target, os.O_WRONLY)
        assert failed.value.errno == errno.EIO and not target.exists()
        raise RuntimeError("the block ends by an exception")
    os.close(fileio.open_new(target, os.O_WRONLY))  # no plan left
    with fileio.recording() as calls:
        fileio.fsync_dir(tmp_path)
    fileio.fsync_dir(tmp_path)
    assert [(c.op, c.path) for c in calls] == [(fileio.Op.FSYNC, str(tmp_path))]

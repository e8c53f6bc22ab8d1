"""Appends of several produce requests for one partition together
(``ReplicaManager.append_group``, the end-of-turn appends of broker.produce_appends) against
the same requests appended one after the other (``append_single``, acks=1): the same answer
for each request, the same bytes in the segment and index files, the same log end offset,
high watermark and producer state, whatever the requests hold (refused batches among good
ones, idempotent producers resending or out of order, one producer twice, batches too large
to copy) and through rolls, full indexes and LogAppendTime. A write that fails leaves none of
the group in the log. The group's validation answers each batch as the one-batch validation
does, for every kind of bad batch and hundreds of corrupted headers."""

from __future__ import annotations

import errno
import random
import time
from pathlib import Path

import pytest

from broker.partition import AppendResult, GroupResults, PlainResults
from broker.record_validation import (
    LONG_MAX,
    RecordValidationError,
    ValidationConfig,
    validate_client_batch,
    validate_group,
)
from broker.replica_manager import ReplicaManager
from protocol.compression import CompressionType
from protocol.errors import ErrorCode
from protocol.records import NewRecord, batch_crc, build_batch
from protocol.topic_partition import TopicPartition
from storage import fileio
from storage.config import LogConfig
from tests.unit.test_replica_manager import close_rm, make_leader, new_rm

pytestmark = pytest.mark.timeout(60)
TP = TopicPartition("t", 0)
NOW_S = 1_700_000_000.0
VERSION = 9


def _batch(n: int = 1, pid: int = -1, seq: int = -1, size: int = 100, ts: int | None = None,
           key: bytes | None = b"k", **kwargs: object) -> bytes:
    stamp = int(NOW_S * 1000) if ts is None else ts
    return build_batch([NewRecord(key, b"v" * size, (), stamp + i) for i in range(n)],
                       producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                       base_sequence=seq, **kwargs)  # type: ignore[arg-type]


def _corrupt(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])  # the CRC no longer matches


def _turns() -> list[list[bytes | None]]:
    """Requests as they could arrive in turns of the loop, refusals among them."""
    return [
        [_batch(), _batch(3), _batch(pid=1, seq=0), _batch(pid=2, seq=0, n=2)],
        [_batch(pid=1, seq=1), _corrupt(_batch()), _batch(), None, b"", _batch(key=None)],
        [_batch(pid=1, seq=1),  # a resend of the last one: answered with its offsets
         _batch(pid=2, seq=7),  # out of order
         _batch() + _batch(),  # two batches in one request
         _batch(is_control=True), _batch(pid=3, seq=0)],
        [_batch(pid=4, seq=0), _batch(pid=4, seq=1), _batch()],  # one producer twice
        [_batch(size=5000), _batch(), _batch(size=3000, n=2)],  # over HEADER_ONLY_MIN_BYTES
        [_batch(ts=int(NOW_S * 1000) - 10 * 86_400_000), _batch(), _batch()],  # old timestamp
        [_batch(n=2) for _ in range(14)],
        [_batch()],
    ]


async def _leader(tmp: Path, config: LogConfig) -> ReplicaManager:
    rm = new_rm(tmp, config)
    await make_leader(rm, 0)
    return rm


def _files(tmp: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted((tmp / "t-0").iterdir())
            if f.suffix in (".log", ".index", ".timeindex")}


@pytest.mark.parametrize("props", [
    {},
    {"segment.bytes": "1500"},  # rolls in the middle of groups
    {"index.interval.bytes": "1", "segment.index.bytes": "160"},  # indexes fill up: rolls
    {"message.timestamp.type": "LogAppendTime"},
    {"message.timestamp.before.max.ms": "3600000"},  # the old batch refused
    {"max.message.bytes": "4000"},  # the 5000-byte batch refused
    {"cleanup.policy": "compact"},  # the records without a key refused (record errors)
])
async def test_group_answers_and_writes_as_one_by_one(tmp_path: Path, props: dict[str, str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: NOW_S)  # LogAppendTime stamps alike
    config = LogConfig.from_properties(props)
    grouped, single = await _leader(tmp_path / "g", config), await _leader(tmp_path / "s", config)
    try:
        answers: list[tuple[GroupResults, list[AppendResult]]] = []
        for turn in _turns():
            views = [None if r is None else memoryview(r) for r in turn]
            answers.append((grouped.append_group(TP, views, VERSION),
                            [single.append_single(TP, v, VERSION, 1) for v in views]))
        for together, alone in answers:
            assert list(together) == alone  # (every field of each)
        # A plain group's answers, made when read (PlainResults): by index too, and what
        # its answers are written from.
        plain = [(t, a) for t, a in answers if isinstance(t, PlainResults)]
        assert plain or props  # (without props the group of 14 is plain)
        for together, alone in plain:
            assert isinstance(together, PlainResults) and len(together) == len(alone)
            assert [together[i] for i in range(len(alone))] == alone
            assert [together[i] for i in range(-len(alone), 0)] == alone
            assert together.first_offsets == [r.base_offset for r in alone]
            assert {together.log_start_offset} == {r.log_start_offset for r in alone}
        codes = {r.error for together, _ in answers for r in together}
        assert ErrorCode.NO_ERROR in codes and len(codes) > 3  # refusals among them
        pg, ps = grouped.partitions[TP], single.partitions[TP]
        assert pg.log_end_offset == ps.log_end_offset > 40
        assert pg.high_watermark == ps.high_watermark == pg.log_end_offset
        assert pg.log.segment_base_offsets == ps.log.segment_base_offsets
        assert pg.producer_state.snapshot_bytes() == ps.producer_state.snapshot_bytes()
        if props.get("segment.bytes"):
            assert len(pg.log.segment_base_offsets) > 3
    finally:
        close_rm(grouped)
        close_rm(single)
    # (closed: a background flush may have written one's index entries and not yet the other's)
    assert _files(tmp_path / "g") == _files(tmp_path / "s")


async def test_a_group_is_written_once_with_consecutive_offsets(tmp_path: Path) -> None:
    rm = await _leader(tmp_path, LogConfig())
    try:
        rm.append_single(TP, memoryview(_batch()), VERSION, 1)  # the segment is not empty
        with fileio.recording() as calls:
            results = rm.append_group(TP, [memoryview(_batch(n)) for n in (1, 2, 3, 1)], VERSION)
        assert [(r.error, r.base_offset, r.last_offset) for r in results] == [
            (0, 1, 1), (0, 2, 3), (0, 4, 6), (0, 7, 7)]
        assert [c.site.split(":")[1] for c in calls if c.op is fileio.Op.WRITE] == [
            "LogSegment.append"]
    finally:
        close_rm(rm)


async def test_a_failed_write_keeps_none_of_the_group(tmp_path: Path) -> None:
    rm = await _leader(tmp_path, LogConfig())
    try:
        rm.append_single(TP, memoryview(_batch()), VERSION, 1)
        p = rm.partitions[TP]
        size = p.log.active_segment.size_bytes
        group = [memoryview(_batch()), memoryview(_corrupt(_batch())), memoryview(_batch())]
        plan = fileio.FaultPlan(nth=1, errno=errno.ENOSPC, op=fileio.Op.WRITE,
                                path=str(p.log.active_segment.log_path))
        with fileio.injected(plan):
            results = rm.append_group(TP, group, VERSION)
        assert [r.error for r in results] == [ErrorCode.KAFKA_STORAGE_ERROR,
                                              ErrorCode.CORRUPT_MESSAGE,
                                              ErrorCode.KAFKA_STORAGE_ERROR]
        assert (p.log_end_offset, p.high_watermark) == (1, 1)
        assert p.log.active_segment.size_bytes == size and not p.log.offline
        results = rm.append_group(TP, group, VERSION)  # the disk has room again
        assert [(r.error, r.base_offset) for r in results] == [
            (0, 1), (ErrorCode.CORRUPT_MESSAGE, -1), (0, 2)]
    finally:
        close_rm(rm)


def _validation_cases() -> list[bytes | None]:
    rng = random.Random(15)
    good = [_batch(), _batch(3, pid=5, seq=9), _batch(compression=CompressionType.ZSTD),
            _batch(compression=CompressionType.GZIP)]
    cases: list[bytes | None] = [
        None, b"", *good, good[0] + good[0], good[0][:-1], good[0][:40],
        _batch(pid=5, seq=-1), _batch(is_control=True), _batch(is_transactional=True),
        _batch(2, last_offset_delta=0), _batch(size=5000), _batch(key=None),
        _batch(ts=int(NOW_S * 1000) - 10 * 86_400_000),
    ]
    for _ in range(400):  # a byte of a good batch's header changed
        data = bytearray(rng.choice(good))
        data[rng.randrange(61)] = rng.randrange(256)
        cases.append(bytes(data))
    return cases


def _byte_views() -> list[memoryview]:
    """Views of good batches that are not 1-D "B" views, one byte an item (read as bytes)."""
    data = _batch()
    return [memoryview(data).cast("b"), memoryview(data).cast("c"),
            memoryview(data).cast("B", (len(data), 1)), memoryview(bytearray(data))]


def _outcome(r: object) -> object:
    if isinstance(r, RecordValidationError):
        return type(r), r.error_code, r.message, r.record_errors
    assert isinstance(r, tuple)
    view, head = r
    return bytes(view), head


@pytest.mark.parametrize("config", [
    ValidationConfig(), ValidationConfig(max_message_bytes=4000), ValidationConfig(compacted=True),
    ValidationConfig(timestamp_before_max_ms=3_600_000),
])
def test_validating_a_group_answers_as_each_alone(config: ValidationConfig) -> None:
    """validate_group (the group's inline checks) against validate_client_batch."""
    even = next(b for b in (_batch(size=s) for s in (100, 101)) if len(b) % 2 == 0)
    cases = [*_validation_cases(), *_byte_views(), memoryview(even).cast("H")]
    now = int(NOW_S * 1000)
    for version in range(3, 12):
        alone: list[object] = []
        for r in cases:
            try:
                alone.append(_outcome(validate_client_batch(r, version, config, now,
                                                            verify_crc=False)))
            except RecordValidationError as exc:
                alone.append(_outcome(exc))
        together = [_outcome(r) for r in validate_group(cases, version, config, now)[0]]
        assert together == alone
        assert 0 < sum(isinstance(o, tuple) and len(o) == 2 for o in alone) < len(alone)


@pytest.mark.parametrize("config", [
    ValidationConfig(), ValidationConfig(max_message_bytes=4000), ValidationConfig(compacted=True),
    ValidationConfig(timestamp_before_max_ms=3_600_000),
])
def test_a_plain_group_is_one_whose_batches_each_pass(config: ValidationConfig) -> None:
    """validate_group's plain groups (each batch with its header's fields, no BatchHeader):
    exactly those whose every batch validate_client_batch passes with its CRC matching and
    no producer id, on a topic without per-record checks; the fields are the header it
    reads. Any other group is answered as each alone, also after plain batches."""
    cases = [*_validation_cases(), _corrupt(_batch()), *_byte_views()]
    now = int(NOW_S * 1000)
    per_record = config.compacted or config.timestamp_before_max_ms < LONG_MAX
    plain_seen = 0
    for version in range(3, 12):
        for r in cases:
            for group in ([r], [_batch(), _batch(2), r]):
                alone: list[object] = []
                each_plain = not per_record
                for b in group:
                    try:
                        batch = validate_client_batch(b, version, config, now, verify_crc=False)
                    except RecordValidationError as exc:
                        alone.append(_outcome(exc))
                        each_plain = False
                        continue
                    alone.append(_outcome(batch))
                    each_plain = each_plain and (batch.head.producer_id == -1
                                                 and batch_crc(batch.buffer) == batch.head.crc)
                checked, plain = validate_group(group, version, config, now)
                if plain is None:
                    assert not each_plain
                    assert [_outcome(c) for c in checked] == alone
                else:
                    assert each_plain and checked == []
                    assert [(bytes(view), (0, *f)) for view, f in plain] == alone
                    plain_seen += 1
    assert plain_seen > 0 or per_record

"""Log.append_client_batch's single-batch path (_append_one_as_leader) against the general
``_append_as_leader`` given the same one batch: the same answers (AppendInfo, or the same
error), the same bytes in the segment files, the same log end offset, through rolls, both
timestamp types, bounded timestamps, batches without timestamps and control batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.records import NewRecord, build_batch, read_single_batch
from storage.batches import writable_buffer
from storage.config import LogConfig
from storage.errors import StorageError
from storage.loader import load_log
from storage.log import Log
from storage.naming import TopicPartition

pytestmark = pytest.mark.timeout(60)
NOW_MS = 1_700_000_000_000


def _batches() -> list[bytes]:
    def records(ts: int | None, n: int = 2) -> list[NewRecord]:
        return [NewRecord(b"k", b"v" * 50, (), None if ts is None else ts + i) for i in range(n)]
    return [
        build_batch(records(NOW_MS - 10)),
        build_batch(records(None, 3)),  # no timestamps: maxTimestamp -1
        build_batch(records(NOW_MS - 5), producer_id=7, producer_epoch=0, base_sequence=0),
        build_batch(records(NOW_MS - 7_200_000)),  # two hours old
        build_batch(records(NOW_MS + 7_200_000)),  # two hours ahead
        build_batch(records(NOW_MS), is_control=True),
        build_batch(records(-5, 1)),  # a negative timestamp
        build_batch(records(NOW_MS - 1, 4)),
        # over HEADER_ONLY_MIN_BYTES: a read-only one is written without being copied
        build_batch(records(NOW_MS - 3, 80)),
        build_batch(records(None, 80)),
    ]


def _open(d: Path, name: str, props: dict[str, str]) -> Log:
    return load_log(d / f"{name}-0", TopicPartition(name, 0), LogConfig.from_properties(props),
                    clean_shutdown=True)


def _answer(log: Log, data: bytes, one: bool) -> object:
    single = read_single_batch(data)
    assert single is not None
    view, head = single
    try:
        if one:
            return log.append_client_batch(view, head, 3, now_ms=NOW_MS)
        return log._append_as_leader(writable_buffer(view), (head,), 3, False, NOW_MS)
    except StorageError as exc:
        return type(exc), str(exc).replace("one-0", "x").replace("all-0", "x")


@pytest.mark.parametrize("props", [
    {},
    {"message.timestamp.type": "LogAppendTime"},
    {"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "3600000"},
    {"segment.bytes": "400"},  # a roll every other batch
    {"segment.bytes": "400", "message.timestamp.type": "LogAppendTime"},
])
def test_one_batch_path_answers_as_the_general_path(tmp_path: Path,
                                                    props: dict[str, str]) -> None:
    one, general = _open(tmp_path, "one", props), _open(tmp_path, "all", props)
    try:
        for _ in range(3):
            for data in _batches():
                assert _answer(one, data, True) == _answer(general, data, False)
        assert one.log_end_offset == general.log_end_offset > 0
        assert one.segment_base_offsets == general.segment_base_offsets
        for a, b in zip(sorted((tmp_path / "one-0").iterdir()),
                        sorted((tmp_path / "all-0").iterdir()), strict=True):
            if a.suffix in (".log", ".index", ".timeindex"):
                assert a.name == b.name and a.read_bytes() == b.read_bytes()
    finally:
        one.close()
        general.close()

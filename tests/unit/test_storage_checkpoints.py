"""Checkpoint files, partition.metadata, meta.properties, the leader epoch cache, LogConfig."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from storage.checkpoints import (
    read_offset_checkpoint,
    read_partition_metadata,
    read_properties,
    topic_id_from_str,
    topic_id_to_str,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
)
from storage.config import LogConfig
from storage.epoch_cache import EpochEntry, LeaderEpochCache
from storage.errors import CorruptCheckpointError, LogConfigError
from storage.naming import TopicPartition, parse_partition_dir, parse_segment_file

pytestmark = pytest.mark.timeout(30)


def test_offset_checkpoint_is_kafkas_text_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {TopicPartition("b", 1): 7, TopicPartition("a", 0): 1234})
    assert path.read_text() == "0\n2\na 0 1234\nb 1 7\n"
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    assert read_offset_checkpoint(path) == {("a", 0): 1234, ("b", 1): 7}
    assert read_offset_checkpoint(tmp_path / "missing") == {}


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "0\n1\na 0 -5\n", "\xff"],
)
def test_malformed_offset_checkpoint_raises(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(CorruptCheckpointError):
        read_offset_checkpoint(path)


def test_partition_metadata_and_topic_id(tmp_path: Path) -> None:
    topic_id = uuid.UUID("2f1c7c6e-5a0c-4d35-9c2e-6b1f0f3c7d11").bytes
    text = topic_id_to_str(topic_id)
    assert len(text) == 22 and "=" not in text
    assert topic_id_from_str(text) == topic_id
    path = tmp_path / "partition.metadata"
    write_partition_metadata(path, topic_id)
    assert path.read_text() == f"version: 0\ntopic_id: {text}\n"
    assert read_partition_metadata(path) == topic_id
    path.write_text("version: 0\ntopic_id: nope\n")
    with pytest.raises(CorruptCheckpointError):
        read_partition_metadata(path)


def test_meta_properties(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    write_meta_properties(path, 3, "abcDEF123")
    lines = path.read_text().splitlines()
    assert lines[0] == "#" and lines[1].startswith("#")
    assert read_properties(path) == {"broker.id": "3", "version": "0", "cluster.id": "abcDEF123"}


def test_epoch_cache_assign_end_offset_for_and_persist(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    assert cache.end_offset_for(0, 10) == (-1, -1)  # empty cache
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # same epoch, later offset: nothing new
    assert cache.assign(2, 100)
    assert cache.assign(5, 250)
    assert not cache.assign(-1, 300)
    assert cache.end_offset_for(-1, 400) == (-1, -1)
    assert cache.end_offset_for(5, 400) == (5, 400)  # latest epoch: log end offset
    assert cache.end_offset_for(0, 400) == (0, 100)
    assert cache.end_offset_for(1, 400) == (0, 100)  # unknown epoch: floor epoch, next start
    assert cache.end_offset_for(3, 400) == (2, 250)
    assert cache.end_offset_for(9, 400) == (-1, -1)
    assert cache.epoch_for_offset(99) == 0 and cache.epoch_for_offset(250) == 5
    cache.flush()
    assert path.read_text() == "0\n3\n0 0\n2 100\n5 250\n"
    assert LeaderEpochCache.load(path).entries() == cache.entries()


def test_epoch_cache_requested_below_first_epoch(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "c", [EpochEntry(4, 40), EpochEntry(6, 60)])  # type: ignore[arg-type]
    assert cache.end_offset_for(2, 100) == (2, 40)


def test_epoch_cache_assign_drops_non_monotonic_entries(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "c")
    cache.assign(1, 0)
    cache.assign(3, 50)
    cache.assign(4, 80)
    cache.assign(3, 60)  # a lower epoch again: entries with epoch >= 3 go
    assert cache.entries() == [(1, 0), (3, 60)]
    cache.assign(5, 40)  # an earlier start offset: entries starting >= 40 go
    assert cache.entries() == [(1, 0), (5, 40)]


def test_epoch_cache_truncation_both_ends(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "c")
    for epoch, start in [(0, 0), (1, 10), (2, 20), (3, 30)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries() == [(0, 0), (1, 10)]
    cache.truncate_from_start(15)
    assert cache.entries() == [(1, 15)]
    cache.truncate_from_start(5)  # below the first entry: nothing changes
    assert cache.entries() == [(1, 15)]
    cache.flush()
    assert (tmp_path / "c").read_text() == "0\n1\n1 15\n"


def test_corrupt_epoch_checkpoint_raises(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n0 0\n")
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCache.load(path)


def test_log_config_defaults_and_validation() -> None:
    cfg = LogConfig()
    assert cfg.segment_bytes == 1 << 30 and cfg.segment_index_bytes == 10 << 20
    assert cfg.retention_ms == 604800000 and cfg.retention_bytes == -1
    assert cfg.max_message_bytes == 1048588 and cfg.file_delete_delay_ms == 60000
    assert cfg.flush_messages == 2**63 - 1 and cfg.cleanup_policy == ("delete",)
    cfg2 = LogConfig.from_properties(
        {"segment.bytes": "1048576", "message.timestamp.type": "LogAppendTime",
         "leader.replication.throttled.replicas": "*"}
    )
    assert cfg2.segment_bytes == 1048576 and cfg2.log_append_time
    assert cfg2.to_properties()["leader.replication.throttled.replicas"] == "*"
    assert LogConfig.from_properties(cfg2.to_properties()) == cfg2
    for bad in (
        {"segment.byte": "1"},
        {"segment.bytes": "10"},
        {"segment.bytes": "abc"},
        {"segment.bytes": str(2**31)},
        {"cleanup.policy": "shred"},
        {"message.timestamp.type": "Now"},
        {"min.cleanable.dirty.ratio": "1.5"},
        {"preallocate": "yes"},
    ):
        with pytest.raises(LogConfigError, match=next(iter(bad)).replace(".", r"\.")):
            LogConfig.from_properties(bad)


def test_names() -> None:
    assert parse_partition_dir("orders-3") == ("orders", 3)
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("orders-x") is None
    assert parse_partition_dir("orders-3.abcd-delete") is None
    assert parse_partition_dir("-3") is None
    assert parse_segment_file("00000000000000000042.log") == (42, ".log")
    assert parse_segment_file("00000000000000000042.log.deleted") is None

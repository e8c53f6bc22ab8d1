"""File and directory names, exactly as Kafka spells them.

``TopicPartition`` (``protocol.topic_partition``) is re-exported here: storage names
directories by it.

- Partition directory: ``<topic>-<partition>`` (topic names are ``[a-zA-Z0-9._-]``, at most
  249 characters, so the partition is whatever follows the last ``-``).
- A partition being deleted: ``<topic>-<partition>.<uuid hex>-delete``.
- Segment files: the base offset as 20 zero-padded digits plus ``.log``, ``.index``,
  ``.timeindex`` (``00000000000000000000.log``); a segment queued for deletion gets the
  extra suffix ``.deleted``.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from protocol.topic_partition import TopicPartition as TopicPartition  # re-exported

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SNAPSHOT_SUFFIX = ".snapshot"
TXN_INDEX_SUFFIX = ".txnindex"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"

_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_SEGMENT_RE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex|\.snapshot)$")
_DELETE_DIR_RE = re.compile(r"^(.+)-(\d+)\.([0-9a-f]{32})-delete$")



def is_valid_topic(name: str) -> bool:
    """Kafka's topic name rule (``Topic.validate``): legal characters, length, not . or .."""
    return bool(_TOPIC_RE.match(name)) and name not in (".", "..")


def partition_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """``orders-3`` -> TopicPartition('orders', 3); None for anything else."""
    topic, sep, part = name.rpartition("-")
    if not sep or not part.isdigit() or not is_valid_topic(topic):
        return None
    if len(part) > 1 and part[0] == "0":
        return None
    partition = int(part)
    if partition > 2**31 - 1:
        return None
    return TopicPartition(topic, partition)


def delete_dir_name(tp: TopicPartition) -> str:
    """Name a partition directory gets when it is deleted (Kafka's ``logDeleteDirName``)."""
    return f"{partition_dir_name(tp)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"


def is_delete_dir(name: str) -> bool:
    return bool(_DELETE_DIR_RE.match(name))


def filename_prefix(base_offset: int) -> str:
    """The 20-digit name stem of a segment with this base offset."""
    if base_offset < 0:
        raise ValueError(f"segment base offset {base_offset} is negative")
    return f"{base_offset:020d}"


def log_file(directory: Path, base_offset: int) -> Path:
    return directory / (filename_prefix(base_offset) + LOG_SUFFIX)


def index_file(directory: Path, base_offset: int) -> Path:
    return directory / (filename_prefix(base_offset) + INDEX_SUFFIX)


def time_index_file(directory: Path, base_offset: int) -> Path:
    return directory / (filename_prefix(base_offset) + TIME_INDEX_SUFFIX)


def parse_segment_file(name: str) -> tuple[int, str] | None:
    """``00000000000000000042.log`` -> (42, '.log'); None for other names."""
    match = _SEGMENT_RE.match(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)

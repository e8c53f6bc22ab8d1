"""Checkpoint and metadata files in Kafka's text formats, written atomically.

Every write goes to ``<name>.tmp``, is fsynced, renamed over the target, and the directory
is fsynced (Kafka's ``CheckpointFile.write``), so a crash leaves the old or the new file,
never a torn one. All writes block on fsync: call them from a thread pool.

Offset checkpoints (``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``)::

    0                       version
    2                       number of entries
    orders 0 1234           topic partition offset
    orders 1 99

``leader-epoch-checkpoint`` uses the same frame with ``epoch startOffset`` lines
(see ``storage.epoch_cache``).

``partition.metadata``::

    version: 0
    topic_id: <Kafka Uuid: 16 bytes, URL-safe base64 without padding>

``meta.properties`` (Java properties; ZooKeeper-mode broker)::

    #
    #<date>
    broker.id=0
    version=0
    cluster.id=<id>
"""

from __future__ import annotations

import base64
import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from storage import fileio
from storage.errors import CorruptCheckpointError
from storage.naming import TopicPartition

CHECKPOINT_VERSION = 0
MAX_CHECKPOINT_BYTES = 64 * 1024 * 1024  # refuse to read anything larger (bounded input)

T = TypeVar("T")


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename or create inside it is durable."""
    fileio.fsync_dir(directory)


class DirSyncError(OSError):
    """The new file is in place but fsyncing its directory failed: the change is visible,
    its durability unknown (the caller keeps the new state and reports a failed dir)."""


def atomic_write_bytes(path: Path, data: bytes, *, tmp_name: str | None = None,
                       sync_dir: bool = True) -> None:
    """Write ``data`` to ``path`` atomically: temp file, fsync, rename, fsync dir.

    On an ``OSError`` before the rename the temp file is removed (best effort) and the old
    file stands; the error is raised for the caller to sort (full disk or failed dir).
    After the rename, a failed directory fsync raises ``DirSyncError``. ``tmp_name``
    (default ``<name>.tmp``; it must end in ``.tmp``, which start-up removes) lets writers
    that may race for one file use temp files of their own. ``sync_dir=False`` leaves the
    directory fsync to the caller, who then owes one after its last such write there
    (until it, a crash may leave the old file, never a torn one).
    """
    tmp = path.with_name(tmp_name or path.name + ".tmp")
    try:
        fd = fileio.open_new(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            fileio.write_all(fd, data, tmp)
            fileio.fsync(fd, tmp)
        finally:
            os.close(fd)
        fileio.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    if not sync_dir:
        return
    try:
        fileio.fsync_dir(path.parent)
    except OSError as exc:
        raise DirSyncError(exc.errno, exc.strerror, exc.filename) from exc


def atomic_write_text(path: Path, text: str, *, sync_dir: bool = True) -> None:
    """``atomic_write_bytes`` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"), sync_dir=sync_dir)


def _read_text(path: Path) -> str:
    size = path.stat().st_size
    if size > MAX_CHECKPOINT_BYTES:
        raise CorruptCheckpointError(f"{path}: {size} bytes is too large for a checkpoint")
    try:
        return path.read_text("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError(f"{path}: not UTF-8 text ({exc})") from exc


def _parse_int(path: Path, text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CorruptCheckpointError(f"{path}: malformed {what} {text!r}") from None


def read_versioned_lines(
    path: Path, fields: int, parse: Callable[[list[str]], T]
) -> list[T]:
    """Parse Kafka's ``version / count / lines`` frame; each line has ``fields`` fields."""
    lines = _read_text(path).splitlines()
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{path}: missing version or entry count")
    version = _parse_int(path, lines[0].strip(), "version")
    if version != CHECKPOINT_VERSION:
        raise CorruptCheckpointError(f"{path}: unrecognised version {version}")
    count = _parse_int(path, lines[1].strip(), "entry count")
    body = [line for line in lines[2:] if line.strip()]
    if count < 0 or count != len(body):
        raise CorruptCheckpointError(
            f"{path}: expected {count} entries, found {len(body)}"
        )
    out: list[T] = []
    for line in body:
        parts = line.split()
        if len(parts) != fields:
            raise CorruptCheckpointError(f"{path}: malformed line {line!r}")
        try:
            out.append(parse(parts))
        except ValueError:
            raise CorruptCheckpointError(f"{path}: malformed line {line!r}") from None
    return out


def write_versioned_lines(path: Path, lines: Sequence[str], *, sync_dir: bool = True) -> None:
    text = f"{CHECKPOINT_VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    atomic_write_text(path, text, sync_dir=sync_dir)


def _parse_offset_line(parts: list[str]) -> tuple[TopicPartition, int]:
    partition, offset = int(parts[1]), int(parts[2])
    if partition < 0 or offset < 0:
        raise ValueError("negative partition or offset")
    return TopicPartition(parts[0], partition), offset


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Read an offset checkpoint; a missing file is empty. Raises ``CorruptCheckpointError``."""
    if not path.exists():
        return {}
    return dict(read_versioned_lines(path, 3, _parse_offset_line))


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Write an offset checkpoint atomically (sorted, for stable files)."""
    lines = [f"{tp.topic} {tp.partition} {off}" for tp, off in sorted(offsets.items())]
    write_versioned_lines(path, lines)


# ---------------------------------------------------------------- topic ids


def topic_id_to_str(topic_id: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    if len(topic_id) != 16:
        raise ValueError(f"topic id must be 16 bytes, got {len(topic_id)}")
    return base64.urlsafe_b64encode(topic_id).decode("ascii").rstrip("=")


def topic_id_from_str(text: str) -> bytes:
    """Kafka's ``Uuid.fromString`` (22 characters of URL-safe base64)."""
    if len(text) != 22:
        raise ValueError(f"topic id {text!r} is not 22 characters")
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} does not decode to 16 bytes")
    return raw


def read_partition_metadata(path: Path) -> bytes:
    """The topic id stored in ``partition.metadata``."""
    fields: dict[str, str] = {}
    for line in _read_text(path).splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise CorruptCheckpointError(f"{path}: malformed line {line!r}")
        fields[key.strip()] = value.strip()
    if fields.get("version") != "0":
        raise CorruptCheckpointError(f"{path}: unrecognised version {fields.get('version')!r}")
    try:
        return topic_id_from_str(fields.get("topic_id", ""))
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: {exc}") from None


def write_partition_metadata(path: Path, topic_id: bytes) -> None:
    atomic_write_text(path, f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n")


# ---------------------------------------------------------------- meta.properties


def read_properties(path: Path) -> dict[str, str]:
    """Read a simple Java properties file (``key=value`` lines, ``#`` comments)."""
    props: dict[str, str] = {}
    for line in _read_text(path).splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        key, sep, value = stripped.partition("=")
        if not sep:
            raise CorruptCheckpointError(f"{path}: malformed line {line!r}")
        props[key.strip()] = value.strip()
    return props


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    """Write properties like ``java.util.Properties.store`` (comment, date, key=value)."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    body = "".join(f"{k}={v}\n" for k, v in props.items())
    atomic_write_text(path, f"#\n#{stamp}\n{body}")


def write_meta_properties(path: Path, broker_id: int, cluster_id: str | None) -> None:
    props = {"broker.id": str(broker_id), "version": "0"}
    if cluster_id is not None:
        props["cluster.id"] = cluster_id
    write_properties(path, props)

"""``partition.metadata``: a log's topic id on disk (Kafka's ``PartitionMetadataFile``).

Layout (``storage.checkpoints``, written atomically: temp file, fsync, rename, fsync of
the partition directory)::

    version: 0
    topic_id: <Kafka Uuid: 16 bytes, URL-safe base64 without padding>

When it is written (Kafka's semantics): a topic id given to a log, at its creation or
later to a log that has none (Kafka's ``assignTopicId``), is *recorded* here in memory
and written by ``maybe_flush``, which runs

- from the log manager's batched flush right after partitions are created
  (``LogManager.flush_partition_metadata``: many files at once, in threads), so creating
  partitions waits for no fsync;
- in any case before the log's first append, first flush, close or deletion, so log
  data never reaches the disk without the topic id beside it.

What a crash can leave: a partition directory without the file (never a torn file: the
write is atomic, and start-up removes ``*.tmp``). The log then opens with no topic id,
and the controller's next LeaderAndIsr carries the id, which is recorded and written
again; a file with another id than the controller's makes that LeaderAndIsr fail with
INCONSISTENT_TOPIC_ID, as in Kafka.

Thread-safety: ``record`` and ``maybe_flush`` take the file's lock; ``dirty`` may be read
without it (a racing flush at worst makes a caller take the lock for nothing).
"""

from __future__ import annotations

import threading
from pathlib import Path

from storage.checkpoints import write_partition_metadata
from storage.errors import InconsistentTopicIdError
from storage.naming import PARTITION_METADATA

__all__ = ["PartitionMetadataFile"]


class PartitionMetadataFile:
    """The ``partition.metadata`` of one partition directory."""

    __slots__ = ("_dirty", "_lock", "path")

    def __init__(self, directory: Path) -> None:
        self.path = directory / PARTITION_METADATA
        self._lock = threading.Lock()
        self._dirty: bytes | None = None  # recorded, not written yet

    @property
    def dirty(self) -> bool:
        return self._dirty is not None

    def record(self, topic_id: bytes) -> None:
        """Remember ``topic_id`` for the next ``maybe_flush``. InconsistentTopicIdError if
        another id is already waiting to be written."""
        if len(topic_id) != 16:
            raise ValueError(f"topic id must be 16 bytes, got {len(topic_id)}")
        with self._lock:
            if self._dirty is not None and self._dirty != topic_id:
                raise InconsistentTopicIdError(
                    f"{self.path}: topic id {topic_id.hex()} recorded after "
                    f"{self._dirty.hex()}")
            self._dirty = topic_id

    def maybe_flush(self) -> bool:
        """Write the recorded topic id, durably; False if there was none to write. On an
        ``OSError`` it stays recorded (the caller sorts the error: full disk or failed
        directory) and is written by the next call."""
        if self._dirty is None:
            return False
        with self._lock:
            topic_id = self._dirty
            if topic_id is None:
                return False
            write_partition_metadata(self.path, topic_id)
            self._dirty = None
            return True

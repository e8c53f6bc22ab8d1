"""Producer id allocation for InitProducerId, durable across restarts.

Like Kafka's ``ProducerIdManager``, ids are handed out from blocks of
``PRODUCER_ID_BLOCK_SIZE`` (1000). Before the first id of a block is given out, the end of
that block is written to ``<log.dir>/producer-id-block`` so that after any restart (clean or
kill -9) the next id comes from a fresh block: an id is never handed out twice, at the cost
of skipping the unused rest of a block (as Kafka does).

File layout (text, one line, written atomically: temp file, fsync, rename, fsync dir)::

    version=0 next_block_start=<int64>\\n

Thread-safety: ``generate`` is a coroutine for the broker's event loop; the fsync of a new
block runs in the default thread pool, and a lock keeps concurrent callers in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from storage.checkpoints import atomic_write_bytes

PRODUCER_ID_BLOCK_SIZE = 1000
BLOCK_FILE_NAME = "producer-id-block"
_MAX_PRODUCER_ID = 2**63 - 1


class ProducerIdError(RuntimeError):
    """The block file is unreadable or cannot be written, or the id space is exhausted."""


def read_next_block_start(path: Path) -> int:
    """The first id of the next block to allocate (0 when the file does not exist)."""
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return 0
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    if fields.get("version") != "0" or "next_block_start" not in fields:
        raise ProducerIdError(f"{path}: unrecognised content {text[:80]!r}")
    try:
        value = int(fields["next_block_start"])
    except ValueError:
        raise ProducerIdError(f"{path}: next_block_start is not an integer") from None
    if value < 0:
        raise ProducerIdError(f"{path}: negative next_block_start {value}")
    return value


# A cluster's shared source of blocks (ZooKeeper's /latest_producer_id_block): size ->
# [start, end).
BlockSource = Callable[[int], Awaitable[tuple[int, int]]]


class ProducerIdManager:
    """Hands out producer ids; ``await generate()``. See the module docstring."""

    def __init__(self, log_dir: Path, *, block_size: int = PRODUCER_ID_BLOCK_SIZE,
                 claim_block: BlockSource | None = None) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.path = Path(log_dir) / BLOCK_FILE_NAME
        self.block_size = block_size
        self._next_block_start = read_next_block_start(self.path)
        self._next_id = 0
        self._block_end = 0  # exclusive; next_id == block_end means no block is held
        self._lock = asyncio.Lock()
        self._claim_block = claim_block

    async def generate(self) -> int:
        """A producer id never handed out before by this log dir."""
        async with self._lock:
            if self._next_id >= self._block_end and self._claim_block is not None:
                self._next_id, self._block_end = await self._claim_block(self.block_size)
            elif self._next_id >= self._block_end:
                start = self._next_block_start
                end = start + self.block_size
                if end > _MAX_PRODUCER_ID:
                    raise ProducerIdError("producer id space exhausted")
                try:
                    await asyncio.to_thread(
                        atomic_write_bytes, self.path,
                        f"version=0 next_block_start={end}\n".encode("ascii"))
                except OSError as exc:  # no id of the block was handed out: retry later
                    raise ProducerIdError(f"cannot write {self.path}: {exc}") from exc
                self._next_block_start = end
                self._next_id, self._block_end = start, end
            pid = self._next_id
            self._next_id += 1
            return pid

"""What a structured-streaming checkpoint says about the last micro-batch (read without Spark).

Spark's offset log ``<checkpoint>/offsets/<batch id>`` is written before a batch runs::

    v1
    {"batchWatermarkMs":0,"batchTimestampMs":...,"conf":{...}}    the batch's metadata
    {"topic":{"0":42,"1":17}}                                       one line per source

and ``<checkpoint>/commits/<batch id>`` once the batch's output is done. A query whose last
offset-log batch is committed resumes from that batch's offsets, so when the topics hold
nothing past them there is nothing to read, and Spark need not start at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from spark_ingest.offsets import PartitionOffsets, SourceError, offsets_from_json

INITIAL_MARK: Final = "$initial"  # spark_ingest.source's mark on its initial offset
MAX_LOG_BYTES: Final = 1 << 20
BATCHES: Final = "_batches"  # the Parquet sink's record of each landed batch, under the output


@dataclass(frozen=True, slots=True)
class LastBatch:
    batch_id: int
    committed: bool
    offsets: PartitionOffsets


def _ids(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def last_batch(checkpoint: Path) -> LastBatch | None:
    """The newest batch of the offset log (None for a new checkpoint); SourceError when the
    log cannot be read (Spark would refuse it too)."""
    ids = _ids(checkpoint / "offsets")
    if not ids:
        return None
    path = checkpoint / "offsets" / str(ids[-1])
    try:
        with path.open("rb") as f:
            lines = f.read(MAX_LOG_BYTES).decode().splitlines()
        if len(lines) < 3 or lines[0] != "v1":
            raise ValueError("not a v1 offset log entry with one source")
        data = json.loads(lines[2])
    except (OSError, ValueError) as exc:
        raise SourceError(f"--checkpoint: cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise SourceError(f"--checkpoint: {path}: the source offset is not a JSON object")
    topics = {k: v for k, v in data.items() if k != INITIAL_MARK}
    offsets = offsets_from_json(topics, f"--checkpoint ({path})", allow_special=False) if topics else {}
    return LastBatch(ids[-1], ids[-1] in _ids(checkpoint / "commits"), offsets)


def landed_anything(checkpoint: Path, output: Path) -> bool:
    """Whether a batch was committed to the checkpoint or landed in the output."""
    return bool(_ids(checkpoint / "commits")) or any((output / BATCHES).glob("*.json"))

"""An idempotent Parquet sink for ``foreachBatch``: every micro-batch lands exactly once.

Layout under the output directory::

    topic=<t>/date=<yyyy-mm-dd>/batch-<id:010d>-<n:05d>.parquet   the data (hive partitions)
    _batches/<id:010d>.json     one per finished batch: records, payload bytes, files
    _staging/batch-<id:010d>/   a batch being written (removed when it is published)

Spark's streaming checkpoint journals a micro-batch's offsets before running it and marks
it committed after ``foreachBatch`` returns; a job killed in between re-runs that batch,
with the same id and the same offsets, when it restarts. ``write_batch`` makes the re-run
harmless: it first deletes whatever an earlier attempt of the same batch id left (staging
files and published files both carry the id), then writes the batch to staging and
publishes each file with an atomic ``rename``. So after any rerun that completes, the
output holds each record exactly once. A batch whose ``_batches`` record an earlier attempt
had written is marked ``rewritten`` (its records had landed already: they are not new).
Directories starting with ``_`` are ignored by Spark and by pyarrow's dataset readers.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from spark_ingest.checkpoint import BATCHES

STAGING: Final = "_staging"


@dataclass(frozen=True, slots=True)
class BatchResult:
    batch_id: int
    records: int
    payload_bytes: int  # key + value bytes
    files: int
    seconds: float
    rewritten: bool = False  # an interrupted run had landed this batch already


def _name(batch_id: int) -> str:
    return f"batch-{batch_id:010d}"


class ParquetBatchSink:
    """``foreachBatch`` target writing Parquet partitioned by topic and date."""

    def __init__(self, output: Path, log: Any = print) -> None:
        self.output = Path(output)
        self.log = log
        self.results: list[BatchResult] = []

    def _forget(self, batch_id: int) -> None:
        """Remove every trace of an earlier attempt of ``batch_id``."""
        name = _name(batch_id)
        shutil.rmtree(self.output / STAGING / name, ignore_errors=True)
        for old in self.output.glob(f"topic=*/date=*/{name}-*.parquet"):
            old.unlink(missing_ok=True)
        (self.output / BATCHES / f"{batch_id:010d}.json").unlink(missing_ok=True)

    def write_batch(self, df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        rewritten = (self.output / BATCHES / f"{batch_id:010d}.json").exists()
        self._forget(batch_id)
        staging = self.output / STAGING / _name(batch_id)
        observation = Observation(f"batch{batch_id}")
        payload = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
        observed = df.observe(observation, F.count(F.lit(1)).alias("records"),
                              F.coalesce(F.sum(payload), F.lit(0)).alias("payload_bytes"))
        (observed.withColumn("date", F.date_format("timestamp", "yyyy-MM-dd"))
         .write.partitionBy("topic", "date").parquet(str(staging)))
        stats = observation.get
        files = self._publish(batch_id, staging)
        result = BatchResult(batch_id, int(stats.get("records", 0)), int(stats.get("payload_bytes", 0)),
                             files, round(time.monotonic() - started, 3), rewritten)
        self._record(result)
        self.results.append(result)
        mb = result.payload_bytes / 1e6
        again = " (landed before by an interrupted run: rewritten)" if rewritten else ""
        self.log(f"batch {batch_id}: {result.records} records, {mb:.2f} MB in {result.seconds:.1f} s "
                 f"({result.records / max(result.seconds, 1e-3):,.0f} records/s), {files} files{again}")

    def _publish(self, batch_id: int, staging: Path) -> int:
        count = 0
        for n, src in enumerate(sorted(staging.glob("topic=*/date=*/*.parquet"))):
            target_dir = self.output / src.parent.parent.name / src.parent.name
            target_dir.mkdir(parents=True, exist_ok=True)
            os.replace(src, target_dir / f"{_name(batch_id)}-{n:05d}.parquet")
            count += 1
        shutil.rmtree(staging, ignore_errors=True)
        return count

    def _record(self, result: BatchResult) -> None:
        folder = self.output / BATCHES
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{result.batch_id:010d}.json.tmp"
        tmp.write_text(json.dumps(asdict(result)))
        os.replace(tmp, folder / f"{result.batch_id:010d}.json")

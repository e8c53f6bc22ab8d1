"""The source's output schema (the same as Spark's Kafka source) and Arrow batches of it.

Columns, in order: ``key binary, value binary, topic string, partition int, offset long,
timestamp timestamp, timestampType int`` and, with ``includeHeaders=true``,
``headers array<struct<key: string, value: binary>>`` (null when a record has none, as
in Spark). ``timestampType`` is Kafka's
attribute bit: 0 CreateTime, 1 LogAppendTime. Timestamps are ms since the epoch in Kafka
and microseconds (UTC) in Arrow/Spark.

``ArrowRows`` gathers records column by column and cuts an Arrow ``RecordBatch`` every
``max_rows`` rows (bounded memory per Spark task); the Python data source API accepts
Arrow batches from ``read()``, which is far cheaper than a tuple per row.
"""

from __future__ import annotations

from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]

from protocol.records import RecordBatch
from spark_ingest.record_columns import Columns, add_batch_columns

BASE_DDL: Final = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL: Final = "headers array<struct<key: string, value: binary>>"
DEFAULT_MAX_ROWS: Final = 8192

_HEADER_TYPE: Final = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def schema_ddl(include_headers: bool) -> str:
    return f"{BASE_DDL}, {HEADERS_DDL}" if include_headers else BASE_DDL


def arrow_schema(include_headers: bool) -> Any:
    fields = [
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
        ("partition", pa.int32()), ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(("headers", _HEADER_TYPE))
    return pa.schema(fields)


class ArrowRows:
    """Column buffers for one topic-partition; ``add_batch``, then ``flush`` an Arrow batch."""

    def __init__(self, topic: str, partition: int, include_headers: bool,
                 max_rows: int = DEFAULT_MAX_ROWS) -> None:
        self._topic = topic
        self._partition = partition
        self._include_headers = include_headers
        self._schema = arrow_schema(include_headers)
        self.max_rows = max_rows
        self._cols = Columns()

    def __len__(self) -> int:
        return len(self._cols)

    @property
    def full(self) -> bool:
        return len(self._cols) >= self.max_rows

    def add_batch(self, batch: RecordBatch, start: int, end: int) -> None:
        """Add the records of ``batch`` in ``[start, end)`` (``CorruptRecordError`` on bad data)."""
        add_batch_columns(batch, start, end, self._cols, self._include_headers)

    def flush(self) -> Any:
        """An Arrow ``RecordBatch`` of what was added (then empty), or None when empty."""
        cols = self._cols
        n = len(cols)
        if n == 0:
            return None
        arrays = [
            pa.array(cols.keys, pa.binary()),
            pa.array(cols.values, pa.binary()),
            pa.array([self._topic] * n, pa.string()),
            pa.array([self._partition] * n, pa.int32()),
            pa.array(cols.offsets, pa.int64()),
            pa.array([t * 1000 for t in cols.timestamps_ms], pa.int64()).cast(
                pa.timestamp("us", tz="UTC")),
            pa.array(cols.types, pa.int32()),
        ]
        if self._include_headers:
            # Spark's Kafka source gives null (not []) for a record without headers
            arrays.append(pa.array(cols.headers, _HEADER_TYPE))
        self._cols = Columns()
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema)

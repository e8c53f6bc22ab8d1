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

from collections.abc import Iterable
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]

from protocol.records import Record

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
    """Column buffers for one topic-partition; ``add`` records, ``flush`` an Arrow batch."""

    def __init__(self, topic: str, partition: int, include_headers: bool,
                 max_rows: int = DEFAULT_MAX_ROWS) -> None:
        self._topic = topic
        self._partition = partition
        self._include_headers = include_headers
        self._schema = arrow_schema(include_headers)
        self.max_rows = max_rows
        self._clear()

    def _clear(self) -> None:
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._offsets: list[int] = []
        self._timestamps_us: list[int] = []
        self._types: list[int] = []
        self._headers: list[list[dict[str, Any]] | None] = []

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.max_rows

    def add(self, records: Iterable[Record], timestamp_type: int) -> None:
        keys, values, offsets = self._keys, self._values, self._offsets
        stamps, types = self._timestamps_us, self._types
        for r in records:
            keys.append(r.key)
            values.append(r.value)
            offsets.append(r.offset)
            stamps.append(r.timestamp * 1000)
            types.append(timestamp_type)
            if self._include_headers:
                # Spark's Kafka source gives null (not []) for a record without headers
                self._headers.append([{"key": k, "value": v} for k, v in r.headers] if r.headers else None)

    def flush(self) -> Any:
        """An Arrow ``RecordBatch`` of what was added (then empty), or None when empty."""
        n = len(self._offsets)
        if n == 0:
            return None
        arrays = [
            pa.array(self._keys, pa.binary()),
            pa.array(self._values, pa.binary()),
            pa.array([self._topic] * n, pa.string()),
            pa.array([self._partition] * n, pa.int32()),
            pa.array(self._offsets, pa.int64()),
            pa.array(self._timestamps_us, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            pa.array(self._types, pa.int32()),
        ]
        if self._include_headers:
            arrays.append(pa.array(self._headers, _HEADER_TYPE))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._schema)
        self._clear()
        return batch

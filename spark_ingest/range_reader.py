"""Read one offset range ``[start, end)`` of one topic-partition: runs in a Spark executor.

Fetches from the partition's leader from ``start`` until ``end``, decoding each batch with
``protocol.records`` (CRC32C checked, as a consumer with ``check.crcs=true`` does) and
skipping what lies outside the range (a fetch starts at the batch holding the offset),
control batches (transaction markers) and gaps (compacted offsets). Output is Arrow
batches of the source schema (``spark_ingest.rows``).

Data loss (``failOnDataLoss``): records of the range that are gone (the log start moved
past them: OFFSET_OUT_OF_RANGE, or a log that no longer reaches ``end``) raise
``SourceError`` when true; when false the reader logs a warning, skips to what is left and
ends early. Every loop is bounded: a fetch either moves the offset forward or counts as a
stall, and ``MAX_STALLS`` stalls in a row end the read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterator
from typing import Any, Final

from protocol.errors import ErrorCode, ProtocolError
from protocol.records import StopReason, scan_batches
from spark_ingest.kafka_client import RETRIABLE, Cluster, error_name
from spark_ingest.offsets import OffsetRange, SourceError
from spark_ingest.options import SourceOptions
from spark_ingest.rows import ArrowRows

log = logging.getLogger(__name__)

MAX_STALLS: Final = 10
STALL_BACKOFF_MS: Final = 100


def _lost(opts: SourceOptions, rng: OffsetRange, first: int, last: int, why: str) -> None:
    message = (f"failOnDataLoss: records [{first}, {last}) of {rng.tp} are gone ({why}); "
               "set failOnDataLoss=false to skip lost records")
    if opts.fail_on_data_loss:
        raise SourceError(message)
    log.warning("%s; skipping them", message)


def read_range(opts: SourceOptions, rng: OffsetRange, cluster: Cluster | None = None) -> Iterator[Any]:
    """Arrow ``RecordBatch``es holding the records of ``rng`` in offset order."""
    own = cluster is None
    conn = Cluster(opts.bootstrap, opts.request_timeout_ms) if cluster is None else cluster
    try:
        yield from _read(conn, opts, rng)
    finally:
        if own:
            conn.close()


def _read(cluster: Cluster, opts: SourceOptions, rng: OffsetRange) -> Iterator[Any]:
    rows = ArrowRows(rng.tp.topic, rng.tp.partition, opts.include_headers)
    offset = rng.start
    stalls = 0
    while offset < rng.end:
        if stalls >= MAX_STALLS:
            raise SourceError(f"reading {rng.tp} stopped making progress at offset {offset} "
                              f"(range [{rng.start}, {rng.end}))")
        got = cluster.fetch(rng.tp, offset, opts.max_partition_fetch_bytes, opts.fetch_max_wait_ms)
        code = got.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            lso = got.log_start_offset
            if lso < 0 or lso <= offset:
                lso = cluster.earliest([rng.tp])[rng.tp]
            if lso > offset:
                _lost(opts, rng, offset, min(lso, rng.end), f"the log now starts at {lso}")
                offset = lso
                stalls = 0
                continue
            stalls += 1
            time.sleep(STALL_BACKOFF_MS / 1000)
            continue
        if code in RETRIABLE or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            stalls += 1
            time.sleep(STALL_BACKOFF_MS * stalls / 1000)
            if code != ErrorCode.NETWORK_EXCEPTION:
                cluster.refresh(rng.tp)
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and stalls >= MAX_STALLS:
                _lost(opts, rng, offset, rng.end, "the topic or partition was deleted")
                break
            continue
        if code != 0:
            raise SourceError(f"Fetch of {rng.tp} at offset {offset} failed: {error_name(code)}")
        before = offset
        offset = yield from _decode(got.records, offset, rng.end, rows)
        if offset > before:
            stalls = 0
            continue
        if got.high_watermark <= offset:
            # Nothing at or after ``offset``: the log no longer reaches the range's end.
            stalls += 1
            if stalls >= MAX_STALLS // 2:
                _lost(opts, rng, offset, rng.end, f"the log ends at {got.high_watermark}")
                break
            time.sleep(STALL_BACKOFF_MS / 1000)
            continue
        stalls += 1
    last = rows.flush()
    if last is not None:
        yield last


def _decode(data: bytes, offset: int, end: int, rows: ArrowRows) -> Generator[Any, None, int]:
    """Add the records of ``data`` in ``[offset, end)``; the generator's value is the next
    offset to fetch. A cut last batch is normal (the fetch size limit); a bad CRC is not.
    """
    scan = scan_batches(data, verify_crc=True)
    if scan.count == 0 and scan.stop_reason not in (None, StopReason.TRUNCATED):
        raise SourceError(f"corrupt record data at offset {offset}: {scan.message}")
    for batch in scan.batches:
        next_offset = batch.next_offset
        if next_offset <= offset:
            continue
        if not batch.is_control:
            try:
                rows.add_batch(batch, offset, end)
            except ProtocolError as exc:
                raise SourceError(f"corrupt batch at offset {batch.base_offset}: {exc}") from None
            if rows.full:
                flushed = rows.flush()
                if flushed is not None:
                    yield flushed
        offset = min(next_offset, end)
        if offset >= end:
            break
    return offset

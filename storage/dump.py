"""``minikafka dump-log FILE...``: print segments and indexes like ``kafka-dump-log.sh``.

Output follows Kafka 3.9's ``kafka.tools.DumpLogSegments`` line for line:

- ``.log``: ``Dumping <file>``, ``Log starting offset: <base>``, then one line per batch
  (``baseOffset: .. lastOffset: .. count: .. position: .. CreateTime: .. size: ..
  magic: 2 compresscodec: .. crc: .. isvalid: ..``); with ``--deep-iteration`` one
  ``| offset: ..`` line per record, and with ``--print-data-log`` its key and payload
  (UTF-8) too. Trailing bytes that are not a whole batch: ``Found N invalid bytes at the
  end of <file>``.
- ``.index``: ``offset: .. position: ..`` per entry; ``.timeindex``: ``timestamp: ..
  offset: ..`` per entry. Each entry is checked against the segment's ``.log`` as Kafka
  does (an offset entry must name the last offset of the batch at its position; a time
  entry the largest timestamp of the batch ending at its offset, increasing), and the
  index gets the loader's sanity check; problems go to stderr, a clean index prints
  ``<file> passed sanity check.``

The segment file is mapped read-only (nothing is modified); batches are decoded with
``protocol.records``. Exit status: 0, or 1 when a file is missing or unknown.
"""

from __future__ import annotations

import argparse
import mmap
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from protocol.compression import CompressionType
from protocol.errors import ProtocolError
from protocol.records import (
    ControlType,
    CorruptRecordError,
    RecordBatch,
    TruncatedBatchError,
    decode_control_key,
    iter_batches,
)
from storage.errors import CorruptIndexError
from storage.index import OffsetIndex, TimeIndex
from storage.naming import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, parse_segment_file

_CODEC_NAMES = {
    CompressionType.NONE: "none",
    CompressionType.GZIP: "gzip",
    CompressionType.SNAPPY: "snappy",
    CompressionType.LZ4: "lz4",
    CompressionType.ZSTD: "zstd",
}
_CONTROL_NAMES = {
    0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION", 6: "KRAFT_VOTERS",
}
_INT32_MAX = 2**31 - 1
_MAX_INDEX_ENTRIES = 1 << 28  # bound for loops over index files


def _base_offset(path: Path) -> int:
    parsed = parse_segment_file(path.name)
    return parsed[0] if parsed is not None else 0


def _last_sequence(batch: RecordBatch) -> int:
    base = batch.base_sequence
    if base < 0:
        return -1
    return (base + batch.last_offset_delta) % (_INT32_MAX + 1)


def _record_sequence(batch: RecordBatch, offset_delta: int) -> int:
    base = batch.base_sequence
    return -1 if base < 0 else (base + offset_delta) % (_INT32_MAX + 1)


def _timestamp_type(batch: RecordBatch) -> str:
    return "LogAppendTime" if batch.timestamp_type == 1 else "CreateTime"


def _batch_line(batch: RecordBatch, position: int) -> str:
    horizon = (
        f"OptionalLong[{batch.base_timestamp}]" if batch.has_delete_horizon else "OptionalLong.empty"
    )
    return (
        f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
        f"count: {batch.records_count} baseSequence: {batch.base_sequence} "
        f"lastSequence: {_last_sequence(batch)} producerId: {batch.producer_id} "
        f"producerEpoch: {batch.producer_epoch} "
        f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
        f"isTransactional: {str(batch.is_transactional).lower()} "
        f"isControl: {str(batch.is_control).lower()} deleteHorizonMs: {horizon} "
        f"position: {position} {_timestamp_type(batch)}: {batch.max_timestamp} "
        f"size: {batch.size_bytes} magic: {batch.magic} "
        f"compresscodec: {_CODEC_NAMES.get(batch.compression, 'unknown')} crc: {batch.crc} "
        f"isvalid: {str(batch.verify_crc()).lower()}"
    )


def _record_lines(batch: RecordBatch, print_data: bool) -> Iterator[str]:
    ts_type = _timestamp_type(batch)
    for record in batch.records():
        key_size = -1 if record.key is None else len(record.key)
        value_size = -1 if record.value is None else len(record.value)
        seq = _record_sequence(batch, record.offset - batch.base_offset)
        header_keys = ",".join(k for k, _ in record.headers)
        line = (
            f"| offset: {record.offset} {ts_type}: {record.timestamp} keySize: {key_size} "
            f"valueSize: {value_size} sequence: {seq} headerKeys: [{header_keys}]"
        )
        if batch.is_control:
            ctype = decode_control_key(record.key).type
            if ctype in (ControlType.ABORT, ControlType.COMMIT) and record.value is not None:
                epoch = int.from_bytes(record.value[2:6], "big", signed=True)
                line += f" endTxnMarker: {_CONTROL_NAMES[ctype]} coordinatorEpoch: {epoch}"
            else:
                line += f" controlType: {_CONTROL_NAMES.get(ctype, 'UNKNOWN')}({ctype})"
        elif print_data:
            if record.key is not None:
                line += " key: " + record.key.decode("utf-8", "replace")
            if record.value is not None:
                line += " payload: " + record.value.decode("utf-8", "replace")
        yield line


class _Mapped:
    """A read-only map of a whole file (empty files give an empty view)."""

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:  # the map keeps its own reference to the file
            size = os.fstat(fd).st_size
            self._mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else None
        finally:
            os.close(fd)
        self.view = memoryview(self._mm) if self._mm is not None else memoryview(b"")

    def close(self) -> None:
        self.view.release()
        if self._mm is not None:
            self._mm.close()


def dump_log(path: Path, out: TextIO, err: TextIO, *, deep: bool, print_data: bool) -> None:
    out.write(f"Log starting offset: {_base_offset(path)}\n")
    mapped = _Mapped(path)
    valid = 0
    try:
        batches = iter_batches(mapped.view)
        while True:  # bounded: each turn consumes one batch of the finite file
            try:
                batch = next(batches)
            except StopIteration:
                break
            except TruncatedBatchError:
                break
            except (CorruptRecordError, ProtocolError) as exc:
                err.write(f"Corrupt batch at position {valid} of {path.name}: {exc}\n")
                break
            out.write(_batch_line(batch, valid) + "\n")
            if deep or print_data:
                try:
                    for line in _record_lines(batch, print_data):
                        out.write(line + "\n")
                except (CorruptRecordError, ProtocolError) as exc:
                    err.write(f"Corrupt records in batch at position {valid}: {exc}\n")
            valid += batch.size_bytes
            batch.release()
        del batches
    finally:
        mapped.close()
    trailing = path.stat().st_size - valid
    if trailing > 0:
        out.write(f"Found {trailing} invalid bytes at the end of {path.name}\n")


def _log_batches(log_path: Path) -> list[tuple[int, int, int, int]]:
    """(position, size, last offset, max record timestamp) of every whole batch."""
    out: list[tuple[int, int, int, int]] = []
    if not log_path.exists():
        return out
    mapped = _Mapped(log_path)
    try:
        pos = 0
        for batch in iter_batches(mapped.view):
            out.append((pos, batch.size_bytes, batch.last_offset, batch.max_timestamp))
            pos += batch.size_bytes
            batch.release()
    except ProtocolError:
        pass
    finally:
        mapped.close()
    return out


def dump_index(path: Path, out: TextIO, err: TextIO) -> bool:
    """Print offset index entries; check each against the log. True if all is well."""
    base = _base_offset(path)
    size = path.stat().st_size
    idx = OffsetIndex(path, base, max(size, 8), writable=False)
    ok = True
    try:
        if idx.entries == 0:
            out.write(f"{path} is empty.\n")
            return True
        batches = {pos: last for pos, _, last, _ in _log_batches(path.with_suffix(LOG_SUFFIX))}
        mismatches: list[tuple[int, int]] = []
        for i in range(min(idx.entries, _MAX_INDEX_ENTRIES)):
            entry = idx.entry(i)
            if entry.offset == base and i > 0:
                break  # zero tail of an untrimmed index
            log_last = batches.get(entry.position, -1)
            if log_last != entry.offset:
                mismatches.append((entry.offset, log_last))
            out.write(f"offset: {entry.offset} position: {entry.position}\n")
        if mismatches:
            ok = False
            err.write(f"Mismatches in :{path.resolve()}\n")
            for index_offset, log_offset in mismatches:
                err.write(f"  Index offset: {index_offset}, log offset: {log_offset}\n")
        ok = _sanity(idx.sanity_check, path, out, err) and ok
    finally:
        idx.close()
    return ok


def dump_time_index(path: Path, out: TextIO, err: TextIO) -> bool:
    """Print time index entries; check each against the log as Kafka does."""
    base = _base_offset(path)
    size = path.stat().st_size
    idx = TimeIndex(path, base, max(size, 12), writable=False)
    ok = True
    try:
        if idx.entries == 0:
            out.write(f"{path} is empty.\n")
            return True
        by_last = {last: ts for _, _, last, ts in _log_batches(path.with_suffix(LOG_SUFFIX))}
        prev = -1
        for i in range(min(idx.entries, _MAX_INDEX_ENTRIES)):
            entry = idx.entry(i)
            if entry.offset == base and i > 0:
                break
            log_ts = by_last.get(entry.offset)
            if log_ts is None:
                ok = False
                err.write(f"Indexed offset {entry.offset} of {path.name} is not the last offset "
                          f"of a batch in the log\n")
            elif log_ts != entry.timestamp:
                ok = False
                err.write(f"Found timestamp mismatch in :{path.resolve()}\n"
                          f"  Index timestamp: {entry.timestamp}, log timestamp: {log_ts}\n")
            if entry.timestamp <= prev:
                ok = False
                err.write(f"Found out of order timestamp in :{path.resolve()}\n"
                          f"  Index timestamp: {entry.timestamp}, "
                          f"Previously indexed timestamp: {prev}\n")
            prev = entry.timestamp
            out.write(f"timestamp: {entry.timestamp} offset: {entry.offset}\n")
        ok = _sanity(idx.sanity_check, path, out, err) and ok
    finally:
        idx.close()
    return ok


def _sanity(check: Callable[[], None], path: Path, out: TextIO, err: TextIO) -> bool:
    try:
        check()
    except CorruptIndexError as exc:
        err.write(f"{path} failed sanity check: {exc}\n")
        return False
    out.write(f"{path} passed sanity check.\n")
    return True


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="minikafka dump-log",
        description="Print log segments and indexes like kafka-dump-log.sh.",
    )
    p.add_argument("paths", nargs="*", type=Path, help=".log, .index or .timeindex files")
    p.add_argument("--files", default="", help="comma-separated files (kafka-dump-log.sh style)")
    p.add_argument("--print-data-log", action="store_true", help="print record keys and values")
    p.add_argument("--deep-iteration", action="store_true", help="print every record")
    return p


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Entry point of ``minikafka dump-log`` and ``python -m storage.dump``."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    stdout = out if out is not None else sys.stdout
    stderr = err if err is not None else sys.stderr
    files = list(args.paths) + [Path(f) for f in args.files.split(",") if f]
    if not files:
        stderr.write("minikafka dump-log: give at least one file\n")
        return 1
    status = 0
    for path in files:
        if not path.is_file():
            stderr.write(f"{path}: no such file\n")
            status = 1
            continue
        stdout.write(f"Dumping {path}\n")
        if path.name.endswith(LOG_SUFFIX):
            dump_log(path, stdout, stderr, deep=args.deep_iteration,
                     print_data=args.print_data_log)
        elif path.name.endswith(INDEX_SUFFIX):
            dump_index(path, stdout, stderr)
        elif path.name.endswith(TIME_INDEX_SUFFIX):
            dump_time_index(path, stdout, stderr)
        else:
            stderr.write(f"Ignoring unknown file {path}\n")
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())

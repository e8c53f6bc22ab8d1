"""Apache Kafka's own record classes (kafka-clients 3.9.1) read our batches, and we read theirs.

One JVM run of tests/fixtures/batches/JavaRecords.java: it CRC-checks (ensureValid) and
decodes our batches for every codec, prints each record, and rebuilds the same records
with Java's MemoryRecordsBuilder, which we then decode. Java's lz4 reader
(KafkaLZ4BlockInputStream) and xerial snappy are the interesting cases.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from protocol.records import CompressionType, NewRecord, Record, build_batch, scan_batches

pytestmark = [pytest.mark.java, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
LIBS = ROOT / "tools" / "kafka-jars" / "libs"
PROGRAM = ROOT / "tests" / "fixtures" / "batches" / "JavaRecords.java"
TS0 = 1_700_000_000_000

SENT = [
    NewRecord(b"key-0", b"value-0" * 40, [("trace", b"abc"), ("empty", b""), ("nil", None)], TS0),
    NewRecord(None, b"no key", (), TS0 + 7),
    NewRecord(b"tombstone", None, [("h\u00e9", b"\x00\xff")], TS0 + 3),
    NewRecord(b"", b"", (), TS0 + 1000),
]


def expected(base_offset: int) -> list[Record]:
    return [
        Record(base_offset + i, r.timestamp_ms or 0, r.key, r.value, list(r.headers))
        for i, r in enumerate(SENT)
    ]


def unhex(field: str) -> bytes | None:
    return None if field == "-" else bytes.fromhex(field[1:])


def parse(line: str) -> tuple[str, str, Record]:
    """One ``R file codec offset timestamp key value [hkey=hvalue]...`` line."""
    tag, name, codec, offset, ts, key, value, *headers = line.split(" ")
    assert tag == "R"
    hdrs: list[tuple[str, bytes | None]] = []
    for h in headers:
        hkey, hvalue = h.split("=")
        raw_key = unhex(hkey)
        assert raw_key is not None
        hdrs.append((raw_key.decode("utf-8"), unhex(hvalue)))
    return name, codec, Record(int(offset), int(ts), unhex(key), unhex(value), hdrs)


def test_java_reads_our_batches_and_we_read_javas(tmp_path: Path) -> None:
    assert (LIBS / "kafka-clients-3.9.1.jar").exists(), "run tools/fetch-kafka-jars first"
    files = {}
    for codec in CompressionType:
        path = tmp_path / f"{codec.name}.bin"
        path.write_bytes(
            build_batch(SENT, base_offset=0, compression=codec)
            + build_batch(SENT, base_offset=4, compression=codec, producer_id=3, producer_epoch=0)
        )
        files[codec] = path
    proc = subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{LIBS}/*", str(PROGRAM),
         *map(str, files.values())],
        capture_output=True, text=True, timeout=100, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]

    seen: dict[str, list[Record]] = {}
    for line in proc.stdout.splitlines():
        name, java_codec, record = parse(line)
        assert java_codec == name.removesuffix(".bin").lower()
        seen.setdefault(name, []).append(record)
    for codec, path in files.items():
        assert seen[path.name] == expected(0) + expected(4), codec

        scan = scan_batches((tmp_path / f"{path.name}.java").read_bytes())
        assert scan.stop_reason is None, scan.message
        assert len(scan.batches) == 2
        got: list[Record] = []
        for batch in scan.batches:
            assert batch.compression is codec and batch.verify_crc()
            got += batch.records()
        assert got == expected(0) + expected(4), codec

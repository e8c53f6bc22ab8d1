"""Byte compatibility: Apache Kafka's own DumpLogSegments reads segments and indexes written
by storage/ without errors, and prints exactly what ``storage.dump`` prints."""

from __future__ import annotations

import io
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from protocol.compression import CompressionType
from protocol.records import ControlType, NewRecord, build_batch, build_control_batch
from storage.config import LogConfig
from storage.dump import main as dump_main
from storage.loader import load_log
from storage.naming import TopicPartition

REPO = Path(__file__).resolve().parents[2]
JARS = REPO / "tools" / "kafka-jars" / "libs"
pytestmark = [
    pytest.mark.java,
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        not JARS.is_dir() or shutil.which("java") is None,
        reason="needs java and tools/fetch-kafka-jars",
    ),
]
CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
          CompressionType.LZ4, CompressionType.ZSTD]


def _records(rng: random.Random, i: int) -> list[NewRecord]:
    return [
        NewRecord(
            None if j % 4 == 3 else f"key-{i}-{j}".encode(),
            None if j % 7 == 6 else f"value {i} {j} ".encode() * rng.randint(1, 40),
            [("h1", b"x"), ("h2", None)] if j % 2 else (),
            1_700_000_000_000 + i * 100 + rng.randint(0, 50),
        )
        for j in range(rng.randint(1, 6))
    ]


def build_logs(root: Path) -> list[Path]:
    """Several partitions exercising rolls, codecs, transactions, LogAppendTime,
    follower appends, truncation and crash recovery; returns every segment file."""
    rng = random.Random(42)
    small = {"segment.bytes": "6000", "index.interval.bytes": "300"}
    # leader appends with every codec, idempotent producer, transaction markers
    a = load_log(root / "a-0", TopicPartition("a", 0), LogConfig.from_properties(small),
                 clean_shutdown=True)
    for i in range(60):
        a.append(build_batch(_records(rng, i), compression=CODECS[i % 5], producer_id=7,
                             producer_epoch=1, base_sequence=i * 10,
                             is_transactional=i % 10 == 9), leader_epoch=i // 20)
        if i % 10 == 9:
            a.append(build_control_batch(ControlType.COMMIT if i % 20 else ControlType.ABORT,
                                         producer_id=7, producer_epoch=1, coordinator_epoch=3,
                                         timestamp_ms=1_700_000_000_000 + i * 100 + 60),
                     leader_epoch=i // 20, allow_control=True)
    a.truncate_to(a.log_end_offset - 5)
    for i in range(60, 70):
        a.append(build_batch(_records(rng, i)), leader_epoch=5)
    a.close()
    # LogAppendTime
    b = load_log(root / "b-1", TopicPartition("b", 1), LogConfig.from_properties(
        {**small, "message.timestamp.type": "LogAppendTime"}), clean_shutdown=True)
    for i in range(30):
        b.append(build_batch(_records(rng, i), compression=CODECS[i % 5]), leader_epoch=0,
                 now_ms=1_700_000_100_000 + i)
    b.close()
    # follower appends keep the leader's offsets and epochs
    c = load_log(root / "c-2", TopicPartition("c", 2), LogConfig.from_properties(small),
                 clean_shutdown=True)
    offset = 0
    for i in range(40):
        recs = _records(rng, i)
        c.append_as_follower(build_batch(recs, base_offset=offset, partition_leader_epoch=i // 8))
        offset += len(recs)
    c.close()
    # crash: untrimmed indexes, torn tail, then recovery rebuilds indexes
    d = load_log(root / "d-3", TopicPartition("d", 3), LogConfig.from_properties(small),
                 clean_shutdown=True)
    for i in range(40):
        d.append(build_batch(_records(rng, i), compression=CODECS[i % 5]), leader_epoch=1)
    active = d.active_segment.log_path
    d.abandon()
    with open(active, "r+b") as f:
        f.truncate(active.stat().st_size - 17)
    load_log(root / "d-3", TopicPartition("d", 3), LogConfig.from_properties(small),
             clean_shutdown=False).close()
    files: list[Path] = []
    for part in sorted(root.iterdir()):
        for suffix in (".log", ".index", ".timeindex"):
            files.extend(sorted(part.glob(f"*{suffix}")))
    return files


def kafka_dump(files: list[Path]) -> str:
    proc = subprocess.run(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", str(JARS / "*"),
         "kafka.tools.DumpLogSegments",
         "--files", ",".join(str(f) for f in files), "--print-data-log"],
        capture_output=True, text=True, timeout=150,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    problems = [line for line in proc.stderr.splitlines() if "log4j" not in line]
    assert not problems, "\n".join(problems[:40])
    return proc.stdout


def our_dump(files: list[Path]) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert dump_main(["--print-data-log", *map(str, files)], out, err) == 0
    assert err.getvalue() == ""
    return out.getvalue()


def test_kafka_dump_log_segments_reads_our_files(tmp_path: Path) -> None:
    files = build_logs(tmp_path)
    assert sum(f.suffix == ".log" for f in files) >= 8  # rolled segments in every log
    theirs = kafka_dump(files)
    for bad in ("Mismatches", "mismatch", "out of order", "invalid bytes", "isvalid: false",
                "Exception", "not found"):
        assert bad not in theirs, bad
    ours = [line for line in our_dump(files).splitlines() if not line.endswith("sanity check.")]
    theirs_lines = [line for line in theirs.splitlines() if "log4j" not in line]
    assert len(theirs_lines) == len(ours)
    for n, (mine, kafka) in enumerate(zip(ours, theirs_lines, strict=True)):
        assert mine == kafka, f"line {n}: ours {mine!r} != kafka {kafka!r}"
    # Every segment was dumped and indexes actually hold entries.
    assert theirs.count("Log starting offset:") == sum(f.suffix == ".log" for f in files)
    assert theirs.count("offset: ") > 0 and "timestamp: " in theirs and "endTxnMarker: COMMIT" in theirs
    assert "LogAppendTime: 1700000100000" in theirs

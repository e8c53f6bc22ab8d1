"""storage.dump: the dump-log tool's output, its index checks, and ``python -m storage.dump``."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.records import NewRecord, build_batch
from storage.config import LogConfig
from storage.dump import main
from storage.loader import load_log
from storage.naming import TopicPartition

pytestmark = pytest.mark.timeout(60)
REPO = Path(__file__).resolve().parents[2]


def make_segment(tmp_path: Path) -> Path:
    lg = load_log(tmp_path / "t-0", TopicPartition("t", 0),
                  LogConfig.from_properties({"index.interval.bytes": "100"}), clean_shutdown=True)
    for i in range(6):
        lg.append(build_batch([NewRecord(b"k%d" % i, b"v" * 80, timestamp_ms=1000 + i)]),
                  leader_epoch=0)
    lg.close()
    return tmp_path / "t-0"


def run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(args, out, err)
    return code, out.getvalue(), err.getvalue()


def test_dump_log_batches_records_and_trailing_bytes(tmp_path: Path) -> None:
    d = make_segment(tmp_path)
    seg = d / "00000000000000000000.log"
    code, out, _ = run([str(seg)])
    assert code == 0
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {seg}", "Log starting offset: 0"]
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1")
    assert "position: 0 CreateTime: 1000 size: " in lines[2] and lines[2].endswith("isvalid: true")
    assert len(lines) == 8  # no record lines without --deep-iteration
    code, out, _ = run(["--print-data-log", str(seg)])
    assert "| offset: 5 CreateTime: 1005 keySize: 2 valueSize: 80 sequence: -1 headerKeys: [] " in out
    assert "key: k5 payload: " + "v" * 80 in out
    with open(seg, "ab") as f:
        f.write(b"\x00" * 20)
    _, out, _ = run(["--deep-iteration", str(seg)])
    assert "Found 20 invalid bytes at the end of 00000000000000000000.log" in out
    assert "payload" not in out and "| offset: 5" in out


def test_dump_indexes_check_entries_against_the_log(tmp_path: Path) -> None:
    d = make_segment(tmp_path)
    idx = d / "00000000000000000000.index"
    code, out, err = run(["--files", f"{idx},{d / '00000000000000000000.timeindex'}"])
    assert code == 0 and err == ""
    assert "offset: 1 position: " in out and "passed sanity check." in out
    assert "timestamp: 1001 offset: 1" in out
    with open(idx, "ab") as f:
        f.write(struct.pack(">ii", 9, 3))  # points inside a batch, offset unknown
    _, out, err = run([str(idx)])
    assert "Mismatches in :" in err and "Index offset: 9, log offset: -1" in err


def test_missing_file_and_module_entry_point(tmp_path: Path) -> None:
    code, _, err = run([str(tmp_path / "nope.log")])
    assert code == 1 and "no such file" in err
    d = make_segment(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "storage.dump",
                           str(d / "00000000000000000000.log")],
                          cwd=REPO, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and "baseOffset: 5 lastOffset: 5" in proc.stdout

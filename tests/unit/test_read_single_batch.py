"""protocol.records.read_single_batch (the produce path's one header read) against the full
scan: it finds a batch exactly where ``scan_batches`` finds one whole magic-2 batch filling
the buffer, with the header ``read_header`` reads, for good, cut, padded and garbled input."""

from __future__ import annotations

import random
import struct

from protocol.batch_header import read_header
from protocol.records import NewRecord, build_batch, read_single_batch, scan_batches


def _expected(buf: bytes) -> object:
    scan = scan_batches(buf, verify_crc=False)
    if scan.stop_reason is None and len(scan.batches) == 1:
        return read_header(buf, 0)
    return None


def _got(buf: bytes) -> object:
    single = read_single_batch(buf)
    return None if single is None else single[1]


def test_agrees_with_the_scan() -> None:
    batch = build_batch([NewRecord(b"k", b"v" * 100, (), None), NewRecord(None, b"w", (), 5)])
    cases = [batch, batch + batch, batch + b"\x00", batch[:-1], batch[:61], batch[:60], b""]
    for magic in (0, 1, 3):
        cases.append(batch[:16] + bytes((magic,)) + batch[17:])
    for delta in (-1, 1, -(len(batch) - 12) + 48):
        length = struct.unpack_from(">i", batch, 8)[0] + delta
        cases.append(batch[:8] + struct.pack(">i", length) + batch[12:])
    rng = random.Random(7)
    for _ in range(2000):
        garbled = bytearray(batch)
        garbled[rng.randrange(0, 21)] = rng.randrange(256)
        cases.append(bytes(garbled))
    found = 0
    for buf in cases:
        assert _got(buf) == _expected(buf)
        found += _got(buf) is not None
    assert found > 1  # the good batch, and garbled ones that still hold one batch

"""A batch corrupted at rest, met by fetches of a real broker: CORRUPT_MESSAGE, logged once.

Records are produced, the broker is stopped cleanly (so the next start trusts the files
and scans nothing), one record byte of the middle batch is flipped on disk, and the broker
is started again. A fetch from the start gets the batches before the corrupt one; fetches
at the corrupt batch get CORRUPT_MESSAGE, which the broker logs once with the file, the
byte position and the offset; the batches after it are still served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from client.sync import SyncClient
from protocol.errors import ErrorCode
from tests.integration.data_path_client import batch, create_topic, fetch, produce, records_of

pytestmark = pytest.mark.timeout(90)


@pytest.mark.broker_errors(r"corrupt batch at byte \d+ \(base offset 3\).*CORRUPT_MESSAGE")
def test_fetch_of_a_corrupt_batch_is_corrupt_message(broker: Any) -> None:
    create_topic(broker.bootstrap, "rot")
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
        bases = [produce(c, "rot", 0, batch([b"v%d-%d" % (i, k) for k in range(3)])).base_offset
                 for i in range(3)]
    assert bases == [0, 3, 6]
    broker.stop()
    segment: Path = broker.log_dir / "rot-0" / "00000000000000000000.log"
    raw = bytearray(segment.read_bytes())
    size = len(raw) // 3  # three batches of the same size
    raw[size + size - 2] ^= 0xFF  # the last record byte of the middle batch
    segment.write_bytes(bytes(raw))
    broker.start()
    mark = len(broker.stderr_text())
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
        first = fetch(c, "rot", 0, 0).responses[0].partitions[0]
        assert first.error_code == ErrorCode.NO_ERROR
        assert [r.value for r in records_of(first.records)] == [b"v0-0", b"v0-1", b"v0-2"]
        for _ in range(3):
            bad = fetch(c, "rot", 0, 3).responses[0].partitions[0]
            assert bad.error_code == ErrorCode.CORRUPT_MESSAGE
            assert records_of(bad.records) == []
        after = fetch(c, "rot", 0, 6).responses[0].partitions[0]
        assert after.error_code == ErrorCode.NO_ERROR
        assert [r.value for r in records_of(after.records)] == [b"v2-0", b"v2-1", b"v2-2"]
    log = broker.stderr_text()[mark:]
    lines = [line for line in log.splitlines() if "CORRUPT_MESSAGE" in line]
    assert len(lines) == 1, lines
    assert str(segment) in lines[0] and f"at byte {size} (base offset 3)" in lines[0]
    assert "Traceback" not in log

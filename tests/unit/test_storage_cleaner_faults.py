"""The log cleaner meeting a disk error while it writes the cleaned segment: the cleaned
files go, the log is untouched; a full disk leaves the log online and the next pass cleans
it, EIO takes the log dir offline (Kafka's cleaner does the same on an IOException)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from storage import fileio
from tests.unit.test_storage_cleaner import Clock, fill, make_cleaner, open_log, records_of

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(("code", "offline"), [
    (errno.ENOSPC, False),
    pytest.param(errno.EIO, True, marks=pytest.mark.broker_errors(
        r"is offline: cleaning t-0 of t-0 failed: .*Input/output error")),
])
def test_disk_error_while_writing_the_cleaned_segment(tmp_path: Path, code: int,
                                                      offline: bool) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock)
    latest = fill(lg, clock, 2000, 50)
    lg.roll()
    # The cleaning writes only its *.cleaned files in the partition directory: fail the
    # first of those writes.
    with fileio.injected(fileio.FaultPlan(nth=1, op=fileio.Op.WRITE, errno=code,
                                          path_prefix=str(tmp_path / "t-0"))):
        cleaner, worker = make_cleaner(lg, clock)
        assert cleaner.clean_filthiest(worker)
        assert fileio.faults_raised() == 1
    assert cleaner.totals.aborted == 1 and cleaner.totals.failed == 0
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    assert lg.offline is offline
    if offline:
        return
    def latest_values() -> dict[bytes | None, tuple[int, bytes | None]]:
        out: dict[bytes | None, tuple[int, bytes | None]] = {}
        for offset, key, value, _ in records_of(lg):  # whole batches, CRCs good
            out[key] = (offset, value)
        return out

    assert latest_values() == latest  # groups swapped in before the error are whole
    assert cleaner.clean_filthiest(worker)  # not marked uncleanable: cleaned on the next pass
    assert cleaner.totals.cleanings == 1
    assert latest_values() == latest and len(records_of(lg)) == 50

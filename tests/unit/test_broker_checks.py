"""The test harness's own rules (tests/broker_checks.py, tests/conftest.py): which broker log
entries are problems, how a declaration allows them, and, through pytester (an inner pytest
run with the project's conftest), that an undeclared broker error fails the test at
teardown and that under CI=true a skipped test fails the run naming it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.broker_checks import Expectations, is_problem, split_entries, unexpected_entries

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
INNER_ARGS = ("-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function")

LOG = """\
[2026-01-01 12:00:00,000] INFO [KafkaServer id=0] started (broker.server)
[2026-01-01 12:00:01,000] WARNING Closing connection c1: bad frame (broker.network.connection)
[2026-01-01 12:00:02,000] ERROR Handler for api key 3 v12 (correlation id 5, client x) failed (broker.network.request_channel)
Traceback (most recent call last):
  File "broker/handlers/metadata.py", line 10, in handle
RuntimeError: boom
[2026-01-01 12:00:03,000] WARNING retrying (broker.x)
Traceback (most recent call last):
ValueError: hidden in a warning
[2026-01-01 12:00:04,000] INFO shut down completed (broker.server)
"""


class _Marker:
    def __init__(self, *args: str, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs


def test_entries_keep_their_traceback_lines() -> None:
    entries = split_entries(LOG)
    assert len(entries) == 5
    assert entries[2].endswith("RuntimeError: boom")
    assert [is_problem(e) for e in entries] == [False, False, True, True, False]
    raw = "Traceback (most recent call last):\n  File x\nKeyError: 1\n"  # printed by Python
    assert [is_problem(e) for e in split_entries(raw)] == [True]


def test_declared_patterns_allow_entries_and_must_match() -> None:
    assert len(unexpected_entries(LOG, Expectations())) == 2
    expected = Expectations.from_markers([_Marker(r"api key 3 .*failed(.|\n)*RuntimeError: boom"),
                                          _Marker("never logged", exit_codes=(1,))])
    (left,) = unexpected_entries(LOG, expected)
    assert "hidden in a warning" in left
    assert expected.unmatched() == ["never logged"] and expected.exit_codes == {1}
    with pytest.raises(TypeError, match="exit_code"):
        Expectations.from_markers([_Marker(exit_code=1)])


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester whose inner runs (subprocesses) use the project's tests/conftest.py."""
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv("CI", raising=False)
    return pytester


@pytest.mark.timeout(180)
def test_undeclared_broker_error_fails_the_test_at_teardown(inner: pytest.Pytester) -> None:
    """A real broker that fails start-up (its log dir is locked by another) exits 1 and logs
    ERROR: the test fails at teardown unless it declares both; a broker that dies by itself
    is reported with its exit code; so is an ERROR record of an in-process broker."""
    inner.makepyfile(test_inner='''
import os, signal
import pytest
from tests.integration.broker_process import BrokerProcess, BrokerStartError

@pytest.fixture(scope="module")
def first(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("first")).start()
    yield proc
    proc.stop()

def second_on_same_dir(first, tmp_path):
    with pytest.raises(BrokerStartError):
        BrokerProcess(tmp_path, {"log.dirs": str(first.log_dir)}, name="second").start()

def test_undeclared(first, tmp_path):
    second_on_same_dir(first, tmp_path)

@pytest.mark.broker_errors("Failed to acquire lock", exit_codes=(1,))
def test_declared(first, tmp_path):
    second_on_same_dir(first, tmp_path)

@pytest.mark.broker_errors("not what happened", exit_codes=(1,))
def test_wrong_pattern(first, tmp_path):
    second_on_same_dir(first, tmp_path)

def test_dies_by_itself(tmp_path):
    proc = BrokerProcess(tmp_path, name="crashing").start()
    os.kill(proc.pid, signal.SIGKILL)  # not through kill9(): as if it crashed
    proc.stop()

def test_in_process_error():
    import logging
    logging.getLogger("broker.network.request_channel").error("Handler failed")
''')
    result = inner.runpytest_subprocess(*INNER_ARGS, "-rE")
    result.assert_outcomes(passed=5, errors=4)
    out = result.stdout.str()
    assert "ERROR at teardown of test_declared" not in out
    result.stdout.fnmatch_lines([
        "ERROR test_inner.py::test_undeclared - *BrokerHealthError*",
        "ERROR test_inner.py::test_wrong_pattern - *BrokerHealthError*",
        "ERROR test_inner.py::test_dies_by_itself - *BrokerHealthError*",
        "ERROR test_inner.py::test_in_process_error - *BrokerHealthError*",
    ])
    assert re.search(r"second \(pid \d+\) exited with 1 \(start-up\)", out)
    assert re.search(r"crashing \(pid \d+\) exited with -9 \(", out)
    assert "in-process broker logged:\n    ERROR Handler failed (broker.network.request_channel)" in out
    assert "ERROR Start-up failed: Failed to acquire lock on file .lock" in out  # quoted


def test_skips_fail_the_run_in_ci_naming_the_test(inner: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    inner.makepyfile(test_inner='''
import pytest

def test_runs():
    pass

@pytest.mark.skipif(True, reason="needs java")
def test_needs_java():
    pass

def test_skips_itself():
    pytest.skip("kcat not installed")
''')
    monkeypatch.setenv("CI", "false")
    inner.runpytest_subprocess(*INNER_ARGS).assert_outcomes(passed=1, skipped=2)
    monkeypatch.setenv("CI", "true")
    result = inner.runpytest_subprocess(*INNER_ARGS, "-rfEs")
    # A skip in setup (skipif) turns into an error, one in the test body into a failure.
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "FAILED test_inner.py::test_skips_itself - SKIPPED IN CI: Skipped: kcat not installed",
        "ERROR test_inner.py::test_needs_java - SKIPPED IN CI: Skipped: needs java",
    ])


def test_a_skipped_module_fails_collection_in_ci(inner: pytest.Pytester,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    inner.makepyfile(test_inner='''
import pytest
pytest.importorskip("no_such_module_here")

def test_never_collected():
    pass
''')
    monkeypatch.setenv("CI", "true")
    result = inner.runpytest_subprocess(*INNER_ARGS)
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*SKIPPED IN CI*no_such_module_here*"])


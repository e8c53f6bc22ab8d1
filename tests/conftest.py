"""Shared pytest configuration.

- asyncio tests run on uvloop, as the broker does;
- broker health: after every test, each broker it started (or shared with it) must have
  exited with 0 and logged no ERROR line and no traceback, and the project's loggers in the
  test process must have logged no ERROR record, unless the test declares what it expects
  with ``@pytest.mark.broker_errors(...)`` (``tests/broker_checks.py``). A problem fails the
  test at teardown, naming the broker and quoting the log entry;
- in CI (``CI`` set to true/1/yes) a skipped test is a failed test: every check must run;
- the garbage collector's heap is unfrozen after every test (broker.heap freezes it);
- on parallel workers (pytest-xdist, ``--dist loadfile``: what ``scripts/test`` runs), the
  tests that must not overlap each other share one worker (``tests/xdist_groups.py``);
- Hypothesis has no deadline and no "too slow" health check: on a shared, loaded machine an
  example's wall time says nothing about the code (a test that bounds work measures work).
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Generator, Iterator
from typing import Any

import pytest
import uvloop
from hypothesis import HealthCheck, settings

from tests.broker_checks import (
    MARKER,
    MARKER_HELP,
    Expectations,
    ProjectErrorHandler,
    format_record,
    report,
)
from tests.integration.broker_process import BrokerProcess
from tests.tls_certs import Pki, make_pki

_HANDLER = pytest.StashKey[ProjectErrorHandler]()

settings.register_profile("minikafka", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("minikafka")


def pytest_asyncio_loop_factories(config: Any, item: Any) -> dict[str, Any]:
    return {"uvloop": uvloop.new_event_loop}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    handler = ProjectErrorHandler()
    logging.getLogger().addHandler(handler)
    config.stash[_HANDLER] = handler


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, a broker's key and certificate signed by it, and clients' (tests.tls_certs),
    made once per test module."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: absent with -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None
    from tests.xdist_groups import GroupedFileScheduling
    return GroupedFileScheduling(config, log)


# -- broker health -------------------------------------------------------------------------


class BrokerHealthError(AssertionError):
    """A broker exited with an unexpected code or logged an undeclared error."""


def _problems(item: pytest.Item) -> list[str]:
    expected = Expectations.from_markers(item.iter_markers(MARKER))
    problems: list[str] = []
    for proc in list(BrokerProcess.started):
        problems += proc.take_problems(expected)
        if not proc.is_running():
            BrokerProcess.started.remove(proc)
    records, dropped = item.config.stash[_HANDLER].take()
    entries = (format_record(r) for r in records)  # each an ERROR of a project logger
    problems += [f"in-process broker logged:\n{entry}" for entry in entries
                 if not expected.allows(entry)]
    if dropped:
        problems.append(f"in-process broker: {dropped} more ERROR records not kept")
    problems += [f"declared by @pytest.mark.{MARKER} but never logged: {pattern!r}"
                 for pattern in expected.unmatched()]
    return problems


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    # After every fixture due here is torn down (brokers of a module fixture at the end of
    # their module): what the brokers logged and how they exited belongs to this test.
    __tracebackhide__ = True
    try:
        result = yield
    except BaseException as exc:
        problems = _problems(item)
        if problems:
            exc.add_note("broker health:\n" + report(problems))
        raise
    problems = _problems(item)
    if problems:
        raise BrokerHealthError(f"{len(problems)} broker problem(s) the test did not declare "
                                f"(@pytest.mark.{MARKER}):\n" + report(problems))
    return result


@pytest.fixture(scope="session", autouse=True)
def _no_broker_outlives_the_session() -> Iterator[None]:
    yield
    leaked = [proc for proc in BrokerProcess.started if proc.is_running()]
    for proc in leaked:
        proc.stop()
    if leaked:
        raise BrokerHealthError("brokers still running at the end of the session (a test "
                                f"started them and did not stop them): {[p.name for p in leaked]}")


@pytest.fixture(autouse=True)
def _heap_unfrozen_after_test() -> Iterator[None]:
    """A broker in this process that hosts many partitions freezes the collector's heap
    (broker.heap), the test process's with it: unfrozen after each test, so that what
    one test left is collected as usual."""
    yield
    gc.unfreeze()


# -- no skip in CI -------------------------------------------------------------------------


def _skip_is_failure(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (f"SKIPPED IN CI: {reason}\n(CI is set: a skipped test fails the run; "
                       "install what it needs, see .ci/run)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)  # read by tests/outcome.py
    if in_ci() and rep.skipped and not hasattr(rep, "wasxfail"):
        _skip_is_failure(rep)
    return rep


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    rep = yield
    if in_ci() and rep.skipped:
        _skip_is_failure(rep)
    return rep

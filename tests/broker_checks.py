"""What makes a broker "unhealthy" in a test, and how a test declares the errors it provokes.

Every broker a test starts must stop with exit code 0, and its log must hold no ERROR (or
CRITICAL) line and no traceback, unless the test declares what it expects::

    @pytest.mark.broker_errors(r"Handler for api key 3 .* failed", exit_codes=(1,))

- each positional argument is a regular expression searched (``re.search``) in one log
  entry: the log line and the traceback lines that follow it; an entry that matches any of
  them is allowed, and every declared pattern must match at least one entry, so a
  declaration cannot outlive the error it names;
- ``exit_codes`` lists the non-zero exit codes the test expects (a broker killed by the
  test with SIGKILL never needs declaring).

The same rule covers brokers run in the test process (``SocketServer`` and the group or
replica-manager harnesses of the unit tests): ERROR records of the project's own loggers.
The pytest hooks that apply it live in ``tests/conftest.py``; this module is the logic.

Broker log format (``broker.server.configure_logging``)::

    [2026-01-01 12:00:00,000] ERROR message (logger.name)
    Traceback (most recent call last):        <- continuation lines of the same entry
      ...
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

MARKER = "broker_errors"
MARKER_HELP = (f"{MARKER}(*patterns, exit_codes=()): the broker errors this test provokes "
               "(regexes, each must match a logged ERROR/traceback entry) and non-zero exit "
               "codes it expects; see tests/broker_checks.py")

# Loggers of the project's own packages: their ERROR records fail an in-process test.
PROJECT_LOGGERS = ("broker", "storage", "protocol", "controller", "client", "spark_ingest", "cli")

_ENTRY_START = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\] (?P<level>[A-Z]+) ")
_PROBLEM_LEVELS = frozenset({"ERROR", "CRITICAL"})
_TRACEBACK = "Traceback (most recent call last)"


@dataclass
class Expectations:
    """What one test declared with ``@pytest.mark.broker_errors``; records what it saw."""

    patterns: tuple[re.Pattern[str], ...] = ()
    exit_codes: frozenset[int] = frozenset()
    matched: set[str] = field(default_factory=set)

    @classmethod
    def from_markers(cls, markers: Iterable[Any]) -> Expectations:
        patterns: list[re.Pattern[str]] = []
        codes: set[int] = set()
        for marker in markers:
            patterns += [re.compile(p) for p in marker.args]
            unknown = set(marker.kwargs) - {"exit_codes"}
            if unknown:
                raise TypeError(f"{MARKER}: unknown arguments {sorted(unknown)}")
            codes.update(int(c) for c in marker.kwargs.get("exit_codes", ()))
        return cls(tuple(patterns), frozenset(codes))

    def allows(self, entry: str) -> bool:
        hits = [p.pattern for p in self.patterns if p.search(entry)]
        self.matched.update(hits)
        return bool(hits)

    def unmatched(self) -> list[str]:
        return [p.pattern for p in self.patterns if p.pattern not in self.matched]


def split_entries(text: str) -> list[str]:
    """A broker log cut into entries: a formatted line plus its continuation lines. Lines
    before the first formatted line (a raw traceback printed by Python) form an entry too."""
    entries: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if _ENTRY_START.match(line) and current:
            entries.append("\n".join(current))
            current = []
        current.append(line)
    if current:
        entries.append("\n".join(current))
    return entries


def is_problem(entry: str) -> bool:
    match = _ENTRY_START.match(entry)
    return (match is not None and match.group("level") in _PROBLEM_LEVELS) or _TRACEBACK in entry


def unexpected_entries(text: str, expected: Expectations) -> list[str]:
    return [e for e in split_entries(text) if is_problem(e) and not expected.allows(e)]


def is_project_record(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR and record.name.split(".")[0] in PROJECT_LOGGERS


def format_record(record: logging.LogRecord) -> str:
    text = f"{record.levelname} {record.getMessage()} ({record.name})"
    if record.exc_info and record.exc_info[1] is not None:
        text += "\n" + logging.Formatter().formatException(record.exc_info)
    return text


class ProjectErrorHandler(logging.Handler):
    """Collects the project's ERROR records in the test process (bounded)."""

    MAX_RECORDS = 1000

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        if not is_project_record(record):
            return
        if len(self.records) < self.MAX_RECORDS:
            self.records.append(record)
        else:
            self.dropped += 1

    def take(self) -> tuple[list[logging.LogRecord], int]:
        records, dropped = self.records, self.dropped
        self.records, self.dropped = [], 0
        return records, dropped


def report(problems: Sequence[str], limit_chars: int = 6000) -> str:
    text = "\n\n".join(problems)
    if len(text) > limit_chars:
        text = text[:limit_chars] + f"\n... ({len(text) - limit_chars} more characters)"
    return text

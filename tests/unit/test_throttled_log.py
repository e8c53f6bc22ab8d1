"""Rate-limited log lines: one per condition per interval (ThrottledLog), a bounded count
whatever they say (BurstLog); both report what they dropped in the next line written."""

from __future__ import annotations

import logging

import pytest

from storage.throttled_log import BurstLog, ThrottledLog


def test_throttled_log_one_line_per_key_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    throttled = ThrottledLog(logging.getLogger("t.throttled"), 60.0, max_keys=2,
                             clock_s=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="t.throttled")
    assert throttled.warning("full", "disk full in %s", "/a")
    assert not any(throttled.warning("full", "disk full in %s", "/a") for _ in range(500))
    assert throttled.warning("other", "another condition")  # keys are independent
    now[0] += 60
    assert throttled.warning("full", "disk full in %s", "/a")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["disk full in /a", "another condition",
                     "disk full in /a (500 more like this in the last 60 s)"]


def test_burst_log_bounds_a_flood(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    burst = BurstLog(logging.getLogger("t.burst"), rate_per_s=10, burst=5, clock_s=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="t.burst")
    written = sum(burst.warning("bad frame %d", i) for i in range(10_000))
    assert written == 5
    now[0] += 1.0  # ten more tokens, capped by the burst of five
    written += sum(burst.warning("bad frame %d", i) for i in range(10_000))
    assert written == 10
    lines = [r.getMessage() for r in caplog.records]
    assert lines[5] == "bad frame 0 (9995 similar lines dropped: more than 10 a second)"

"""Waiting on a condition instead of sleeping: for state that changes in another process
(a broker's log, files in its log dir) or another thread, where no event can be awaited.

``wait_for(condition, timeout_s, what)`` polls ``condition`` every ``step_s`` until it is
true; the timeout is a bound on a hang (generous: the machine may be loaded), never a
measurement, and the failure names what was awaited.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, step_s: float = 0.02) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(step_s)


async def async_wait_for(condition: Callable[[], bool], timeout_s: float, what: str,
                         step_s: float = 0.005) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(step_s)

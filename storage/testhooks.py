"""Test-only pause points (off unless a test turns one on).

A test that wants to crash the broker at a named step of the log cleaner starts the broker
process with the environment variable ``MINIKAFKA_TEST_PAUSE_AT=<step>`` (for instance
``cleaner:swap-renamed``). When the cleaner reaches that step it logs
``test hook: paused at <step>`` and blocks its thread forever; the test then kills the
process. Nothing else can turn a pause point on: it is read from the process environment
only, never from configuration or from the network. Unset, ``pause_point`` is a dict
lookup and a return.
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger(__name__)

ENV_VAR = "MINIKAFKA_TEST_PAUSE_AT"


def pause_point(name: str) -> None:
    """Block the calling thread forever if the test environment names this step."""
    if os.environ.get(ENV_VAR) != name:
        return
    log.warning("test hook: paused at %s", name)
    for handler in logging.getLogger().handlers:
        handler.flush()
    threading.Event().wait()

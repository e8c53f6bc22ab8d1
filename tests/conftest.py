"""Shared pytest configuration: run asyncio tests on uvloop, as the broker does."""

from __future__ import annotations

from typing import Any

import uvloop


def pytest_asyncio_loop_factories(config: Any, item: Any) -> dict[str, Any]:
    return {"uvloop": uvloop.new_event_loop}

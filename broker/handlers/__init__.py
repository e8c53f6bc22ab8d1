"""API handlers, one module per API key, imported on first use.

``broker.handlers.index`` lists which module handles each key and the versions it
implements; ``base.REGISTRY`` loads a module the first time its key is looked up (its
``@api`` registration must match the index), and ApiVersions answers from the index
without loading anything. ``load_all`` imports every handler module (tests that walk
them all, and a check that the index and the modules agree). A new handler module adds
its line to the index.
"""

from __future__ import annotations

from broker.handlers.base import REGISTRY, find_spec
from broker.handlers.index import HANDLER_INDEX

__all__ = ["HANDLER_MODULES", "REGISTRY", "load_all"]

HANDLER_MODULES: tuple[str, ...] = tuple(entry.module for entry in HANDLER_INDEX.values())


def load_all() -> None:
    """Import every handler module (idempotent)."""
    for api_key in HANDLER_INDEX:
        find_spec(api_key)

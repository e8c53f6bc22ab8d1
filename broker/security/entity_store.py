"""Configs of users and client ids: SCRAM credentials and client quotas.

What Kafka keeps in ZooKeeper under ``/config/users/<user>``, ``/config/clients/<client-id>``
and ``/config/users/<user>/clients/<client-id>`` (``<default>`` for the default entity),
each a JSON object ``{"version": 1, "config": {"SCRAM-SHA-256": "salt=...,stored_key=...,
server_key=...,iterations=4096", "producer_byte_rate": "1048576"}}``. ``EntityConfigStore``
is that seam: a ZooKeeper implementation writes those znodes (and ``/config/changes``
notifications); ``LocalEntityConfigStore`` is the single node's, one JSON file in the log
dir, ``<log.dir>/minikafka-entity-configs.json``::

    {"version": 1,
     "entities": [{"entity": [["user", "alice"]], "config": {"SCRAM-SHA-256": "salt=..."}},
                  {"entity": [["user", null], ["client-id", "c1"]], "config": {...}}]}

An entity is a tuple of (type, name) pairs, type "user" before "client-id"; name None is
the default entity (``<default>``). Writes are atomic (temp file, fsync, rename, fsync of
the directory), so a crash leaves the old or the new file; a file that does not parse fails
start-up naming it.

``get`` and ``all`` answer from what this broker knows now (on the event loop, cheap);
``alter`` is a coroutine (the local file is written in a worker thread; ZooKeeper is
asked); ``subscribe`` hears of entities another broker changed (a ZooKeeper store's
``/config/changes`` notifications; the local file never calls back).

Thread-safety: ``alter`` serialises writers with a lock and publishes a new snapshot;
readers on the event loop see either the old or the new one.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol

from storage.checkpoints import atomic_write_text

STORE_FILE: Final = "minikafka-entity-configs.json"
FORMAT_VERSION: Final = 1
MAX_FILE_BYTES: Final = 64 * 1024 * 1024
USER: Final = "user"
CLIENT_ID: Final = "client-id"
ENTITY_TYPES: Final = (USER, CLIENT_ID)

Entity = tuple[tuple[str, str | None], ...]


class EntityStoreError(ValueError):
    """The store's file cannot be read."""


class EntityStoreWriteError(Exception):
    """The configs could not be stored (the disk or ZooKeeper failed); nothing changed."""


class EntityConfigStore(Protocol):
    def get(self, entity: Entity) -> dict[str, str]:
        """The entity's configs (empty when it has none)."""
        ...

    def all(self) -> dict[Entity, dict[str, str]]:
        """Every entity that has configs."""
        ...

    async def alter(self, changes: Mapping[Entity, Mapping[str, str | None]]) -> None:
        """Set (a value) or remove (None) keys of each entity, all or nothing;
        EntityStoreWriteError if it failed."""
        ...

    def subscribe(self, listener: Callable[[Iterable[Entity]], None]) -> None:
        """Call ``listener`` (on the event loop) with the entities someone else changed."""
        ...


def user_entity(name: str | None) -> Entity:
    return ((USER, name),)


class LocalEntityConfigStore:
    def __init__(self, path: Path, entities: dict[Entity, dict[str, str]]) -> None:
        self.path = path
        self._entities = entities
        self._lock = threading.Lock()

    @classmethod
    def load(cls, log_dir: Path) -> LocalEntityConfigStore:
        path = log_dir / STORE_FILE
        if not path.exists():
            return cls(path, {})
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise EntityStoreError(f"larger than {MAX_FILE_BYTES} bytes")
            return cls(path, _decode(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise EntityStoreError(f"{path}: unreadable entity configs: {exc}") from None

    def get(self, entity: Entity) -> dict[str, str]:
        return dict(self._entities.get(entity, {}))

    def all(self) -> dict[Entity, dict[str, str]]:
        return {e: dict(c) for e, c in self._entities.items()}

    async def alter(self, changes: Mapping[Entity, Mapping[str, str | None]]) -> None:
        try:
            await asyncio.to_thread(self.alter_now, changes)
        except OSError as exc:
            raise EntityStoreWriteError(f"{self.path}: {exc}") from exc

    def subscribe(self, listener: Callable[[Iterable[Entity]], None]) -> None:
        """Nothing else writes the local file: no notifications."""

    def alter_now(self, changes: Mapping[Entity, Mapping[str, str | None]]) -> None:
        """``alter``, blocking (OSError if the file cannot be written)."""
        with self._lock:
            updated = {e: dict(c) for e, c in self._entities.items()}
            for entity, keys in changes.items():
                config = updated.setdefault(entity, {})
                for key, value in keys.items():
                    if value is None:
                        config.pop(key, None)
                    else:
                        config[key] = value
                if not config:
                    del updated[entity]
            atomic_write_text(self.path, json.dumps(_encode(updated), indent=1, sort_keys=True))
            self._entities = updated


def _encode(entities: Mapping[Entity, Mapping[str, str]]) -> dict[str, Any]:
    return {"version": FORMAT_VERSION,
            "entities": [{"entity": [list(pair) for pair in entity], "config": dict(config)}
                         for entity, config in sorted(entities.items(), key=lambda kv: repr(kv[0]))]}


def _decode(doc: Any) -> dict[Entity, dict[str, str]]:
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"expected version {FORMAT_VERSION}")
    out: dict[Entity, dict[str, str]] = {}
    for item in doc["entities"]:
        entity = tuple((str(kind), None if name is None else str(name)) for kind, name in item["entity"])
        if not entity or any(kind not in ENTITY_TYPES for kind, _ in entity):
            raise ValueError(f"bad entity {item['entity']!r}")
        config = item["config"]
        if not isinstance(config, dict):
            raise ValueError(f"bad config for {item['entity']!r}")
        out[entity] = {str(k): str(v) for k, v in config.items()}
    return out

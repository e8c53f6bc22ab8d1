"""``LocalBrokerConfigStore``: dynamic broker configs of a single node, one JSON file.

What a cluster keeps in ``/config/brokers/<id>`` and ``/config/brokers/<default>``
(``controller.topic_store.BrokerConfigStore``), in ``<log.dir>/minikafka-broker-configs.json``::

    {"version": 1, "entities": {"0": {"num.io.threads": "4"},
                                "<default>": {"leader.replication.throttled.rate": "1000"}}}

An entity without configs is not written. Writes are atomic (temp file, fsync, rename, fsync
of the directory, in a worker thread): a crash leaves the old or the new file; a write that
fails changes nothing and raises ``TopicStoreError`` (KAFKA_STORAGE_ERROR). A file that does
not parse fails start-up (``TopicStoreLoadError`` naming it). Watchers hear of an entity
after its write is durable, on the event loop (this node is the only writer: the callback
plays the part of ZooKeeper's ``/config/changes`` notification).

Thread-safety: the event loop that calls it; writes are serialized by an asyncio lock.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from controller.local_store import TopicStoreLoadError
from controller.topic_store import TopicStoreError
from protocol.errors import ErrorCode
from storage.checkpoints import DirSyncError, atomic_write_bytes

STORE_FILE: Final = "minikafka-broker-configs.json"
FORMAT_VERSION: Final = 1
MAX_STORE_BYTES: Final = 16 * 1024 * 1024
MAX_WATCHERS: Final = 16


class LocalBrokerConfigStore:
    """See the module docstring."""

    def __init__(self, path: Path, entities: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.path = path
        self._entities: dict[str, dict[str, str]] = {
            k: dict(v) for k, v in (entities or {}).items() if v}
        self._callbacks: list[Callable[[str], None]] = []
        self._lock = asyncio.Lock()

    @classmethod
    def load(cls, log_dir: Path) -> LocalBrokerConfigStore:
        path = log_dir / STORE_FILE
        if not path.exists():
            return cls(path)
        try:
            if path.stat().st_size > MAX_STORE_BYTES:
                raise ValueError(f"larger than {MAX_STORE_BYTES} bytes")
            return cls(path, _from_json(json.loads(path.read_text("utf-8"))))
        except (OSError, ValueError, TypeError) as exc:
            raise TopicStoreLoadError(f"cannot read the broker config store {path}: {exc}") from None

    async def broker_configs(self, entity: str) -> dict[str, str]:
        return dict(self._entities.get(entity, {}))

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        async with self._lock:
            new = {k: dict(v) for k, v in self._entities.items() if k != entity}
            if configs:
                new[entity] = dict(configs)
            data = json.dumps({"version": FORMAT_VERSION, "entities": new}, sort_keys=True,
                              indent=1).encode("utf-8")
            try:
                await asyncio.to_thread(atomic_write_bytes, self.path, data)
            except DirSyncError:
                pass  # renamed into place: the new state stands (as the topic store's)
            except OSError as exc:
                raise TopicStoreError(ErrorCode.KAFKA_STORAGE_ERROR,
                                      f"writing {self.path} failed: {exc}") from None
            self._entities = new
        loop = asyncio.get_running_loop()
        for callback in list(self._callbacks):
            loop.call_soon(callback, entity)

    def watch_broker_configs(self, callback: Callable[[str], None]) -> None:
        if len(self._callbacks) >= MAX_WATCHERS:
            raise RuntimeError(f"more than {MAX_WATCHERS} broker config watchers")
        self._callbacks.append(callback)


def _from_json(doc: Any) -> dict[str, dict[str, str]]:
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"not a version {FORMAT_VERSION} broker config store")
    entities = doc.get("entities")
    if not isinstance(entities, dict):
        raise ValueError("'entities' is not an object")
    out: dict[str, dict[str, str]] = {}
    for entity, configs in entities.items():
        if not isinstance(configs, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in configs.items()):
            raise ValueError(f"the configs of {entity!r} are not an object of strings")
        out[entity] = dict(configs)
    return out

"""``ZkEntityConfigStore``: user and client-id configs (SCRAM credentials, client quotas) of a
cluster in Kafka's own znodes.

Znodes (under the chroot of ``zookeeper.connect``), as Kafka 3.9 writes them
(``AdminZkClient.changeConfigs``, ``ConfigEntityZNode``)::

  /config/users/<user>                        {"version":1,"config":{"SCRAM-SHA-256":"salt=...,
                                              stored_key=...,server_key=...,iterations=4096",
                                              "producer_byte_rate":"1048576"}}
  /config/users/<user>/clients/<client-id>    {"version":1,"config":{...}}
  /config/clients/<client-id>                 {"version":1,"config":{...}}
  /config/changes/config_change_<10 digits>   persistent sequential,
                                              {"version":2,"entity_path":"users/<user>"} (or
                                              "users/<user>/clients/<id>", "clients/<id>")

Names are Kafka's ``Sanitizer.sanitize`` of the user or client id (URL-encoding: ``User
CN=a,O=b`` is ``CN%3Da%2CO%3Db``); ``<default>`` is the default entity, as is.

``alter`` reads each entity's znode with its version, applies the key changes, and writes
all of them and their change notifications in one ZooKeeper transaction, conditional on
those versions (a conflict with another broker reads again and retries, at most
``MAX_UPDATE_RETRIES`` times); an entity left with no keys keeps an empty config, as Kafka
writes it. Every broker watches ``/config/changes`` (the topic store reads the ``topics/``
notifications of the same sequence; this store the ``users/`` and ``clients/`` ones): each
notification it has not seen names an entity whose znode it reads again before telling its
listeners (the quota managers re-read their quotas; SCRAM logins read the store each time).
Notifications older than ``controller.zk_changes.CHANGE_EXPIRY_MS`` are deleted (at most
once a minute).

``start`` creates ``/config/users``, ``/config/clients`` and ``/config/changes`` if missing,
reads every entity, then arms the watch.

Thread-safety: the event loop only (the client hands kazoo's watch callbacks to it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Final
from urllib.parse import unquote_plus

from broker.security.entity_store import CLIENT_ID, USER, Entity, EntityStoreWriteError
from controller import zk_data as zd
from controller.zk_changes import WatchTasks, purge_expired, sequenced
from controller.zk_client import (
    CreateOp,
    Op,
    SetDataOp,
    ZkBadVersion,
    ZkClient,
    ZkError,
    ZkNodeExists,
    ZkNoNode,
)

log = logging.getLogger(__name__)

USERS: Final = f"{zd.CONFIG}/users"
CLIENTS: Final = f"{zd.CONFIG}/clients"
DEFAULT_NAME: Final = "<default>"  # Kafka's ConfigEntityName.Default
MAX_UPDATE_RETRIES: Final = 10
RETRY_BACKOFF_S: Final = 0.1
PURGE_INTERVAL_MS: Final = 60_000
MAX_LISTENERS: Final = 8
_URL_SAFE: Final = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")

Listener = Callable[[Iterable[Entity]], None]
_ABSENT: Final = -1


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: Java's URLEncoder, with ``*`` as %2A and space as %20."""
    return "".join(chr(b) if b in _URL_SAFE else f"%{b:02X}" for b in name.encode())


def desanitize(name: str) -> str:
    return unquote_plus(name, errors="strict")


def _znode_name(name: str | None) -> str:
    return DEFAULT_NAME if name is None else sanitize(name)


def _entity_name(znode_name: str) -> str | None:
    return None if znode_name == DEFAULT_NAME else desanitize(znode_name)


def entity_path(entity: Entity) -> str:
    """``users/alice``, ``users/alice/clients/c1``, ``clients/c1`` (under ``/config``)."""
    kinds = tuple(kind for kind, _ in entity)
    if kinds == (USER,):
        return f"users/{_znode_name(entity[0][1])}"
    if kinds == (USER, CLIENT_ID):
        return f"users/{_znode_name(entity[0][1])}/clients/{_znode_name(entity[1][1])}"
    if kinds == (CLIENT_ID,):
        return f"clients/{_znode_name(entity[0][1])}"
    raise ValueError(f"not a user / client-id entity: {entity!r}")


def parse_entity_path(path: str) -> Entity:
    """The inverse of ``entity_path`` (ValueError when it names no such entity)."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users":
        return ((USER, _entity_name(parts[1])),)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return ((USER, _entity_name(parts[1])), (CLIENT_ID, _entity_name(parts[3])))
    if len(parts) == 2 and parts[0] == "clients":
        return ((CLIENT_ID, _entity_name(parts[1])),)
    raise ValueError(f"not a user / client-id entity path: {path!r}")


class ZkEntityConfigStore:
    """See the module docstring."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk
        self._entities: dict[Entity, dict[str, str]] = {}
        self._listeners: list[Listener] = []
        self._last_change = -1
        self._next_purge_ms = 0.0
        self._lock = asyncio.Lock()
        self._watches = WatchTasks("config change", "zk-entity-store-watch", log)

    # ------------------------------------------------------------ start and stop

    async def start(self) -> None:
        """Read every user / client-id entity, then watch ``/config/changes`` (ZkError:
        ZooKeeper did not answer; ZkDataError: a znode that does not parse)."""
        for path in (USERS, CLIENTS, zd.CONFIG_CHANGES):
            await self.zk.create_persistent(path, exist_ok=True)
        self._last_change = max((s for s, _ in _sequenced(await self.zk.children(zd.CONFIG_CHANGES))),
                                default=-1)
        entities: list[Entity] = []
        for user in await self.zk.children(USERS):
            entities.append(parse_entity_path(f"users/{user}"))
            for client in await _children_or_none(self.zk, f"{USERS}/{user}/clients"):
                entities.append(parse_entity_path(f"users/{user}/clients/{client}"))
        entities += [parse_entity_path(f"clients/{c}") for c in await self.zk.children(CLIENTS)]
        for entity, (config, _version) in zip(
                entities, await asyncio.gather(*(self._read(e) for e in entities)), strict=True):
            if config:
                self._entities[entity] = config
        log.info("Loaded the configs of %d users and client ids from ZooKeeper", len(self._entities))
        self._watches.spawn(self._arm)

    async def close(self) -> None:
        await self._watches.close()

    # ------------------------------------------------------------ the EntityConfigStore protocol

    def get(self, entity: Entity) -> dict[str, str]:
        return dict(self._entities.get(entity, {}))

    def all(self) -> dict[Entity, dict[str, str]]:
        return {e: dict(c) for e, c in self._entities.items()}

    def subscribe(self, listener: Listener) -> None:
        if len(self._listeners) >= MAX_LISTENERS:
            raise RuntimeError(f"more than {MAX_LISTENERS} entity config listeners")
        self._listeners.append(listener)

    async def alter(self, changes: Mapping[Entity, Mapping[str, str | None]]) -> None:
        async with self._lock:
            try:
                await self._alter(changes)
            except (ZkError, zd.ZkDataError) as exc:
                raise EntityStoreWriteError(f"ZooKeeper: {exc}") from exc

    # ------------------------------------------------------------ writing

    async def _alter(self, changes: Mapping[Entity, Mapping[str, str | None]]) -> None:
        for _attempt in range(MAX_UPDATE_RETRIES + 1):
            ops: list[Op] = []
            updated: dict[Entity, dict[str, str]] = {}
            for entity, keys in changes.items():
                path = f"{zd.CONFIG}/{entity_path(entity)}"
                config, version = await self._read(entity)
                for key, value in keys.items():
                    if value is None:
                        config.pop(key, None)
                    else:
                        config[key] = value
                updated[entity] = config
                data = zd.encode_entity_config(config)
                if version == _ABSENT:
                    parent = path.rsplit("/", 1)[0]
                    await self.zk.create_persistent(parent, exist_ok=True)
                    ops.append(CreateOp(path, data))
                else:
                    ops.append(SetDataOp(path, data, version))
                entity_type, _, name = entity_path(entity).partition("/")
                ops.append(CreateOp(f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
                                    zd.encode_config_change(entity_type, name), sequence=True))
            results = await self.zk.multi(ops)
            errors = [r for r in results if isinstance(r, ZkError)]
            if not errors:
                for entity, config in updated.items():
                    self._remember(entity, config)
                return
            if not any(isinstance(e, ZkBadVersion | ZkNodeExists | ZkNoNode) for e in errors):
                raise errors[0]
            await asyncio.sleep(RETRY_BACKOFF_S)  # another broker wrote: read again
        raise EntityStoreWriteError(
            f"Failed to update the configs of {len(changes)} entities after trying a maximum of "
            f"{MAX_UPDATE_RETRIES} times")

    async def _read(self, entity: Entity) -> tuple[dict[str, str], int]:
        found = await self.zk.get_or_none(f"{zd.CONFIG}/{entity_path(entity)}")
        if found is None:
            return {}, _ABSENT
        data, stat = found
        return zd.decode_entity_config(data), stat.version

    def _remember(self, entity: Entity, config: dict[str, str]) -> None:
        if config:
            self._entities[entity] = dict(config)
        else:
            self._entities.pop(entity, None)

    # ------------------------------------------------------------ notifications

    async def _arm(self) -> None:
        fired = self.zk.loop_watch(lambda: self._watches.spawn(self._arm))
        children = _sequenced(await self.zk.children(zd.CONFIG_CHANGES, watch=fired))
        changed: dict[Entity, None] = {}
        for seq, child in children:
            if seq <= self._last_change:
                continue
            self._last_change = seq
            found = await self.zk.get_or_none(f"{zd.CONFIG_CHANGES}/{child}")
            if found is None:
                continue
            try:
                entity_type, name = zd.decode_config_change(found[0])
                if entity_type in ("users", "clients"):
                    changed[parse_entity_path(f"{entity_type}/{name}")] = None
            except (zd.ZkDataError, ValueError) as exc:
                log.warning("ignoring config change %s: %s", child, exc)
        for entity in changed:
            try:
                config, _version = await self._read(entity)
            except zd.ZkDataError as exc:
                log.error("config change of %s not applied: %s", entity_path(entity), exc)
                continue
            log.info("Processing override for entityPath: %s", entity_path(entity))
            self._remember(entity, config)
        if changed:
            for listener in list(self._listeners):
                listener(list(changed))
        await self._purge(children)

    async def _purge(self, children: list[tuple[int, str]]) -> None:
        now_ms = time.time() * 1000
        if now_ms < self._next_purge_ms:
            return
        self._next_purge_ms = now_ms + PURGE_INTERVAL_MS
        await purge_expired(self.zk, zd.CONFIG_CHANGES, children, now_ms)


async def _children_or_none(zk: ZkClient, path: str) -> list[str]:
    try:
        return await zk.children(path)
    except ZkNoNode:
        return []


def _sequenced(children: Iterable[str]) -> list[tuple[int, str]]:
    return sequenced(children, zd.CONFIG_CHANGE_PREFIX)

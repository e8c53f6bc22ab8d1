"""``ZkAclStore``: a cluster's ACLs in Kafka's own znodes (AclAuthorizer in ZooKeeper mode).

Znodes (under the chroot of ``zookeeper.connect``), as Kafka 3.9 writes them
(``kafka.zk.ZkData``: LiteralAclStore, ExtendedAclStore, the two change stores)::

  /kafka-acl/<ResourceType>/<name>                      LITERAL patterns
  /kafka-acl-extended/prefixed/<ResourceType>/<name>    PREFIXED patterns
      {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                            "operation":"Read","host":"*"}]}
      (ResourceType in Kafka's camel case: Topic, Group, Cluster, TransactionalId, ...)
  /kafka-acl-changes/acl_changes_<10 digits>            persistent sequential, a literal
      pattern's ``TOPIC:orders`` (Java's ResourceType name; read case-insensitively, as
      Kafka's ResourceType.fromString)
  /kafka-acl-extended-changes/acl_changes_<10 digits>   persistent sequential,
      {"version":1,"resourceType":"TOPIC","name":"logs-","patternType":"PREFIXED"}

Writes are Kafka's ``updateResourceAcls``: per pattern, the delta is applied to the entries
last read with the znode's version (this broker's, or read now when it has none), then
written conditionally -- set with that version, created when there was no znode, deleted
with the version when no entry is left. A conflict (another broker wrote in between) reads
the znode again and applies the delta again, at most ``MAX_UPDATE_RETRIES`` times with a
random backoff; then AclStoreWriteError. A pattern whose entries changed gets a change
notification.

Every broker (this one included) watches both change paths: the notifications it has not
seen (by sequence number) name patterns, whose znodes it reads again before telling its
listeners (the authorizer reloads them). A fired watch is re-armed before it is processed;
kazoo fires every watch when the connection drops, so a reconnect re-reads and nothing is
missed while the notifications last. Notifications older than
``controller.zk_changes.CHANGE_EXPIRY_MS`` are deleted (at most once a minute), as Kafka's
ZkNodeChangeNotificationListener does.

``start`` creates the four roots (as Kafka's broker does), reads every ACL znode (a znode
that does not parse fails start-up naming it), then arms the watches.

Thread-safety: the event loop only (the client hands kazoo's watch callbacks to it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Final

from broker.security.acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    camel_name,
    from_camel_name,
)
from broker.security.acl_store import (
    AclDelta,
    AclStoreError,
    AclStoreWriteError,
    acls_from_json,
    acls_to_json,
)
from controller.zk_changes import WatchTasks, purge_expired, sequenced
from controller.zk_client import ZkBadVersion, ZkClient, ZkError, ZkNodeExists, ZkNoNode

log = logging.getLogger(__name__)

ACL_PATHS: Final = {PatternType.LITERAL: "/kafka-acl",
                    PatternType.PREFIXED: "/kafka-acl-extended/prefixed"}
CHANGE_PATHS: Final = {PatternType.LITERAL: "/kafka-acl-changes",
                       PatternType.PREFIXED: "/kafka-acl-extended-changes"}
CHANGE_PREFIX: Final = "acl_changes_"
EXTENDED_CHANGE_VERSION: Final = 1
MAX_UPDATE_RETRIES: Final = 10  # Kafka's AclAuthorizer.maxUpdateRetries
RETRY_BACKOFF_MS: Final = 100  # Kafka's retryBackoffMs ...
RETRY_BACKOFF_JITTER_MS: Final = 50  # ... plus up to retryBackoffJitterMs
PURGE_INTERVAL_MS: Final = 60_000
MAX_LISTENERS: Final = 8

Listener = Callable[[Iterable[ResourcePattern]], None]
_ABSENT: Final = -1  # the version of a znode that does not exist


def resource_path(pattern: ResourcePattern) -> str:
    return f"{ACL_PATHS[pattern.pattern_type]}/{camel_name(pattern.resource_type)}/{pattern.name}"


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps({"version": EXTENDED_CHANGE_VERSION, "resourceType": pattern.resource_type.name,
                       "name": pattern.name, "patternType": pattern.pattern_type.name},
                      separators=(",", ":")).encode()


def decode_change(pattern_type: PatternType, data: bytes | None) -> ResourcePattern:
    """A notification's pattern; ValueError when it does not parse."""
    text = (data or b"").decode()
    if pattern_type == PatternType.LITERAL:
        type_name, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {text!r}")
        return ResourcePattern(_resource_type(type_name), name, PatternType.LITERAL)
    doc = json.loads(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("version"), int) \
            or doc["version"] > EXTENDED_CHANGE_VERSION:
        raise ValueError(f"unsupported ACL change event {text!r}")
    found = PatternType[str(doc["patternType"]).upper()]
    if found not in ACL_PATHS:
        raise ValueError(f"pattern type {found.name} has no store")
    return ResourcePattern(_resource_type(str(doc["resourceType"])), str(doc["name"]), found)


def _resource_type(name: str) -> ResourceType:
    found = from_camel_name(ResourceType, name)
    if found in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise ValueError(f"resource type {name!r}")
    return found


class ZkAclStore:
    """See the module docstring."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk
        self._acls: dict[ResourcePattern, tuple[frozenset[AccessControlEntry], int]] = {}
        self._listeners: list[Listener] = []
        self._last_change = dict.fromkeys(CHANGE_PATHS, -1)
        self._next_purge_ms = dict.fromkeys(CHANGE_PATHS, 0.0)
        self._watches = WatchTasks("ACL change", "zk-acl-store-watch", log)

    # ------------------------------------------------------------ start and stop

    async def start(self) -> None:
        """Read every ACL, then watch the notifications (AclStoreError: a bad znode;
        ZkError: ZooKeeper did not answer)."""
        for path in (*ACL_PATHS.values(), *CHANGE_PATHS.values()):
            await self.zk.create_persistent(path, exist_ok=True)
        # Notifications already there are covered by the full read that follows.
        for pattern_type, path in CHANGE_PATHS.items():
            self._last_change[pattern_type] = max(
                (s for s, _ in _sequenced(await self.zk.children(path))), default=-1)
        for pattern_type, root in ACL_PATHS.items():
            for type_name in await self.zk.children(root):
                try:
                    resource_type = _resource_type(type_name)
                except ValueError:
                    log.warning("ignoring %s/%s: not a resource type", root, type_name)
                    continue
                names = await self.zk.children(f"{root}/{type_name}")
                patterns = [ResourcePattern(resource_type, n, pattern_type) for n in names]
                for pattern, found in zip(patterns, await asyncio.gather(
                        *(self._read(p) for p in patterns)), strict=True):
                    if found[0]:
                        self._acls[pattern] = found
        log.info("Loaded %d ACL resource patterns from ZooKeeper", len(self._acls))
        for pattern_type in CHANGE_PATHS:
            self._spawn(pattern_type)

    async def close(self) -> None:
        await self._watches.close()

    # ------------------------------------------------------------ the AclStore protocol

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        return {pattern: entries for pattern, (entries, _) in self._acls.items()}

    def subscribe(self, listener: Listener) -> None:
        if len(self._listeners) >= MAX_LISTENERS:
            raise RuntimeError(f"more than {MAX_LISTENERS} ACL store listeners")
        self._listeners.append(listener)

    async def write(self, deltas: Mapping[ResourcePattern, AclDelta]
                    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        result = {}
        for pattern, delta in deltas.items():
            try:
                result[pattern] = await self._update(pattern, delta)
            except (ZkError, AclStoreError) as exc:
                raise AclStoreWriteError(f"ZooKeeper: {exc}") from exc
        return result

    # ------------------------------------------------------------ writing

    async def _update(self, pattern: ResourcePattern, delta: AclDelta
                      ) -> frozenset[AccessControlEntry]:
        path = resource_path(pattern)
        current, version = self._acls.get(pattern) or await self._read(pattern)
        for _attempt in range(MAX_UPDATE_RETRIES + 1):
            updated = delta.applied_to(current)
            if updated == current and (updated or version == _ABSENT):
                return current  # nothing to change
            try:
                if not updated:
                    await self.zk.delete(path, version)
                    new_version = _ABSENT
                elif version == _ABSENT:
                    await self.zk.create_persistent(path, _encode(updated))
                    new_version = 0
                else:
                    new_version = (await self.zk.set(path, _encode(updated), version)).version
            except (ZkBadVersion, ZkNodeExists, ZkNoNode):
                # Another broker changed it: read it again and apply the delta to that.
                await asyncio.sleep((RETRY_BACKOFF_MS + random.randrange(RETRY_BACKOFF_JITTER_MS))
                                    / 1000)
                current, version = await self._read(pattern)
                continue
            self._remember(pattern, updated, new_version)
            log.info("Updated ACLs for %s with new version %d", _describe(pattern), new_version)
            await self.zk.create(f"{CHANGE_PATHS[pattern.pattern_type]}/{CHANGE_PREFIX}",
                                 encode_change(pattern), sequence=True)
            return updated
        raise AclStoreWriteError(f"Failed to update ACLs for {_describe(pattern)} after trying a "
                                 f"maximum of {MAX_UPDATE_RETRIES} times")

    async def _read(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        """The znode's entries and version (empty, -1 when there is none)."""
        found = await self.zk.get_or_none(resource_path(pattern))
        if found is None:
            return frozenset(), _ABSENT
        data, stat = found
        if not data:
            return frozenset(), stat.version
        try:
            return acls_from_json(json.loads(data)), stat.version
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise AclStoreError(f"{resource_path(pattern)}: unreadable ACLs: {exc}") from None

    def _remember(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry],
                  version: int) -> None:
        if entries:
            self._acls[pattern] = (entries, version)
        else:
            self._acls.pop(pattern, None)

    # ------------------------------------------------------------ notifications

    def _spawn(self, pattern_type: PatternType) -> None:
        """Process (and re-arm) the watch of ``pattern_type``'s notifications."""
        self._watches.spawn(partial(self._arm, pattern_type))

    async def _arm(self, pattern_type: PatternType) -> None:
        path = CHANGE_PATHS[pattern_type]
        fired = self.zk.loop_watch(lambda: self._spawn(pattern_type))
        children = _sequenced(await self.zk.children(path, watch=fired))
        changed: dict[ResourcePattern, None] = {}
        for seq, child in children:
            if seq <= self._last_change[pattern_type]:
                continue
            self._last_change[pattern_type] = seq
            found = await self.zk.get_or_none(f"{path}/{child}")
            if found is None:
                continue
            try:
                changed[decode_change(pattern_type, found[0])] = None
            except (ValueError, KeyError, UnicodeDecodeError) as exc:
                log.warning("ignoring ACL change notification %s/%s: %s", path, child, exc)
        for pattern in changed:
            try:
                entries, version = await self._read(pattern)
            except AclStoreError as exc:
                log.error("ACL change for %s not applied: %s", _describe(pattern), exc)
                continue
            log.info("Processing Acl change notification for %s, %d entries, zkVersion %d",
                     _describe(pattern), len(entries), version)
            self._remember(pattern, entries, version)
        if changed:
            for listener in list(self._listeners):
                listener(list(changed))
        await self._purge(pattern_type, children)

    async def _purge(self, pattern_type: PatternType, children: list[tuple[int, str]]) -> None:
        now_ms = time.time() * 1000
        if now_ms < self._next_purge_ms[pattern_type]:
            return
        self._next_purge_ms[pattern_type] = now_ms + PURGE_INTERVAL_MS
        await purge_expired(self.zk, CHANGE_PATHS[pattern_type], children, now_ms)


def _sequenced(children: Iterable[str]) -> list[tuple[int, str]]:
    return sequenced(children, CHANGE_PREFIX)


def _encode(entries: frozenset[AccessControlEntry]) -> bytes:
    return json.dumps(acls_to_json(entries), separators=(",", ":")).encode()


def _describe(pattern: ResourcePattern) -> str:
    """Kafka's ResourcePattern string: ``Topic:LITERAL:orders``."""
    return f"{camel_name(pattern.resource_type)}:{pattern.pattern_type.name}:{pattern.name}"

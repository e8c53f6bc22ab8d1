"""Where ACLs live. ``AclStore`` is the seam: Kafka's ZooKeeper layout (a ZooKeeper
implementation writes exactly this) keeps one znode per resource pattern,

- LITERAL: ``/kafka-acl/<ResourceType>/<name>`` (``/kafka-acl/Topic/orders``),
- PREFIXED: ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``,

each holding ``{"version": 1, "acls": [{"principal": "User:alice", "permissionType":
"Allow", "operation": "Read", "host": "*"}]}``, and announces every change with a
sequential znode under ``/kafka-acl-changes`` (literal) or ``/kafka-acl-extended-changes``
(prefixed) so other brokers reload that resource.

``LocalAclStore`` is the single node's: one JSON file in the log dir,
``<log.dir>/minikafka-acls.json``::

    {"version": 1,
     "resources": [{"resourceType": "Topic", "patternType": "LITERAL", "name": "orders",
                    "acls": {"version": 1, "acls": [ ...Kafka's entries, as above... ]}}]}

A write is a set of ``AclDelta`` (entries added and removed per pattern), applied to what
is stored, as Kafka's ``updateResourceAcls`` applies its change to the znode it reads: on
ZooKeeper another broker may have changed the pattern since this one planned. It returns
each pattern's entries as stored afterwards. The file is replaced atomically (temp file,
fsync, rename, fsync of the directory): a crash leaves the old or the new ACLs; a file that
does not parse fails start-up naming it. Nothing else writes it, so ``subscribe`` never
calls back (a ZooKeeper store calls its listeners with the resources another broker
changed).

Thread-safety: ``load`` and ``write`` on the event loop (the local file is written in a
worker thread); one writer at a time (the authorizer's lock).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from broker.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    camel_name,
    from_camel_name,
)
from broker.security.principal import KafkaPrincipal
from storage.checkpoints import atomic_write_text

STORE_FILE: Final = "minikafka-acls.json"
FORMAT_VERSION: Final = 1
ACL_JSON_VERSION: Final = 1
MAX_FILE_BYTES: Final = 64 * 1024 * 1024

Acls = Mapping[ResourcePattern, frozenset[AccessControlEntry]]


class AclStoreError(ValueError):
    """The stored ACLs cannot be read."""


class AclStoreWriteError(Exception):
    """The ACLs could not be stored (the disk or ZooKeeper failed); nothing was applied."""


@dataclass(frozen=True, slots=True)
class AclDelta:
    """What one CreateAcls / DeleteAcls does to a pattern."""

    added: frozenset[AccessControlEntry] = frozenset()
    removed: frozenset[AccessControlEntry] = frozenset()

    def applied_to(self, current: frozenset[AccessControlEntry]) -> frozenset[AccessControlEntry]:
        return (current | self.added) - self.removed


class AclStore(Protocol):
    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every resource pattern that has ACLs (what this broker knows now)."""
        ...

    async def write(self, deltas: Mapping[ResourcePattern, AclDelta]
                    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Apply each delta to the stored pattern (no entries left: the pattern goes);
        the patterns' entries as stored afterwards. AclStoreWriteError if it failed."""
        ...

    def subscribe(self, listener: Callable[[Iterable[ResourcePattern]], None]) -> None:
        """Call ``listener`` with the patterns changed by someone else (another broker)."""
        ...


def acls_to_json(entries: Iterable[AccessControlEntry]) -> dict[str, Any]:
    """A znode's content: Kafka's AclEntry.toJsonCompatibleMap."""
    return {"version": ACL_JSON_VERSION, "acls": [
        {"principal": e.principal, "permissionType": camel_name(e.permission),
         "operation": camel_name(e.operation), "host": e.host}
        for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission))]}


def acls_from_json(doc: Any) -> frozenset[AccessControlEntry]:
    if doc.get("version") != ACL_JSON_VERSION:
        raise ValueError(f"ACL JSON version {doc.get('version')!r}")
    out = set()
    for item in doc["acls"]:
        principal = str(KafkaPrincipal.parse(str(item["principal"])))
        out.add(AccessControlEntry(principal, str(item["host"]),
                                   from_camel_name(AclOperation, str(item["operation"])),
                                   from_camel_name(AclPermissionType, str(item["permissionType"]))))
    return frozenset(out)


class LocalAclStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        if path.exists():
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    raise AclStoreError(f"larger than {MAX_FILE_BYTES} bytes")
                self._acls = _decode(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
                raise AclStoreError(f"{path}: unreadable ACLs: {exc}") from None

    @classmethod
    def in_log_dir(cls, log_dir: Path) -> LocalAclStore:
        return cls(log_dir / STORE_FILE)

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        return dict(self._acls)

    async def write(self, deltas: Mapping[ResourcePattern, AclDelta]
                    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        updated = dict(self._acls)
        result = {}
        for pattern, delta in deltas.items():
            entries = result[pattern] = delta.applied_to(updated.get(pattern, frozenset()))
            if entries:
                updated[pattern] = entries
            else:
                updated.pop(pattern, None)
        text = json.dumps(_encode(updated), indent=1)
        try:
            await asyncio.to_thread(atomic_write_text, self.path, text)
        except OSError as exc:
            raise AclStoreWriteError(f"{self.path}: {exc}") from exc
        self._acls = updated
        return result

    def subscribe(self, listener: Callable[[Iterable[ResourcePattern]], None]) -> None:
        """Nothing else writes the local file: no notifications."""


def _encode(acls: Acls) -> dict[str, Any]:
    order = sorted(acls, key=lambda p: (p.resource_type, p.pattern_type, p.name))
    return {"version": FORMAT_VERSION, "resources": [
        {"resourceType": camel_name(p.resource_type), "patternType": p.pattern_type.name,
         "name": p.name, "acls": acls_to_json(acls[p])} for p in order]}


def _decode(doc: Any) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"expected version {FORMAT_VERSION}")
    out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for item in doc["resources"]:
        resource_type = from_camel_name(ResourceType, str(item["resourceType"]))
        pattern_type = PatternType[str(item["patternType"])]
        if (resource_type in (ResourceType.ANY, ResourceType.UNKNOWN)
                or pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED)):
            raise ValueError(f"bad resource {item!r}")
        entries = acls_from_json(item["acls"])
        if entries:
            out[ResourcePattern(resource_type, str(item["name"]), pattern_type)] = entries
    return out

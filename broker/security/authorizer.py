"""Kafka's ``AclAuthorizer`` semantics over an ``AclStore`` (a local file, or ZooKeeper).

Authorizing (principal, host) for an operation on a resource (type, literal name):

1. a principal in ``super.users`` is allowed everything;
2. the ACLs that apply are those on the literal name, on the ``*`` wildcard of its type and
   on every PREFIXED pattern that the name starts with; if there are none at all,
   ``allow.everyone.if.no.acl.found`` decides;
3. a DENY entry matching the principal (or ``User:*``), the host (or ``*``) and the
   operation (or ALL) denies, whatever else allows;
4. else an ALLOW entry matching the same way allows, where READ, WRITE, DELETE and ALTER
   each imply DESCRIBE, and ALTER_CONFIGS implies DESCRIBE_CONFIGS;
5. else denied.

``allowed_by_resource_type`` is Kafka's ``authorizeByResourceType`` (may the principal do
the operation on *some* resource of the type: used by InitProducerId without a
transactional id). ``authorized_operations`` gives Kafka's 32-bit field of allowed
operations. Changes (CreateAcls, DeleteAcls) are planned against the cache, then
``store_changes`` writes them to the store as deltas (one writer at a time under
``alter_lock``) and takes what the store then holds into the cache. Patterns another broker
changed come from the store's notifications (``reload``).

Thread-safety: reads and ``apply`` run on the event loop; the cache is replaced, never
mutated in place, so a read sees one consistent snapshot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from broker.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.acl_store import AclDelta, AclStore
from broker.security.principal import KafkaPrincipal
from protocol.errors import ErrorCode

_IMPLIED: Final = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}

Changes = dict[ResourcePattern, frozenset[AccessControlEntry]]


@dataclass(frozen=True, slots=True)
class ApiError:
    code: int
    message: str | None


def parse_super_users(text: str | None) -> frozenset[KafkaPrincipal]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:broker``)."""
    if not text:
        return frozenset()
    return frozenset(KafkaPrincipal.parse(p.strip()) for p in text.split(";") if p.strip())


class AclAuthorizer:
    def __init__(self, store: AclStore, *, super_users: frozenset[KafkaPrincipal] = frozenset(),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self._store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self._cache: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._set_cache(store.load())
        self.alter_lock = asyncio.Lock()
        store.subscribe(self.reload)

    def _set_cache(self, cache: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        lengths: dict[ResourceType, set[int]] = {}
        for pattern in cache:
            if pattern.pattern_type == PatternType.PREFIXED:
                lengths.setdefault(pattern.resource_type, set()).add(len(pattern.name))
        self._cache = cache
        self._prefix_lengths = {t: tuple(sorted(v)) for t, v in lengths.items()}

    # -- authorizing -------------------------------------------------------------------------

    def _matching(self, resource_type: ResourceType, name: str) -> list[frozenset[AccessControlEntry]]:
        cache = self._cache
        found = []
        for candidate in (ResourcePattern(resource_type, name, PatternType.LITERAL),
                          ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL)):
            entries = cache.get(candidate)
            if entries:
                found.append(entries)
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            entries = cache.get(ResourcePattern(resource_type, name[:length], PatternType.PREFIXED))
            if entries:
                found.append(entries)
        return found

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self._matching(resource_type, name)
        if not acls:
            return self.allow_if_no_acl
        who = (str(principal), WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)

        def exists(permission: AclPermissionType, operations: frozenset[AclOperation]) -> bool:
            return any(e.permission == permission and e.principal in who and e.host in hosts
                       and (e.operation in operations or e.operation == AclOperation.ALL)
                       for entries in acls for e in entries)

        if exists(AclPermissionType.DENY, frozenset({operation})):
            return False
        return exists(AclPermissionType.ALLOW, _IMPLIED.get(operation, frozenset({operation})))

    def authorized_operations(self, principal: KafkaPrincipal, host: str,
                              resource_type: ResourceType, name: str) -> int:
        """Kafka's authorized-operations bit field (bit = operation code)."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    def allowed_by_resource_type(self, principal: KafkaPrincipal, host: str,
                                 operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: is some resource of the type allowed?"""
        if principal in self.super_users:
            return True
        who = (str(principal), WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)

        def names(permission: AclPermissionType, pattern_type: PatternType) -> set[str]:
            return {p.name for p, entries in self._cache.items()
                    if p.resource_type == resource_type and p.pattern_type == pattern_type
                    and any(e.permission == permission and e.principal in who and e.host in hosts
                            and e.operation in (operation, AclOperation.ALL) for e in entries)}

        deny_literals = names(AclPermissionType.DENY, PatternType.LITERAL)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_if_no_acl:
            return True
        deny_prefixes = names(AclPermissionType.DENY, PatternType.PREFIXED)
        allow_literals = names(AclPermissionType.ALLOW, PatternType.LITERAL)
        allow_prefixes = names(AclPermissionType.ALLOW, PatternType.PREFIXED)

        def dominated(name: str) -> bool:
            return any(name[:i] in deny_prefixes for i in range(1, len(name) + 1))

        return (any(not dominated(p) for p in allow_prefixes)
                or any(lit == WILDCARD_RESOURCE or (lit not in deny_literals and not dominated(lit))
                       for lit in allow_literals))

    # -- listing and changing ------------------------------------------------------------------

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return [AclBinding(pattern, entry) for pattern, entries in self._cache.items()
                for entry in entries if binding_filter.matches(AclBinding(pattern, entry))]

    def plan_create(self, bindings: list[AclBinding]) -> tuple[list[ApiError | None], Changes]:
        """Per binding its error (None: created) and the store changes, as Kafka checks them:
        unknown elements or a bad name, principal or cluster name -> INVALID_REQUEST."""
        results: list[ApiError | None] = []
        changes: Changes = {}
        for binding in bindings:
            error = _creation_error(binding)
            results.append(error)
            if error is None:
                current = changes.get(binding.pattern, self._cache.get(binding.pattern, frozenset()))
                changes[binding.pattern] = current | {binding.entry}
        return results, changes

    def plan_delete(self, filters: list[AclBindingFilter]) -> tuple[list[list[AclBinding]], Changes]:
        """Per filter the bindings it deletes (a binding matched by several filters counts
        for the first), and the store changes."""
        deleted: list[list[AclBinding]] = [[] for _ in filters]
        taken: set[AclBinding] = set()
        changes: Changes = {}
        for pattern, entries in self._cache.items():
            remaining = set(entries)
            for index, binding_filter in enumerate(filters):
                if not binding_filter.pattern.matches(pattern):
                    continue
                for entry in entries:
                    if binding_filter.entry.matches(entry):
                        binding = AclBinding(pattern, entry)
                        remaining.discard(entry)
                        if binding not in taken:
                            taken.add(binding)
                            deleted[index].append(binding)
            if len(remaining) != len(entries):
                changes[pattern] = frozenset(remaining)
        return deleted, changes

    async def store_changes(self, changes: Changes) -> None:
        """Write planned changes (each pattern's entries as planned against the cache) to the
        store as what they add and remove, then cache what the store holds afterwards;
        AclStoreWriteError (nothing applied) if the store failed."""
        deltas = {}
        for pattern, planned in changes.items():
            current = self._cache.get(pattern, frozenset())
            deltas[pattern] = AclDelta(planned - current, current - planned)
        self.apply(await self._store.write(deltas))

    def apply(self, changes: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        """Take stored changes into the cache (after the store wrote them)."""
        cache = dict(self._cache)
        for pattern, entries in changes.items():
            if entries:
                cache[pattern] = entries
            else:
                cache.pop(pattern, None)
        self._set_cache(cache)

    def reload(self, patterns: Iterable[ResourcePattern]) -> None:
        """Another broker changed these patterns (a ZooKeeper store's notification)."""
        stored = self._store.load()
        self.apply({p: stored.get(p, frozenset()) for p in patterns})

    @property
    def store(self) -> AclStore:
        return self._store


def _creation_error(binding: AclBinding) -> ApiError | None:
    pattern, entry = binding.pattern, binding.entry
    if binding.is_unknown():  # Kafka: validateAclBinding, reported as "Failed to create ACL"
        return ApiError(ErrorCode.INVALID_REQUEST, "Failed to create ACL")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return ApiError(ErrorCode.INVALID_REQUEST,
                        f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        return ApiError(ErrorCode.INVALID_REQUEST, "Invalid empty resource name")
    if "/" in pattern.name:
        return ApiError(ErrorCode.INVALID_REQUEST, "Failed to create ACL")
    try:
        KafkaPrincipal.parse(entry.principal)
    except ValueError as exc:
        return ApiError(ErrorCode.INVALID_REQUEST, f"Failed to create ACL: {exc}")
    if not entry.host:
        return ApiError(ErrorCode.INVALID_REQUEST, "Failed to create ACL: empty host")
    return None

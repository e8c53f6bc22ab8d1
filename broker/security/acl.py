"""ACLs as Kafka models them (``org.apache.kafka.common.acl`` / ``.resource``): resource
patterns, access control entries, bindings, and the filters that select them, with Kafka's
codes (the wire values of CreateAcls / DescribeAcls / DeleteAcls) and names (the JSON that
ZooKeeper holds under ``/kafka-acl``).

Filter semantics (``ResourcePatternFilter.matches``): a filter's resource type ANY matches
every type; pattern type ANY matches LITERAL and PREFIXED patterns by exact name; MATCH
matches every pattern that applies to the name (the literal name, the ``*`` wildcard, and
every prefix of it); LITERAL / PREFIXED match that pattern type by exact name; a null name
matches every name. Entry filters match field by field, null / ANY matching everything.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, TypeVar

WILDCARD_RESOURCE: Final = "*"
WILDCARD_PRINCIPAL: Final = "User:*"
WILDCARD_HOST: Final = "*"
CLUSTER_NAME: Final = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


E = TypeVar("E", ResourceType, PatternType, AclOperation, AclPermissionType)


def from_code(kind: type[E], code: int) -> E:
    """Kafka's ``fromCode``: an unknown code is UNKNOWN."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def camel_name(member: enum.IntEnum) -> str:
    """Kafka's JSON / ZooKeeper names: ``Read``, ``IdempotentWrite``, ``TransactionalId``."""
    return "".join(part.capitalize() for part in member.name.split("_"))


def from_camel_name(kind: type[E], name: str) -> E:
    for member in kind:
        if camel_name(member).lower() == name.replace("_", "").lower():
            return member
    raise ValueError(f"unknown {kind.__name__} {name!r}")


# Operations each resource type supports (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS: Final[dict[ResourceType, frozenset[AclOperation]]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                   AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                                     AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                                     AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType  # LITERAL or PREFIXED


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str  # "User:alice", or "User:*"
    host: str  # an IP address, or "*"
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def is_unknown(self) -> bool:
        return (self.pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY)
                or self.pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED)
                or self.entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY)
                or self.entry.permission in (AclPermissionType.UNKNOWN, AclPermissionType.ANY))


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if (self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
                and self.pattern_type != pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)  # PREFIXED

    def indefinite_field(self) -> str | None:
        """Kafka's findIndefiniteField: why the filter may match more than one pattern."""
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation == AclOperation.ANY or self.operation == entry.operation)
                and (self.permission == AclPermissionType.ANY or self.permission == entry.permission))


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def is_unknown(self) -> bool:
        return (self.pattern.resource_type == ResourceType.UNKNOWN
                or self.pattern.pattern_type == PatternType.UNKNOWN
                or self.entry.operation == AclOperation.UNKNOWN
                or self.entry.permission == AclPermissionType.UNKNOWN)


ANY_BINDING: Final = AclBindingFilter(
    ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
    AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))

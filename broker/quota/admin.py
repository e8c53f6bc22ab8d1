"""DescribeClientQuotas and AlterClientQuotas over the user / client-id entity store, with
Kafka's checks and messages (its ZkAdminManager):

Describe: filter components for ``user`` and ``client-id`` (each at most once: else
INVALID_REQUEST "Duplicate user filter component entity type"), matching a name exactly
(match_type 0), the default entity (1, or 0 with a null match) or any entity with that type
(2); ``strict`` excludes entities that have types the filter does not mention. Only quota
keys are described (never SCRAM credentials). ``ip`` components (connection-rate quotas)
are not supported here: INVALID_REQUEST.

Alter, per entry (all or nothing for the entry): the entity must be user, client-id or both
(else INVALID_REQUEST), names may not be empty; keys must be quota keys ("Invalid
configuration key <key>"); byte rates must be whole numbers ("Configuration
producer_byte_rate must be a LONG value"); a value must be positive (not in Kafka: a zero
bound would throttle forever). ``validate_only`` checks without writing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.quota.manager import QUOTA_KEYS
from broker.security.entity_store import CLIENT_ID, USER, Entity, EntityConfigStore

EXACT, DEFAULT, ANY = 0, 1, 2
EPSILON = 1e-6


class QuotaRequestError(ValueError):
    """INVALID_REQUEST with this message."""


@dataclass(frozen=True, slots=True)
class Component:
    entity_type: str
    match_type: int
    match: str | None


def describe(store: EntityConfigStore, components: Sequence[Component],
             strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    by_type: dict[str, Component] = {}
    for c in components:
        if c.entity_type == "":
            raise QuotaRequestError("Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID):
            raise QuotaRequestError(f"Custom entity type '{c.entity_type}' not supported")
        if c.entity_type in by_type:
            name = "user" if c.entity_type == USER else "client"
            raise QuotaRequestError(f"Duplicate {name} filter component entity type")
        if c.match_type not in (EXACT, DEFAULT, ANY):
            raise QuotaRequestError(f"Unexpected match type {c.match_type}")
        by_type[c.entity_type] = c

    def matches(kind: str, names: dict[str, str | None]) -> bool:
        component = by_type.get(kind)
        if component is None:
            return kind not in names or not strict
        if kind not in names:
            return False
        if component.match_type == ANY:
            return True
        if component.match_type == DEFAULT:
            return names[kind] is None
        return names[kind] == component.match  # EXACT (a null match is the default)

    out = []
    for entity, config in store.all().items():
        quotas = {k: float(v) for k, v in config.items() if k in QUOTA_KEYS}
        names = dict(entity)
        if quotas and matches(USER, names) and matches(CLIENT_ID, names):
            out.append((entity, quotas))
    return sorted(out, key=lambda item: repr(item[0]))


def entity_of(pairs: Sequence[tuple[str, str | None]]) -> Entity:
    """A request's entity in store form (user before client-id); QuotaRequestError if bad."""
    if not pairs:
        raise QuotaRequestError("Invalid empty client quota entity")
    names: dict[str, str | None] = {}
    for kind, name in pairs:
        if kind not in (USER, CLIENT_ID):
            if kind == "ip":
                raise QuotaRequestError("IP quotas (connection creation rates) are not supported")
            raise QuotaRequestError(f"Unhandled client quota entity type: {kind}")
        if kind in names:
            raise QuotaRequestError(f"Duplicate {kind} entity type")
        if name is not None and name == "":
            raise QuotaRequestError(f"Empty {kind} not supported")
        names[kind] = name
    return tuple((kind, names[kind]) for kind in (USER, CLIENT_ID) if kind in names)


def plan_ops(ops: Sequence[tuple[str, float, bool]]) -> dict[str, str | None]:
    """The store changes for one entity's ops (key, value, remove); QuotaRequestError if bad."""
    changes: dict[str, str | None] = {}
    for key, value, remove in ops:
        if remove:
            changes[key] = None
            continue
        kind = QUOTA_KEYS.get(key)
        if kind is None:
            raise QuotaRequestError(f"Invalid configuration key {key}")
        if kind == "LONG":
            whole = int(value + EPSILON)
            if abs(whole - value) > EPSILON:
                raise QuotaRequestError(f"Configuration {key} must be a LONG value")
            text = str(whole)
        else:
            text = repr(float(value))
        if value <= 0:
            raise QuotaRequestError(f"Configuration {key} must be positive")
        changes[key] = text
    return changes  # removing an absent key is a no-op, as in Kafka

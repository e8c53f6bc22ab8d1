"""The authorizer's semantics, Kafka's AclAuthorizer rule by rule (the cases of Kafka's
AuthorizerTest that apply to a single node), plus exhaustive checks: implied operations
over every operation, and a brute-force oracle over random ACL sets."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.security.acl import (
    ANY_BINDING,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from broker.security.acl_store import LocalAclStore, acls_from_json, acls_to_json
from broker.security.authorizer import AclAuthorizer, parse_super_users
from broker.security.principal import KafkaPrincipal, user

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ALICE, BOB = user("alice"), user("bob")
HOST, OTHER_HOST = "192.168.0.1", "192.168.0.2"
TOPIC = "orders"

REAL_OPERATIONS = [o for o in Op if o not in (Op.UNKNOWN, Op.ANY, Op.ALL)]


def entry(principal: KafkaPrincipal | str, operation: AclOperation, permission: AclPermissionType = Perm.ALLOW,
          host: str = WILDCARD_HOST) -> AccessControlEntry:
    return AccessControlEntry(str(principal), host, operation, permission)


def authorizer(tmp_path: Path, acls: dict[ResourcePattern, set[AccessControlEntry]] | None = None,
               **kw: object) -> AclAuthorizer:
    auth = AclAuthorizer(LocalAclStore.in_log_dir(tmp_path), **kw)  # type: ignore[arg-type]
    if acls:
        auth.apply({p: frozenset(e) for p, e in acls.items()})
    return auth


def literal(name: str = TOPIC, rt: ResourceType = RT.TOPIC) -> ResourcePattern:
    return ResourcePattern(rt, name, PT.LITERAL)


def prefixed(name: str, rt: ResourceType = RT.TOPIC) -> ResourcePattern:
    return ResourcePattern(rt, name, PT.PREFIXED)


def test_no_acls_denies_unless_allow_everyone(tmp_path: Path) -> None:
    assert not authorizer(tmp_path).authorize(ALICE, HOST, Op.READ, RT.TOPIC, TOPIC)
    assert authorizer(tmp_path, allow_everyone_if_no_acl_found=True).authorize(
        ALICE, HOST, Op.READ, RT.TOPIC, TOPIC)


def test_allow_everyone_only_when_the_resource_has_no_acl_at_all(tmp_path: Path) -> None:
    # An ACL for bob on the topic: alice is no longer covered by allow.everyone.if.no.acl.found.
    auth = authorizer(tmp_path, {literal(): {entry(BOB, Op.READ)}}, allow_everyone_if_no_acl_found=True)
    assert auth.authorize(BOB, HOST, Op.READ, RT.TOPIC, TOPIC)
    assert not auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, TOPIC)
    assert auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "other")


def test_super_users(tmp_path: Path) -> None:
    auth = authorizer(tmp_path, {literal(): {entry(ALICE, Op.ALL, Perm.DENY)}},
                      super_users=parse_super_users("User:alice; User:broker"))
    assert auth.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, TOPIC)
    assert auth.authorize(user("broker"), HOST, Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")
    assert not auth.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, TOPIC)


def test_deny_takes_precedence_over_allow(tmp_path: Path) -> None:
    auth = authorizer(tmp_path, {literal(): {entry(ALICE, Op.READ), entry(ALICE, Op.READ, Perm.DENY)}})
    assert not auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, TOPIC)
    # A deny on the wildcard resource beats an allow on the literal name, and vice versa.
    auth = authorizer(tmp_path, {literal(): {entry(ALICE, Op.READ)},
                                 literal(WILDCARD_RESOURCE): {entry(ALICE, Op.READ, Perm.DENY)}})
    assert not auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, TOPIC)
    auth = authorizer(tmp_path, {prefixed("ord"): {entry(WILDCARD_PRINCIPAL, Op.ALL, Perm.DENY)},
                                 literal(): {entry(ALICE, Op.ALL)}})
    assert not auth.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, TOPIC)


def test_principal_and_host_matching(tmp_path: Path) -> None:
    auth = authorizer(tmp_path, {literal(): {entry(ALICE, Op.READ, host=HOST),
                                             entry(WILDCARD_PRINCIPAL, Op.WRITE)}})
    assert auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, TOPIC)
    assert not auth.authorize(ALICE, OTHER_HOST, Op.READ, RT.TOPIC, TOPIC)
    assert not auth.authorize(BOB, HOST, Op.READ, RT.TOPIC, TOPIC)
    assert auth.authorize(BOB, OTHER_HOST, Op.WRITE, RT.TOPIC, TOPIC)
    # Principals are compared with their type: Group:alice is not User:alice.
    assert not auth.authorize(KafkaPrincipal("Group", "alice"), HOST, Op.READ, RT.TOPIC, TOPIC)
    deny_host = authorizer(tmp_path, {literal(): {entry(ALICE, Op.READ),
                                                  entry(ALICE, Op.READ, Perm.DENY, host=OTHER_HOST)}})
    assert deny_host.authorize(ALICE, HOST, Op.READ, RT.TOPIC, TOPIC)
    assert not deny_host.authorize(ALICE, OTHER_HOST, Op.READ, RT.TOPIC, TOPIC)


def test_literal_wildcard_and_prefixed_patterns(tmp_path: Path) -> None:
    auth = authorizer(tmp_path, {literal(WILDCARD_RESOURCE): {entry(ALICE, Op.READ)},
                                 prefixed("logs-"): {entry(BOB, Op.WRITE)}})
    assert auth.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "anything")
    assert not auth.authorize(ALICE, HOST, Op.READ, RT.GROUP, "anything")  # per resource type
    assert auth.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, "logs-app")
    assert auth.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, "logs-")
    assert not auth.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, "logs")
    assert not auth.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, "app-logs-x")
    # A literal "*" pattern is the wildcard; a PREFIXED "*" is a prefix like any other.
    star_prefix = authorizer(tmp_path, {prefixed("*"): {entry(ALICE, Op.READ)}})
    assert not star_prefix.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "x")
    assert star_prefix.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "*x")


@pytest.mark.parametrize("granted", [*REAL_OPERATIONS, Op.ALL])
def test_implied_operations(tmp_path: Path, granted: AclOperation) -> None:
    """READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
    ALL allows everything; nothing else implies anything (every pair checked)."""
    auth = authorizer(tmp_path, {literal(): {entry(ALICE, granted)}})
    for asked in REAL_OPERATIONS:
        expected = (asked == granted or granted == Op.ALL
                    or (asked == Op.DESCRIBE and granted in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER))
                    or (asked == Op.DESCRIBE_CONFIGS and granted == Op.ALTER_CONFIGS))
        assert auth.authorize(ALICE, HOST, asked, RT.TOPIC, TOPIC) == expected, (granted, asked)


@pytest.mark.parametrize("denied", [*REAL_OPERATIONS, Op.ALL])
def test_deny_implies_nothing_but_itself(tmp_path: Path, denied: AclOperation) -> None:
    """Denying READ does not deny DESCRIBE (Kafka: only allows are widened)."""
    auth = authorizer(tmp_path, {literal(): {entry(ALICE, Op.ALL), entry(ALICE, denied, Perm.DENY)}})
    for asked in REAL_OPERATIONS:
        assert auth.authorize(ALICE, HOST, asked, RT.TOPIC, TOPIC) == (
            denied != Op.ALL and asked != denied), (denied, asked)


def test_authorized_operations_bits(tmp_path: Path) -> None:
    auth = authorizer(tmp_path, {literal(): {entry(ALICE, Op.READ), entry(ALICE, Op.ALTER_CONFIGS)}})
    bits = auth.authorized_operations(ALICE, HOST, RT.TOPIC, TOPIC)
    assert bits == sum(1 << o for o in (Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS))


def test_allowed_by_resource_type(tmp_path: Path) -> None:
    auth = authorizer(tmp_path)
    assert not auth.allowed_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    auth.apply({literal(): frozenset({entry(ALICE, Op.WRITE)})})
    assert auth.allowed_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert not auth.allowed_by_resource_type(BOB, HOST, Op.WRITE, RT.TOPIC)
    auth.apply({prefixed("ord"): frozenset({entry(ALICE, Op.WRITE, Perm.DENY)})})
    assert not auth.allowed_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)  # dominated by the deny
    auth.apply({literal("x"): frozenset({entry(ALICE, Op.ALL)})})
    assert auth.allowed_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    auth.apply({literal(WILDCARD_RESOURCE): frozenset({entry(WILDCARD_PRINCIPAL, Op.WRITE, Perm.DENY)})})
    assert not auth.allowed_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert authorizer(tmp_path, super_users=frozenset({BOB})).allowed_by_resource_type(
        BOB, HOST, Op.WRITE, RT.TOPIC)


# -- filters ---------------------------------------------------------------------------------------

PATTERNS = [literal("foo"), literal(WILDCARD_RESOURCE), prefixed("f"), prefixed("fo"),
            prefixed("bar"), literal("foo", RT.GROUP)]


@pytest.mark.parametrize(("pattern_filter", "expected"), [
    (ResourcePatternFilter(RT.ANY, None, PT.ANY), PATTERNS),
    (ResourcePatternFilter(RT.TOPIC, "foo", PT.LITERAL), [literal("foo")]),
    (ResourcePatternFilter(RT.TOPIC, "fo", PT.PREFIXED), [prefixed("fo")]),
    (ResourcePatternFilter(RT.TOPIC, "foo", PT.ANY), [literal("foo")]),
    (ResourcePatternFilter(RT.ANY, "foo", PT.ANY), [literal("foo"), literal("foo", RT.GROUP)]),
    (ResourcePatternFilter(RT.TOPIC, "foo", PT.MATCH),
     [literal("foo"), literal(WILDCARD_RESOURCE), prefixed("f"), prefixed("fo")]),
    (ResourcePatternFilter(RT.TOPIC, None, PT.PREFIXED), [prefixed("f"), prefixed("fo"), prefixed("bar")]),
    (ResourcePatternFilter(RT.TOPIC, WILDCARD_RESOURCE, PT.LITERAL), [literal(WILDCARD_RESOURCE)]),
])
def test_resource_pattern_filters(pattern_filter: ResourcePatternFilter,
                                  expected: list[ResourcePattern]) -> None:
    assert [p for p in PATTERNS if pattern_filter.matches(p)] == expected


def test_entry_filter_and_indefinite_fields() -> None:
    e = entry(ALICE, Op.READ, host=HOST)
    assert AccessControlEntryFilter(None, None, Op.ANY, Perm.ANY).matches(e)
    assert AccessControlEntryFilter("User:alice", HOST, Op.READ, Perm.ALLOW).matches(e)
    assert not AccessControlEntryFilter("User:bob", None, Op.ANY, Perm.ANY).matches(e)
    assert not AccessControlEntryFilter(None, None, Op.WRITE, Perm.ANY).matches(e)
    assert not AccessControlEntryFilter(None, None, Op.ANY, Perm.DENY).matches(e)
    assert ResourcePatternFilter(RT.TOPIC, "x", PT.LITERAL).indefinite_field() is None
    assert ResourcePatternFilter(RT.TOPIC, "x", PT.MATCH).indefinite_field() == "Resource pattern type is MATCH."
    assert ResourcePatternFilter(RT.ANY, "x", PT.LITERAL).indefinite_field() == "Resource type is ANY."


# -- changes and the store ------------------------------------------------------------------------

def test_create_describe_delete_and_persist(tmp_path: Path) -> None:
    auth = authorizer(tmp_path)
    bindings = [AclBinding(literal(), entry(ALICE, Op.READ)),
                AclBinding(prefixed("logs-"), entry(BOB, Op.WRITE, host=HOST)),
                AclBinding(literal("kafka-cluster", RT.CLUSTER), entry(ALICE, Op.ALTER)),
                AclBinding(literal("other", RT.CLUSTER), entry(ALICE, Op.ALTER)),
                AclBinding(literal(""), entry(ALICE, Op.READ)),
                AclBinding(literal("a/b"), entry(ALICE, Op.READ)),
                AclBinding(literal(), entry("alice", Op.READ)),
                AclBinding(literal(), entry(ALICE, Op.ANY)),
                AclBinding(ResourcePattern(RT.TOPIC, "x", PT.MATCH), entry(ALICE, Op.READ))]
    errors, changes = auth.plan_create(bindings)
    assert [e is None for e in errors] == [True, True, True] + [False] * 6
    assert errors[3] is not None and errors[3].message == \
        "The only valid name for the CLUSTER resource is kafka-cluster"
    assert errors[4] is not None and errors[4].message == "Invalid empty resource name"
    asyncio.run(auth.store_changes(changes))
    assert sorted(map(str, auth.acls(ANY_BINDING))) == sorted(map(str, bindings[:3]))
    # A new authorizer over the same log dir sees the same ACLs (the file, written atomically).
    again = AclAuthorizer(LocalAclStore.in_log_dir(tmp_path))
    assert set(again.acls(ANY_BINDING)) == set(bindings[:3])
    assert again.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, "logs-x")
    # Delete with two overlapping filters: each binding is reported once, for the first filter.
    deleted, changes = again.plan_delete([
        AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "logs-x", PT.MATCH),
                         AccessControlEntryFilter(None, None, Op.ANY, Perm.ANY)),
        AclBindingFilter(ResourcePatternFilter(RT.ANY, None, PT.ANY),
                         AccessControlEntryFilter("User:bob", None, Op.ANY, Perm.ANY))])
    assert deleted == [[bindings[1]], []]
    asyncio.run(again.store_changes(changes))
    assert set(AclAuthorizer(LocalAclStore.in_log_dir(tmp_path)).acls(ANY_BINDING)) == {bindings[0], bindings[2]}


def test_kafka_acl_json(tmp_path: Path) -> None:
    entries = {entry(ALICE, Op.IDEMPOTENT_WRITE, Perm.DENY, host=HOST), entry(WILDCARD_PRINCIPAL, Op.ALL)}
    doc = acls_to_json(entries)
    assert doc == {"version": 1, "acls": [
        {"principal": "User:*", "permissionType": "Allow", "operation": "All", "host": "*"},
        {"principal": "User:alice", "permissionType": "Deny", "operation": "IdempotentWrite",
         "host": HOST}]}
    assert acls_from_json(doc) == entries


def test_unreadable_store_fails(tmp_path: Path) -> None:
    (tmp_path / "minikafka-acls.json").write_text("{not json")
    with pytest.raises(ValueError, match="unreadable ACLs"):
        LocalAclStore.in_log_dir(tmp_path)


# -- oracle: random ACL sets against a direct reading of the rules ------------------------------

NAMES = ["a", "ab", "abc", "b", WILDCARD_RESOURCE]
PRINCIPALS = ["User:alice", "User:bob", WILDCARD_PRINCIPAL]
HOSTS = [HOST, OTHER_HOST, WILDCARD_HOST]
OPS = [Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.ALL]

acl_strategy = st.tuples(st.sampled_from(NAMES), st.sampled_from([PT.LITERAL, PT.PREFIXED]),
                         st.sampled_from(PRINCIPALS), st.sampled_from(HOSTS), st.sampled_from(OPS),
                         st.sampled_from([Perm.ALLOW, Perm.DENY]))


def oracle(acls: list[tuple[str, PatternType, str, str, AclOperation, AclPermissionType]],
           principal: str, host: str, operation: AclOperation, name: str, allow_if_none: bool) -> bool:
    applies = [a for a in acls if (a[1] == PT.LITERAL and a[0] in (name, WILDCARD_RESOURCE))
               or (a[1] == PT.PREFIXED and name.startswith(a[0]))]
    if not applies:
        return allow_if_none
    matching = [a for a in applies if a[2] in (principal, WILDCARD_PRINCIPAL) and a[3] in (host, WILDCARD_HOST)]
    if any(a[5] == Perm.DENY and a[4] in (operation, Op.ALL) for a in matching):
        return False
    implied = {Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
               Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}}.get(operation, {operation})
    return any(a[5] == Perm.ALLOW and (a[4] in implied or a[4] == Op.ALL) for a in matching)


@settings(max_examples=120, deadline=None)
@given(st.lists(acl_strategy, max_size=8), st.booleans())
def test_matches_the_rules_on_random_acl_sets(acls: list[tuple[str, PatternType, str, str, AclOperation, AclPermissionType]],
                                              allow_if_none: bool) -> None:
    auth = AclAuthorizer(_MemoryStore(), allow_everyone_if_no_acl_found=allow_if_none)
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for name, pt, principal, host, op, perm in acls:
        grouped.setdefault(ResourcePattern(RT.TOPIC, name, pt), set()).add(
            AccessControlEntry(principal, host, op, perm))
    auth.apply({p: frozenset(e) for p, e in grouped.items()})
    for principal, host, op, name in itertools.product(["User:alice", "User:bob"], [HOST, OTHER_HOST],
                                                       [Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS],
                                                       ["a", "abc", "b", "c"]):
        assert auth.authorize(KafkaPrincipal.parse(principal), host, op, RT.TOPIC, name) == \
            oracle(acls, principal, host, op, name, allow_if_none), (principal, host, op, name)


class _MemoryStore:
    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        return {}

    def write(self, changes: object) -> None:
        pass

    def subscribe(self, listener: object) -> None:
        pass

"""The ZooKeeper security stores on a real ZooKeeper: Kafka's znodes and JSON for ACLs
(/kafka-acl, /kafka-acl-extended, their change notifications) and for user / client-id
configs (/config/users, /config/clients, /config/changes), version-checked writes against a
concurrent writer, and two brokers' stores kept in step by the notifications."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from broker.security.acl import (
    ANY_BINDING,
    AccessControlEntry,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as RT
from broker.security.authorizer import AclAuthorizer
from broker.security.entity_store import CLIENT_ID, USER, Entity
from broker.security.principal import KafkaPrincipal
from broker.security.zk_acl_store import ZkAclStore
from broker.security.zk_entity_store import ZkEntityConfigStore, sanitize
from controller.zk_client import ZkClient
from tests.cluster.conftest import KazooFactory

pytestmark = pytest.mark.timeout(120)

ALICE = KafkaPrincipal.parse("User:alice")
ORDERS = ResourcePattern(RT.TOPIC, "orders", PatternType.LITERAL)
BILLING = ResourcePattern(RT.GROUP, "billing-", PatternType.PREFIXED)
HOST = "127.0.0.1"


def allow(op: Op, principal: str = "User:alice") -> AccessControlEntry:
    return AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW)


@pytest.fixture
async def open_store(zk_connect: str) -> AsyncIterator[Callable[..., Any]]:
    """open_store(ZkAclStore) / open_store(ZkEntityConfigStore): a started store on its own
    ZooKeeper session (one per broker)."""
    opened: list[tuple[ZkClient, Any]] = []

    async def make(kind: type[Any]) -> Any:
        zk = await ZkClient.connect(zk_connect, session_timeout_ms=6000)
        store = kind(zk)
        opened.append((zk, store))
        await store.start()
        return store

    yield make
    for zk, store in opened:
        await store.close()
        await zk.close()


async def eventually(check: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.02)


def znode_json(kazoo: Any, path: str) -> Any:
    data, _stat = kazoo.get(path)
    return json.loads(data)


def notifications(kazoo: Any, path: str) -> list[bytes]:
    return [kazoo.get(f"{path}/{c}")[0] for c in sorted(kazoo.get_children(path))]


async def test_acls_in_kafkas_znodes_reach_the_other_broker(
        open_store: Callable[..., Any], zk_connect: str, kazoo_factory: KazooFactory) -> None:
    one = AclAuthorizer(await open_store(ZkAclStore))
    two = AclAuthorizer(await open_store(ZkAclStore))
    assert not two.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders")
    await one.store_changes({ORDERS: frozenset({allow(Op.READ)}),
                             BILLING: frozenset({allow(Op.READ)})})
    kazoo = kazoo_factory(zk_connect)
    assert znode_json(kazoo, "/kafka-acl/Topic/orders") == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    assert znode_json(kazoo, "/kafka-acl-extended/prefixed/Group/billing-")["acls"][0]["operation"] == "Read"
    assert notifications(kazoo, "/kafka-acl-changes") == [b"TOPIC:orders"]
    assert [json.loads(n) for n in notifications(kazoo, "/kafka-acl-extended-changes")] == [
        {"version": 1, "resourceType": "GROUP", "name": "billing-", "patternType": "PREFIXED"}]
    # The other broker applies both through the notifications.
    await eventually(lambda: two.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders")
                     and two.authorize(ALICE, HOST, Op.READ, RT.GROUP, "billing-eu"),
                     "the second broker allows what the first created")
    # A deletion through the second broker: the znode goes, the first broker denies again.
    deleted, changes = two.plan_delete([ANY_BINDING])
    assert len(deleted[0]) == 2
    await two.store_changes(changes)
    assert kazoo.exists("/kafka-acl/Topic/orders") is None
    await eventually(lambda: not one.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders")
                     and not one.authorize(ALICE, HOST, Op.READ, RT.GROUP, "billing-eu"),
                     "the first broker denies after the second deleted")


async def test_acl_write_over_a_concurrent_writer(
        open_store: Callable[..., Any], zk_connect: str, kazoo_factory: KazooFactory) -> None:
    """Kafka's updateResourceAcls: the write is conditional on the version this broker read;
    a znode another broker changed in between is read again and the change applied to it."""
    one = AclAuthorizer(await open_store(ZkAclStore))
    await one.store_changes({ORDERS: frozenset({allow(Op.READ)})})
    kazoo = kazoo_factory(zk_connect)
    # Another writer (no notification, so this broker still holds version 0).
    kazoo.set("/kafka-acl/Topic/orders", json.dumps({"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Allow", "operation": "Write", "host": "*"},
    ]}).encode())
    # Planned against this broker's cache (alice's entry only): add carol's.
    await one.store_changes({ORDERS: frozenset({allow(Op.READ), allow(Op.DESCRIBE, "User:carol")})})
    stored = {(a["principal"], a["operation"]) for a in znode_json(kazoo, "/kafka-acl/Topic/orders")["acls"]}
    assert stored == {("User:alice", "Read"), ("User:bob", "Write"), ("User:carol", "Describe")}
    assert kazoo.exists("/kafka-acl/Topic/orders").version == 2
    # The cache holds what was stored, bob's entry included.
    assert one.authorize(KafkaPrincipal.parse("User:bob"), HOST, Op.WRITE, RT.TOPIC, "orders")


async def test_a_store_reads_acls_kafka_wrote(
        open_store: Callable[..., Any], zk_connect: str, kazoo_factory: KazooFactory) -> None:
    kazoo = kazoo_factory(zk_connect)
    kazoo.create("/kafka-acl/Cluster/kafka-cluster", json.dumps({"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "IdempotentWrite",
         "host": "*"}]}).encode(), makepath=True)
    kazoo.create("/kafka-acl/TransactionalId/tx-1", json.dumps({"version": 1, "acls": [
        {"principal": "User:*", "permissionType": "Deny", "operation": "All", "host": "10.0.0.1"}]}).encode(),
        makepath=True)
    auth = AclAuthorizer(await open_store(ZkAclStore))
    assert auth.authorize(ALICE, HOST, Op.IDEMPOTENT_WRITE, RT.CLUSTER, "kafka-cluster")
    assert not auth.authorize(ALICE, "10.0.0.1", Op.WRITE, RT.TRANSACTIONAL_ID, "tx-1")
    # A notification Kafka's broker wrote (Java's enum name) is understood.
    kazoo.set("/kafka-acl/Cluster/kafka-cluster", b'{"version":1,"acls":[]}')
    kazoo.create("/kafka-acl-changes/acl_changes_", b"CLUSTER:kafka-cluster", sequence=True)
    await eventually(lambda: not auth.authorize(ALICE, HOST, Op.IDEMPOTENT_WRITE, RT.CLUSTER,
                                                "kafka-cluster"), "the notification applied")


def entity(user: str | None = None, client: str | None = None, *, has_user: bool = True,
           has_client: bool = False) -> Entity:
    parts: list[tuple[str, str | None]] = []
    if has_user:
        parts.append((USER, user))
    if has_client:
        parts.append((CLIENT_ID, client))
    return tuple(parts)


async def test_entity_configs_in_kafkas_znodes_reach_the_other_broker(
        open_store: Callable[..., Any], zk_connect: str, kazoo_factory: KazooFactory) -> None:
    one = await open_store(ZkEntityConfigStore)
    two = await open_store(ZkEntityConfigStore)
    heard: list[Entity] = []
    two.subscribe(lambda changed: heard.extend(changed))
    alice, alice_c1 = entity("alice"), entity("alice", "c1", has_client=True)
    default_client = entity(None, has_user=False, has_client=True)
    dn_user = entity("CN=a,O=b c")
    await one.alter({alice: {"SCRAM-SHA-256": "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096",
                             "producer_byte_rate": "1024"},
                     alice_c1: {"consumer_byte_rate": "2048"},
                     default_client: {"request_percentage": "50.0"},
                     dn_user: {"producer_byte_rate": "1"}})
    kazoo = kazoo_factory(zk_connect)
    assert znode_json(kazoo, "/config/users/alice") == {"version": 1, "config": {
        "SCRAM-SHA-256": "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096",
        "producer_byte_rate": "1024"}}
    assert znode_json(kazoo, "/config/users/alice/clients/c1")["config"] == {"consumer_byte_rate": "2048"}
    assert znode_json(kazoo, "/config/clients/<default>")["config"] == {"request_percentage": "50.0"}
    assert sanitize("CN=a,O=b c") == "CN%3Da%2CO%3Db%20c"
    assert znode_json(kazoo, "/config/users/CN%3Da%2CO%3Db%20c")["config"] == {"producer_byte_rate": "1"}
    assert sorted(json.loads(n)["entity_path"] for n in notifications(kazoo, "/config/changes")) == sorted([
        "users/alice", "users/alice/clients/c1", "clients/<default>", "users/CN%3Da%2CO%3Db%20c"])
    assert all(json.loads(n)["version"] == 2 for n in notifications(kazoo, "/config/changes"))
    await eventually(lambda: two.all() == one.all() and len(two.all()) == 4,
                     "the second broker has every entity")
    assert set(heard) == {alice, alice_c1, default_client, dn_user}
    # Removing a key: the znode keeps the rest; the other broker follows.
    await one.alter({alice: {"producer_byte_rate": None}, alice_c1: {"consumer_byte_rate": None}})
    assert znode_json(kazoo, "/config/users/alice/clients/c1") == {"version": 1, "config": {}}
    await eventually(lambda: "producer_byte_rate" not in two.get(alice) and two.get(alice_c1) == {},
                     "the second broker saw the removal")
    assert "SCRAM-SHA-256" in two.get(alice)
    # A store started now reads everything (sanitized names decoded).
    three = await open_store(ZkEntityConfigStore)
    assert three.all() == one.all()


async def test_entity_alter_over_a_concurrent_writer(
        open_store: Callable[..., Any], zk_connect: str, kazoo_factory: KazooFactory) -> None:
    one = await open_store(ZkEntityConfigStore)
    alice = entity("alice")
    await one.alter({alice: {"producer_byte_rate": "1"}})
    kazoo = kazoo_factory(zk_connect)
    kazoo.set("/config/users/alice", b'{"version":1,"config":{"producer_byte_rate":"1","consumer_byte_rate":"9"}}')
    await one.alter({alice: {"request_percentage": "10"}})
    assert znode_json(kazoo, "/config/users/alice")["config"] == {
        "producer_byte_rate": "1", "consumer_byte_rate": "9", "request_percentage": "10"}
    assert one.get(alice)["consumer_byte_rate"] == "9"

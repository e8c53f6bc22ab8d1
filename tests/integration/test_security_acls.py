"""ACL administration on a real broker with the authorizer on (``authorizer.class.name``,
``super.users``): Kafka's own kafka-acls (kafka.admin.AclCommand) adds, lists and removes
ACLs on minikafka; the ACL APIs' answers (CLUSTER_AUTHORIZATION_FAILED for a non-super user
on a SASL listener, SECURITY_DISABLED without an authorizer); ACLs survive a restart."""

from __future__ import annotations

from typing import Any

import pytest

from broker.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import ModuleBrokerFactory
from tests.integration.netclient import RawClient, sasl_plain_login
from tests.integration.secure_clients import java

pytestmark = pytest.mark.timeout(180)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_admin="admin-secret";')
ACL_PROPS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS;User:admin",
}


@pytest.fixture(scope="module")
def acl_broker(module_broker_factory: ModuleBrokerFactory) -> BrokerProcess:
    return module_broker_factory("acl-broker", dict(ACL_PROPS))


def kafka_acls(bootstrap: str, *args: str) -> str:
    done = java("kafka.admin.AclCommand", ["--bootstrap-server", bootstrap, *args])
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def describe_all(client: RawClient) -> DescribeAclsResponse:
    _cid, body = client.request(29, 3, DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY, resource_name_filter=None,
        pattern_type_filter=PatternType.ANY, principal_filter=None, host_filter=None,
        operation=AclOperation.ANY, permission_type=AclPermissionType.ANY))
    assert isinstance(body, DescribeAclsResponse)
    return body


def bindings(body: DescribeAclsResponse) -> set[tuple[Any, ...]]:
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
             a.permission_type) for r in body.resources for a in r.acls}


@pytest.mark.java
def test_kafka_acls_cli_adds_lists_and_removes(acl_broker: BrokerProcess) -> None:
    bs = acl_broker.endpoints["PLAINTEXT"]
    out = kafka_acls(bs, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                     "--operation", "Describe", "--topic", "orders", "--group", "billing",
                     "--resource-pattern-type", "literal")
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`" in out
    kafka_acls(bs, "--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1",
               "--operation", "Write", "--topic", "logs-", "--resource-pattern-type", "prefixed")
    kafka_acls(bs, "--add", "--allow-principal", "User:alice", "--operation", "IdempotentWrite",
               "--cluster")
    with RawClient(bs) as client:
        got = bindings(describe_all(client))
    T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
    L, P = PatternType.LITERAL, PatternType.PREFIXED
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    assert got == {
        (T, "orders", L, "User:alice", "*", AclOperation.READ, allow),
        (T, "orders", L, "User:alice", "*", AclOperation.DESCRIBE, allow),
        (G, "billing", L, "User:alice", "*", AclOperation.READ, allow),
        (G, "billing", L, "User:alice", "*", AclOperation.DESCRIBE, allow),
        (T, "logs-", P, "User:bob", "10.0.0.1", AclOperation.WRITE, deny),
        (C, "kafka-cluster", L, "User:alice", "*", AclOperation.IDEMPOTENT_WRITE, allow),
    }
    listed = kafka_acls(bs, "--list", "--topic", "logs-app", "--resource-pattern-type", "match")
    assert "name=logs-, patternType=PREFIXED" in listed and "name=orders" not in listed
    assert "(principal=User:bob, host=10.0.0.1, operation=WRITE, permissionType=DENY)" in listed
    kafka_acls(bs, "--remove", "--force", "--topic", "orders", "--group", "billing")
    with RawClient(bs) as client:
        left = bindings(describe_all(client))
    assert {b[1] for b in left} == {"logs-", "kafka-cluster"}


def test_acl_apis_need_cluster_permissions(acl_broker: BrokerProcess) -> None:
    creation = CreateAclsRequest.AclCreation(
        resource_type=ResourceType.TOPIC, resource_name="x", resource_pattern_type=PatternType.LITERAL,
        principal="User:alice", host="*", operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW)
    with RawClient(acl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        sasl_plain_login(client, "alice", "alice-secret")
        assert describe_all(client).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        _cid, created = client.request(30, 3, CreateAclsRequest(creations=[creation]))
        assert isinstance(created, CreateAclsResponse)
        assert [r.error_code for r in created.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
        _cid, deleted = client.request(31, 3, DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=ResourceType.ANY, resource_name_filter=None,
            pattern_type_filter=PatternType.ANY, principal_filter=None, host_filter=None,
            operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)]))
        assert isinstance(deleted, DeleteAclsResponse)
        assert [r.error_code for r in deleted.filter_results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
        _cid, scram = client.request(50, 0, DescribeUserScramCredentialsRequest(users=None))
        assert isinstance(scram, DescribeUserScramCredentialsResponse)
        assert scram.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert "Principal = User:alice is Denied Operation = Describe from host = 127.0.0.1 on " \
           "resource = Cluster:LITERAL:kafka-cluster for request = DescribeAcls" in acl_broker.stderr_text()
    with RawClient(acl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        sasl_plain_login(client, "admin", "admin-secret")  # a super user
        _cid, created = client.request(30, 3, CreateAclsRequest(creations=[
            creation, CreateAclsRequest.AclCreation(
                resource_type=ResourceType.CLUSTER, resource_name="other", resource_pattern_type=PatternType.LITERAL,
                principal="User:alice", host="*", operation=AclOperation.ALTER,
                permission_type=AclPermissionType.ALLOW)]))
        assert isinstance(created, CreateAclsResponse)
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (0, ""), (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster")]


def test_acls_survive_a_restart(tmp_path: Any) -> None:
    proc = BrokerProcess(tmp_path, dict(ACL_PROPS))
    with proc:
        with RawClient(proc.endpoints["PLAINTEXT"]) as client:
            _cid, created = client.request(30, 3, CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
                resource_type=ResourceType.GROUP, resource_name="g", resource_pattern_type=PatternType.PREFIXED,
                principal="User:*", host="*", operation=AclOperation.READ,
                permission_type=AclPermissionType.ALLOW)]))
            assert isinstance(created, CreateAclsResponse) and created.results[0].error_code == 0
        proc.restart()
        with RawClient(proc.endpoints["PLAINTEXT"]) as client:
            assert bindings(describe_all(client)) == {
                (ResourceType.GROUP, "g", PatternType.PREFIXED, "User:*", "*", AclOperation.READ,
                 AclPermissionType.ALLOW)}


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        body = describe_all(client)
        assert (body.error_code, body.error_message) == (
            ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")


def test_mtls_principal_from_mapping_rules_is_what_acls_see(tmp_path: Any) -> None:
    """Client certificates map to principals by ssl.principal.mapping.rules; the authorizer
    decides on that principal: alice (allowed DESCRIBE on the cluster) lists ACLs, bob does not."""
    import ssl

    from tests.tls_certs import make_pki

    pki = make_pki(tmp_path / "pki")
    proc = BrokerProcess(tmp_path, {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        **pki.broker_ssl_props(),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=clients,.*$/$1/U,DEFAULT",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
    })

    def context(name: str) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
        ctx.load_cert_chain(str(pki.client(name).cert), str(pki.client(name).key))
        return ctx

    with proc:
        with RawClient(proc.endpoints["PLAINTEXT"]) as admin:
            _cid, created = admin.request(30, 3, CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
                resource_type=ResourceType.CLUSTER, resource_name="kafka-cluster",
                resource_pattern_type=PatternType.LITERAL, principal="User:ALICE", host="*",
                operation=AclOperation.DESCRIBE, permission_type=AclPermissionType.ALLOW)]))
            assert isinstance(created, CreateAclsResponse) and created.results[0].error_code == 0
        with RawClient(proc.endpoints["SSL"], ssl_context=context("alice")) as alice:
            assert describe_all(alice).error_code == 0
        with RawClient(proc.endpoints["SSL"], ssl_context=context("bob")) as bob:
            assert describe_all(bob).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert "Principal = User:BOB is Denied Operation = Describe" in proc.stderr_text()

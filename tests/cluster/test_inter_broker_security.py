"""Replication over a secured inter-broker listener: three broker processes on a real
ZooKeeper whose only listener is SASL_SSL (SCRAM-SHA-512, the brokers' credential stored
in ZooKeeper before they start, as Kafka's docs have it), with ACLs on and the brokers'
principal a super user. Every broker-to-broker connection (the controller's requests,
AlterPartition, the followers' Fetch and OffsetForLeaderEpoch) logs in there.

- an RF 3 topic takes acks=all records, loses its leader, and a consumer reads them all;
  the SASL sessions last ``connections.max.reauth.ms`` (3 s): the brokers re-authenticate
  their connections to each other in place, and none is closed as expired;
- a broker with the wrong inter-broker password never joins the ISR and says why;
- the peer's advertised host is checked against its certificate
  (``ssl.endpoint.identification.algorithm``, Kafka's default ``https``; empty: not checked);
- mutual TLS between brokers whose key stores are PEM strings, on the SSL listener that
  ``security.inter.broker.protocol`` names (next to a PLAINTEXT one).

The clients are confluent-kafka's (librdkafka), logged in as a super user (the last test:
by a client certificate).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.security.credentials import ScramCredential
from tests.cluster.conftest import ClusterBrokers, KazooFactory
from tests.tls_certs import Pki, make_pki
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

MECHANISM = "SCRAM-SHA-512"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"
BROKER_PASSWORD = "broker-secret"
ADMIN_PASSWORD = "admin-secret"
LAG_MS = 2000  # replica.lag.time.max.ms
REAUTH_MS = 3000  # connections.max.reauth.ms: several sessions in one test


def secured_props(pki: Pki, password: str = BROKER_PASSWORD) -> dict[str, str]:
    return {
        "listeners": "INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.internal.scram-sha-512.sasl.jaas.config":
            f'{SCRAM_JAAS} username="broker" password="{password}";',
        **pki.broker_ssl_props(),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker;User:admin",
        "connections.max.reauth.ms": str(REAUTH_MS),
        "replica.lag.time.max.ms": str(LAG_MS),
        "offsets.topic.replication.factor": "1",
    }


def store_scram_users(kazoo_factory: KazooFactory, zk_connect: str) -> None:
    """The users' SCRAM-SHA-512 credentials in Kafka's znodes (``/config/users/<user>``), as
    ``kafka-configs --zookeeper --alter --add-config SCRAM-SHA-512=[...]`` writes them
    before the first broker starts."""
    zk = kazoo_factory(zk_connect.split("/", 1)[0])
    chroot = "/" + zk_connect.split("/", 1)[1]
    for user, password in (("broker", BROKER_PASSWORD), ("admin", ADMIN_PASSWORD)):
        credential = ScramCredential.from_password(MECHANISM, password, os.urandom(16), 4096)
        zk.create(f"{chroot}/config/users/{user}", json.dumps(
            {"version": 1, "config": {MECHANISM: credential.to_config()}}).encode(), makepath=True)


def start_cluster(cluster_brokers: Callable[..., ClusterBrokers], kazoo_factory: KazooFactory,
                  pki: Pki, per_broker: dict[int, dict[str, str]] | None = None) -> ClusterBrokers:
    brokers = cluster_brokers(count=0)
    store_scram_users(kazoo_factory, brokers.zk_connect)
    brokers.props.update(secured_props(pki))
    for broker_id in (1, 2, 3):  # broker 1 first: the controller
        brokers.start(broker_id, **(per_broker or {}).get(broker_id, {}))
    return brokers


def client_config(brokers: ClusterBrokers, pki: Pki, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": ",".join(p.endpoints["INTERNAL"] for p in brokers.all
                                          if p.is_running()),
            "security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca_cert),
            "sasl.mechanisms": MECHANISM, "sasl.username": "admin",
            "sasl.password": ADMIN_PASSWORD, **extra}


def create_topic(config: dict[str, Any], topic: str, replicas: list[int], **configs: str) -> None:
    admin = AdminClient(config)
    futures = admin.create_topics([NewTopic(topic, num_partitions=1,
                                            replica_assignment=[replicas], config=configs)],
                                  request_timeout=30)
    futures[topic].result(timeout=30)


def partition_state(config: dict[str, Any], topic: str) -> tuple[int, list[int]]:
    """(leader, sorted ISR) of partition 0, as the brokers' metadata says."""
    metadata = AdminClient(config).list_topics(topic, timeout=10)
    partition = metadata.topics[topic].partitions[0]
    return int(partition.leader), sorted(partition.isrs)


def wait_state(config: dict[str, Any], topic: str, leader: int | None, isr: list[int],
               timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    got: tuple[int, list[int]] | None = None
    while time.monotonic() < deadline:
        try:
            got = partition_state(config, topic)
        except Exception:
            got = None
        if got is not None and (leader is None or got[0] == leader) and got[1] == sorted(isr):
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic}-0: wanted leader {leader} ISR {isr}, last seen {got}")


def produce(config: dict[str, Any], topic: str, values: list[bytes]) -> None:
    """acks=all; every record must be acknowledged."""
    failures: list[str] = []
    producer = Producer({**config, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 30000})
    for value in values:
        producer.produce(topic, value, partition=0,
                         on_delivery=lambda err, _m: failures.append(str(err)) if err else None)
    assert producer.flush(40) == 0, "records still in flight after 40 s"
    assert failures == [], failures[:3]


def consume(config: dict[str, Any], topic: str, count: int, timeout_s: float = 30.0) -> list[bytes]:
    consumer = Consumer({**config, "group.id": f"reader-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                out.append(bytes(message.value()))
    finally:
        consumer.close()
    return out


def test_rf3_acks_all_survives_leader_kill_over_sasl_ssl(
        cluster_brokers: Callable[..., ClusterBrokers], kazoo_factory: KazooFactory,
        tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    brokers = start_cluster(cluster_brokers, kazoo_factory, pki)
    config = client_config(brokers, pki)
    create_topic(config, "orders", [2, 3, 1], **{"min.insync.replicas": "2"})
    wait_state(config, "orders", 2, [1, 2, 3])
    values = [f"order-{i}".encode() for i in range(300)]
    produce(config, "orders", values)
    wait_state(config, "orders", 2, [1, 2, 3])  # the followers fetch and stay in sync
    brokers.brokers[2].kill9()
    survivors = client_config(brokers, pki)
    wait_state(survivors, "orders", 3, [1, 3])
    assert consume(survivors, "orders", len(values)) == values
    # The brokers' connections to each other lived through several SASL sessions: each
    # re-authenticated in place (KIP-368) and none was closed as expired.
    for proc in brokers.all:
        assert "its SASL session expired" not in proc.stderr_text(), proc.stderr_text()[-3000:]


def test_broker_with_wrong_inter_broker_password_stays_out_of_the_isr(
        cluster_brokers: Callable[..., ClusterBrokers], kazoo_factory: KazooFactory,
        tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    wrong = secured_props(pki, password="not-the-password")
    brokers = start_cluster(cluster_brokers, kazoo_factory, pki, per_broker={
        3: {"listener.name.internal.scram-sha-512.sasl.jaas.config":
            wrong["listener.name.internal.scram-sha-512.sasl.jaas.config"]}})
    config = client_config(brokers, pki)
    create_topic(config, "payments", [1, 2, 3])
    produce(config, "payments", [b"p-%d" % i for i in range(20)])
    wait_state(config, "payments", 1, [1, 2])  # broker 3 dropped after replica.lag.time.max.ms
    time.sleep(LAG_MS / 1000)
    assert partition_state(config, "payments") == (1, [1, 2]), "broker 3 rejoined the ISR"
    follower_log = brokers.brokers[3].stderr_text()
    assert ("Error in fetch from broker 1: Authentication failed during authentication due to "
            "invalid credentials with SASL mechanism SCRAM-SHA-512") in follower_log, follower_log[-3000:]
    assert "Failed authentication with" in brokers.brokers[1].stderr_text()


def test_peer_host_name_is_checked_against_its_certificate(
        cluster_brokers: Callable[..., ClusterBrokers], kazoo_factory: KazooFactory,
        tmp_path: Path) -> None:
    """Every broker's certificate names another host than the advertised 127.0.0.1: broker
    2 checks it (the default) and cannot fetch; brokers 1 (the controller) and 3 do not."""
    pki = make_pki(tmp_path / "pki", server_hosts=("broker.elsewhere.test",))
    unchecked = {"listener.name.internal.ssl.endpoint.identification.algorithm": ""}
    brokers = start_cluster(cluster_brokers, kazoo_factory, pki,
                            per_broker={1: unchecked, 3: unchecked})
    config = client_config(brokers, pki, **{"ssl.endpoint.identification.algorithm": "none"})
    create_topic(config, "audit", [1, 2, 3])
    produce(config, "audit", [b"a-%d" % i for i in range(20)])
    wait_state(config, "audit", 1, [1, 3])
    time.sleep(LAG_MS / 1000)
    assert partition_state(config, "audit") == (1, [1, 3])
    checked_log = brokers.brokers[2].stderr_text()
    mismatch = "IP address mismatch, certificate is not valid for '127.0.0.1'"
    assert "Error in fetch from broker 1: SSL handshake with node 1 (127.0.0.1:" in checked_log
    assert mismatch in checked_log, checked_log[-3000:]
    assert mismatch not in brokers.brokers[3].stderr_text()


BROKER_DN = "CN=localhost,O=minikafka tests,C=US"  # the certificate every broker presents
ALICE_DN = "CN=alice,OU=clients,O=minikafka tests,C=US"


def test_mutual_tls_between_brokers_with_pem_string_keystores(
        cluster_brokers: Callable[..., ClusterBrokers], tmp_path: Path) -> None:
    """Listeners PLAINTEXT and SSL (``ssl.client.auth=required``); the inter-broker listener
    is chosen by ``security.inter.broker.protocol=SSL`` alone (the listener named SSL, as
    Kafka picks it), and each broker's key store is the PEM strings ``ssl.keystore.key`` /
    ``ssl.keystore.certificate.chain`` (no key file): the brokers present that certificate to
    each other (controller requests, the followers' fetches) and are authorized by its DN as
    a super user. Over PLAINTEXT they would be ANONYMOUS, which may not replicate. With
    min.insync.replicas = 3 an acks=all produce succeeds only when both followers fetch."""
    pki = make_pki(tmp_path / "pki", server_as_client=True)
    brokers = cluster_brokers(count=0)
    brokers.props.update({
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "security.inter.broker.protocol": "SSL",
        "ssl.client.auth": "required",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": pki.server_key.read_text(),
        "ssl.keystore.certificate.chain": pki.server_cert.read_text(),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{BROKER_DN};User:{ALICE_DN}",
        "replica.lag.time.max.ms": str(LAG_MS),
        "offsets.topic.replication.factor": "1",
    })
    for broker_id in (1, 2, 3):
        brokers.start(broker_id)
    alice = pki.client("alice")
    config = {"bootstrap.servers": ",".join(p.endpoints["SSL"] for p in brokers.all),
              "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_cert),
              "ssl.certificate.location": str(alice.cert), "ssl.key.location": str(alice.key)}
    # Every broker knows the three (the controller's UpdateMetadata) before the assignment
    # names them: a broker answers INVALID_REPLICA_ASSIGNMENT for a broker it does not know.
    wait_for(lambda: all(len(AdminClient({**config, "bootstrap.servers": p.endpoints["SSL"]})
                             .list_topics(timeout=10).brokers) == 3 for p in brokers.all),
             timeout_s=30, what="three brokers in every broker's metadata", step_s=0.2)
    create_topic(config, "ledger", [2, 3, 1], **{"min.insync.replicas": "3"})
    values = [b"entry-%d" % i for i in range(50)]
    produce(config, "ledger", values)
    time.sleep(LAG_MS / 1000)
    assert partition_state(config, "ledger") == (2, [1, 2, 3])
    assert consume(config, "ledger", len(values)) == values
    # No broker refused a peer for lack of a certificate. (Other failed handshakes may be
    # logged: a librdkafka client closed while connecting resets its handshake.)
    for proc in brokers.all:
        assert "PEER_DID_NOT_RETURN_A_CERTIFICATE" not in proc.stderr_text(), proc.stderr_text()[-3000:]

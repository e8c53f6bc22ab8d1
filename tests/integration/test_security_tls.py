"""TLS listeners against a real broker with three listeners (PLAINTEXT, SSL with client
certificates requested, MTLS requiring them), PEM key and trust stores made at test time:
every stock client produces and consumes over TLS; each listener advertises its own
endpoint; a client without a certificate on MTLS, and a plaintext client on a TLS port, are
refused with a log line and never get a Kafka response."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from client.config import ClientConfig
from client.errors import ClientError
from client.sync import SyncClient
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import ModuleBrokerFactory
from tests.integration.data_path_client import create_topic
from tests.integration.secure_clients import (
    ClientSecurity,
    aiokafka_round_trip,
    confluent_round_trip,
    java_console_round_trip,
    kafka_python_round_trip,
    values,
)
from tests.tls_certs import Pki, make_pki

pytestmark = pytest.mark.timeout(120)

# ApiVersions v0, correlation id 7, client id "t": a request any Kafka broker answers.
API_VERSIONS_V0 = struct.pack(">ihhih", 10 + 1, 18, 0, 7, 1) + b"t"


@pytest.fixture(scope="module")
def tls_broker(module_broker_factory: ModuleBrokerFactory, pki: Pki) -> BrokerProcess:
    return module_broker_factory("tls-broker", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        **pki.broker_ssl_props(),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
    })


def ssl_client(pki: Pki, cert: str | None = None) -> ClientSecurity:
    if cert is None:
        return ClientSecurity("SSL", ca=pki.ca_cert)
    c = pki.client(cert)
    return ClientSecurity("SSL", ca=pki.ca_cert, cert=c.cert, key=c.key, keystore=c.keystore)


ROUND_TRIPS: dict[str, Callable[..., list[bytes]]] = {
    "kafka-python": kafka_python_round_trip,
    "confluent-kafka": confluent_round_trip,
    "aiokafka": aiokafka_round_trip,
}


@pytest.mark.parametrize("client", sorted(ROUND_TRIPS))
def test_clients_produce_and_consume_over_ssl(tls_broker: BrokerProcess, pki: Pki, client: str) -> None:
    topic = f"ssl-{client}"
    create_topic(tls_broker.bootstrap, topic)
    got = ROUND_TRIPS[client](tls_broker.endpoints["SSL"], topic, ssl_client(pki))
    tag = {"kafka-python": "kp", "confluent-kafka": "ck", "aiokafka": "aio"}[client]
    assert got == values(50, tag)


@pytest.mark.parametrize("client", sorted(ROUND_TRIPS))
def test_clients_with_certificates_over_mtls(tls_broker: BrokerProcess, pki: Pki, client: str) -> None:
    topic = f"mtls-{client}"
    create_topic(tls_broker.bootstrap, topic)
    got = ROUND_TRIPS[client](tls_broker.endpoints["MTLS"], topic, ssl_client(pki, "alice"))
    assert len(got) == 50


@pytest.mark.java
def test_java_console_tools_over_mtls(tls_broker: BrokerProcess, pki: Pki, tmp_path: Path) -> None:
    create_topic(tls_broker.bootstrap, "mtls-java")
    got = java_console_round_trip(tls_broker.endpoints["MTLS"], "mtls-java",
                                  ssl_client(pki, "bob"), tmp_path)
    assert got == values(50, "java")


def test_each_listener_advertises_its_own_endpoint(tls_broker: BrokerProcess, pki: Pki) -> None:
    from confluent_kafka.admin import AdminClient

    for listener, sec in (("PLAINTEXT", ClientSecurity()), ("SSL", ssl_client(pki)),
                          ("MTLS", ssl_client(pki, "alice"))):
        admin = AdminClient({"bootstrap.servers": tls_broker.endpoints[listener], **sec.confluent()})
        brokers = admin.list_topics(timeout=10).brokers
        assert [f"{b.host}:{b.port}" for b in brokers.values()] == [tls_broker.endpoints[listener]]


def _address(endpoint: str) -> tuple[str, int]:
    host, port = endpoint.rsplit(":", 1)
    return host, int(port)


def _wait_for_log(proc: BrokerProcess, text: str, timeout_s: float = 10) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        log = proc.stderr_text()
        if text in log:
            return log
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the broker's log")


def _recv_all(sock: Any, limit: int = 4096) -> bytes:
    data = b""
    try:
        while len(data) < limit:
            chunk = sock.recv(limit)
            if not chunk:
                break
            data += chunk
    except (ssl.SSLError, ConnectionResetError):
        pass
    return data


def test_client_without_certificate_is_refused_on_mtls(tls_broker: BrokerProcess, pki: Pki) -> None:
    before = tls_broker.stderr_text().count("SSL handshake failed")
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    with socket.create_connection(_address(tls_broker.endpoints["MTLS"]), timeout=10) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(API_VERSIONS_V0)  # TLS 1.3: the refusal arrives after the handshake
                assert _recv_all(tls) == b""  # no Kafka response, ever
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            pass
    deadline = time.monotonic() + 10
    while tls_broker.stderr_text().count("SSL handshake failed") == before:
        assert time.monotonic() < deadline, "no log line for the refused handshake"
        time.sleep(0.05)


def test_plaintext_client_on_tls_port_gets_no_kafka_response(tls_broker: BrokerProcess) -> None:
    with socket.create_connection(_address(tls_broker.endpoints["SSL"]), timeout=10) as sock:
        sock.sendall(API_VERSIONS_V0)
        answer = _recv_all(sock)
    # Nothing, or a TLS alert record (content type 21): never a Kafka frame.
    assert answer == b"" or answer[0] == 21
    log = _wait_for_log(tls_broker, "SSL handshake failed")
    assert "Failed authentication with 127.0.0.1" in log
    # The broker still serves everyone else.
    with socket.create_connection(_address(tls_broker.endpoints["PLAINTEXT"]), timeout=10) as sock:
        sock.sendall(API_VERSIONS_V0)
        size = struct.unpack(">i", sock.recv(4))[0]
        assert size > 0


# -- the project's own client (the CLI's, and the brokers' for inter-broker traffic) ----------


def own_ssl_config(pki: Pki, cert: str | None = None, **extra: str) -> ClientConfig:
    props = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
             "ssl.truststore.location": str(pki.ca_cert)}
    if cert is not None:
        props.update({"ssl.keystore.type": "PEM",
                      "ssl.keystore.location": str(pki.client(cert).keystore)})
    return ClientConfig.from_properties({**props, **extra})


def test_own_client_over_ssl_and_mtls(tls_broker: BrokerProcess, pki: Pki) -> None:
    create_topic(tls_broker.bootstrap, "own-ssl")
    with SyncClient(tls_broker.endpoints["SSL"], own_ssl_config(pki)) as client:
        assert "own-ssl" in {t.name for t in client.list_topics()}
    with SyncClient(tls_broker.endpoints["MTLS"], own_ssl_config(pki, "alice")) as client:
        assert "own-ssl" in {t.name for t in client.list_topics()}


def test_own_client_refuses_an_untrusted_broker_and_is_refused_without_a_certificate(
        tls_broker: BrokerProcess, pki: Pki, tmp_path: Path) -> None:
    other = make_pki(tmp_path / "other-ca")  # a CA that did not sign the broker's certificate
    untrusted = ClientConfig.from_properties({
        "security.protocol": "SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(other.ca_cert)})
    with pytest.raises(ClientError) as refused, SyncClient(tls_broker.endpoints["SSL"], untrusted) as client:
        client.list_topics()
    assert refused.value.error_name == "SSL_AUTHENTICATION_FAILED" and not refused.value.retriable
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
    with pytest.raises(ClientError) as refused, \
            SyncClient(tls_broker.endpoints["MTLS"], own_ssl_config(pki)) as client:
        client.list_topics()
    assert refused.value.error_name in ("SSL_AUTHENTICATION_FAILED", "NETWORK_EXCEPTION")
    jks_default = ClientConfig.from_properties({"security.protocol": "SSL",
                                                "ssl.truststore.location": str(pki.ca_cert)})
    with pytest.raises(ClientError, match="PEM only"), \
            SyncClient(tls_broker.endpoints["SSL"], jks_default) as client:
        client.list_topics()

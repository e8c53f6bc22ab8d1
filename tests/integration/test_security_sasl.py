"""SASL against a real broker: listeners SASL_PLAINTEXT, SASL_SSL and REAUTH (SASL_PLAINTEXT
with connections.max.reauth.ms) with PLAIN (JAAS users) and SCRAM-SHA-256/512 (credentials
created with AlterUserScramCredentials); every stock client produces and consumes with each
mechanism; wrong passwords, unknown users, unknown mechanisms, requests before
authentication and expired sessions get Kafka's answers and are never served; re-
authentication keeps a librdkafka client connected; random bytes on the port never
authenticate."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import scramp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli import topics as topics_cli
from client.config import ClientConfig
from client.errors import ClientError
from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from protocol.records import NewRecord, build_batch, iter_batches
from protocol.topic_partition import TopicPartition
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import ModuleBrokerFactory
from tests.integration.data_path_client import create_topic
from tests.integration.netclient import ConnectionClosed, RawClient
from tests.integration.secure_clients import (
    ClientSecurity,
    aiokafka_round_trip,
    confluent_round_trip,
    java_console_round_trip,
    kafka_python_round_trip,
    values,
)
from tests.tls_certs import Pki

pytestmark = pytest.mark.timeout(180)

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required;'
REAUTH_MS = 1500
PASSWORDS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
             "SCRAM-SHA-512": ("bob", "bob-secret")}


@pytest.fixture(scope="module")
def sasl_broker(module_broker_factory: ModuleBrokerFactory, pki: Pki) -> BrokerProcess:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
                     "SASL_SSL://127.0.0.1:0,REAUTH://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,REAUTH:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server_keystore),
    }
    for listener in ("sasl_plaintext", "sasl_ssl", "reauth"):
        for mechanism in MECHANISMS:
            props[f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"] = (
                PLAIN_JAAS if mechanism == "PLAIN" else SCRAM_JAAS)
    proc = module_broker_factory("sasl-broker", props)
    _create_scram_users(proc.endpoints["PLAINTEXT"])
    return proc


def _create_scram_users(bootstrap: str) -> None:
    """bob for both SCRAM mechanisms, through the Java-compatible admin API (librdkafka's)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret"),
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"bob-secret"),
    ])
    for future in futures.values():
        assert future.result(timeout=10) is None
    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(timeout=10)
    infos = sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos)
    assert infos == [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)]


def sasl(protocol: str, mechanism: str, pki: Pki | None = None,
         password: str | None = None) -> ClientSecurity:
    username, right = PASSWORDS[mechanism]
    return ClientSecurity(protocol, ca=pki.ca_cert if pki else None, mechanism=mechanism,
                          username=username, password=right if password is None else password)


ROUND_TRIPS: dict[str, tuple[Callable[..., list[bytes]], str]] = {
    "kafka-python": (kafka_python_round_trip, "kp"),
    "confluent-kafka": (confluent_round_trip, "ck"),
    "aiokafka": (aiokafka_round_trip, "aio"),
}


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("client", sorted(ROUND_TRIPS))
def test_clients_over_sasl_plaintext(sasl_broker: BrokerProcess, client: str, mechanism: str) -> None:
    topic = f"sasl-{client}-{mechanism}"
    create_topic(sasl_broker.bootstrap, topic)
    round_trip, tag = ROUND_TRIPS[client]
    got = round_trip(sasl_broker.endpoints["SASL_PLAINTEXT"], topic, sasl("SASL_PLAINTEXT", mechanism))
    assert got == values(50, tag)


@pytest.mark.parametrize("client", sorted(ROUND_TRIPS))
def test_clients_over_sasl_ssl(sasl_broker: BrokerProcess, pki: Pki, client: str) -> None:
    topic = f"sasl-ssl-{client}"
    create_topic(sasl_broker.bootstrap, topic)
    round_trip, tag = ROUND_TRIPS[client]
    mechanism = {"kafka-python": "SCRAM-SHA-512", "confluent-kafka": "PLAIN",
                 "aiokafka": "SCRAM-SHA-256"}[client]
    got = round_trip(sasl_broker.endpoints["SASL_SSL"], topic, sasl("SASL_SSL", mechanism, pki))
    assert got == values(50, tag)


@pytest.mark.java
@pytest.mark.parametrize(("listener", "mechanism"), [("SASL_PLAINTEXT", "SCRAM-SHA-256"),
                                                     ("SASL_SSL", "SCRAM-SHA-512")])
def test_java_console_tools(sasl_broker: BrokerProcess, pki: Pki, tmp_path: Path, listener: str,
                            mechanism: str) -> None:
    topic = f"java-{listener}"
    create_topic(sasl_broker.bootstrap, topic)
    sec = sasl(listener, mechanism, pki if listener == "SASL_SSL" else None)
    assert java_console_round_trip(sasl_broker.endpoints[listener], topic, sec, tmp_path) == \
        values(50, "java")


@pytest.mark.java
def test_kafka_configs_adds_a_scram_user(sasl_broker: BrokerProcess) -> None:
    """Kafka's own kafka-configs (ConfigCommand) creates a SCRAM user; the user logs in."""
    from tests.integration.secure_clients import java

    done = java("kafka.admin.ConfigCommand", [
        "--bootstrap-server", sasl_broker.endpoints["PLAINTEXT"], "--alter", "--add-config",
        "SCRAM-SHA-512=[iterations=4096,password=ivy-secret]", "--entity-type", "users",
        "--entity-name", "ivy"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Completed updating config for user ivy." in done.stdout
    with RawClient(sasl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        assert handshake(client, "SCRAM-SHA-512").error_code == 0
        scram = scramp.ScramClient(["SCRAM-SHA-512"], "ivy", "ivy-secret")
        first = authenticate(client, scram.get_client_first().encode())
        scram.set_server_first(bytes(first.auth_bytes).decode())
        assert authenticate(client, scram.get_client_final().encode()).error_code == 0


# -- raw exchanges: Kafka's exact answers ---------------------------------------------------------

def handshake(client: RawClient, mechanism: str, version: int = 1) -> SaslHandshakeResponse:
    _cid, body = client.request(17, version, SaslHandshakeRequest(mechanism=mechanism))
    assert isinstance(body, SaslHandshakeResponse)
    return body


def authenticate(client: RawClient, token: bytes, version: int = 2) -> SaslAuthenticateResponse:
    _cid, body = client.request(36, version, SaslAuthenticateRequest(auth_bytes=token))
    assert isinstance(body, SaslAuthenticateResponse)
    return body


def plain_login(client: RawClient, user: str, password: str) -> SaslAuthenticateResponse:
    assert handshake(client, "PLAIN").error_code == 0
    return authenticate(client, f"\0{user}\0{password}".encode())


def metadata_is_served(client: RawClient) -> bool:
    try:
        _cid, body = client.request(3, 1, MetadataRequest(topics=None))
    except (ConnectionClosed, ConnectionResetError, TimeoutError):
        return False
    return isinstance(body, MetadataResponse)


def test_api_versions_answered_before_authentication(sasl_broker: BrokerProcess) -> None:
    with RawClient(sasl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        _cid, body = client.request(18, 3, ApiVersionsRequest(client_software_name="t",
                                                              client_software_version="1"))
        assert isinstance(body, ApiVersionsResponse) and body.error_code == 0
        assert {17, 36, 50, 51} <= {k.api_key for k in body.api_keys}
        response = plain_login(client, "alice", "alice-secret")
        assert response.error_code == 0 and response.session_lifetime_ms == 0
        assert metadata_is_served(client)


def test_wrong_password_is_refused_after_the_delay(sasl_broker: BrokerProcess) -> None:
    with RawClient(sasl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        started = time.monotonic()
        response = plain_login(client, "alice", "wrong")
        waited_s = time.monotonic() - started
        assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert waited_s >= 0.09  # connection.failed.authentication.delay.ms (100)
        assert client.is_closed_by_peer()
    assert "Failed authentication with 127.0.0.1" in sasl_broker.stderr_text()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize(("user", "password"), [("bob", "wrong"), ("nobody", "bob-secret")])
def test_scram_wrong_password_or_unknown_user(sasl_broker: BrokerProcess, mechanism: str,
                                              user: str, password: str) -> None:
    with RawClient(sasl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        assert handshake(client, mechanism).error_code == 0
        scram = scramp.ScramClient([mechanism], user, password)
        response = authenticate(client, scram.get_client_first().encode())
        if response.error_code == 0:
            scram.set_server_first(bytes(response.auth_bytes).decode())
            response = authenticate(client, scram.get_client_final().encode())
        assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert response.error_message == ("Authentication failed during authentication due to "
                                           f"invalid credentials with SASL mechanism {mechanism}")
        assert client.is_closed_by_peer()


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_client_with_wrong_password_gets_an_authentication_error(sasl_broker: BrokerProcess,
                                                                 pki: Pki, protocol: str) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    sec = sasl(protocol, "SCRAM-SHA-256", pki if protocol == "SASL_SSL" else None, password="nope")
    producer = Producer({"bootstrap.servers": sasl_broker.endpoints[protocol],
                         "error_cb": errors.append, **sec.confluent()})
    producer.produce("never", b"x")
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed during authentication due to invalid credentials" in errors[0].str()
    producer.purge()


def test_unsupported_mechanism(sasl_broker: BrokerProcess) -> None:
    with RawClient(sasl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        response = handshake(client, "GSSAPI")
        assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert response.mechanisms == list(MECHANISMS)
        assert client.is_closed_by_peer()


@pytest.mark.parametrize("api_key", [3, 0, 1, 19, 36])
def test_request_before_authentication_closes_without_answer(sasl_broker: BrokerProcess,
                                                             api_key: int) -> None:
    with RawClient(sasl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        client.send(struct.pack(">ihhih", 10, api_key, 0, 99, -1))
        assert client.is_closed_by_peer()
    assert f"Unexpected Kafka request of type {api_key} (version 0) during SASL handshake" in \
        sasl_broker.stderr_text()


def test_handshake_v0_raw_tokens(sasl_broker: BrokerProcess) -> None:
    with RawClient(sasl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        assert handshake(client, "PLAIN", version=0).error_code == 0
        token = b"\0alice\0alice-secret"
        client.send(struct.pack(">i", len(token)) + token)
        assert client.recv_frame() == b""  # PLAIN answers an empty token
        assert metadata_is_served(client)


def test_oversized_frame_before_authentication_closes(sasl_broker: BrokerProcess) -> None:
    with RawClient(sasl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        client.send(struct.pack(">i", 524288 + 1) + b"\0" * 1024)
        assert client.is_closed_by_peer()


def test_sasl_requests_on_a_plaintext_listener_get_illegal_sasl_state(sasl_broker: BrokerProcess) -> None:
    with RawClient(sasl_broker.endpoints["PLAINTEXT"]) as client:
        assert handshake(client, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        response = authenticate(client, b"\0alice\0alice-secret")
        assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert metadata_is_served(client)


# -- sessions: expiry and re-authentication -------------------------------------------------------

def test_expired_session_is_closed(sasl_broker: BrokerProcess) -> None:
    with RawClient(sasl_broker.endpoints["REAUTH"]) as client:
        response = plain_login(client, "alice", "alice-secret")
        assert response.error_code == 0 and response.session_lifetime_ms == REAUTH_MS
        assert metadata_is_served(client)
        time.sleep(REAUTH_MS / 1000 + 0.2)
        assert not metadata_is_served(client)
    assert "its SASL session expired" in sasl_broker.stderr_text()


def test_reauthentication_keeps_the_connection(sasl_broker: BrokerProcess) -> None:
    with RawClient(sasl_broker.endpoints["REAUTH"]) as client:
        plain_login(client, "alice", "alice-secret")
        time.sleep(1.1)  # re-authentication at most once a second
        again = plain_login(client, "alice", "alice-secret")
        assert again.error_code == 0 and again.session_lifetime_ms == REAUTH_MS
        time.sleep(0.6)  # past the first session's end, inside the second's
        assert metadata_is_served(client)


def test_reauthentication_as_another_user_fails(sasl_broker: BrokerProcess) -> None:
    with RawClient(sasl_broker.endpoints["REAUTH"]) as client:
        plain_login(client, "alice", "alice-secret")
        time.sleep(1.1)
        response = plain_login(client, "admin", "admin-secret")
        assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert response.error_message == ("Cannot change principals during re-authentication "
                                          "from User.alice: User.admin")
        assert client.is_closed_by_peer()


def test_librdkafka_reauthenticates(sasl_broker: BrokerProcess) -> None:
    """A producer kept busy for three session lifetimes: librdkafka re-authenticates (KIP-368)
    before each expiry, so the broker never closes an expired session."""
    from confluent_kafka import Producer

    create_topic(sasl_broker.bootstrap, "reauth")
    before = sasl_broker.stderr_text().count("its SASL session expired")
    sec = sasl("SASL_PLAINTEXT", "SCRAM-SHA-256")
    producer = Producer({"bootstrap.servers": sasl_broker.endpoints["REAUTH"], "linger.ms": 0,
                         **sec.confluent()})
    errors: list[Any] = []
    delivered = 0
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    while time.monotonic() < deadline:
        producer.produce("reauth", b"x", on_delivery=lambda err, _m: errors.append(err) if err else None)
        assert producer.flush(10) == 0
        delivered += 1
        time.sleep(0.05)
    assert errors == [] and delivered > 20
    assert sasl_broker.stderr_text().count("its SASL session expired") == before


# -- SCRAM credential administration: Kafka's error codes -----------------------------------------

def test_alter_and_describe_user_scram_credentials_errors(sasl_broker: BrokerProcess) -> None:
    Upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    Delete = AlterUserScramCredentialsRequest.ScramCredentialDeletion
    salt = b"0123456789abcdef"
    salted_pw = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)  # what a client sends
    request = AlterUserScramCredentialsRequest(
        deletions=[Delete(name="carol", mechanism=1), Delete(name="", mechanism=1)],
        upsertions=[Upsert(name="dave", mechanism=1, iterations=4096, salt=salt, salted_password=salted_pw),
                    Upsert(name="erin", mechanism=9, iterations=4096, salt=salt, salted_password=salted_pw),
                    Upsert(name="frank", mechanism=2, iterations=100, salt=salt, salted_password=salted_pw),
                    Upsert(name="gina", mechanism=2, iterations=20000, salt=salt, salted_password=salted_pw),
                    Upsert(name="hal", mechanism=1, iterations=4096, salt=salt, salted_password=salted_pw),
                    Upsert(name="hal", mechanism=1, iterations=4096, salt=salt, salted_password=salted_pw)])
    with RawClient(sasl_broker.endpoints["PLAINTEXT"]) as client:
        _cid, body = client.request(51, 0, request)
        assert isinstance(body, AlterUserScramCredentialsResponse)
        got = {r.user: (r.error_code, r.error_message) for r in body.results}
        assert got == {
            "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            "erin": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            "frank": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            "gina": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            "hal": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
            "carol": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
            "dave": (0, ""),
        }
        _cid, described = client.request(50, 0, DescribeUserScramCredentialsRequest(users=[
            DescribeUserScramCredentialsRequest.UserName("dave"),
            DescribeUserScramCredentialsRequest.UserName("nobody"),
            DescribeUserScramCredentialsRequest.UserName("bob"),
            DescribeUserScramCredentialsRequest.UserName("bob")]))
        assert isinstance(described, DescribeUserScramCredentialsResponse)
        by_user = {r.user: r for r in described.results}
        assert [(i.mechanism, i.iterations) for i in by_user["dave"].credential_infos] == [(1, 4096)]
        assert by_user["nobody"].error_code == ErrorCode.RESOURCE_NOT_FOUND
        assert by_user["bob"].error_code == ErrorCode.DUPLICATE_RESOURCE
    # dave logs in with the password whose salted form was stored.
    with RawClient(sasl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        assert handshake(client, "SCRAM-SHA-256").error_code == 0
        scram = scramp.ScramClient(["SCRAM-SHA-256"], "dave", "pw")
        first = authenticate(client, scram.get_client_first().encode())
        scram.set_server_first(bytes(first.auth_bytes).decode())
        final = authenticate(client, scram.get_client_final().encode())
        assert final.error_code == 0
        scram.set_server_final(bytes(final.auth_bytes).decode())


# -- fuzzing the exchange on the real port ---------------------------------------------------------

def _frames(data: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(d)) + d for d in data)


HANDSHAKE_V1_PLAIN = struct.pack(">hhih", 17, 1, 1, -1) + struct.pack(">h", 5) + b"PLAIN"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=120), min_size=1, max_size=4), st.booleans())
def test_fuzzed_exchanges_never_authenticate(sasl_broker: BrokerProcess, tokens: list[bytes],
                                             after_handshake: bool) -> None:
    """Random frames (after a valid PLAIN handshake, or from the start), then a Metadata
    request: it is never answered, and the broker keeps serving others."""
    data = _frames(([HANDSHAKE_V1_PLAIN] if after_handshake else []) + tokens)
    with RawClient(sasl_broker.endpoints["SASL_PLAINTEXT"], timeout_s=5) as client:
        try:
            client.send(data)
            _cid, metadata = client.frame(3, 1, MetadataRequest(topics=None), correlation_id=4242)
            client.send(metadata)
            client.sock.settimeout(2)
            while True:
                frame = client.recv_frame()
                assert struct.unpack_from(">i", frame)[0] != 4242, "a request was served"
        except (ConnectionClosed, ConnectionResetError, BrokenPipeError, TimeoutError):
            pass
    assert sasl_broker.is_running()


def test_broker_still_serves_after_the_fuzzing(sasl_broker: BrokerProcess) -> None:
    with RawClient(sasl_broker.endpoints["SASL_PLAINTEXT"]) as client:
        assert plain_login(client, "alice", "alice-secret").error_code == 0
        assert metadata_is_served(client)


# -- the project's own client (the CLI's, and the brokers' for inter-broker traffic) ----------


def own_client_props(protocol: str, mechanism: str, pki: Pki | None = None,
                     password: str | None = None) -> dict[str, str]:
    """Kafka client properties, as a user writes them in a --command-config file."""
    user, right = PASSWORDS[mechanism]
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    props = {"security.protocol": protocol, "sasl.mechanism": mechanism,
             "sasl.jaas.config": f'{module} required username="{user}" '
                                 f'password="{right if password is None else password}";'}
    if pki is not None:
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert)})
    return props


@pytest.mark.parametrize(("protocol", "mechanism"), [
    ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512")])
def test_own_client_and_cli_over_sasl(sasl_broker: BrokerProcess, pki: Pki, tmp_path: Path,
                                      protocol: str, mechanism: str) -> None:
    props = own_client_props(protocol, mechanism, pki if protocol == "SASL_SSL" else None)
    endpoint = sasl_broker.endpoints[protocol]
    topic = f"own-{protocol}-{mechanism}".lower()
    config_file = tmp_path / "client.properties"
    config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    out = io.StringIO()
    assert topics_cli.main(["--bootstrap-server", endpoint, "--command-config", str(config_file),
                            "--create", "--topic", topic, "--partitions", "1"], out=out) == 0, out.getvalue()
    with SyncClient(endpoint, ClientConfig.from_properties(props)) as client:
        tp = TopicPartition(topic, 0)
        produced = client.produce(tp, build_batch([NewRecord(b"k", b"over " + protocol.encode(), (), None)]))
        assert produced is not None and produced.base_offset == 0
        fetched = client.fetch(tp, 0)
        assert [r.value for b in iter_batches(fetched.records) for r in b.records()] == [
            b"over " + protocol.encode()]
    out = io.StringIO()
    assert topics_cli.main(["--bootstrap-server", endpoint, "--command-config", str(config_file),
                            "--list"], out=out) == 0
    assert topic in out.getvalue().split()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_own_client_with_a_wrong_password_gets_the_brokers_refusal(sasl_broker: BrokerProcess,
                                                                   mechanism: str) -> None:
    props = own_client_props("SASL_PLAINTEXT", mechanism, password="wrong")
    started = time.monotonic()
    with pytest.raises(ClientError) as refused, \
            SyncClient(sasl_broker.endpoints["SASL_PLAINTEXT"], ClientConfig.from_properties(props)) as client:
        client.list_topics()
    assert refused.value.error_name == "SASL_AUTHENTICATION_FAILED" and not refused.value.retriable
    assert time.monotonic() - started < 10, "an authentication failure is not retried"


def broker_peer_ports(proc: BrokerProcess, endpoint: str) -> set[int]:
    """The client ports of the broker process's established TCP connections on ``endpoint``'s
    port (its sockets, from /proc: the server's view of which connections exist)."""
    inodes = set()
    for fd in Path(f"/proc/{proc.pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    port = int(endpoint.rsplit(":", 1)[1])
    peers = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state == "01" and inode in inodes and int(local.rsplit(":", 1)[1], 16) == port:
                peers.add(int(remote.rsplit(":", 1)[1], 16))
    return peers


def test_own_client_reauthenticates_on_the_same_connection(sasl_broker: BrokerProcess) -> None:
    """The project's client (the CLI's and the brokers' own) held for over two session
    lifetimes, busy and then idle past the session's end: it re-authenticates on the same
    socket (KIP-368), every request is answered, and the broker closes no expired session.
    (PLAIN here; the brokers' own connections re-authenticate with SCRAM-SHA-512 in
    tests/cluster/test_inter_broker_security.py.)"""
    endpoint = sasl_broker.endpoints["REAUTH"]
    expired_before = sasl_broker.stderr_text().count("its SASL session expired")
    props = own_client_props("SASL_PLAINTEXT", "PLAIN")
    with SyncClient(endpoint, ClientConfig.from_properties(props)) as client:
        node = sasl_broker.broker_id
        client.send(MetadataRequest(topics=[]), node_id=node)
        conn = client.run(client.client.connection(node))
        peers = broker_peer_ports(sasl_broker, endpoint)  # this one and the bootstrap one
        assert peers, "the broker holds no connection from the client"
        deadline = time.monotonic() + 1.5 * REAUTH_MS / 1000
        while time.monotonic() < deadline:  # busy: one re-authentication
            assert isinstance(client.send(MetadataRequest(topics=[]), node_id=node), MetadataResponse)
            time.sleep(0.05)
        time.sleep(1.2 * REAUTH_MS / 1000)  # idle past the session's end: another
        assert isinstance(client.send(MetadataRequest(topics=[]), node_id=node), MetadataResponse)
        assert client.run(client.client.connection(node)) is conn and not conn.closed
        assert conn.reauthentications >= 2
        assert broker_peer_ports(sasl_broker, endpoint) == peers
    assert sasl_broker.stderr_text().count("its SASL session expired") == expired_before


def test_own_client_settings_refused_before_connecting() -> None:
    for props, message in (
            ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"},
             "sasl.mechanism=GSSAPI is not supported"),
            ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
             "sasl.jaas.config must be set"),
            ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required;"},
             "username and password are required")):
        with pytest.raises(ClientError, match=message) as refused:
            ClientConfig.from_properties(props)
        assert refused.value.error_name == "INVALID_CONFIG"

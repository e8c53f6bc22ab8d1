"""The SASL authenticator (sans-IO) against real SASL clients' bytes: scramp's SCRAM client,
PLAIN tokens, Kafka's frames; failures answered as Kafka answers them; re-authentication
(KIP-368) with a controlled clock; JAAS parsing; and fuzzing: no byte sequence raises or
authenticates."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import scramp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.handlers.api_versions import answer_before_authentication
from broker.security.credentials import CredentialStore, ScramCredential
from broker.security.entity_store import LocalEntityConfigStore, user_entity
from broker.security.jaas import JaasError, parse, parse_one
from broker.security.principal import user
from broker.security.sasl.authenticator import SaslAuthenticator, SaslSettings, State, Step
from protocol.errors import ErrorCode
from protocol.frames import RequestHeader, decode_response, encode_request
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.metadata import MetadataRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class Clock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns

    def advance_ms(self, ms: int) -> None:
        self.ns += ms * 1_000_000


@pytest.fixture
def store(tmp_path: Path) -> CredentialStore:
    entities = LocalEntityConfigStore.load(tmp_path)
    entities.alter_now({user_entity("bob"): {
        m: ScramCredential.from_password(m, "bob-secret", b"salt-" + m.encode(), 4096).to_config()
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}})
    return CredentialStore(entities)


def make(store: CredentialStore, clock: Clock | None = None, reauth_ms: int = 0) -> SaslAuthenticator:
    settings = SaslSettings("SASL", MECHANISMS, {"alice": "alice-secret"},
                            dict.fromkeys(MECHANISMS, reauth_ms), 524288)
    return SaslAuthenticator(settings, store,
                             lambda v, r: answer_before_authentication(v, r, "test"),
                             clock_ns=clock or Clock())


def frame(api_key: int, version: int, body: object, correlation_id: int = 1) -> bytes:
    return encode_request(RequestHeader(api_key, version, correlation_id, "test"), body)[4:]  # type: ignore[arg-type]


def reply_of(step: Step, api_key: int, version: int) -> object:
    assert step.reply is not None and step.failure is None, step
    assert struct.unpack(">i", step.reply[:4])[0] == len(step.reply) - 4
    return decode_response(step.reply[4:], api_key, version)[1]


def handshake(auth: SaslAuthenticator, mechanism: str, version: int = 1) -> SaslHandshakeResponse:
    response = reply_of(auth.receive(frame(17, version, SaslHandshakeRequest(mechanism=mechanism))),
                        17, version)
    assert isinstance(response, SaslHandshakeResponse)
    return response


def authenticate(auth: SaslAuthenticator, token: bytes, version: int = 2) -> Step:
    return auth.receive(frame(36, version, SaslAuthenticateRequest(auth_bytes=token)))


def plain(auth: SaslAuthenticator, username: str, password: str, version: int = 2) -> Step:
    handshake(auth, "PLAIN")
    return authenticate(auth, f"\0{username}\0{password}".encode(), version)


def scram(auth: SaslAuthenticator, mechanism: str, username: str, password: str) -> Step:
    handshake(auth, mechanism)
    client = scramp.ScramClient([mechanism], username, password)
    first = authenticate(auth, client.get_client_first().encode())
    response = reply_of(first, 36, 2)
    assert isinstance(response, SaslAuthenticateResponse) and response.error_code == 0
    client.set_server_first(bytes(response.auth_bytes).decode())
    final = authenticate(auth, client.get_client_final().encode())
    if final.failure is None:
        body = reply_of(final, 36, 2)
        assert isinstance(body, SaslAuthenticateResponse)
        client.set_server_final(bytes(body.auth_bytes).decode())  # verifies the server signature
    return final


def failed_answer(step: Step, api_key: int, version: int) -> object:
    assert step.failure is not None and step.failure.reply is not None
    return decode_response(step.failure.reply[4:], api_key, version)[1]


# -- successful exchanges --------------------------------------------------------------------

def test_api_versions_then_plain(store: CredentialStore) -> None:
    auth = make(store)
    versions = reply_of(auth.receive(frame(18, 3, ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))), 18, 3)
    assert isinstance(versions, ApiVersionsResponse) and versions.error_code == 0
    assert {k.api_key for k in versions.api_keys} >= {17, 18, 36}
    step = plain(auth, "alice", "alice-secret")
    assert step.authenticated == user("alice") and auth.complete
    body = reply_of(step, 36, 2)
    assert isinstance(body, SaslAuthenticateResponse) and body.error_code == 0
    assert body.session_lifetime_ms == 0 and auth.session_expiry_ns is None


def test_handshake_lists_the_enabled_mechanisms(store: CredentialStore) -> None:
    assert handshake(make(store), "PLAIN").mechanisms == list(MECHANISMS)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram(store: CredentialStore, mechanism: str) -> None:
    auth = make(store)
    step = scram(auth, mechanism, "bob", "bob-secret")
    assert step.authenticated == user("bob") and auth.mechanism == mechanism


def test_plain_v0_raw_tokens(store: CredentialStore) -> None:
    auth = make(store)
    handshake(auth, "PLAIN", version=0)
    step = auth.receive(b"\0alice\0alice-secret")  # a bare token, no Kafka header
    assert step.authenticated == user("alice") and step.reply == b"\0\0\0\0"


def test_scram_v0_raw_tokens(store: CredentialStore) -> None:
    auth = make(store)
    handshake(auth, "SCRAM-SHA-256", version=0)
    client = scramp.ScramClient(["SCRAM-SHA-256"], "bob", "bob-secret")
    first = auth.receive(client.get_client_first().encode())
    assert first.reply is not None
    client.set_server_first(first.reply[4:].decode())
    final = auth.receive(client.get_client_final().encode())
    assert final.authenticated == user("bob") and final.reply is not None
    client.set_server_final(final.reply[4:].decode())


# -- failures ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("username", "password", "message"), [
    ("alice", "wrong", "Authentication failed: Invalid username or password"),
    ("nobody", "alice-secret", "Authentication failed: Invalid username or password"),
    ("", "x", "Authentication failed: username not specified"),
    ("alice", "", "Authentication failed: password not specified"),
])
def test_plain_failures(store: CredentialStore, username: str, password: str, message: str) -> None:
    auth = make(store)
    step = plain(auth, username, password)
    body = failed_answer(step, 36, 2)
    assert isinstance(body, SaslAuthenticateResponse)
    assert (body.error_code, body.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, message)
    assert step.failure is not None and step.failure.delayed and auth.state is State.FAILED


def test_plain_authorization_id_must_be_the_user(store: CredentialStore) -> None:
    auth = make(store)
    handshake(auth, "PLAIN")
    body = failed_answer(authenticate(auth, b"admin\0alice\0alice-secret"), 36, 2)
    assert isinstance(body, SaslAuthenticateResponse)
    assert body.error_message == ("Authentication failed: Client requested an authorization id "
                                  "that is different from username")


@pytest.mark.parametrize(("username", "password"), [("bob", "wrong"), ("nobody", "bob-secret")])
def test_scram_failures_do_not_say_which(store: CredentialStore, username: str, password: str) -> None:
    auth = make(store)
    handshake(auth, "SCRAM-SHA-512")
    client = scramp.ScramClient(["SCRAM-SHA-512"], username, password)
    step = authenticate(auth, client.get_client_first().encode())
    if step.failure is None:  # a known user: the proof is refused in the final message
        body = reply_of(step, 36, 2)
        assert isinstance(body, SaslAuthenticateResponse)
        client.set_server_first(bytes(body.auth_bytes).decode())
        step = authenticate(auth, client.get_client_final().encode())
    body = failed_answer(step, 36, 2)
    assert isinstance(body, SaslAuthenticateResponse)
    assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert body.error_message == ("Authentication failed during authentication due to invalid "
                                  "credentials with SASL mechanism SCRAM-SHA-512")
    assert not auth.complete


def test_unsupported_mechanism(store: CredentialStore) -> None:
    auth = make(store)
    step = auth.receive(frame(17, 1, SaslHandshakeRequest(mechanism="GSSAPI")))
    body = failed_answer(step, 17, 1)
    assert isinstance(body, SaslHandshakeResponse)
    assert body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and body.mechanisms == list(MECHANISMS)


@pytest.mark.parametrize("api_key", [3, 0, 1, 36])  # Metadata, Produce, Fetch, SaslAuthenticate
def test_other_requests_before_authentication_fail_without_answer(store: CredentialStore,
                                                                   api_key: int) -> None:
    auth = make(store)
    step = auth.receive(struct.pack(">hhih", api_key, 0, 5, -1))
    assert step.failure is not None and step.failure.reply is None and step.authenticated is None
    assert "Unexpected Kafka request" in step.failure.reason


def test_request_during_authenticate_state_fails(store: CredentialStore) -> None:
    auth = make(store)
    handshake(auth, "PLAIN")
    step = auth.receive(frame(3, 1, MetadataRequest(topics=None)))
    assert step.failure is not None and not auth.complete


def test_api_versions_only_first(store: CredentialStore) -> None:
    auth = make(store)
    auth.receive(frame(18, 0, ApiVersionsRequest()))
    assert auth.receive(frame(18, 0, ApiVersionsRequest())).failure is not None


# -- sessions and re-authentication ------------------------------------------------------------

def test_session_lifetime_and_expiry(store: CredentialStore) -> None:
    clock = Clock()
    auth = make(store, clock, reauth_ms=5000)
    step = plain(auth, "alice", "alice-secret")
    body = reply_of(step, 36, 2)
    assert isinstance(body, SaslAuthenticateResponse) and body.session_lifetime_ms == 5000
    clock.advance_ms(5000)
    assert not auth.session_expired()
    clock.advance_ms(1)
    assert auth.session_expired()


def test_v0_authenticate_gets_no_lifetime_but_still_expires(store: CredentialStore) -> None:
    clock = Clock()
    auth = make(store, clock, reauth_ms=1000)
    body = reply_of(plain(auth, "alice", "alice-secret", version=0), 36, 0)
    assert isinstance(body, SaslAuthenticateResponse) and body.session_lifetime_ms == 0
    clock.advance_ms(1001)
    assert auth.session_expired()


def reauth_handshake(auth: SaslAuthenticator, mechanism: str) -> bool:
    data = frame(17, 1, SaslHandshakeRequest(mechanism=mechanism))
    if not auth.begins_reauthentication(data):
        return False
    assert reply_of(auth.receive(data), 17, 1) is not None
    return True


def test_reauthentication(store: CredentialStore) -> None:
    clock = Clock()
    auth = make(store, clock, reauth_ms=5000)
    plain(auth, "alice", "alice-secret")
    clock.advance_ms(4000)
    assert reauth_handshake(auth, "PLAIN")
    step = authenticate(auth, b"\0alice\0alice-secret")
    assert step.authenticated == user("alice") and auth.complete
    clock.advance_ms(4000)
    assert not auth.session_expired()  # the new session runs from the re-authentication
    clock.advance_ms(500)
    assert reauth_handshake(auth, "PLAIN")  # more than a second after the last one: allowed


def test_reauthentication_at_most_once_a_second(store: CredentialStore) -> None:
    clock = Clock()
    auth = make(store, clock, reauth_ms=5000)
    plain(auth, "alice", "alice-secret")
    assert reauth_handshake(auth, "PLAIN")
    authenticate(auth, b"\0alice\0alice-secret")
    clock.advance_ms(500)
    assert not auth.begins_reauthentication(frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN")))


def test_no_reauthentication_without_a_session_lifetime(store: CredentialStore) -> None:
    auth = make(store, Clock(), reauth_ms=0)
    plain(auth, "alice", "alice-secret")
    assert not auth.begins_reauthentication(frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN")))


def test_reauthentication_cannot_change_principal(store: CredentialStore) -> None:
    auth = make(store, Clock(), reauth_ms=5000)
    plain(auth, "alice", "alice-secret")
    assert reauth_handshake(auth, "SCRAM-SHA-256")
    body = failed_answer(authenticate(auth, b"x"), 36, 2)
    assert isinstance(body, SaslAuthenticateResponse)
    assert "not supported for re-authentication of mechanism 'PLAIN'" in str(body.error_message)

    auth = make(store, Clock(), reauth_ms=5000)
    scram(auth, "SCRAM-SHA-256", "bob", "bob-secret")
    assert reauth_handshake(auth, "SCRAM-SHA-256")
    entities = store.entities
    entities.alter_now({user_entity("carol"): {"SCRAM-SHA-256": ScramCredential.from_password(
        "SCRAM-SHA-256", "c", b"salt-for-carol", 4096).to_config()}})
    step = scram_continue(auth, "SCRAM-SHA-256", "carol", "c")
    body = failed_answer(step, 36, 2)
    assert isinstance(body, SaslAuthenticateResponse)
    assert body.error_message == ("Cannot change principals during re-authentication from "
                                  "User.bob: User.carol")


def scram_continue(auth: SaslAuthenticator, mechanism: str, username: str, password: str) -> Step:
    client = scramp.ScramClient([mechanism], username, password)
    response = reply_of(authenticate(auth, client.get_client_first().encode()), 36, 2)
    assert isinstance(response, SaslAuthenticateResponse)
    client.set_server_first(bytes(response.auth_bytes).decode())
    return authenticate(auth, client.get_client_final().encode())


# -- fuzzing ------------------------------------------------------------------------------------

@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=6))
def test_fuzz_random_frames_never_raise_or_authenticate(store: CredentialStore,
                                                        frames: list[bytes]) -> None:
    auth = make(store)
    for data in frames:
        step = auth.receive(data)
        assert step.authenticated is None
        if step.failure is not None:
            break
    assert not auth.complete


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(MECHANISMS), st.sampled_from([0, 1]),
       st.lists(st.binary(max_size=200), min_size=1, max_size=4))
def test_fuzz_tokens_after_a_valid_handshake(store: CredentialStore, mechanism: str, version: int,
                                             tokens: list[bytes]) -> None:
    auth = make(store)
    handshake(auth, mechanism, version)
    for token in tokens:
        step = (auth.receive(token) if version == 0
                else authenticate(auth, token))
        assert step.authenticated is None
        if step.failure is not None:
            break
    assert not auth.complete


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=60), st.text(max_size=60))
def test_fuzz_scram_client_first_messages(store: CredentialStore, user_part: str, rest: str) -> None:
    auth = make(store)
    handshake(auth, "SCRAM-SHA-256")
    step = authenticate(auth, f"n,,n={user_part},r={rest}".encode())
    assert step.authenticated is None


# -- JAAS ----------------------------------------------------------------------------------------

def test_jaas_parsing() -> None:
    (module,) = parse('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
                      '  username="admin" password="a\\"b" // comment\n'
                      '  user_alice=alice-secret /* block */;')
    assert module.class_name == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert module.flag == "required"
    assert module.options == {"username": "admin", "password": 'a"b', "user_alice": "alice-secret"}
    assert len(parse("a required; b optional x=1;")) == 2


@pytest.mark.parametrize("text", [
    "", "Module", "Module required", "Module maybe;", "Module required x;", "Module required x=;",
    "a required; b required;",
])
def test_jaas_refusals(text: str) -> None:
    with pytest.raises(JaasError):
        parse_one(text)

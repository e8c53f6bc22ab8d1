"""One connection's SASL exchange on a SASL_PLAINTEXT / SASL_SSL listener (Kafka's
``SaslServerAuthenticator``), sans-IO: the connection hands it every frame until it is
authenticated, and each frame gives a ``Step`` (a frame to write, success, or failure).

States and what each accepts (anything else fails the connection)::

    INITIAL          ApiVersions (-> HANDSHAKE) or SaslHandshake
    HANDSHAKE        SaslHandshake: a mechanism of sasl.enabled.mechanisms -> AUTHENTICATE,
                     else UNSUPPORTED_SASL_MECHANISM and close
    AUTHENTICATE     SaslHandshake v1+: SaslAuthenticate requests carrying the tokens
                     (v0: raw size-prefixed tokens, answered with raw tokens)
    COMPLETE         authenticated: frames go to the request channel; a SaslHandshake
                     starts re-authentication (KIP-368) when the session has a lifetime

Failures, as Kafka answers them: bad credentials -> SaslAuthenticate answered
SASL_AUTHENTICATION_FAILED (PLAIN: its message; SCRAM: a message that does not say whether
the user exists), then close; an unsupported mechanism -> UNSUPPORTED_SASL_MECHANISM, then
close; any other request before authentication -> close without an answer. Authentication
failures are delayed (``connection.failed.authentication.delay.ms``, the response and the
close together), which the connection does. A frame over ``sasl.server.max.receive.size``
before authentication closes the connection (the connection checks it).

Sessions: with ``connections.max.reauth.ms`` > 0 (per listener and mechanism) a successful
SaslAuthenticate v1+ answers ``session_lifetime_ms``; past it, any request other than a
SaslHandshake that starts re-authentication closes the connection. Re-authentication must
use the same mechanism and end with the same principal; at most one per second.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from broker.security.credentials import CredentialStore
from broker.security.principal import KafkaPrincipal, user
from broker.security.sasl.mechanisms import (
    PLAIN,
    PlainServer,
    SaslAuthenticationError,
    SaslError,
    SaslServer,
    ScramServer,
)
from protocol.errors import ErrorCode, ProtocolError
from protocol.frames import API_VERSIONS_KEY, decode_request_header, encode_response, size_prefix
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

log = logging.getLogger(__name__)

SASL_HANDSHAKE_KEY: Final = SaslHandshakeRequest.API_KEY
SASL_AUTHENTICATE_KEY: Final = SaslAuthenticateRequest.API_KEY
SASL_HANDSHAKE_MAX_VERSION: Final = 1
SASL_AUTHENTICATE_MAX_VERSION: Final = 2
MIN_REAUTH_INTERVAL_NS: Final = 1_000_000_000


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """A SASL listener's settings, from its ``sasl.*`` properties and JAAS entries."""

    listener: str
    mechanisms: tuple[str, ...]  # sasl.enabled.mechanisms, in order
    plain_users: Mapping[str, str]  # PLAIN: user_<name>="<password>" options
    reauth_ms: Mapping[str, int]  # connections.max.reauth.ms per mechanism (0: no expiry)
    max_receive_bytes: int  # sasl.server.max.receive.size
    failed_delay_ms: int = 100  # connection.failed.authentication.delay.ms


class State(enum.Enum):
    INITIAL = "initial"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Failure:
    reason: str  # for the log line
    reply: bytes | None = None  # Kafka's error response, written just before closing
    delayed: bool = True  # an authentication failure: close after the failed-auth delay


@dataclass(frozen=True, slots=True)
class Step:
    reply: bytes | None = None  # a frame (size prefix included) to write now
    authenticated: KafkaPrincipal | None = None  # the exchange completed with this principal
    failure: Failure | None = None


# (request version, request or None when the version is unknown) -> (answer version, body):
# the broker's own ApiVersions answer (KIP-511: an unknown version gets the v0 error).
ApiVersionsAnswer = Callable[[int, ApiVersionsRequest | None], tuple[int, Any]]


class SaslAuthenticator:
    def __init__(self, settings: SaslSettings, credentials: CredentialStore,
                 api_versions: ApiVersionsAnswer, *,
                 clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self._settings = settings
        self._credentials = credentials
        self._api_versions = api_versions
        self._clock_ns = clock_ns
        self.state = State.INITIAL
        self._server: SaslServer | None = None
        self._kafka_headers = False  # SaslHandshake v1+: tokens in SaslAuthenticate requests
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_expiry_ns: int | None = None
        self._reauth_from: tuple[str, KafkaPrincipal] | None = None
        self._last_reauth_ns = 0

    # -- what the connection asks --------------------------------------------------------

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    @property
    def max_receive_bytes(self) -> int:
        return self._settings.max_receive_bytes

    @property
    def failed_delay_ms(self) -> int:
        return self._settings.failed_delay_ms

    def session_expired(self) -> bool:
        return self.session_expiry_ns is not None and self._clock_ns() > self.session_expiry_ns

    def begins_reauthentication(self, frame: bytes) -> bool:
        """On an authenticated connection: is ``frame`` a SaslHandshake that starts
        re-authentication? If so, the authenticator takes it (and what follows) from now."""
        if (self.state is not State.COMPLETE or self.session_expiry_ns is None or len(frame) < 2
                or int.from_bytes(frame[:2], "big") != SASL_HANDSHAKE_KEY):
            return False
        now = self._clock_ns()
        if self._last_reauth_ns and now - self._last_reauth_ns < MIN_REAUTH_INTERVAL_NS:
            return False  # at most one per second; the handshake is then answered normally
        assert self.mechanism is not None and self.principal is not None
        self._last_reauth_ns = now
        self._reauth_from = (self.mechanism, self.principal)
        self.state = State.HANDSHAKE
        self._server = None
        return True

    @property
    def _what(self) -> str:
        return "re-authentication" if self._reauth_from is not None else "authentication"

    # -- frames --------------------------------------------------------------------------

    def receive(self, frame: bytes) -> Step:
        """The next frame from the client (the bytes after the size prefix)."""
        try:
            if self.state is State.AUTHENTICATE and not self._kafka_headers:
                return self._raw_token(frame)
            return self._request(frame)
        except ProtocolError as exc:
            return self._fail(Failure(f"invalid request during SASL {self._what}: {exc}",
                                      delayed=False))

    def _fail(self, failure: Failure) -> Step:
        self.state = State.FAILED
        return Step(failure=failure)

    def _request(self, frame: bytes) -> Step:
        header, offset = decode_request_header(frame)
        key, version = header.api_key, header.api_version
        if self.state is State.INITIAL and key == API_VERSIONS_KEY:
            self.state = State.HANDSHAKE
            return Step(reply=self._api_versions_reply(frame, header.correlation_id, version, offset))
        if self.state in (State.INITIAL, State.HANDSHAKE) and key == SASL_HANDSHAKE_KEY:
            return self._handshake(frame, header.correlation_id, version, offset)
        if self.state is State.AUTHENTICATE and key == SASL_AUTHENTICATE_KEY:
            return self._authenticate(frame, header.correlation_id, version, offset)
        stage = "handshake" if self.state is not State.AUTHENTICATE else self._what
        return self._fail(Failure(f"Unexpected Kafka request of type {key} (version {version}) "
                                  f"during SASL {stage}"))

    def _api_versions_reply(self, frame: bytes, correlation_id: int, version: int,
                            offset: int) -> bytes:
        request: ApiVersionsRequest | None = None
        if version <= ApiVersionsRequest.HIGHEST_VERSION:
            request = ApiVersionsRequest.decode_at(frame, version, offset)[0]
        answer_version, body = self._api_versions(version, request)
        return _frame(correlation_id, API_VERSIONS_KEY, answer_version, body)

    def _handshake(self, frame: bytes, correlation_id: int, version: int, offset: int) -> Step:
        if version > SASL_HANDSHAKE_MAX_VERSION:
            return self._fail(Failure(f"unsupported SaslHandshake version {version}", delayed=False))
        request = SaslHandshakeRequest.decode_at(frame, version, offset)[0]
        mechanism = request.mechanism
        enabled = list(self._settings.mechanisms)
        if mechanism not in enabled:
            reply = _frame(correlation_id, SASL_HANDSHAKE_KEY, version, SaslHandshakeResponse(
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled))
            return self._fail(Failure(f"Unsupported SASL mechanism {mechanism}", reply))
        reply = _frame(correlation_id, SASL_HANDSHAKE_KEY, version, SaslHandshakeResponse(
            error_code=ErrorCode.NO_ERROR, mechanisms=enabled))
        if self._reauth_from is not None and mechanism != self._reauth_from[0]:
            # Kafka answers the handshake, then fails the next token (REAUTH_BAD_MECHANISM).
            self.state = State.AUTHENTICATE
            self._kafka_headers = version >= 1
            self._server = None
            return Step(reply=reply)
        self._kafka_headers = version >= 1
        self._server = self._new_server(mechanism)
        self.state = State.AUTHENTICATE
        return Step(reply=reply)

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(self._settings.plain_users)
        return ScramServer(mechanism, self._credentials.get)

    def _authenticate(self, frame: bytes, correlation_id: int, version: int, offset: int) -> Step:
        if version > SASL_AUTHENTICATE_MAX_VERSION:
            return self._fail(Failure(f"unsupported SaslAuthenticate version {version}",
                                      delayed=False))
        request = SaslAuthenticateRequest.decode_at(frame, version, offset)[0]

        def failed(message: str) -> Step:
            reply = _frame(correlation_id, SASL_AUTHENTICATE_KEY, version, SaslAuthenticateResponse(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message,
                auth_bytes=b"", session_lifetime_ms=0))
            return self._fail(Failure(f"SASL {self._what} failed: {message}", reply))

        if self._server is None:
            assert self._reauth_from is not None
            return failed(f"SASL mechanism requested by client is not supported for "
                          f"re-authentication of mechanism '{self._reauth_from[0]}'")
        try:
            token = self._server.evaluate(bytes(request.auth_bytes))
            done = self._finish_if_complete()
        except SaslAuthenticationError as exc:
            return failed(str(exc))
        except SaslError as exc:
            log.debug("SASL %s failed: %s", self._what, exc)
            return failed(f"Authentication failed during {self._what} due to invalid credentials "
                          f"with SASL mechanism {self._server.mechanism}")
        lifetime_ms = self._lifetime_ms() if done is not None and version >= 1 else 0
        # error_message "" (the schema's default), not null: what Kafka sends on success
        reply = _frame(correlation_id, SASL_AUTHENTICATE_KEY, version, SaslAuthenticateResponse(
            error_code=ErrorCode.NO_ERROR, error_message="", auth_bytes=token,
            session_lifetime_ms=lifetime_ms))
        return Step(reply=reply, authenticated=done)

    def _raw_token(self, token: bytes) -> Step:
        """SaslHandshake v0: the tokens travel as bare size-prefixed frames."""
        if self._server is None:
            return self._fail(Failure("SASL mechanism changed during re-authentication"))
        try:
            reply = self._server.evaluate(token)
            done = self._finish_if_complete()
        except SaslError as exc:
            return self._fail(Failure(f"SASL {self._what} failed: {exc}"))
        return Step(reply=size_prefix(len(reply)) + reply, authenticated=done)

    def _finish_if_complete(self) -> KafkaPrincipal | None:
        assert self._server is not None
        if not self._server.complete:
            return None
        principal = user(self._server.authorization_id)
        if self._reauth_from is not None and principal != self._reauth_from[1]:
            before = self._reauth_from[1]
            raise SaslAuthenticationError(
                f"Cannot change principals during re-authentication from {before.type}."
                f"{before.name}: {principal.type}.{principal.name}")
        self.mechanism = self._server.mechanism
        self.principal = principal
        self.state = State.COMPLETE
        self._reauth_from = None
        lifetime_ms = self._lifetime_ms()
        self.session_expiry_ns = (self._clock_ns() + lifetime_ms * 1_000_000
                                  if lifetime_ms > 0 else None)
        return principal

    def _lifetime_ms(self) -> int:
        assert self._server is not None
        return max(0, self._settings.reauth_ms.get(self._server.mechanism, 0))


def _frame(correlation_id: int, api_key: int, version: int, body: Any) -> bytes:
    return b"".join(bytes(p) for p in encode_response(correlation_id, api_key, version, body))  # type: ignore[arg-type]

"""The broker side of SASL/PLAIN (RFC 4616) and SASL/SCRAM-SHA-256/512 (RFC 5802, 7677).

A server evaluates the client's tokens one at a time (``evaluate`` -> the token to send
back) until ``complete``; then ``authorization_id`` is the authenticated user. A failure
raises ``SaslAuthenticationError`` whose message may be sent to the client (PLAIN's, as
Kafka's ``PlainSaslServer`` words them) or ``SaslError``, for which the client is told only
that its credentials were invalid (SCRAM: nothing about whether the user exists).

PLAIN checks the password against the ``user_<name>="<password>"`` options of the
listener's ``PlainLoginModule`` JAAS entry (in constant time). SCRAM reads the stored
credential (``CredentialStore``) and runs the exchange with ``scramp``; the client-first
message's ``n=`` user name must match a stored credential of this mechanism.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Protocol

from broker.security.credentials import ScramCredential

PLAIN = "PLAIN"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SUPPORTED = (PLAIN, *SCRAM_MECHANISMS)


class SaslError(Exception):
    """Authentication failed; the client is told only that its credentials were invalid."""


class SaslAuthenticationError(SaslError):
    """Authentication failed; the message is sent to the client."""


class SaslServer(Protocol):
    mechanism: str

    def evaluate(self, token: bytes) -> bytes: ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...


class PlainServer:
    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._user: str | None = None

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        assert self._user is not None
        return self._user

    def evaluate(self, token: bytes) -> bytes:
        if self._user is not None:
            raise SaslAuthenticationError("Authentication failed: exchange already complete")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        parts = text.split("\x00", 3)
        if len(parts) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compared in constant time, and compared even for an unknown user.
        matches = hmac.compare_digest((expected or "\x00" + password).encode(), password.encode())
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        self._user = username
        return b""


class ScramServer:
    def __init__(self, mechanism: str,
                 credential_for: Callable[[str, str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self._credential_for = credential_for
        import scramp  # at the first SCRAM exchange: a broker without SCRAM never loads it

        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)
        self._step = 0
        self._user: str | None = None
        self._complete = False

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int] | None:
        credential = self._credential_for(username, self.mechanism)
        if credential is None:
            return None
        self._user = username
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        assert self._complete and self._user is not None
        return self._user

    def evaluate(self, token: bytes) -> bytes:
        import scramp

        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("SCRAM message is not UTF-8") from None
        try:
            if self._step == 0:
                self._step = 1
                _check_authzid(message)
                self._server.set_client_first(message)
                return str(self._server.get_server_first()).encode("utf-8")
            if self._step == 1:
                self._step = 2
                self._server.set_client_final(message)
                final = str(self._server.get_server_final()).encode("utf-8")
                self._complete = True
                return final
        except scramp.ScramException as exc:
            self._step = 3
            raise SaslError(f"SCRAM: {exc}") from None
        raise SaslError("SCRAM: unexpected message after the exchange")


def _check_authzid(client_first: str) -> None:
    """Kafka refuses an authorization id (``a=`` in the GS2 header) other than the user name."""
    parts = client_first.split(",", 3)
    if len(parts) < 3 or not parts[1]:
        return
    authzid = parts[1][2:] if parts[1].startswith("a=") else None
    user = parts[2][2:] if parts[2].startswith("n=") else None
    if authzid is None or authzid != user:
        import scramp

        raise scramp.ScramException("Authentication failed: Invalid authorization id")

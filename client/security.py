"""TLS and SASL for the client's connections, configured by Kafka's client properties.

- ``security.protocol``: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT, SASL_SSL.
- TLS (``ssl_context``): the broker's certificate is checked against
  ``ssl.truststore.location`` (``ssl.truststore.type=PEM``) or the PEM text of
  ``ssl.truststore.certificates``, else the system's CAs, and its host name unless
  ``ssl.endpoint.identification.algorithm`` is empty (Kafka's default ``https`` checks it).
  A client certificate (mutual TLS): ``ssl.keystore.location`` (``ssl.keystore.type=PEM``: the
  private key and its certificate chain in one file, the key encrypted with
  ``ssl.key.password`` if it is), or the same as PEM text in ``ssl.keystore.key`` and
  ``ssl.keystore.certificate.chain`` (loaded by ``client.pem_keystore``, never left on disk).
  ``ssl.enabled.protocols`` bounds the TLS versions. Java key stores
  (JKS, PKCS12) are refused as INVALID_CONFIG: convert them to PEM.
- SASL (``authenticate``): after ApiVersions, SaslHandshake (v1) names ``sasl.mechanism``
  (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), then SaslAuthenticate carries the exchange:
  PLAIN's one message, or SCRAM's two rounds (RFC 5802, by ``scramp``, which also checks the
  server's signature). The user and password come from ``sasl.jaas.config``, Kafka's JAAS
  line (``org.apache.kafka.common.security.plain.PlainLoginModule required username="alice"
  password="alice-secret";``). A refusal is the broker's error (SASL_AUTHENTICATION_FAILED,
  UNSUPPORTED_SASL_MECHANISM, ...) as a ClientError that is not retriable.
- Re-authentication (KIP-368): a broker with ``connections.max.reauth.ms`` answers the last
  SaslAuthenticate (v1+) with the session's lifetime, and closes the connection at its first
  request after the session ended. The connection (``client.connection``) runs the same
  exchange again on the open socket before that (``reauthentication_delay_ms``).
"""

from __future__ import annotations

import random
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from client.errors import ClientError, check
from client.pem_keystore import load_pem_strings
from protocol.errors import ErrorCode
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

INVALID_CONFIG: Final = "INVALID_CONFIG"
SECURITY_PROTOCOLS: Final = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
SASL_MECHANISMS: Final = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
_TLS_VERSIONS: Final = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# One JAAS option: key=value, the value quoted (with \" and \\ escapes) or a bare word.
_JAAS_OPTION: Final = re.compile(r'\s*([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')
_JAAS_HEAD: Final = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b",
                               re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class TlsSettings:
    truststore_type: str = "JKS"
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    keystore_type: str = "JKS"
    keystore_location: str | None = None
    keystore_key: str | None = None
    keystore_certificate_chain: str | None = None
    key_password: str | None = None
    endpoint_identification: str = "https"
    enabled_protocols: str = "TLSv1.2,TLSv1.3"


@dataclass(frozen=True, slots=True)
class SaslSettings:
    mechanism: str = "GSSAPI"
    jaas_config: str | None = None


def uses_tls(protocol: str) -> bool:
    return protocol.upper() in ("SSL", "SASL_SSL")


def uses_sasl(protocol: str) -> bool:
    return protocol.upper() in ("SASL_PLAINTEXT", "SASL_SSL")


def ssl_context(tls: TlsSettings) -> ssl.SSLContext:
    """The client's TLS context; ClientError(INVALID_CONFIG) for settings it cannot use."""
    for prop, kind, used in (
            ("ssl.truststore.type", tls.truststore_type,
             tls.truststore_location or tls.truststore_certificates),
            ("ssl.keystore.type", tls.keystore_type,
             tls.keystore_location or tls.keystore_key or tls.keystore_certificate_chain)):
        if used and kind.upper() != "PEM":
            raise ClientError(INVALID_CONFIG, f"{prop}={kind} is not supported (PEM only)")
    pem_strings = bool(tls.keystore_key or tls.keystore_certificate_chain)
    if pem_strings and tls.keystore_location:
        raise ClientError(INVALID_CONFIG, "ssl.keystore.key: set either ssl.keystore.location or "
                                          "the PEM strings, not both")
    if pem_strings and not (tls.keystore_key and tls.keystore_certificate_chain):
        missing = "ssl.keystore.certificate.chain" if tls.keystore_key else "ssl.keystore.key"
        raise ClientError(INVALID_CONFIG, f"{missing} must be set with the other PEM key store "
                                          "string")
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    try:
        if tls.truststore_location or tls.truststore_certificates:
            context.load_verify_locations(cafile=tls.truststore_location or None,
                                          cadata=tls.truststore_certificates or None)
        if tls.keystore_location:
            context.load_cert_chain(tls.keystore_location, password=tls.key_password)
        elif tls.keystore_key and tls.keystore_certificate_chain:
            load_pem_strings(context, tls.keystore_key, tls.keystore_certificate_chain,
                             tls.key_password)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ClientError(INVALID_CONFIG, f"Failed to load SSL keystore or truststore: {exc}") from None
    context.check_hostname = bool(tls.endpoint_identification)
    versions = [v.strip() for v in tls.enabled_protocols.split(",") if v.strip()]
    unknown = [v for v in versions if v not in _TLS_VERSIONS]
    if unknown or not versions:
        raise ClientError(INVALID_CONFIG, f"ssl.enabled.protocols: unsupported {unknown or versions}"
                                          f" (supported: {', '.join(_TLS_VERSIONS)})")
    context.minimum_version = min(_TLS_VERSIONS[v] for v in versions)
    context.maximum_version = max(_TLS_VERSIONS[v] for v in versions)
    return context


def jaas_credentials(jaas: str | None) -> tuple[str, str]:
    """(username, password) of a client JAAS line; INVALID_CONFIG when it has none."""
    if not jaas:
        raise ClientError(INVALID_CONFIG, "sasl.jaas.config must be set for SASL (with "
                                          "username and password)")
    head = _JAAS_HEAD.match(jaas)
    if head is None:
        raise ClientError(INVALID_CONFIG, "sasl.jaas.config: expected '<LoginModule> required "
                                          "username=\"...\" password=\"...\";'")
    options: dict[str, str] = {}
    rest = jaas[head.end():].strip().rstrip(";")
    for match in _JAAS_OPTION.finditer(rest):
        quoted, bare = match.group(2), match.group(3)
        options[match.group(1)] = (re.sub(r"\\(.)", r"\1", quoted) if quoted is not None
                                   else bare)
    if "username" not in options or "password" not in options:
        raise ClientError(INVALID_CONFIG, "sasl.jaas.config: username and password are required")
    return options["username"], options["password"]


def check_sasl(sasl: SaslSettings) -> None:
    if sasl.mechanism not in SASL_MECHANISMS:
        raise ClientError(INVALID_CONFIG, f"sasl.mechanism={sasl.mechanism} is not supported "
                                          f"(supported: {', '.join(sorted(SASL_MECHANISMS))})")
    jaas_credentials(sasl.jaas_config)


Send = Callable[[Any], Awaitable[Any]]


async def authenticate(send: Send, sasl: SaslSettings, where: str) -> int:
    """Kafka's SASL exchange over a connection (``send`` one request, get its response).
    Returns the session's lifetime in ms (SaslAuthenticate v1+ ``session_lifetime_ms``; 0:
    the session does not expire)."""
    user, password = jaas_credentials(sasl.jaas_config)
    handshake = await send(SaslHandshakeRequest(mechanism=sasl.mechanism))
    assert isinstance(handshake, SaslHandshakeResponse)
    check(handshake.error_code, None,
          f"SaslHandshake with {where} ({sasl.mechanism}; the broker offers "
          f"{', '.join(handshake.mechanisms) or 'none'})")
    if sasl.mechanism == "PLAIN":
        return (await _round(send, f"\0{user}\0{password}".encode(), where)).session_lifetime_ms
    import scramp  # only for SCRAM: a PLAINTEXT or PLAIN client does not load it

    client = scramp.ScramClient([sasl.mechanism], user, password)
    server_first = await _round(send, client.get_client_first().encode(), where)
    try:
        client.set_server_first(bytes(server_first.auth_bytes).decode())
        server_final = await _round(send, client.get_client_final().encode(), where)
        client.set_server_final(bytes(server_final.auth_bytes).decode())
    except (scramp.ScramException, UnicodeDecodeError) as exc:
        raise ClientError(ErrorCode.SASL_AUTHENTICATION_FAILED.name,
                          f"SCRAM exchange with {where} failed: {exc}") from None
    return server_final.session_lifetime_ms


def reauthentication_delay_ms(session_lifetime_ms: int) -> float:
    """When to re-authenticate (KIP-368), as Kafka's client picks it: at 85% to 95% of the
    session's lifetime (random, so that many connections do not all re-authenticate at
    once; the 85% leaves room for the network and clock drift)."""
    return session_lifetime_ms * (0.85 + 0.10 * random.random())


async def _round(send: Send, token: bytes, where: str) -> SaslAuthenticateResponse:
    response = await send(SaslAuthenticateRequest(auth_bytes=token))
    assert isinstance(response, SaslAuthenticateResponse)
    check(response.error_code, response.error_message, f"SaslAuthenticate with {where}")
    return response

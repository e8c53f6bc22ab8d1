"""Client settings, by the names and defaults of Kafka's Java client (``CommonClientConfigs``).

``ClientConfig.from_properties`` reads a client properties file's keys (what Kafka's tools take
with ``--command-config``); a bad value raises ``ClientError('INVALID_CONFIG', ...)`` naming
the property. ``parse_bootstrap`` splits ``bootstrap.servers``.

=======================================  ==========  ===========================================
property                                 default     meaning
=======================================  ==========  ===========================================
client.id                                minikafka   sent in every request header
request.timeout.ms                       30000       one request's answer; then the connection
                                                     is closed (its stream can no longer be
                                                     trusted), as Kafka's NetworkClient does
default.api.timeout.ms                   60000       a whole call, retries included
retry.backoff.ms / retry.backoff.max.ms  100 / 1000  exponential backoff between retries (x2,
                                                     +-20% jitter)
reconnect.backoff.ms / .max.ms           50 / 1000   the same between connection attempts
socket.connection.setup.timeout.ms       10000       TCP connect plus the ApiVersions exchange
metadata.max.age.ms                      300000      refresh metadata at least this often
max.in.flight.requests.per.connection    5           requests awaiting an answer per connection
security.protocol                        PLAINTEXT   PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
ssl.truststore.type / .location          JKS / -     the CAs that sign brokers' certificates:
ssl.truststore.certificates              -           a PEM file or PEM text (type PEM; JKS and
                                                     PKCS12 are refused); unset: the system's
ssl.keystore.type / .location            JKS / -     a client certificate (mutual TLS): key and
ssl.key.password                         -           chain in one PEM file, key maybe encrypted
ssl.keystore.key                         -           or the same as PEM text (type PEM): the
ssl.keystore.certificate.chain           -           key, and its certificate chain
ssl.endpoint.identification.algorithm    https       "" does not check the broker's host name
ssl.enabled.protocols                    TLSv1.2,    the TLS versions offered
                                         TLSv1.3
sasl.mechanism                           GSSAPI      PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 here
sasl.jaas.config                         -           ``... required username="u" password="p";``
=======================================  ==========  ===========================================

TLS and SASL are ``client.security``'s (checked when the settings are made: an unsupported
mechanism, or SASL without a user and password, is INVALID_CONFIG at once).

``max_response_bytes`` (not a Kafka property) bounds one response frame.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from client.errors import ClientError
from client.security import (
    SECURITY_PROTOCOLS,
    SaslSettings,
    TlsSettings,
    check_sasl,
    uses_sasl,
    uses_tls,
)

INVALID_CONFIG: Final = "INVALID_CONFIG"

# property name -> dataclass field ("ssl.<field>", "sasl.<field>": of the TlsSettings or
# SaslSettings in that field)
_PROPERTIES: Final = {
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
    "default.api.timeout.ms": "default_api_timeout_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "retry.backoff.max.ms": "retry_backoff_max_ms",
    "reconnect.backoff.ms": "reconnect_backoff_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "socket.connection.setup.timeout.ms": "connection_setup_timeout_ms",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "max.in.flight.requests.per.connection": "max_in_flight_requests_per_connection",
    "security.protocol": "security_protocol",
    "ssl.truststore.type": "ssl.truststore_type",
    "ssl.truststore.location": "ssl.truststore_location",
    "ssl.truststore.certificates": "ssl.truststore_certificates",
    "ssl.keystore.type": "ssl.keystore_type",
    "ssl.keystore.location": "ssl.keystore_location",
    "ssl.keystore.key": "ssl.keystore_key",
    "ssl.keystore.certificate.chain": "ssl.keystore_certificate_chain",
    "ssl.key.password": "ssl.key_password",
    "ssl.endpoint.identification.algorithm": "ssl.endpoint_identification",
    "ssl.enabled.protocols": "ssl.enabled_protocols",
    "sasl.mechanism": "sasl.mechanism",
    "sasl.jaas.config": "sasl.jaas_config",
}
SUPPORTED_SECURITY_PROTOCOLS: Final = SECURITY_PROTOCOLS


@dataclass(frozen=True, slots=True)
class ClientConfig:
    client_id: str = "minikafka"
    request_timeout_ms: int = 30_000
    default_api_timeout_ms: int = 60_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1_000
    connection_setup_timeout_ms: int = 10_000
    metadata_max_age_ms: int = 300_000
    max_in_flight_requests_per_connection: int = 5
    security_protocol: str = "PLAINTEXT"
    # The ssl.* and sasl.* properties, used when security.protocol has TLS or SASL.
    ssl: TlsSettings = field(default_factory=TlsSettings)
    sasl: SaslSettings = field(default_factory=SaslSettings)
    max_response_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int) and value < 1 and f.name != "retry_backoff_ms":
                raise ClientError(INVALID_CONFIG, f"{_property_of(f.name)} must be at least 1, not {value}")
        if self.retry_backoff_ms < 0:
            raise ClientError(INVALID_CONFIG, f"retry.backoff.ms must not be negative, not {self.retry_backoff_ms}")
        if self.security_protocol.upper() not in SUPPORTED_SECURITY_PROTOCOLS:
            raise ClientError(INVALID_CONFIG,
                              f"security.protocol={self.security_protocol} is not supported "
                              f"(supported: {', '.join(sorted(SUPPORTED_SECURITY_PROTOCOLS))})")
        if uses_sasl(self.security_protocol):
            check_sasl(self.sasl)

    @property
    def tls(self) -> TlsSettings | None:
        """The TLS settings (None: a plain TCP connection)."""
        return self.ssl if uses_tls(self.security_protocol) else None

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: ClientConfig | None = None) -> ClientConfig:
        """Settings from Kafka client properties; keys this client does not use are ignored
        (see ``unused_properties``)."""
        changes: dict[str, object] = {}
        nested: dict[str, dict[str, str]] = {}  # "ssl" / "sasl" -> their fields' changes
        defaults = base or cls()
        for key, raw in props.items():
            name = _PROPERTIES.get(key.strip())
            if name is None:
                continue
            value = raw.strip()
            group, _, field_name = name.partition(".")
            if field_name:
                nested.setdefault(group, {})[field_name] = value
            elif isinstance(getattr(defaults, name), int):
                try:
                    changes[name] = int(value)
                except ValueError:
                    raise ClientError(INVALID_CONFIG,
                                      f"Invalid value {value} for configuration {key.strip()}: "
                                      "Not a number of type INT") from None
            else:
                changes[name] = value
        for group, values in nested.items():
            changes[group] = dataclasses.replace(getattr(defaults, group), **values)
        return dataclasses.replace(defaults, **changes)  # type: ignore[arg-type]


def unused_properties(props: Mapping[str, str]) -> list[str]:
    """The keys of ``props`` this client does not read (Kafka warns about them)."""
    return sorted(k for k in props if k.strip() not in _PROPERTIES and k.strip() != "bootstrap.servers")


def _property_of(field_name: str) -> str:
    for prop, name in _PROPERTIES.items():
        if name == field_name:
            return prop
    return field_name


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` -> addresses; ClientError naming a bad entry."""
    out: list[tuple[str, int]] = []
    for item in bootstrap.split(","):
        entry = item.strip()
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ClientError(INVALID_CONFIG, f"Invalid url in bootstrap.servers: {entry}")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ClientError(INVALID_CONFIG, "No resolvable bootstrap urls given in bootstrap.servers")
    return out

"""Each listener's security, built once at start-up from the configuration (before any bind):
its protocol, its TLS context and principal mapping rules (SSL, SASL_SSL).

A property a listener's protocol needs but cannot use (a JKS key store, a missing key, a
bad mapping rule) raises ``ConfigError`` naming it, so start-up fails with exit code 1.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from broker.config import BrokerConfig, ConfigError
from broker.security.ssl_principal import SslPrincipalMapper
from broker.security.tls import TlsConfigError, server_context

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    name: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


def build_listener(config: BrokerConfig, name: str) -> ListenerSecurity:
    protocol = config.security_protocol(name)
    values = config.listener_values(name)
    if protocol in SASL_PROTOCOLS:
        raise ConfigError(f"Invalid value for configuration listeners: listener {name}: security "
                          f"protocol {protocol} is not supported yet")
    if protocol not in TLS_PROTOCOLS:
        return ListenerSecurity(name, protocol)
    try:
        context = server_context(name, values)
    except TlsConfigError as exc:
        raise ConfigError(str(exc)) from None
    rules = values.get("ssl.principal.mapping.rules")
    try:
        mapper = SslPrincipalMapper(None if rules is None else str(rules))
    except ValueError as exc:
        raise ConfigError(f"Invalid value {rules!r} for configuration ssl.principal.mapping.rules "
                          f"(listener {name}): {exc}") from None
    return ListenerSecurity(name, protocol, context, mapper)


def build_listeners(config: BrokerConfig) -> dict[str, ListenerSecurity]:
    """Every listener's security, by listener name; ConfigError names a bad property."""
    return {e.listener_name: build_listener(config, e.listener_name) for e in config.listeners}

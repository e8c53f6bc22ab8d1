"""Each listener's security, built once at start-up from the configuration (before any bind):
its protocol, its TLS context (SSL, SASL_SSL), principal mapping rules (SSL) and SASL
settings (SASL_PLAINTEXT, SASL_SSL).

SASL settings: ``sasl.enabled.mechanisms`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; Kafka's
default GSSAPI, and OAUTHBEARER, are refused), and for each enabled mechanism a JAAS entry
``listener.name.<l>.<mechanism>.sasl.jaas.config`` with Kafka's login module
(``org.apache.kafka.common.security.plain.PlainLoginModule`` with ``user_<name>="<password>"``
options for PLAIN, ``org.apache.kafka.common.security.scram.ScramLoginModule`` for SCRAM,
whose users live in the credential store); ``connections.max.reauth.ms`` per mechanism
(``listener.name.<l>.<mechanism>.connections.max.reauth.ms``) or per listener.

A property a listener's protocol needs but cannot use (a JKS key store, a missing key, a
bad mapping rule, a missing JAAS entry) raises ``ConfigError`` naming it, so start-up fails
with exit code 1.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.config import BrokerConfig, ConfigError, PropValue
from broker.security.tls import TlsConfigError, server_context

if TYPE_CHECKING:
    # Imported by the functions that build them: a broker whose listeners are all
    # PLAINTEXT (or SSL without SASL) loads neither the SASL exchange nor its codecs.
    from broker.security.sasl.authenticator import SaslSettings
    from broker.security.ssl_principal import SslPrincipalMapper

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    name: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None  # SSL: certificate DN -> user name
    sasl: SaslSettings | None = None

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


def build_listener(config: BrokerConfig, name: str) -> ListenerSecurity:
    protocol = config.security_protocol(name)
    values = config.listener_values(name)
    sasl = sasl_settings(config, name, values) if protocol in SASL_PROTOCOLS else None
    if protocol not in TLS_PROTOCOLS:
        return ListenerSecurity(name, protocol, sasl=sasl)
    try:
        context = server_context(name, values)
    except TlsConfigError as exc:
        raise ConfigError(str(exc)) from None
    mapper = None
    if protocol == "SSL":
        from broker.security.ssl_principal import SslPrincipalMapper

        rules = values.get("ssl.principal.mapping.rules")
        try:
            mapper = SslPrincipalMapper(None if rules is None else str(rules))
        except ValueError as exc:
            raise ConfigError(f"Invalid value {rules!r} for configuration "
                              f"ssl.principal.mapping.rules (listener {name}): {exc}") from None
    return ListenerSecurity(name, protocol, context, mapper, sasl)


def sasl_settings(config: BrokerConfig, name: str, values: dict[str, PropValue]) -> SaslSettings:
    from broker.security.jaas import JaasError, parse_one
    from broker.security.sasl.authenticator import SaslSettings
    from broker.security.sasl.mechanisms import PLAIN, SUPPORTED

    prefix = f"listener.name.{name.lower()}."
    mechanisms = values.get("sasl.enabled.mechanisms") or []
    assert isinstance(mechanisms, list)
    if not mechanisms:
        raise ConfigError(f"Invalid value for configuration sasl.enabled.mechanisms (listener "
                          f"{name}): no SASL mechanism is enabled")
    unsupported = [m for m in mechanisms if m not in SUPPORTED]
    if unsupported:
        raise ConfigError(f"Invalid value {','.join(mechanisms)!r} for configuration "
                          f"sasl.enabled.mechanisms (listener {name}): "
                          f"{', '.join(unsupported)} not supported (supported: {', '.join(SUPPORTED)})")
    plain_users: dict[str, str] = {}
    reauth_ms: dict[str, int] = {}
    for mechanism in mechanisms:
        key = f"{mechanism.lower()}.sasl.jaas.config"
        text = values.get(key)
        if text is None:
            raise ConfigError(f"Missing configuration {prefix}{key}: the JAAS entry for SASL "
                              f"mechanism {mechanism} on listener {name}")
        try:
            module = parse_one(str(text))
        except JaasError as exc:
            raise ConfigError(f"Invalid value for configuration {prefix}{key}: {exc}") from None
        if module.class_name != LOGIN_MODULES[mechanism]:
            raise ConfigError(f"Invalid value for configuration {prefix}{key}: login module "
                              f"{module.class_name} (expected {LOGIN_MODULES[mechanism]})")
        if mechanism == PLAIN:
            plain_users = {k[len("user_"):]: v for k, v in module.options.items()
                           if k.startswith("user_") and len(k) > len("user_")}
        per_mechanism = values.get(f"{mechanism.lower()}.connections.max.reauth.ms")
        reauth = per_mechanism if per_mechanism is not None else values["connections.max.reauth.ms"]
        assert isinstance(reauth, int)
        reauth_ms[mechanism] = reauth
    max_receive = values["sasl.server.max.receive.size"]
    assert isinstance(max_receive, int)
    return SaslSettings(name, tuple(mechanisms), plain_users, reauth_ms, max_receive,
                        config.get_int("connection.failed.authentication.delay.ms"))


def build_listeners(config: BrokerConfig) -> dict[str, ListenerSecurity]:
    """Every listener's security, by listener name; ConfigError names a bad property."""
    listeners = {e.listener_name: build_listener(config, e.listener_name) for e in config.listeners}
    inter_broker = listeners.get(config.inter_broker_listener_name)
    if inter_broker is not None and inter_broker.sasl is not None:
        mechanism = config.values["sasl.mechanism.inter.broker.protocol"]
        if mechanism not in inter_broker.sasl.mechanisms:
            raise ConfigError(f"Invalid value {mechanism!r} for configuration "
                              "sasl.mechanism.inter.broker.protocol: must be included in "
                              "sasl.enabled.mechanisms when SASL is used for inter-broker "
                              "communication")
    return listeners


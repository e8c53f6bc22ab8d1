"""The client properties a broker uses for its peers' inter-broker listener."""

from __future__ import annotations

import re

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.security.inter_broker import inter_broker_client_properties
from client.config import ClientConfig
from client.security import jaas_credentials

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def config(**extra: str) -> BrokerConfig:
    return BrokerConfig.from_properties({
        "listeners": "INTERNAL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
        **extra})


def test_sasl_ssl_inter_broker_listener() -> None:
    props = inter_broker_client_properties(config(**{
        "listener.name.internal.plain.sasl.jaas.config":
            f'{PLAIN} required username="bro\\"ker" password="s3cret" user_broker="s3cret";'}))
    assert props["security.protocol"] == "SASL_SSL" and props["sasl.mechanism"] == "PLAIN"
    assert props["ssl.truststore.location"] == "/ca.pem" and props["ssl.truststore.type"] == "PEM"
    assert jaas_credentials(props["sasl.jaas.config"]) == ('bro"ker', "s3cret")
    assert ClientConfig.from_properties(props).tls is not None  # the client takes them as they are


def test_plaintext_inter_broker_listener_needs_nothing() -> None:
    props = inter_broker_client_properties(BrokerConfig.from_properties({}))
    assert props == {"security.protocol": "PLAINTEXT"}


def test_sasl_without_the_brokers_own_credentials_fails() -> None:
    with pytest.raises(ConfigError, match=re.escape("listener.name.internal.plain.sasl.jaas.config")):
        inter_broker_client_properties(config(**{
            "listener.name.internal.plain.sasl.jaas.config": f'{PLAIN} required user_a="b";'}))


def test_host_name_verification_follows_the_listener() -> None:
    jaas = {"listener.name.internal.plain.sasl.jaas.config":
            f'{PLAIN} required username="broker" password="s3cret";'}
    checked = inter_broker_client_properties(config(**jaas))
    assert checked["ssl.endpoint.identification.algorithm"] == "https"  # Kafka's default
    assert ClientConfig.from_properties(checked).tls.endpoint_identification == "https"  # type: ignore[union-attr]
    unchecked = inter_broker_client_properties(config(**jaas, **{
        "listener.name.internal.ssl.endpoint.identification.algorithm": ""}))
    assert unchecked["ssl.endpoint.identification.algorithm"] == ""
    assert ClientConfig.from_properties(unchecked).tls.endpoint_identification == ""  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match=re.escape("ssl.endpoint.identification.algorithm")):
        config(**{"ssl.endpoint.identification.algorithm": "ldap"})


def test_pem_string_keystore_reaches_the_client() -> None:
    """A broker whose key store is the PEM strings presents it to its peers too."""
    props = inter_broker_client_properties(BrokerConfig.from_properties({
        "listeners": "INTERNAL://127.0.0.1:0", "listener.security.protocol.map": "INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL", "ssl.keystore.type": "PEM",
        "listener.name.internal.ssl.keystore.key": "KEY", "ssl.keystore.certificate.chain": "CHAIN"}))
    tls = ClientConfig.from_properties(props).tls
    assert tls is not None
    assert (tls.keystore_type, tls.keystore_key, tls.keystore_certificate_chain) == ("PEM", "KEY", "CHAIN")


def test_security_inter_broker_protocol_names_the_listener() -> None:
    """Without inter.broker.listener.name, security.inter.broker.protocol picks the listener
    of that name (Kafka's ListenerName.forSecurityProtocol), with that listener's settings."""
    broker = BrokerConfig.from_properties({
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "security.inter.broker.protocol": "SSL", "ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": "/broker.pem",
        "listener.name.ssl.ssl.truststore.location": "/ca.pem"})
    assert broker.inter_broker_listener_name == "SSL"
    props = inter_broker_client_properties(broker)
    assert props["security.protocol"] == "SSL"
    assert (props["ssl.keystore.location"], props["ssl.truststore.location"]) == ("/broker.pem", "/ca.pem")
    with pytest.raises(ConfigError, match=re.escape("only one of inter.broker.listener.name and "
                                                    "security.inter.broker.protocol")):
        BrokerConfig.from_properties({
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "security.inter.broker.protocol": "SSL", "inter.broker.listener.name": "SSL"})
    with pytest.raises(ConfigError, match=re.escape("must be a listener name defined in "
                                                    "advertised.listeners")):
        BrokerConfig.from_properties({"listeners": "INTERNAL://127.0.0.1:0",
                                      "listener.security.protocol.map": "INTERNAL:SSL",
                                      "security.inter.broker.protocol": "SSL"})

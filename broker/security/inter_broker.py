"""How a broker connects to the other brokers' inter-broker listener, as Kafka's brokers do:
the client properties (``client.security``'s names) for the controller's channel, controlled
shutdown and the other broker-to-broker clients.

- ``security.protocol``: the protocol of ``inter.broker.listener.name``;
- TLS: that listener's ``ssl.truststore.*`` (the CAs of the other brokers' certificates),
  ``ssl.keystore.*`` (this broker's certificate, for listeners that ask for one: a PEM file
  in ``ssl.keystore.location`` or the PEM strings ``ssl.keystore.key`` and
  ``ssl.keystore.certificate.chain``) and
  ``ssl.enabled.protocols``; the peer's advertised host is checked against its certificate
  unless that listener's ``ssl.endpoint.identification.algorithm`` is empty (Kafka's
  default ``https`` checks it);
- SASL: ``sasl.mechanism.inter.broker.protocol``, logging in with the ``username`` and
  ``password`` options of that listener's JAAS entry for the mechanism
  (``listener.name.<l>.<mechanism>.sasl.jaas.config``), as Kafka takes the broker's own
  credentials from the same entry that lists the users it accepts.

Every broker-to-broker client uses them: the controller's channel (LeaderAndIsr,
UpdateMetadata, StopReplica), controlled shutdown, AlterPartition and the replica fetchers
(Fetch, OffsetForLeaderEpoch, ListOffsets).

``inter_broker_client_properties`` raises ConfigError (failing start-up) when SASL is used
between brokers and the entry has no username and password.
"""

from __future__ import annotations

from broker.config import BrokerConfig, ConfigError
from broker.security.jaas import JaasError, parse_one

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
_TLS_KEYS = ("ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
             "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key",
             "ssl.keystore.certificate.chain", "ssl.key.password",
             "ssl.endpoint.identification.algorithm")


def inter_broker_client_properties(config: BrokerConfig) -> dict[str, str]:
    listener = config.inter_broker_listener_name
    protocol = config.security_protocol(listener)
    values = config.listener_values(listener)
    props = {"security.protocol": protocol}
    if protocol in TLS_PROTOCOLS:
        for key in _TLS_KEYS:
            value = values.get(key)
            if value is not None:
                props[key] = str(value)
        enabled = values.get("ssl.enabled.protocols")
        if isinstance(enabled, list) and enabled:
            props["ssl.enabled.protocols"] = ",".join(str(v) for v in enabled)
    if protocol in SASL_PROTOCOLS:
        mechanism = str(config.values["sasl.mechanism.inter.broker.protocol"])
        key = f"{mechanism.lower()}.sasl.jaas.config"
        prop = f"listener.name.{listener.lower()}.{key}"
        try:
            module = parse_one(str(values.get(key) or ""))
        except JaasError as exc:
            raise ConfigError(f"Invalid value for configuration {prop}: {exc}") from None
        user, password = module.options.get("username"), module.options.get("password")
        if user is None or password is None:
            raise ConfigError(f"Missing username/password in configuration {prop}: the broker "
                              f"logs in to inter-broker listener {listener} with them "
                              f"({mechanism}, sasl.mechanism.inter.broker.protocol)")
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = (f'{module.class_name} required username="{_quoted(user)}" '
                                     f'password="{_quoted(password)}";')
    return props


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')

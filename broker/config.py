"""The broker's configuration: Kafka's ``server.properties`` names, defaults and validation.

Sources, later wins: a properties file (``--config server.properties``, Java properties
syntax: ``key=value`` or ``key: value``, ``#``/``!`` comments, ``\\`` line continuations),
then ``--override KEY=VALUE`` arguments. Every name must be a property this table knows:
Kafka's broker properties that a single node uses, plus every broker property that is a
synonym of a topic config (``log.retention.hours`` for ``retention.ms``, ...; taken from
``broker.topic_config.TOPIC_CONFIGS`` so the two tables cannot drift). An unknown name or an
invalid value raises ``ConfigError`` naming the property; the CLI then exits non-zero.

Kafka's defaults are kept, with one exception: ``listeners`` defaults to
``PLAINTEXT://127.0.0.1:9092`` (Kafka: ``PLAINTEXT://:9092``, every interface) because this
broker is for local use. Port 0 in ``listeners`` binds an ephemeral port (tests); the bound
port is then advertised.

Listeners: every listener's name maps to a security protocol (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL) through ``listener.security.protocol.map``; advertised listener
names must be listeners; the inter-broker listener (``inter.broker.listener.name``, or the
one named by ``security.inter.broker.protocol``, never both) must be advertised. Security
properties (``ssl.*``, ``sasl.*``, ``connections.max.reauth.ms``) may be set per listener
with Kafka's prefix ``listener.name.<listener>.`` (lower case); the SASL JAAS configuration
exists only in that form, per mechanism: ``listener.name.<l>.<mechanism>.sasl.jaas.config``.
``listener_values(name)`` gives a listener's effective values. Which values a listener's
protocol needs (a PEM keystore for SSL, JAAS and mechanisms for SASL) is checked when the
listener is built (``broker.security.listener``), before anything is bound.

``log.dirs`` (else ``log.dir``) may list several directories (JBOD, ``log_dirs``); the first
(``log_dir``) also holds the broker's own files (topic registry, producer-id block).

``BrokerConfig.explicit`` holds the properties set explicitly (file + overrides), as strings:
DescribeConfigs reports them as STATIC_BROKER_CONFIG and topic configs resolve their broker
synonyms from them (``broker.topic_config.resolve``).
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from broker.topic_config import TOPIC_CONFIGS

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
ACL_AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"


class ConfigError(ValueError):
    """An unknown property, or a value Kafka would refuse; the message names the property."""


class PropType(enum.Enum):
    BOOLEAN = "boolean"
    INT = "int"
    SHORT = "short"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"
    PASSWORD = "password"
    CLASS = "class"


PropValue = bool | int | float | str | list[str] | None
Check = Callable[[PropValue], str | None]  # returns a complaint, or None when fine


@dataclass(frozen=True, slots=True)
class PropDef:
    name: str
    type: PropType
    default: str | None  # as Kafka's docs print it; None = no default (null)
    check: Check | None = None
    doc: str = ""


def _at_least(low: int) -> Check:
    def check(value: PropValue) -> str | None:
        if isinstance(value, int | float) and not isinstance(value, bool) and value < low:
            return f"Value must be at least {low}"
        return None

    return check


def _between(low: int, high: int) -> Check:
    def check(value: PropValue) -> str | None:
        if isinstance(value, int | float) and not isinstance(value, bool) and not low <= value <= high:
            return f"Value must be in [{low}, {high}]"
        return None

    return check


def _each_of(*allowed: str) -> Check:
    def check(value: PropValue) -> str | None:
        if isinstance(value, list):
            bad = [v for v in value if v not in allowed]
            if bad:
                return f"{', '.join(bad)} not supported (supported: {', '.join(allowed)})"
        return None

    return check


def _one_of(*allowed: str) -> Check:
    def check(value: PropValue) -> str | None:
        if value is not None and value not in allowed:
            return f"String must be one of: {', '.join(allowed)}"
        return None

    return check


def _host_port_or_empty(value: PropValue) -> str | None:
    """``host:port`` (``[v6]:port``, port 0-65535), or empty for off."""
    if value is None or value == "":
        return None
    match = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):(\d{1,5})", str(value))
    if match is None or int(match.group(2)) > 65535:
        return "Expected host:port (port 0-65535), or empty for off"
    return None


_B, _I, _S, _L, _STR, _LIST, _D, _P, _C = (
    PropType.BOOLEAN, PropType.INT, PropType.SHORT, PropType.LONG, PropType.STRING,
    PropType.LIST, PropType.DOUBLE, PropType.PASSWORD, PropType.CLASS,
)

# Kafka 3.9 broker properties (KafkaConfig / ServerConfigs / SocketServerConfigs /
# ServerLogConfigs / GroupCoordinatorConfig / ...), names and defaults as Kafka has them.
_BROKER_PROPS: tuple[PropDef, ...] = (
    # server basics
    PropDef("broker.id", _I, "-1", _at_least(-1)),
    PropDef("node.id", _I, "-1", _at_least(-1)),
    PropDef("broker.rack", _STR, None),
    PropDef("broker.id.generation.enable", _B, "true"),
    PropDef("reserved.broker.max.id", _I, "1000", _at_least(0)),
    PropDef("process.roles", _LIST, ""),
    PropDef("cluster.id", _STR, None),
    PropDef("inter.broker.protocol.version", _STR, "3.9-IV0"),
    PropDef("log.message.format.version", _STR, "3.0-IV1"),
    # sockets and listeners
    PropDef("listeners", _LIST, "PLAINTEXT://127.0.0.1:9092"),
    PropDef("advertised.listeners", _LIST, None),
    PropDef("listener.security.protocol.map", _STR,
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    PropDef("inter.broker.listener.name", _STR, None),
    PropDef("security.inter.broker.protocol", _STR, "PLAINTEXT", _one_of(*SECURITY_PROTOCOLS)),
    PropDef("control.plane.listener.name", _STR, None),
    PropDef("socket.send.buffer.bytes", _I, "102400"),
    PropDef("socket.receive.buffer.bytes", _I, "102400"),
    PropDef("socket.request.max.bytes", _I, "104857600", _at_least(1)),
    PropDef("socket.listen.backlog.size", _I, "50", _at_least(1)),
    PropDef("socket.connection.setup.timeout.ms", _L, "10000"),
    PropDef("socket.connection.setup.timeout.max.ms", _L, "30000"),
    PropDef("num.network.threads", _I, "3", _at_least(1)),
    PropDef("num.io.threads", _I, "8", _at_least(1)),
    PropDef("background.threads", _I, "10", _at_least(1)),
    PropDef("queued.max.requests", _I, "500", _at_least(1)),
    PropDef("queued.max.request.bytes", _L, "-1"),
    PropDef("request.timeout.ms", _I, "30000", _at_least(0)),
    PropDef("max.connections", _I, str(INT_MAX), _at_least(0)),
    PropDef("max.connections.per.ip", _I, str(INT_MAX), _at_least(0)),
    PropDef("max.connections.per.ip.overrides", _STR, ""),
    PropDef("max.connection.creation.rate", _I, str(INT_MAX), _at_least(0)),
    PropDef("connections.max.idle.ms", _L, "600000"),
    PropDef("connections.max.reauth.ms", _L, "0"),
    PropDef("connection.failed.authentication.delay.ms", _I, "100", _at_least(0)),
    PropDef("fetch.max.bytes", _I, "57671680", _at_least(1024)),
    PropDef("replica.fetch.max.bytes", _I, "1048576", _at_least(0)),
    PropDef("replica.fetch.response.max.bytes", _I, "10485760", _at_least(0)),
    PropDef("replica.lag.time.max.ms", _L, "30000"),
    PropDef("replica.fetch.wait.max.ms", _I, "500"),
    PropDef("replica.fetch.min.bytes", _I, "1"),
    PropDef("replica.fetch.backoff.ms", _I, "1000", _at_least(0)),
    PropDef("replica.socket.timeout.ms", _I, "30000"),
    PropDef("replica.socket.receive.buffer.bytes", _I, "65536"),
    PropDef("replica.high.watermark.checkpoint.interval.ms", _L, "5000"),
    PropDef("replica.selector.class", _STR, None),
    PropDef("num.replica.fetchers", _I, "1"),
    PropDef("replication.quota.window.num", _I, "11", _at_least(1)),
    PropDef("replication.quota.window.size.seconds", _I, "1", _at_least(1)),
    # Also dynamic per broker in a cluster (broker.dynamic_broker_config, kafka-configs);
    # the log-dirs one is kept but has no effect (no replica moves between log dirs here).
    PropDef("leader.replication.throttled.rate", _L, "9223372036854775807", _at_least(0)),
    PropDef("follower.replication.throttled.rate", _L, "9223372036854775807", _at_least(0)),
    PropDef("replica.alter.log.dirs.io.max.bytes.per.second", _L, "9223372036854775807",
            _at_least(0)),
    PropDef("fetch.purgatory.purge.interval.requests", _I, "1000"),
    PropDef("producer.purgatory.purge.interval.requests", _I, "1000"),
    PropDef("delete.records.purgatory.purge.interval.requests", _I, "1"),
    PropDef("max.incremental.fetch.session.cache.slots", _I, "1000", _at_least(0)),
    # logs
    PropDef("log.dir", _STR, "/tmp/kafka-logs"),
    PropDef("log.dirs", _STR, None),
    PropDef("num.partitions", _I, "1", _at_least(1)),
    PropDef("default.replication.factor", _I, "1", _at_least(1)),
    PropDef("auto.create.topics.enable", _B, "true"),
    PropDef("delete.topic.enable", _B, "true"),
    PropDef("auto.leader.rebalance.enable", _B, "true"),
    PropDef("leader.imbalance.check.interval.seconds", _L, "300", _at_least(1)),
    PropDef("leader.imbalance.per.broker.percentage", _I, "10"),
    PropDef("num.recovery.threads.per.data.dir", _I, "2", _at_least(1)),
    PropDef("log.retention.check.interval.ms", _L, "300000", _at_least(1)),
    PropDef("log.flush.offset.checkpoint.interval.ms", _I, "60000", _at_least(0)),
    PropDef("log.flush.start.offset.checkpoint.interval.ms", _I, "60000", _at_least(0)),
    PropDef("log.flush.scheduler.interval.ms", _L, str(LONG_MAX)),
    PropDef("log.cleaner.enable", _B, "true"),
    PropDef("log.cleaner.threads", _I, "1", _at_least(0)),
    PropDef("log.cleaner.dedupe.buffer.size", _L, "134217728"),
    PropDef("log.cleaner.io.buffer.size", _I, "524288", _at_least(0)),
    PropDef("log.cleaner.io.buffer.load.factor", _D, "0.9"),
    PropDef("log.cleaner.io.max.bytes.per.second", _D, "1.7976931348623157E308"),
    PropDef("log.cleaner.backoff.ms", _L, "15000", _at_least(0)),
    PropDef("log.initial.task.delay.ms", _L, "30000", _at_least(0)),
    PropDef("unstable.api.versions.enable", _B, "false"),
    # groups and offsets
    PropDef("offsets.topic.num.partitions", _I, "50", _at_least(1)),
    PropDef("offsets.topic.replication.factor", _S, "3", _at_least(1)),
    PropDef("offsets.topic.segment.bytes", _I, "104857600", _at_least(1)),
    PropDef("offsets.topic.compression.codec", _I, "0"),
    PropDef("offsets.load.buffer.size", _I, "5242880", _at_least(1)),
    PropDef("offsets.retention.minutes", _I, "10080", _at_least(1)),
    PropDef("offsets.retention.check.interval.ms", _L, "600000", _at_least(1)),
    PropDef("offsets.commit.timeout.ms", _I, "5000", _at_least(1)),
    PropDef("offsets.commit.required.acks", _S, "-1"),
    PropDef("offset.metadata.max.bytes", _I, "4096"),
    PropDef("group.min.session.timeout.ms", _I, "6000"),
    PropDef("group.max.session.timeout.ms", _I, "1800000"),
    PropDef("group.initial.rebalance.delay.ms", _I, "3000"),
    PropDef("group.max.size", _I, str(INT_MAX), _at_least(1)),
    PropDef("group.coordinator.rebalance.protocols", _LIST, "classic"),
    PropDef("transaction.state.log.num.partitions", _I, "50", _at_least(1)),
    PropDef("transaction.state.log.replication.factor", _S, "3", _at_least(1)),
    PropDef("transaction.state.log.min.isr", _I, "2", _at_least(1)),
    PropDef("transaction.state.log.segment.bytes", _I, "104857600", _at_least(1)),
    PropDef("transactional.id.expiration.ms", _I, "604800000", _at_least(1)),
    PropDef("transaction.max.timeout.ms", _I, "900000", _at_least(1)),
    PropDef("producer.id.expiration.ms", _I, "86400000", _at_least(1)),
    PropDef("producer.id.expiration.check.interval.ms", _I, "600000", _at_least(1)),
    # cluster (ZooKeeper mode)
    PropDef("zookeeper.connect", _STR, None),
    PropDef("zookeeper.session.timeout.ms", _I, "18000", _at_least(1)),
    PropDef("zookeeper.connection.timeout.ms", _I, None, _at_least(1)),
    PropDef("zookeeper.max.in.flight.requests", _I, "10", _at_least(1)),
    PropDef("zookeeper.set.acl", _B, "false"),
    PropDef("controller.socket.timeout.ms", _I, "30000"),
    PropDef("controlled.shutdown.enable", _B, "true"),
    PropDef("controlled.shutdown.max.retries", _I, "3"),
    PropDef("controlled.shutdown.retry.backoff.ms", _L, "5000"),
    PropDef("min.insync.replicas", _I, "1", _at_least(1)),
    PropDef("unclean.leader.election.enable", _B, "false"),
    # metrics (accepted, not used)
    PropDef("metric.reporters", _LIST, ""),
    PropDef("metrics.num.samples", _I, "2", _at_least(1)),
    PropDef("metrics.sample.window.ms", _L, "30000", _at_least(1)),
    PropDef("metrics.recording.level", _STR, "INFO"),
    PropDef("kafka.metrics.reporters", _LIST, ""),
    # security: TLS (PEM stores only), SASL (PLAIN, SCRAM), authorizer, client quotas
    PropDef("ssl.protocol", _STR, "TLSv1.3", _one_of("TLSv1.2", "TLSv1.3", "TLS")),
    PropDef("ssl.enabled.protocols", _LIST, "TLSv1.2,TLSv1.3", _each_of("TLSv1.2", "TLSv1.3")),
    PropDef("ssl.cipher.suites", _LIST, ""),
    PropDef("ssl.keystore.type", _STR, "JKS"),
    PropDef("ssl.keystore.location", _STR, None),
    PropDef("ssl.keystore.password", _P, None),
    PropDef("ssl.keystore.key", _P, None),
    PropDef("ssl.keystore.certificate.chain", _P, None),
    PropDef("ssl.key.password", _P, None),
    PropDef("ssl.truststore.type", _STR, "JKS"),
    PropDef("ssl.truststore.location", _STR, None),
    PropDef("ssl.truststore.password", _P, None),
    PropDef("ssl.truststore.certificates", _P, None),
    PropDef("ssl.client.auth", _STR, "none", _one_of("required", "requested", "none")),
    PropDef("ssl.principal.mapping.rules", _STR, "DEFAULT"),
    # Checked by the broker's own connections to its peers (inter-broker listener): "https"
    # matches the peer's advertised host against its certificate, "" does not.
    PropDef("ssl.endpoint.identification.algorithm", _STR, "https", _one_of("https", "HTTPS", "")),
    PropDef("sasl.enabled.mechanisms", _LIST, "GSSAPI"),
    PropDef("sasl.mechanism.inter.broker.protocol", _STR, "GSSAPI"),
    PropDef("sasl.server.max.receive.size", _I, "524288", _at_least(1)),
    PropDef("authorizer.class.name", _STR, "", _one_of("", ACL_AUTHORIZER_CLASS)),
    PropDef("super.users", _STR, None),
    PropDef("allow.everyone.if.no.acl.found", _B, "false"),
    PropDef("quota.window.num", _I, "11", _at_least(1)),
    PropDef("quota.window.size.seconds", _I, "1", _at_least(1)),
    # minikafka's own: the Prometheus endpoint (broker.metrics); empty = off
    PropDef("metrics.prometheus.listener", _STR, "", _host_port_or_empty),
)

# Properties that may also be set per listener, as ``listener.name.<listener>.<name>``.
LISTENER_PROPS: frozenset[str] = frozenset(
    p.name for p in _BROKER_PROPS
    if (p.name.startswith(("ssl.", "sasl.")) and p.name != "sasl.mechanism.inter.broker.protocol")
    or p.name == "connections.max.reauth.ms")
# Properties set per listener *and* SASL mechanism: ``listener.name.<l>.<mechanism>.<name>``
# (the JAAS configuration exists only in this form on a broker).
MECHANISM_PROPS: dict[str, PropDef] = {
    "sasl.jaas.config": PropDef("sasl.jaas.config", _P, None),
    "connections.max.reauth.ms": PropDef("connections.max.reauth.ms", _L, "0"),
}
_LISTENER_PREFIX = re.compile(r"listener\.name\.([a-z0-9_]+)\.(.+)")


def _topic_synonym_props() -> Iterable[PropDef]:
    """Broker properties that are synonyms of topic configs (log.retention.hours, ...)."""
    for definition in TOPIC_CONFIGS.values():
        for synonym in definition.synonyms:
            prop_type = PropType[definition.type.name] if definition.type.name in PropType.__members__ else _STR
            check = definition.check if synonym.factor_ms == 1 else None
            yield PropDef(synonym.name, prop_type, synonym.default,
                          _wrap_topic_check(check) if check is not None else None)


def _wrap_topic_check(check: Callable[..., str | None]) -> Check:
    def wrapped(value: PropValue) -> str | None:
        return None if value is None else check(value)

    return wrapped


def _build_table() -> dict[str, PropDef]:
    table: dict[str, PropDef] = {}
    for prop in _topic_synonym_props():
        table.setdefault(prop.name, prop)
    for prop in _BROKER_PROPS:
        table[prop.name] = prop
    return table


PROPERTIES: dict[str, PropDef] = _build_table()


def parse_value(prop: PropDef, raw: str | None) -> PropValue:
    """Parse ``raw`` as Kafka's ConfigDef.parseType; ConfigError naming the property."""
    if raw is None:
        return None
    text = raw.strip()
    t = prop.type
    try:
        if t is PropType.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ValueError("Expected value to be either true or false")
            return text.lower() == "true"
        if t in (PropType.INT, PropType.SHORT, PropType.LONG):
            number = int(text, 10)
            limit = {PropType.INT: INT_MAX, PropType.SHORT: 2**15 - 1, PropType.LONG: LONG_MAX}[t]
            if not -limit - 1 <= number <= limit:
                raise ValueError(f"Not a number of type {t.name}")
            return number
        if t is PropType.DOUBLE:
            return float(text)
        if t is PropType.LIST:
            return [item.strip() for item in text.split(",") if item.strip()]
        return text
    except ValueError as exc:
        raise ConfigError(f"Invalid value {raw!r} for configuration {prop.name}: {exc}") from None


def parse_properties_text(text: str, source: str = "properties") -> dict[str, str]:
    """Java ``.properties`` syntax (the subset server.properties files use)."""
    out: dict[str, str] = {}
    logical: list[str] = []
    for raw_line in text.splitlines():
        line = raw_line.strip() if not logical else raw_line.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical)
        logical = []
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", entry)
        if match is None:
            key, value = entry, ""
        else:
            key, value = match.group(1), match.group(2)
        out[key.strip()] = value.strip()
    if logical:
        raise ConfigError(f"{source}: file ends inside a line continuation")
    return out


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: ``NAME://host:port``; host "" means every interface."""

    listener_name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener_name}://{self.host}:{self.port}"


def parse_endpoints(prop: str, entries: list[str], protocol_map: Mapping[str, str]) -> list[Endpoint]:
    endpoints: list[Endpoint] = []
    for entry in entries:
        match = re.fullmatch(r"([A-Za-z0-9_]+)://(\[[0-9a-fA-F:.]*\]|[^:\[\]]*):(-?\d+)", entry)
        if match is None:
            raise ConfigError(f"Invalid value {entry!r} for configuration {prop}: "
                              "expected LISTENER_NAME://host:port")
        name, host, port_s = match.group(1).upper(), match.group(2).strip("[]"), match.group(3)
        port = int(port_s)
        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid value {entry!r} for configuration {prop}: port {port}")
        if name not in protocol_map:
            raise ConfigError(f"Invalid value {entry!r} for configuration {prop}: listener "
                              f"{name} is not in listener.security.protocol.map")
        if any(e.listener_name == name for e in endpoints):
            raise ConfigError(f"Invalid value for configuration {prop}: listener {name} twice")
        endpoints.append(Endpoint(name, host, port))
    return endpoints


def _protocol_map(raw: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        name, sep, proto = item.partition(":")
        if not sep:
            raise ConfigError(f"Invalid value {raw!r} for configuration "
                              "listener.security.protocol.map: expected NAME:PROTOCOL pairs")
        protocol = proto.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid value {raw!r} for configuration "
                              f"listener.security.protocol.map: unknown security protocol "
                              f"{proto.strip()!r} (one of {', '.join(SECURITY_PROTOCOLS)})")
        out[name.strip().upper()] = protocol
    return out


def _ip_overrides(raw: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not count.strip().isdigit():
            raise ConfigError(f"Invalid value {raw!r} for configuration "
                              "max.connections.per.ip.overrides: expected host:count pairs")
        out[host.strip()] = int(count)
    return out


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Validated broker configuration. ``values`` holds every known property (defaults
    filled in), typed; ``explicit`` the properties set explicitly, as given."""

    values: Mapping[str, PropValue]
    explicit: Mapping[str, str]
    listeners: tuple[Endpoint, ...]
    advertised_listeners: tuple[Endpoint, ...]
    log_dir: Path  # the first of log.dirs: the broker's own files live there too
    ip_connection_overrides: Mapping[str, int] = field(default_factory=dict)
    # listener name -> security protocol (listener.security.protocol.map)
    security_protocols: Mapping[str, str] = field(default_factory=dict)
    inter_broker_listener_name: str = "PLAINTEXT"
    log_dirs: tuple[Path, ...] = ()  # every entry of log.dirs (JBOD), log_dir first

    # -- construction ------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Validate ``props`` (name -> string value); ConfigError names the bad property."""
        prefixed: dict[str, PropDef] = {}
        for name in props:
            if name not in PROPERTIES:
                prop = _listener_prop(name)
                if prop is None:
                    raise ConfigError(f"Unknown configuration {name!r}")
                prefixed[name] = prop
        values: dict[str, PropValue] = {}
        for name, prop in [*PROPERTIES.items(), *prefixed.items()]:
            raw = props.get(name, prop.default)
            value = parse_value(prop, raw)
            if prop.check is not None and value is not None:
                complaint = prop.check(value)
                if complaint is not None:
                    raise ConfigError(f"Invalid value {raw!r} for configuration {name}: {complaint}")
            values[name] = value
        protocol_map = _protocol_map(str(values["listener.security.protocol.map"]))
        listeners = parse_endpoints("listeners", _as_list(values["listeners"]), protocol_map)
        if not listeners:
            raise ConfigError("Invalid value for configuration listeners: no listener given")
        advertised_raw = values["advertised.listeners"]
        advertised = (parse_endpoints("advertised.listeners", _as_list(advertised_raw), protocol_map)
                      if advertised_raw is not None else listeners)
        if any(a.port == 0 for a in advertised if advertised_raw is not None):
            raise ConfigError("Invalid value for configuration advertised.listeners: port 0")
        listener_names = {e.listener_name for e in listeners}
        if any(a.listener_name not in listener_names for a in advertised):
            raise ConfigError(
                "Invalid value for configuration advertised.listeners: listener names must be "
                f"equal to or a subset of the ones defined in listeners ({', '.join(sorted(listener_names))})")
        if any(a.host == "0.0.0.0" for a in advertised):
            raise ConfigError("Invalid value for configuration advertised.listeners: cannot use "
                              "the nonroutable meta-address 0.0.0.0")
        inter_broker = _inter_broker_listener(props, values, protocol_map,
                                              {a.listener_name for a in advertised})
        log_dirs = values["log.dirs"]
        dirs = [d.strip() for d in str(log_dirs if log_dirs is not None else values["log.dir"]).split(",")
                if d.strip()]
        if not dirs:
            raise ConfigError(f"Invalid value {log_dirs!r} for configuration log.dirs: "
                              "no log directory given")
        if len({os.path.abspath(d) for d in dirs}) != len(dirs):
            raise ConfigError(f"Invalid value {log_dirs!r} for configuration log.dirs: "
                              "Duplicate log directory found")
        if values["zookeeper.connect"] is not None:
            _check_zookeeper_connect(str(values["zookeeper.connect"]))
            if _num(values["broker.id"]) < 0 and _num(values["node.id"]) < 0:
                raise ConfigError("Invalid value -1 for configuration broker.id: set it (a "
                                  "unique id per broker) when zookeeper.connect is set; ids "
                                  "are not generated")
        queued_bytes = _num(values["queued.max.request.bytes"])
        if 0 < queued_bytes < _num(values["socket.request.max.bytes"]):
            raise ConfigError(f"Invalid value {queued_bytes} for configuration "
                              "queued.max.request.bytes: must be -1 or at least "
                              "socket.request.max.bytes")
        broker_id, node_id = int(_num(values["broker.id"])), int(_num(values["node.id"]))
        if broker_id >= 0 and node_id >= 0 and broker_id != node_id:
            raise ConfigError(f"Invalid value {node_id} for configuration node.id: "
                              f"differs from broker.id {broker_id}")
        return cls(
            values=values,
            explicit=dict(props),
            listeners=tuple(listeners),
            advertised_listeners=tuple(advertised),
            log_dir=Path(dirs[0]),
            log_dirs=tuple(Path(d) for d in dirs),
            ip_connection_overrides=_ip_overrides(str(values["max.connections.per.ip.overrides"])),
            security_protocols={e.listener_name: protocol_map[e.listener_name] for e in listeners},
            inter_broker_listener_name=inter_broker,
        )

    @classmethod
    def load(cls, config_file: Path | None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """``--config FILE`` then ``--override KEY=VALUE`` arguments, validated."""
        props: dict[str, str] = {}
        if config_file is not None:
            try:
                text = config_file.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read config file {config_file}: {exc}") from None
            props.update(parse_properties_text(text, str(config_file)))
        for item in overrides:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ConfigError(f"--override {item!r}: expected KEY=VALUE")
            props[name.strip()] = value.strip()
        return cls.from_properties(props)

    # -- typed accessors ----------------------------------------------------------------

    def get_int(self, name: str) -> int:
        value = self.values[name]
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} is not an integer property")
        return value

    def get_bool(self, name: str) -> bool:
        value = self.values[name]
        if not isinstance(value, bool):
            raise TypeError(f"{name} is not a boolean property")
        return value

    @property
    def broker_id(self) -> int:
        """``broker.id`` (or ``node.id``); -1 (Kafka's "generate one") becomes 0 on a single node."""
        broker_id = self.get_int("broker.id")
        if broker_id < 0:
            broker_id = self.get_int("node.id")
        return max(broker_id, 0)

    @property
    def socket_request_max_bytes(self) -> int:
        return self.get_int("socket.request.max.bytes")

    @property
    def queued_max_requests(self) -> int:
        return self.get_int("queued.max.requests")

    @property
    def num_io_threads(self) -> int:
        return self.get_int("num.io.threads")

    @property
    def num_network_threads(self) -> int:
        return self.get_int("num.network.threads")

    @property
    def max_connections(self) -> int:
        return self.get_int("max.connections")

    @property
    def max_connections_per_ip(self) -> int:
        return self.get_int("max.connections.per.ip")

    @property
    def connections_max_idle_ms(self) -> int:
        value = self.values["connections.max.idle.ms"]
        assert isinstance(value, int)
        return value

    @property
    def socket_listen_backlog_size(self) -> int:
        return self.get_int("socket.listen.backlog.size")

    @property
    def message_max_bytes(self) -> int:
        return self.get_int("message.max.bytes")

    @property
    def num_partitions(self) -> int:
        return self.get_int("num.partitions")

    @property
    def default_replication_factor(self) -> int:
        return self.get_int("default.replication.factor")

    @property
    def auto_create_topics_enable(self) -> bool:
        return self.get_bool("auto.create.topics.enable")

    def security_protocol(self, listener_name: str) -> str:
        return self.security_protocols[listener_name]

    def listener_values(self, listener_name: str) -> dict[str, PropValue]:
        """The security properties as they apply to ``listener_name``: each one's
        ``listener.name.<listener>.<name>`` value when set, else the broker-wide one; plus
        the per-mechanism ones under their ``<mechanism>.<name>`` keys (``plain.sasl.jaas.config``)."""
        prefix = f"listener.name.{listener_name.lower()}."
        out: dict[str, PropValue] = {name: self.values[name] for name in LISTENER_PROPS}
        for name, value in self.values.items():
            if name.startswith(prefix):
                out[name[len(prefix):]] = value
        return out

    @property
    def zookeeper_connect(self) -> str | None:
        """``zookeeper.connect``: ``host:port[,host:port...][/chroot]``; None on a single node."""
        value = self.values["zookeeper.connect"]
        return None if value is None else str(value)

    @property
    def zookeeper_session_timeout_ms(self) -> int:
        return self.get_int("zookeeper.session.timeout.ms")

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        """``zookeeper.connection.timeout.ms``; unset means the session timeout, as in Kafka."""
        value = self.values["zookeeper.connection.timeout.ms"]
        return value if isinstance(value, int) else self.zookeeper_session_timeout_ms

    @property
    def broker_rack(self) -> str | None:
        value = self.values["broker.rack"]
        return None if value is None else str(value)

    def max_connections_for(self, host: str) -> int:
        """``max.connections.per.ip``, or the host's entry in ``max.connections.per.ip.overrides``."""
        return self.ip_connection_overrides.get(host, self.max_connections_per_ip)


def _listener_prop(name: str) -> PropDef | None:
    """The definition of a ``listener.name.<l>.<prop>`` or ``listener.name.<l>.<mechanism>.<prop>``
    property (under its full name), or None when ``name`` is no such property."""
    match = _LISTENER_PREFIX.fullmatch(name)
    if match is None:
        return None
    rest = match.group(2)
    if rest in LISTENER_PROPS:
        base = PROPERTIES[rest]
        return PropDef(name, base.type, None, base.check)
    mechanism, _, suffix = rest.partition(".")
    base_def = MECHANISM_PROPS.get(suffix)
    if base_def is None or not mechanism or mechanism != mechanism.lower():
        return None
    return PropDef(name, base_def.type, None, base_def.check)


def _inter_broker_listener(props: Mapping[str, str], values: Mapping[str, PropValue],
                           protocol_map: Mapping[str, str], advertised: set[str]) -> str:
    """Kafka's getInterBrokerListenerNameAndSecurityProtocol, and its checks."""
    named = values["inter.broker.listener.name"]
    if named is not None:
        if "security.inter.broker.protocol" in props:
            raise ConfigError("Invalid value for configuration inter.broker.listener.name: only "
                              "one of inter.broker.listener.name and security.inter.broker.protocol "
                              "should be set")
        listener = str(named).upper()
        if listener not in protocol_map:
            raise ConfigError(f"Invalid value {named!r} for configuration inter.broker.listener.name: "
                              "not in listener.security.protocol.map")
        prop = "inter.broker.listener.name"
    else:
        listener = str(values["security.inter.broker.protocol"])
        prop = "security.inter.broker.protocol"
    if listener not in advertised:
        raise ConfigError(f"Invalid value {listener!r} for configuration {prop}: "
                          "inter.broker.listener.name must be a listener name defined in "
                          "advertised.listeners. The valid options based on currently configured "
                          f"listeners are {','.join(sorted(advertised))}")
    return listener

_ZK_SERVER = re.compile(r"(\[[0-9a-fA-F:.]+\]|[^,/:\s]+):(\d{1,5})")


def _check_zookeeper_connect(connect: str) -> None:
    """``host:port[,host:port...][/chroot]``, as ZooKeeper's ConnectStringParser takes it."""
    hosts, _, chroot = connect.strip().partition("/")
    servers = hosts.split(",")
    bad = [s for s in servers
           if (m := _ZK_SERVER.fullmatch(s.strip())) is None or not 0 < int(m.group(2)) < 65536]
    parts = chroot.rstrip("/").split("/") if chroot.rstrip("/") else []
    if not hosts or bad or any(p in ("", ".", "..") for p in parts):
        raise ConfigError(f"Invalid value {connect!r} for configuration zookeeper.connect: "
                          "expected host:port[,host:port...][/chroot]")


def _as_list(value: PropValue) -> list[str]:
    if isinstance(value, list):
        return value
    return [] if value is None else [str(value)]


def _num(value: PropValue) -> int:
    assert isinstance(value, int) and not isinstance(value, bool)
    return value

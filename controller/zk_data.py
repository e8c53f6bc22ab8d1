"""Kafka's znodes in ZooKeeper mode: paths and JSON, as Apache Kafka 3.9 writes and reads them.

Pure (no I/O): paths are strings, payloads are ``bytes`` in, dataclasses out, and back. The
shapes follow Kafka's ``kafka.zk.ZkData`` (``BrokerIdZNode``, ``TopicZNode``,
``TopicPartitionStateZNode``, ...) and are checked field by field against a real Kafka
3.9.1 broker in ``tests/cluster/test_zk_data_kafka.py``. Paths are relative to the chroot
of ``zookeeper.connect``. JSON is written compact (``{"a":1}``) as Kafka's Jackson does; key
order carries no meaning (Kafka's own order is a hash map's).

Znodes (Kafka 3.9, ZooKeeper mode)::

  /brokers/ids/<id>          ephemeral. {"version":5,"host":h,"port":p,"endpoints":["PLAINTEXT://h:p"],
                             "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"rack":r
                             (only when set),"jmx_port":-1,"timestamp":"<ms>","features":{}};
                             the broker epoch is this znode's czxid
  /controller                ephemeral. {"version":2,"brokerid":id,"timestamp":"<ms>",
                             "kraftControllerEpoch":-1}
  /controller_epoch          the epoch as ASCII digits ("1"); written with version checks
  /brokers/topics/<t>        {"version":3,"partitions":{"0":[1,2]},"topic_id":"<base64 uuid>",
                             "adding_replicas":{},"removing_replicas":{}}
  /brokers/topics/<t>/partitions/<p>/state
                             {"version":1,"leader":1,"leader_epoch":0,"isr":[1],
                             "controller_epoch":1} (+"leader_recovery_state":1 when recovering);
                             the znode's version is the partition epoch
  /config/topics/<t>         {"version":1,"config":{"retention.ms":"1000"}} (values are strings)
  /config/changes/config_change_<10 digits>
                             persistent sequential. {"version":2,"entity_path":"topics/<t>"}
  /admin/delete_topics/<t>   no data: the topic is to be deleted
  /admin/preferred_replica_election
                             {"version":1,"partitions":[{"topic":t,"partition":0}]}
  /admin/reassign_partitions {"version":1,"partitions":[{"topic":t,"partition":0,"replicas":[1]}]}
  /isr_change_notification/isr_change_<10 digits>
                             {"version":1,"partitions":[{"topic":t,"partition":0}]}
  /log_dir_event_notification/log_dir_event_<10 digits>
                             {"version":1,"broker":id,"event":1}
  /cluster/id                {"version":"1","id":"<cluster id>"} (the version is a string)
  /feature                   {"version":2,"status":1,"features":{}}

Persistent parents that Kafka creates at broker start-up, with no data, are
``PERSISTENT_PATHS``. Decoding rejects what Kafka's decoders reject (bad JSON, a missing
or mistyped field) with ``ZkDataError`` naming the znode kind.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from protocol.topic_partition import TopicPartition

# -- paths ----------------------------------------------------------------------------

BROKERS: Final = "/brokers"
BROKER_IDS: Final = "/brokers/ids"
BROKER_SEQUENCE_ID: Final = "/brokers/seqid"
TOPICS: Final = "/brokers/topics"
CONTROLLER: Final = "/controller"
CONTROLLER_EPOCH: Final = "/controller_epoch"
CONFIG: Final = "/config"
CONFIG_CHANGES: Final = "/config/changes"
CONFIG_CHANGE_PREFIX: Final = "config_change_"
ADMIN: Final = "/admin"
DELETE_TOPICS: Final = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION: Final = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS: Final = "/admin/reassign_partitions"
ISR_CHANGE_NOTIFICATION: Final = "/isr_change_notification"
ISR_CHANGE_PREFIX: Final = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION: Final = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX: Final = "log_dir_event_"
CLUSTER_ID: Final = "/cluster/id"
FEATURE: Final = "/feature"
CONSUMERS: Final = "/consumers"
LATEST_PRODUCER_ID_BLOCK: Final = "/latest_producer_id_block"

# Kafka's ConfigType.ALL, each under /config.
CONFIG_TYPES: Final = ("topics", "clients", "users", "brokers", "ips")

# ZkData.PersistentZkPaths: created (empty) by every broker at start-up if missing.
PERSISTENT_PATHS: Final[tuple[str, ...]] = (
    CONSUMERS, BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS, BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION, LATEST_PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{kind}" for kind in CONFIG_TYPES),
)

MATCH_ANY_VERSION: Final = -1  # a conditional write that matches any znode version
INITIAL_CONTROLLER_EPOCH: Final = 0  # /controller_epoch is created with it; the first controller makes it 1
NO_LEADER: Final = -1  # LeaderAndIsr.NoLeader
JMX_PORT_NONE: Final = -1
LEADER_RECOVERY_RECOVERED: Final = 0
LEADER_RECOVERY_RECOVERING: Final = 1
LOG_DIR_FAILURE_EVENT: Final = 1
FEATURE_ENABLED: Final = 1


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(tp: TopicPartition) -> str:
    return f"{TOPICS}/{tp.topic}/partitions/{tp.partition}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{partition_path(tp)}/state"


def config_path(entity_type: str, entity_name: str) -> str:
    return f"{CONFIG}/{entity_type}/{entity_name}"


def topic_config_path(topic: str) -> str:
    return config_path("topics", topic)


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def sequence_number(child_name: str, prefix: str) -> int:
    """``config_change_0000000007`` -> 7 (ZooKeeper's 10-digit sequential suffix)."""
    if not child_name.startswith(prefix) or not child_name[len(prefix):].isdigit():
        raise ZkDataError(f"{child_name!r} is not a {prefix}<sequence> znode")
    return int(child_name[len(prefix):])


# -- errors and JSON helpers ------------------------------------------------------------


class ZkDataError(ValueError):
    """A znode's payload that Kafka would refuse to parse; the message names the znode kind."""


def _dump(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _load(data: bytes | None, kind: str) -> dict[str, Any]:
    if not data:
        raise ZkDataError(f"{kind}: no data")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(f"{kind}: not JSON ({exc}): {data[:200]!r}") from None
    if not isinstance(value, dict):
        raise ZkDataError(f"{kind}: not a JSON object: {data[:200]!r}")
    return value


def _int(obj: Mapping[str, Any], key: str, kind: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZkDataError(f"{kind}: field {key!r} must be an integer, got {value!r}")
    return value


def _str(obj: Mapping[str, Any], key: str, kind: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ZkDataError(f"{kind}: field {key!r} must be a string, got {value!r}")
    return value


def _int_list(value: Any, what: str, kind: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int)
                                          for v in value):
        raise ZkDataError(f"{kind}: {what} must be a list of integers, got {value!r}")
    return tuple(value)


def _partition_list(obj: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    partitions = obj.get("partitions")
    if not isinstance(partitions, list) or not all(isinstance(p, dict) for p in partitions):
        raise ZkDataError(f"{kind}: field 'partitions' must be a list of objects")
    return partitions


def _topic_partition(entry: Mapping[str, Any], kind: str) -> TopicPartition:
    return TopicPartition(_str(entry, "topic", kind), _int(entry, "partition", kind))


# -- Kafka's Uuid text form -------------------------------------------------------------


def uuid_to_kafka(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_kafka(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``; ZkDataError for anything but 22 base64url characters."""
    if len(text) != 22:
        raise ZkDataError(f"topic id {text!r}: expected 22 base64 characters")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raise ZkDataError(f"topic id {text!r}: not base64") from None
    return uuid.UUID(bytes=raw)


# -- /brokers/ids/<id> --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        """``NAME://host:port`` (IPv6 hosts in brackets), Kafka's ``EndPoint.connectionString``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class FeatureRange:
    """A supported feature's version range (``{"min_version":1,"max_version":3}``)."""

    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """``/brokers/ids/<id>`` (BrokerIdZNode, JSON version 5)."""

    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    timestamp_ms: int
    rack: str | None = None
    jmx_port: int = JMX_PORT_NONE
    features: Mapping[str, FeatureRange] = field(default_factory=dict)
    version: int = 5

    @property
    def path(self) -> str:
        return broker_path(self.broker_id)

    def endpoint(self, listener_name: str) -> BrokerEndpoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)

    def encode(self) -> bytes:
        # Kafka keeps a top-level host/port for old clients: the first PLAINTEXT endpoint,
        # or null/-1 when there is none.
        plain = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        body: dict[str, Any] = {
            "version": self.version,
            "host": plain.host if plain is not None else None,
            "port": plain.port if plain is not None else -1,
            "endpoints": [e.connection_string for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp_ms),
            "listener_security_protocol_map": {e.listener_name: e.security_protocol
                                               for e in self.endpoints},
            "features": {name: {"min_version": r.min_version, "max_version": r.max_version}
                         for name, r in self.features.items()},
        }
        if self.rack is not None:
            body["rack"] = self.rack
        return _dump(body)

    @classmethod
    def decode(cls, broker_id: int, data: bytes | None) -> BrokerRegistration:
        kind = f"broker registration {broker_id}"
        obj = _load(data, kind)
        version = _int(obj, "version", kind)
        jmx_port = _int(obj, "jmx_port", kind)
        if version < 1:
            raise ZkDataError(f"{kind}: unsupported version {version}")
        if version == 1:
            endpoints: tuple[BrokerEndpoint, ...] = (
                BrokerEndpoint("PLAINTEXT", _str(obj, "host", kind), _int(obj, "port", kind)),)
        else:
            protocols = obj.get("listener_security_protocol_map")
            if protocols is None:
                protocols = {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
            if not isinstance(protocols, dict):
                raise ZkDataError(f"{kind}: listener_security_protocol_map must be an object")
            raw = obj.get("endpoints")
            if not isinstance(raw, list) or not all(isinstance(e, str) for e in raw):
                raise ZkDataError(f"{kind}: endpoints must be a list of strings")
            endpoints = tuple(_parse_endpoint(e, protocols, kind) for e in raw)
        rack = obj.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise ZkDataError(f"{kind}: rack must be a string")
        timestamp = obj.get("timestamp")
        timestamp_ms = int(timestamp) if isinstance(timestamp, str) and timestamp.isdigit() else -1
        return cls(broker_id, endpoints, timestamp_ms, rack, jmx_port,
                   _decode_features(obj.get("features"), kind), version)


def _parse_endpoint(text: str, protocols: Mapping[str, Any], kind: str) -> BrokerEndpoint:
    name, sep, rest = text.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not colon or not port.lstrip("-").isdigit():
        raise ZkDataError(f"{kind}: bad endpoint {text!r}")
    protocol = protocols.get(name)
    if not isinstance(protocol, str):
        raise ZkDataError(f"{kind}: endpoint {text!r} has no security protocol")
    return BrokerEndpoint(name, host.strip("[]"), int(port), protocol)


def _decode_features(raw: Any, kind: str) -> dict[str, FeatureRange]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ZkDataError(f"{kind}: features must be an object")
    out: dict[str, FeatureRange] = {}
    for name, versions in raw.items():
        if not isinstance(versions, dict):
            raise ZkDataError(f"{kind}: feature {name!r} must be an object")
        out[name] = FeatureRange(_int(versions, "min_version", kind),
                                 _int(versions, "max_version", kind))
    return out


# -- /controller, /controller_epoch ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """``/controller`` (ControllerZNode, JSON version 2)."""

    broker_id: int
    timestamp_ms: int
    kraft_controller_epoch: int = -1

    def encode(self) -> bytes:
        return _dump({"version": 2, "brokerid": self.broker_id,
                      "timestamp": str(self.timestamp_ms),
                      "kraftControllerEpoch": self.kraft_controller_epoch})

    @classmethod
    def decode(cls, data: bytes | None) -> ControllerRegistration:
        obj = _load(data, "controller")
        timestamp = obj.get("timestamp")
        kraft = obj.get("kraftControllerEpoch", -1)
        if isinstance(kraft, bool) or not isinstance(kraft, int):
            raise ZkDataError(f"controller: kraftControllerEpoch must be an integer: {kraft!r}")
        return cls(_int(obj, "brokerid", "controller"),
                   int(timestamp) if isinstance(timestamp, str) and timestamp.isdigit() else -1,
                   kraft)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | None) -> int:
    text = (data or b"").decode("ascii", "replace").strip()
    if not text.lstrip("-").isdigit():
        raise ZkDataError(f"controller epoch: not an integer: {data!r}")
    return int(text)


# -- /brokers/topics/<t> -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/<t>`` (TopicZNode, JSON version 3): replicas per partition."""

    partitions: Mapping[int, ReplicaAssignment]
    topic_id: uuid.UUID | None = None

    @classmethod
    def of(cls, replicas: Mapping[int, Sequence[int]],
           topic_id: uuid.UUID | None = None) -> TopicAssignment:
        return cls({p: ReplicaAssignment(tuple(r)) for p, r in replicas.items()}, topic_id)

    def replicas(self) -> dict[int, tuple[int, ...]]:
        return {p: a.replicas for p, a in self.partitions.items()}

    def encode(self) -> bytes:
        body: dict[str, Any] = {
            "version": 3,
            "partitions": {str(p): list(a.replicas) for p, a in sorted(self.partitions.items())},
            "adding_replicas": {str(p): list(a.adding_replicas)
                                for p, a in sorted(self.partitions.items()) if a.adding_replicas},
            "removing_replicas": {str(p): list(a.removing_replicas)
                                  for p, a in sorted(self.partitions.items())
                                  if a.removing_replicas},
        }
        if self.topic_id is not None:
            body["topic_id"] = uuid_to_kafka(self.topic_id)
        return _dump(body)

    @classmethod
    def decode(cls, topic: str, data: bytes | None) -> TopicAssignment:
        kind = f"topic {topic!r}"
        if not data:  # Kafka: no data -> no partitions, no topic id
            return cls({})
        obj = _load(data, kind)
        raw_id = obj.get("topic_id")
        if raw_id is not None and not isinstance(raw_id, str):
            raise ZkDataError(f"{kind}: topic_id must be a string")
        partitions_raw = obj.get("partitions", {})
        if not isinstance(partitions_raw, dict):
            raise ZkDataError(f"{kind}: partitions must be an object")
        adding = obj.get("adding_replicas") or {}
        removing = obj.get("removing_replicas") or {}
        if not isinstance(adding, dict) or not isinstance(removing, dict):
            raise ZkDataError(f"{kind}: adding/removing_replicas must be objects")
        partitions: dict[int, ReplicaAssignment] = {}
        for key, replicas in partitions_raw.items():
            if not key.lstrip("-").isdigit():
                raise ZkDataError(f"{kind}: partition {key!r} is not a number")
            partitions[int(key)] = ReplicaAssignment(
                _int_list(replicas, f"replicas of partition {key}", kind),
                _int_list(adding.get(key, []), f"adding replicas of partition {key}", kind),
                _int_list(removing.get(key, []), f"removing replicas of partition {key}", kind))
        try:
            topic_id = uuid_from_kafka(raw_id) if raw_id is not None else None
        except ZkDataError as exc:
            raise ZkDataError(f"{kind}: {exc}") from None
        return cls(partitions, topic_id)


# -- /brokers/topics/<t>/partitions/<p>/state ----------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition's leader and ISR (TopicPartitionStateZNode, JSON version 1).

    ``zk_version`` is the znode's version when read (Kafka's partition epoch): the next
    write of the state is conditional on it. It is not part of the JSON."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    zk_version: int = 0

    def encode(self) -> bytes:
        body: dict[str, Any] = {"version": 1, "leader": self.leader,
                                "leader_epoch": self.leader_epoch,
                                "controller_epoch": self.controller_epoch,
                                "isr": list(self.isr)}
        if self.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
            body["leader_recovery_state"] = self.leader_recovery_state
        return _dump(body)

    @classmethod
    def decode(cls, data: bytes | None, zk_version: int = 0) -> PartitionState:
        kind = "partition state"
        obj = _load(data, kind)
        recovery = obj.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED)
        if recovery not in (LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING):
            raise ZkDataError(f"{kind}: unknown leader_recovery_state {recovery!r}")
        return cls(_int(obj, "leader", kind), _int(obj, "leader_epoch", kind),
                   _int_list(obj.get("isr"), "isr", kind), _int(obj, "controller_epoch", kind),
                   recovery, zk_version)


# -- /config/<type>/<name>, /config/changes --------------------------------------------------


def encode_entity_config(configs: Mapping[str, str]) -> bytes:
    """``/config/topics/<t>`` and the other entity configs: ``{"version":1,"config":{...}}``."""
    return _dump({"version": 1, "config": {k: str(v) for k, v in sorted(configs.items())}})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    """Kafka's ConfigEntityZNode.decode: no data or no "config" object -> no overrides."""
    if not data:
        return {}
    obj = _load(data, "entity config")
    config = obj.get("config")
    if not isinstance(config, dict):
        return {}
    out: dict[str, str] = {}
    for key, value in config.items():
        if not isinstance(value, str):
            raise ZkDataError(f"entity config: value of {key!r} must be a string")
        out[key] = value
    return out


def encode_config_change(entity_type: str, entity_name: str) -> bytes:
    """A ``/config/changes/config_change_`` notification (version 2)."""
    return _dump({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})


def decode_config_change(data: bytes | None) -> tuple[str, str]:
    """-> (entity type, entity name); Kafka's version-2 notifications only."""
    kind = "config change notification"
    obj = _load(data, kind)
    version = _int(obj, "version", kind)
    if version != 2:
        raise ZkDataError(f"{kind}: unsupported version {version}")
    entity_type, sep, entity_name = _str(obj, "entity_path", kind).partition("/")
    if not sep or not entity_name:
        raise ZkDataError(f"{kind}: entity_path must be <type>/<name>")
    return entity_type, entity_name


# -- admin requests and notifications ---------------------------------------------------------


def _encode_partitions(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))]


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _dump({"version": 1, "partitions": _encode_partitions(partitions)})


def decode_preferred_replica_election(data: bytes | None) -> frozenset[TopicPartition]:
    kind = "preferred replica election"
    return frozenset(_topic_partition(p, kind) for p in _partition_list(_load(data, kind), kind))


def encode_isr_change(partitions: Iterable[TopicPartition]) -> bytes:
    return _dump({"version": 1, "partitions": _encode_partitions(partitions)})


def decode_isr_change(data: bytes | None) -> frozenset[TopicPartition]:
    kind = "ISR change notification"
    return frozenset(_topic_partition(p, kind) for p in _partition_list(_load(data, kind), kind))


def encode_reassignment(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    """The legacy ``/admin/reassign_partitions`` request (version 1)."""
    return _dump({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in sorted(reassignment.items())]})


def decode_reassignment(data: bytes | None) -> dict[TopicPartition, tuple[int, ...]]:
    kind = "partition reassignment"
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for entry in _partition_list(_load(data, kind), kind):
        out[_topic_partition(entry, kind)] = _int_list(entry.get("replicas"), "replicas", kind)
    return out


def encode_log_dir_event(broker_id: int) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes | None) -> int:
    """-> the broker id whose log directory failed."""
    return _int(_load(data, "log dir event"), "broker", "log dir event")


# -- /cluster/id, /feature -----------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    return _str(_load(data, "cluster id"), "id", "cluster id")


@dataclass(frozen=True, slots=True)
class FeatureZNode:
    """``/feature`` (FeatureZNode, version 2): finalized feature levels, enabled or not."""

    features: Mapping[str, int] = field(default_factory=dict)
    status: int = FEATURE_ENABLED
    version: int = 2

    def encode(self) -> bytes:
        return _dump({"version": self.version, "status": self.status,
                      "features": {n: {"max_version_level": v}
                                   for n, v in sorted(self.features.items())}})

    @classmethod
    def decode(cls, data: bytes | None) -> FeatureZNode:
        kind = "feature"
        obj = _load(data, kind)
        version = _int(obj, "version", kind)
        if version not in (1, 2):
            raise ZkDataError(f"{kind}: unsupported version {version}")
        raw = obj.get("features")
        if not isinstance(raw, dict):
            raise ZkDataError(f"{kind}: features must be an object")
        features = {}
        for name, levels in raw.items():
            if not isinstance(levels, dict):
                raise ZkDataError(f"{kind}: feature {name!r} must be an object")
            features[name] = _int(levels, "max_version_level", kind)
        return cls(features, _int(obj, "status", kind), version)

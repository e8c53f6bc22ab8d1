"""broker.config: server.properties syntax, Kafka's defaults, listeners, validation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.config import PROPERTIES, BrokerConfig, ConfigError, Endpoint, parse_properties_text

pytestmark = pytest.mark.timeout(30)


def test_kafka_defaults() -> None:
    config = BrokerConfig.from_properties({})
    assert config.get_int("num.partitions") == 1
    assert config.get_int("socket.request.max.bytes") == 104857600
    assert config.get_int("queued.max.requests") == 500
    assert config.get_int("num.io.threads") == 8
    assert config.get_int("message.max.bytes") == 1048588
    assert config.get_int("log.retention.hours") == 168
    assert config.values["log.retention.ms"] is None
    assert config.get_int("log.segment.bytes") == 1073741824
    assert config.get_int("offsets.topic.num.partitions") == 50
    assert config.get_int("connections.max.idle.ms") == 600000
    assert config.auto_create_topics_enable is True
    assert config.log_dir == Path("/tmp/kafka-logs")
    assert config.broker_id == 0  # -1 (unset) on a single node
    assert config.explicit == {}


def test_every_topic_config_synonym_is_a_known_broker_property() -> None:
    from broker.topic_config import TOPIC_CONFIGS

    synonyms = {s.name for d in TOPIC_CONFIGS.values() for s in d.synonyms}
    assert synonyms <= set(PROPERTIES)
    assert {"log.flush.interval.messages", "log.flush.interval.ms", "log.index.interval.bytes",
            "log.index.size.max.bytes", "log.retention.minutes", "log.retention.bytes"} <= synonyms


def test_properties_file_syntax() -> None:
    text = ("# comment\n! also a comment\n\n"
            "broker.id = 3\n"
            "log.dirs: /data/a\n"
            "listeners PLAINTEXT://127.0.0.1:9093\n"
            "advertised.listeners=PLAINTEXT://\\\n    broker.example:9093\n")
    props = parse_properties_text(text)
    assert props == {"broker.id": "3", "log.dirs": "/data/a",
                     "listeners": "PLAINTEXT://127.0.0.1:9093",
                     "advertised.listeners": "PLAINTEXT://broker.example:9093"}
    config = BrokerConfig.from_properties(props)
    assert config.broker_id == 3
    assert config.listeners == (Endpoint("PLAINTEXT", "127.0.0.1", 9093),)
    assert config.advertised_listeners == (Endpoint("PLAINTEXT", "broker.example", 9093),)
    assert config.explicit["broker.id"] == "3"


def test_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=4\nlog.dirs=/x\n")
    config = BrokerConfig.load(path, ["num.partitions=6", "log.dir=/ignored"])
    assert config.num_partitions == 6
    assert config.log_dir == Path("/x")  # log.dirs wins over log.dir, as in Kafka


def test_several_log_dirs() -> None:
    config = BrokerConfig.from_properties({"log.dirs": "/d1, /d2,/d3"})
    assert config.log_dirs == (Path("/d1"), Path("/d2"), Path("/d3"))
    assert config.log_dir == Path("/d1")  # the broker's own files live in the first
    with pytest.raises(ConfigError, match=r"log\.dirs: Duplicate log directory found"):
        BrokerConfig.from_properties({"log.dirs": "/d1,/d2/../d1"})


def test_listener_forms() -> None:
    config = BrokerConfig.from_properties({"listeners": "PLAINTEXT://:9092,INTERNAL://[::1]:0",
                                           "listener.security.protocol.map":
                                           "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"})
    assert config.listeners == (Endpoint("PLAINTEXT", "", 9092), Endpoint("INTERNAL", "::1", 0))


@pytest.mark.parametrize(("props", "named"), [
    ({"listeners": "PLAINTEXT://127.0.0.1:99999"}, "listeners"),
    ({"listeners": "127.0.0.1:9092"}, "listeners"),
    ({"listeners": "UNKNOWN://127.0.0.1:9092"}, "listeners"),
    ({"advertised.listeners": "PLAINTEXT://h:0"}, "advertised.listeners"),
    ({"zookeeper.connect": "127.0.0.1"}, "zookeeper.connect"),
    ({"zookeeper.connect": "127.0.0.1:2181/kafka"}, "broker.id"),  # not generated
    ({"broker.id": "1", "node.id": "2"}, "node.id"),
    ({"message.max.bytes": "-1"}, "message.max.bytes"),
    ({"log.segment.bytes": "10"}, "log.segment.bytes"),
    ({"log.cleanup.policy": "shred"}, "log.cleanup.policy"),
    ({"socket.request.max.bytes": "99999999999"}, "socket.request.max.bytes"),
    ({"queued.max.request.bytes": "1000"}, "queued.max.request.bytes"),  # < socket.request.max.bytes
])
def test_invalid_values_name_the_property(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=f"configuration {named}"):
        BrokerConfig.from_properties(props)


@pytest.mark.parametrize(("props", "named"), [
    ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,X:TLS"}, "listener.security.protocol.map"),
    ({"listeners": "PLAINTEXT://h:1", "advertised.listeners": "PLAINTEXT://h:1,SSL://h:2"},
     "advertised.listeners"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
    ({"listeners": "SSL://h:1"}, "security.inter.broker.protocol"),
    ({"listeners": "SSL://h:1,PLAINTEXT://h:2", "inter.broker.listener.name": "INTERNAL"},
     "inter.broker.listener.name"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "inter.broker.listener.name"),
    ({"listener.name.ssl.ssl.client.auth": "sometimes"}, "listener.name.ssl.ssl.client.auth"),
    ({"listener.name.ssl.no.such.property": "1"}, "listener.name.ssl.no.such.property"),
    ({"listener.name.SSL.ssl.client.auth": "none"}, "listener.name.SSL.ssl.client.auth"),
    ({"sasl.jaas.config": "x"}, "sasl.jaas.config"),  # a broker takes it per listener and mechanism
    ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols"),
    ({"authorizer.class.name": "com.example.Authorizer"}, "authorizer.class.name"),
])
def test_invalid_security_values_name_the_property(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(named)):
        BrokerConfig.from_properties(props)


def test_listener_protocols_and_prefixed_values() -> None:
    config = BrokerConfig.from_properties({
        "listeners": "PLAINTEXT://h:1,SSL://h:2,CLIENTS://h:3",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CLIENTS:SASL_SSL",
        "inter.broker.listener.name": "SSL",
        "ssl.client.auth": "requested",
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.clients.plain.sasl.jaas.config": "x required;",
    })
    assert config.security_protocol("CLIENTS") == "SASL_SSL"
    assert config.inter_broker_listener_name == "SSL"
    assert config.listener_values("SSL")["ssl.client.auth"] == "required"
    assert config.listener_values("CLIENTS")["ssl.client.auth"] == "requested"
    assert config.listener_values("CLIENTS")["plain.sasl.jaas.config"] == "x required;"
    assert "plain.sasl.jaas.config" not in config.listener_values("SSL")


def test_override_needs_key_value() -> None:
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        BrokerConfig.load(None, ["num.partitions"])


def test_per_ip_overrides() -> None:
    config = BrokerConfig.from_properties({"max.connections.per.ip": "5",
                                           "max.connections.per.ip.overrides": "10.0.0.1:50,h:0"})
    assert config.max_connections_for("10.0.0.1") == 50
    assert config.max_connections_for("h") == 0
    assert config.max_connections_for("127.0.0.1") == 5

"""broker.config: the ZooKeeper properties (Kafka's names and defaults)."""

from __future__ import annotations

import re

import pytest

from broker.config import BrokerConfig, ConfigError


def test_cluster_mode() -> None:
    config = BrokerConfig.from_properties({"zookeeper.connect": "a:1,b:2/kafka", "broker.id": "3",
                                           "zookeeper.session.timeout.ms": "6000"})
    assert config.zookeeper_connect == "a:1,b:2/kafka" and config.broker_id == 3
    assert config.zookeeper_connection_timeout_ms == 6000


def test_defaults() -> None:
    config = BrokerConfig.from_properties({})
    assert config.zookeeper_connect is None
    assert config.zookeeper_session_timeout_ms == 18000
    assert config.zookeeper_connection_timeout_ms == 18000  # unset: the session timeout
    assert config.broker_rack is None
    config = BrokerConfig.from_properties({"zookeeper.session.timeout.ms": "6000",
                                           "broker.rack": "r1"})
    assert config.zookeeper_connection_timeout_ms == 6000 and config.broker_rack == "r1"
    config = BrokerConfig.from_properties({"zookeeper.connection.timeout.ms": "1500"})
    assert config.zookeeper_connection_timeout_ms == 1500


@pytest.mark.parametrize("connect", ["", "zk", "zk:0", "zk:1,,zk:2", "zk:1/a//b", "zk:1/../x"])
def test_malformed_connect_string_names_the_property(connect: str) -> None:
    with pytest.raises(ConfigError, match=r"zookeeper\.connect: expected host:port"):
        BrokerConfig.from_properties({"zookeeper.connect": connect})


@pytest.mark.parametrize("name", ["zookeeper.session.timeout.ms",
                                  "zookeeper.connection.timeout.ms"])
def test_timeouts_must_be_positive(name: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(name)):
        BrokerConfig.from_properties({name: "0"})

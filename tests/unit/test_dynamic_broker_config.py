"""The pure parts of dynamic replica throttling: which values a broker accepts as dynamic
configs (``broker.dynamic_broker_config.validate``) and which replicas
``minikafka reassign-partitions --throttle`` lists (Kafka's calculateLeaderThrottles /
calculateFollowerThrottles). The whole path runs in tests/cluster/test_replication.py."""

from __future__ import annotations

import pytest

from broker.dynamic_broker_config import DynamicConfigError, validate
from cli.reassign_partitions import throttled_replicas
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition


def test_only_the_replication_rates_are_dynamic_and_they_are_longs() -> None:
    assert validate({"leader.replication.throttled.rate": " 1000 ",
                     "follower.replication.throttled.rate": None,
                     "replica.alter.log.dirs.io.max.bytes.per.second": "0"}) == {
        "leader.replication.throttled.rate": "1000",
        "replica.alter.log.dirs.io.max.bytes.per.second": "0"}
    cases = {
        "log.retention.ms": "Cannot update these configs dynamically: ['log.retention.ms']",
        "leader.replication.throttled.rate": "Invalid value x for configuration "
                                             "leader.replication.throttled.rate: Not a number of "
                                             "type LONG",
    }
    for name, message in cases.items():
        with pytest.raises(DynamicConfigError) as info:
            validate({name: "x"})
        assert (info.value.error_code, info.value.message) == (ErrorCode.INVALID_CONFIG, message)
    with pytest.raises(DynamicConfigError, match="Value must be at least 0"):
        validate({"follower.replication.throttled.rate": "-1"})


def test_throttled_replicas_of_a_reassignment() -> None:
    foo0, foo1, bar10, baz0 = (TopicPartition("foo", 0), TopicPartition("foo", 1),
                               TopicPartition("bar", 10), TopicPartition("baz", 0))
    current = {foo0: [1, 2], foo1: [2, 1], bar10: [4], baz0: [1, 2]}
    targets = {foo0: [1, 3], foo1: [3, 4], bar10: [5], baz0: [1, 2]}  # baz-0 does not move
    assert throttled_replicas(current, targets) == {
        "bar": ("10:4", "10:5"),
        "foo": ("0:1,0:2,1:1,1:2", "0:3,1:3,1:4"),
    }

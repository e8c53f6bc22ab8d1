"""broker.replication_quota: Kafka's throttled-replica lists and sampled replication rate."""

from __future__ import annotations

from broker.replication_quota import (
    ALL,
    ReplicationQuota,
    apply_topic_configs,
    throttled_partitions,
)
from protocol.topic_partition import TopicPartition


def test_throttled_lists_name_partitions_of_this_broker() -> None:
    assert throttled_partitions("", 1) == frozenset()
    assert throttled_partitions(" * ", 1) == frozenset({ALL})
    assert throttled_partitions("0:1,0:2,1:2,3:1", 1) == frozenset({0, 3})
    assert throttled_partitions("0:1,0:2,1:2,3:1", 2) == frozenset({0, 1})
    assert throttled_partitions("0:1", 7) == frozenset()


def test_topic_configs_mark_and_unmark() -> None:
    leader, follower = ReplicationQuota(None), ReplicationQuota(None)
    apply_topic_configs(leader, follower, "t", {
        "leader.replication.throttled.replicas": "0:1",
        "follower.replication.throttled.replicas": "*"}, 1)
    assert leader.is_throttled(TopicPartition("t", 0))
    assert not leader.is_throttled(TopicPartition("t", 1))
    assert follower.is_throttled(TopicPartition("t", 5))
    assert not follower.is_throttled(TopicPartition("u", 0))
    apply_topic_configs(leader, follower, "t", {}, 1)
    assert not leader.is_throttled(TopicPartition("t", 0))
    assert not follower.is_throttled(TopicPartition("t", 5))


def test_rate_over_sampled_windows() -> None:
    now = [100.0]
    quota = ReplicationQuota(1000.0, samples=3, window_s=1.0, clock=lambda: now[0])
    assert not quota.is_quota_exceeded()
    quota.record(1500)  # over at least (samples - 1) windows: 1500 / 2 s
    assert quota.rate() == 750.0 and not quota.is_quota_exceeded()
    now[0] += 0.5
    quota.record(1000)
    assert quota.rate() == 1250.0 and quota.is_quota_exceeded()
    now[0] += 10  # every window expired
    assert quota.rate() == 0.0 and not quota.is_quota_exceeded()


def test_no_bound_never_exceeded() -> None:
    quota = ReplicationQuota(None)
    quota.record(10**12)
    assert not quota.is_quota_exceeded()

"""Broker-level log defaults as dynamic broker configs (Kafka's DynamicLogConfig), on two
minikafka brokers and a real ZooKeeper, set with Kafka's own kafka-configs: a cluster-wide
default (``--entity-default``) and one broker's own value (``--entity-name``) reach every
existing log whose topic has no override of that config, without a restart, with Kafka's
precedence (topic override > this broker's dynamic value > cluster default >
server.properties), and DescribeConfigs reports where a topic's value comes from; a dynamic
unclean.leader.election.enable reaches the controller's elections at once."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import NewTopic

from cli.configs import main as configs_main
from client.errors import ClientError
from devcluster.apache_kafka import kafka_tool
from tests.cluster.conftest import ClusterBrokers
from tests.cluster.replication_support import alive_brokers, controller_id
from tests.cluster.test_cluster_brokers import create, describe
from tests.cluster.test_cluster_metrics import produce_some
from tests.cluster.zk_support import wait_until
from tests.integration.broker_process import BrokerProcess

pytestmark = [pytest.mark.timeout(240), pytest.mark.java]

HOUR_MS = 3_600_000
RECORDS = 12


def _segments(broker: BrokerProcess, topic: str) -> list[str]:
    return sorted(f.name for f in (broker.log_dir / f"{topic}-0").glob("*.log"))


def _earliest(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        tp = KafkaTopicPartition(topic, 0)
        return int(consumer.beginning_offsets([tp])[tp])
    finally:
        consumer.close()


def _state(broker: BrokerProcess, topic: str) -> tuple[int, list[int], list[int]] | None:
    """Partition 0's (leader, replicas, ISR) as ``broker`` tells it; None if it does not
    know the topic yet."""
    try:
        return describe(broker.bootstrap, topic)[0]
    except ClientError:
        return None


def _describe(bootstrap: str, *args: str) -> str:
    out = io.StringIO()
    assert configs_main(["--bootstrap-server", bootstrap, "--describe", *args], out) == 0
    return out.getvalue()


def test_dynamic_log_retention_reaches_logs_without_an_override(
        cluster_brokers: object, tmp_path: Path) -> None:
    cluster: ClusterBrokers = cluster_brokers(  # type: ignore[operator]
        2, log_retention_check_interval_ms="200")
    bootstrap = cluster.bootstrap()
    leader = cluster.brokers[1]

    def kafka_configs(*args: str) -> str:
        return kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, *args,
                          work_dir=tmp_path).stdout

    def applied(*brokers: int, text: str) -> None:
        for b in brokers:
            wait_until(lambda b=b: text in cluster.brokers[b].stderr_text(),  # type: ignore[misc]
                       timeout_s=15, what=f"broker {b} applying {text}", interval_s=0.1)

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        # Both on broker 1 (the leader) and broker 2; only "kept" overrides retention.ms.
        admin.create_topics([NewTopic("plain", replica_assignments={0: [1, 2]}),
                             NewTopic("kept", replica_assignments={0: [1, 2]},
                                      topic_configs={"retention.ms": str(7 * 24 * HOUR_MS)})],
                            timeout_ms=60000)
    finally:
        admin.close()

    # A cluster-wide log.segment.bytes reaches the logs that already exist: they roll small.
    out = kafka_configs("--alter", "--entity-type", "brokers", "--entity-default",
                        "--add-config", "log.segment.bytes=1024")
    assert "Completed updating default config for brokers in the cluster." in out
    applied(1, 2, text="dynamic log defaults now {'log.segment.bytes': '1024'}")
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        old_ms = int(time.time() * 1000) - 2 * HOUR_MS
        for i in range(RECORDS):
            for topic in ("plain", "kept"):
                producer.send(topic, b"%03d" % i + b"x" * 300, timestamp_ms=old_ms + i)
            producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    for broker in (1, 2):
        for topic in ("plain", "kept"):
            wait_until(lambda b=broker, t=topic: len(  # type: ignore[misc]
                _segments(cluster.brokers[b], t)) >= 4, timeout_s=15,
                what=f"{topic} rolled on broker {broker}")
    assert _earliest(bootstrap, "plain") == 0

    # This broker's own value wins over the cluster default: retention -1 keeps everything
    # on broker 1 while the default says one hour.
    kafka_configs("--alter", "--entity-type", "brokers", "--entity-name", "1",
                  "--add-config", "log.retention.ms=-1")
    applied(1, text="dynamic log defaults now {'log.retention.ms': '-1', "
                    "'log.segment.bytes': '1024'}")
    kafka_configs("--alter", "--entity-type", "brokers", "--entity-default",
                  "--add-config", f"log.retention.ms={HOUR_MS}")
    applied(2, text=f"dynamic log defaults now {{'log.retention.ms': '{HOUR_MS}', "
                    "'log.segment.bytes': '1024'}")
    time.sleep(1.0)  # five retention checks
    assert _earliest(bootstrap, "plain") == 0
    assert "retention.ms=-1 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=-1, " \
           f"DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms={HOUR_MS}, " \
           "DEFAULT_CONFIG:log.retention.hours=168}" in _describe(
               leader.bootstrap, "--all", "--entity-type", "topics", "--entity-name", "plain")

    # Without it the default applies: the old closed segments of "plain" go, on the leader
    # and on the follower; "kept" keeps all of its own.
    plain_before = _segments(leader, "plain")
    kafka_configs("--alter", "--entity-type", "brokers", "--entity-name", "1",
                  "--delete-config", "log.retention.ms")
    wait_until(lambda: _earliest(bootstrap, "plain") > 0, timeout_s=15,
               what="retention by the dynamic default on the leader")
    for broker in (1, 2):
        wait_until(lambda b=broker: len(  # type: ignore[misc]
            _segments(cluster.brokers[b], "plain")) == 1, timeout_s=15,
            what=f"plain's closed segments deleted on broker {broker}")
    assert _segments(leader, "plain") == plain_before[-1:]
    assert _earliest(bootstrap, "plain") == int(plain_before[-1].split(".")[0])
    assert _earliest(bootstrap, "kept") == 0
    assert all(len(_segments(cluster.brokers[b], "kept")) >= 4 for b in (1, 2))
    described = _describe(bootstrap, "--all", "--entity-type", "topics",
                          "--entity-name", "plain")
    assert (f"retention.ms={HOUR_MS} sensitive=false synonyms={{"
            f"DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms={HOUR_MS}, "
            "DEFAULT_CONFIG:log.retention.hours=168}") in described
    assert ("segment.bytes=1024 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
            "log.segment.bytes=1024, DEFAULT_CONFIG:log.segment.bytes=1073741824}") in described
    kept = _describe(bootstrap, "--all", "--entity-type", "topics", "--entity-name", "kept")
    assert (f"retention.ms={7 * 24 * HOUR_MS} sensitive=false synonyms={{DYNAMIC_TOPIC_CONFIG:"
            f"retention.ms={7 * 24 * HOUR_MS}, DYNAMIC_DEFAULT_BROKER_CONFIG:"
            f"log.retention.ms={HOUR_MS}, DEFAULT_CONFIG:log.retention.hours=168}}") in kept


@pytest.mark.broker_errors(r"no leader for two-0: no live replica in the ISR \[\d\]")
def test_dynamic_unclean_leader_election_elects_offline_partitions(
        cluster_brokers: object) -> None:
    """unclean.leader.election.enable turned on as a cluster-wide dynamic default: the
    controller elects a partition that waits offline (its only live replica is out of the
    ISR) at once, without another broker change (Kafka's UncleanLeaderElectionEnable)."""
    cluster: ClusterBrokers = cluster_brokers(  # type: ignore[operator]
        3, replica_lag_time_max_ms="2000", auto_leader_rebalance_enable="false")
    first = controller_id(cluster.bootstrap())
    a, b = [i for i in (1, 2, 3) if i != first]
    controller = cluster.brokers[first]
    create(cluster.bootstrap(), "two", {0: [a, b]})
    wait_until(lambda: all(_state(cluster.brokers[i], "two") == (a, [a, b], [a, b])
                           for i in (1, 2, 3)),
               timeout_s=30, what="a leads two, b in sync, as every broker knows")
    cluster.brokers[b].kill9()
    produce_some(cluster.brokers[a].bootstrap, "two", 0, acks=1)
    wait_until(lambda: describe(controller.bootstrap, "two")[0][2] == [a], timeout_s=30,
               what="b out of the ISR of two")
    cluster.brokers[a].kill9()
    wait_until(lambda: alive_brokers(controller.bootstrap) == {first}, timeout_s=30,
               what="the sessions of a and b expired")
    cluster.start(b)  # the only live replica, out of the ISR: no clean leader
    wait_until(lambda: "no leader for two-0: no live replica in the ISR" in
               controller.stderr_text(), timeout_s=30, what="two offline")
    time.sleep(0.5)
    assert describe(controller.bootstrap, "two")[0][0] == -1
    out = io.StringIO()
    assert configs_main(["--bootstrap-server", controller.bootstrap, "--alter",
                         "--entity-type", "brokers", "--entity-default", "--add-config",
                         "unclean.leader.election.enable=true"], out) == 0, out.getvalue()
    wait_until(lambda: describe(controller.bootstrap, "two")[0][0] == b, timeout_s=15,
               what="b elected uncleanly once the dynamic default allows it")

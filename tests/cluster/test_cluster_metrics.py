"""Cluster metrics of real broker processes on a real ZooKeeper, read from their Prometheus
endpoints (``metrics.prometheus.listener``) and parsed by ``prometheus_client``: the
controller's (``KafkaController``, ``ControllerStats``) through failover, the replica
manager's through a follower's death and return, MaxLag while a follower catches up,
offline partitions and unclean elections, and ``/ready`` against the broker's ZooKeeper
registration.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from client.sync import SyncClient
from devcluster.zookeeper import ZooKeeper, free_ports
from tests.cluster.conftest import ClusterBrokers, KazooFactory
from tests.cluster.replication_support import alive_brokers
from tests.cluster.tcp_proxy import TcpProxy
from tests.cluster.test_cluster_brokers import controller_of, create, describe
from tests.cluster.zk_support import wait_until
from tests.integration.broker_process import BrokerProcess
from tests.integration.data_path_client import batch, produce
from tests.integration.metrics_scrape import Scrape, get, scrape

METRICS = {"metrics.prometheus.listener": "127.0.0.1:0"}
ACTIVE = "kafka_controller_kafkacontroller_activecontrollercount"
_URL = re.compile(r"Metrics endpoint at (http://\S+)/metrics")


def url(broker: BrokerProcess) -> str:
    """The endpoint of the broker's current run (its log is appended to across restarts)."""
    found = _URL.findall(broker.stderr_text())
    assert found, "the broker logged no metrics endpoint"
    return str(found[-1])


def metrics(broker: BrokerProcess) -> Scrape:
    return scrape(url(broker))


def gauge(broker: BrokerProcess, name: str, **labels: str) -> float:
    """A sample that must be exported (``Scrape.value`` reads a missing one as 0)."""
    s = metrics(broker)
    assert s.has(name), f"{name} not exported by {broker.name}"
    return s.value(name, **labels)


def running(brokers: ClusterBrokers) -> list[BrokerProcess]:
    return [p for _, p in sorted(brokers.brokers.items()) if p.is_running()]


def controller_id(brokers: ClusterBrokers, *, not_: int | None = None) -> int:
    found: list[int] = []

    def known() -> bool:
        ids = {controller_of(p.bootstrap) for p in running(brokers)}
        if len(ids) == 1 and None not in ids and not_ not in ids:
            found[:] = [i for i in ids if i is not None]
            return True
        return False

    wait_until(known, timeout_s=30, what="every broker to name the same controller")
    return found[0]


def active_counts(brokers: ClusterBrokers) -> dict[int, float]:
    return {p.broker_id: gauge(p, ACTIVE) for p in running(brokers)}


def produce_some(bootstrap: str, topic: str, partition: int, count: int = 5, *,
                 acks: int = -1) -> None:
    with SyncClient(bootstrap, timeout_ms=20_000) as client:
        for i in range(count):
            result = produce(client, topic, partition, batch([b"v%d" % i]), acks=acks)
            assert result.error_code == 0, result


def test_controller_metrics_follow_failover(cluster_brokers: Callable[..., ClusterBrokers]
                                           ) -> None:
    brokers = cluster_brokers(3, **METRICS, auto_leader_rebalance_enable="false")
    first = controller_id(brokers)
    # Every partition's preferred replica is the controller: after it dies, none is led by
    # its preferred replica.
    others = [i for i in (1, 2, 3) if i != first]
    create(brokers.bootstrap(), "t", {0: [first, others[0]], 1: [first, others[1]]})
    wait_until(lambda: all(describe(p.bootstrap, "t")[i][0] == first for p in running(brokers)
                           for i in (0, 1)), timeout_s=30, what="the leaders")
    wait_until(lambda: active_counts(brokers) == {i: float(i == first) for i in (1, 2, 3)},
               timeout_s=15, what="ActiveControllerCount 1 on the controller only")
    s = metrics(brokers.brokers[first])
    assert s.value("kafka_controller_kafkacontroller_globaltopiccount") >= 1
    assert s.value("kafka_controller_kafkacontroller_globalpartitioncount") >= 2
    assert s.value("kafka_controller_kafkacontroller_preferredreplicaimbalancecount") == 0
    assert s.has("kafka_controller_kafkacontroller_controllerstate")
    assert s.value("kafka_controller_kafkacontroller_controllerstate") == 0  # Idle
    # Its election and the topic's creation were processed and timed per state (Kafka's
    # ControllerStats rate-and-time timers); the other brokers were never controller.
    assert s.value("kafka_controller_controllerstats_controllerchangerateandtimems_count") == 1
    assert s.value("kafka_controller_controllerstats_topicchangerateandtimems_count") >= 1
    assert not metrics(brokers.brokers[others[0]]).has(
        "kafka_controller_controllerstats_controllerchangerateandtimems_count")

    brokers.brokers[first].kill9()
    second = controller_id(brokers, not_=first)
    wait_until(lambda: active_counts(brokers) == {i: float(i == second) for i in others},
               timeout_s=15, what="ActiveControllerCount 1 on the new controller only")
    new = brokers.brokers[second]
    wait_until(lambda: gauge(
        new, "kafka_controller_kafkacontroller_preferredreplicaimbalancecount") == 2,
        timeout_s=30, what="both partitions led by a replica that is not the preferred one")
    # The first controller returns: a broker change the new controller handles, timed as
    # Kafka times it (LeaderElectionRateAndTimeMs); its partitions are still imbalanced
    # (auto rebalance is off), it is no controller.
    elections = gauge(new, "kafka_controller_controllerstats_leaderelectionrateandtimems_count")
    brokers.start(first)
    wait_until(lambda: gauge(new, "kafka_controller_controllerstats_leaderelectionrateandtimems"
                                  "_count") > elections,
               timeout_s=30, what="the broker change to be timed")
    s = metrics(new)
    assert s.value("kafka_controller_controllerstats_leaderelectionrateandtimems_sum") > 0
    assert s.value("kafka_controller_controllerstats_controllerchangerateandtimems_count") == 1
    assert s.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert gauge(brokers.brokers[first], ACTIVE) == 0
    assert gauge(brokers.brokers[first],
                 "kafka_controller_kafkacontroller_preferredreplicaimbalancecount") == 0


def test_follower_death_and_return_in_replica_manager_metrics(
        cluster_brokers: Callable[..., ClusterBrokers]) -> None:
    # The leader drops a silent follower after 2 s, before the controller (6 s session)
    # hears of its death: the shrink is the leader's own, counted by its replica manager.
    brokers = cluster_brokers(3, **METRICS, replica_lag_time_max_ms="2000")
    create(brokers.bootstrap(), "r", {0: [1, 2, 3]})
    wait_until(lambda: describe(brokers.bootstrap(), "r")[0] == (1, [1, 2, 3], [1, 2, 3]),
               timeout_s=30, what="the ISR of all three")
    leader = brokers.brokers[1]
    produce_some(leader.bootstrap, "r", 0)
    s = metrics(leader)
    assert s.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert s.value("kafka_cluster_partition_underreplicated", topic="r", partition="0") == 0
    assert s.value("kafka_server_replicamanager_leadercount") >= 1
    assert s.has("kafka_server_replicafetchermanager_maxlag")
    shrinks = s.value("kafka_server_replicamanager_isrshrinks_total")
    expands = s.value("kafka_server_replicamanager_isrexpands_total")

    # A follower at the leader's log end offset is in sync however long it is silent (as
    # in Kafka): records written after its death leave it behind.
    brokers.brokers[3].kill9()
    produce_some(leader.bootstrap, "r", 0, acks=1)
    wait_until(lambda: gauge(leader, "kafka_server_replicamanager_underreplicatedpartitions")
               >= 1, timeout_s=30, what="the leader to count the partition under-replicated")
    s = metrics(leader)
    assert s.value("kafka_server_replicamanager_isrshrinks_total") >= shrinks + 1
    assert s.value("kafka_cluster_partition_underreplicated", topic="r", partition="0") == 1
    assert s.value("kafka_cluster_partition_insyncreplicascount", topic="r", partition="0") == 2

    # A broker restarted while its old ZooKeeper session still holds /brokers/ids/3 refuses
    # to start (as Kafka's does): restart it once the cluster no longer lists it.
    wait_until(lambda: 3 not in alive_brokers(leader.bootstrap), timeout_s=30,
               what="broker 3's ZooKeeper session to end", interval_s=0.3)
    brokers.start(3)
    wait_until(lambda: gauge(leader, "kafka_server_replicamanager_underreplicatedpartitions")
               == 0, timeout_s=60, what="the returned follower to be in sync again")
    s = metrics(leader)
    assert s.value("kafka_server_replicamanager_isrexpands_total") >= expands + 1
    assert s.value("kafka_cluster_partition_insyncreplicascount", topic="r", partition="0") == 3
    follower = metrics(brokers.brokers[3])
    assert follower.value("kafka_server_replicamanager_partitioncount") >= 1
    assert follower.value("kafka_server_replicamanager_leadercount") == 0
    assert follower.value("kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 0
    assert follower.value("kafka_server_replicamanager_offlinereplicacount") == 0


@pytest.mark.broker_errors(r"no leader for (one|two)-0: no live replica in the ISR")
def test_offline_partitions_and_unclean_election(
        cluster_brokers: Callable[..., ClusterBrokers]) -> None:
    brokers = cluster_brokers(3, **METRICS, replica_lag_time_max_ms="2000",
                              auto_leader_rebalance_enable="false",
                              unclean_leader_election_enable="true")
    first = controller_id(brokers)
    a, b = [i for i in (1, 2, 3) if i != first]
    create(brokers.bootstrap(), "one", {0: [a]})  # RF=1 on broker a
    create(brokers.bootstrap(), "two", {0: [a, b]})
    wait_until(lambda: describe(brokers.bootstrap(), "one")[0][0] == a
               and describe(brokers.bootstrap(), "two")[0] == (a, [a, b], [a, b]),
               timeout_s=30, what="the leaders")
    controller = brokers.brokers[first]
    assert gauge(controller, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0

    # b leaves the ISR of "two" (the leader drops it), then a dies: both partitions are
    # offline ("two" has no live replica in its ISR and b is down too).
    brokers.brokers[b].kill9()
    produce_some(brokers.brokers[a].bootstrap, "two", 0, acks=1)
    wait_until(lambda: describe(controller.bootstrap, "two")[0][2] == [a], timeout_s=30,
               what="b out of the ISR of two")
    brokers.brokers[a].kill9()
    wait_until(lambda: gauge(controller, "kafka_controller_kafkacontroller_offlinepartitionscount")
               == 2, timeout_s=30, what="two offline partitions")
    s = metrics(controller)
    assert s.value("kafka_controller_controllerstats_uncleanleaderelections_total") == 0
    # b returns: "two" elects it although it is not in the ISR (unclean); "one" stays
    # offline with its only replica down.
    brokers.start(b)
    wait_until(lambda: gauge(controller, "kafka_controller_kafkacontroller_offlinepartitionscount")
               == 1, timeout_s=30, what="one offline partition left")
    s = metrics(controller)
    assert s.value("kafka_controller_controllerstats_uncleanleaderelections_total") == 1
    assert describe(controller.bootstrap, "two")[0][0] == b


# -- /ready and the ZooKeeper registration ----------------------------------------------------

SESSION_TIMEOUT_MS = 6000


def test_ready_only_while_registered_in_zookeeper(
        cluster_brokers: Callable[..., ClusterBrokers], zk_chroot: str,
        zk_proxy: TcpProxy, kazoo_factory: KazooFactory, zk_connect: str) -> None:
    base = f"http://127.0.0.1:{free_ports(1)[0]}"
    brokers = cluster_brokers(0, zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS))
    # ZooKeeper is not reachable yet: the broker waits for it (connection timeout 60 s).
    zk_proxy.cut()
    started: list[BaseException | BrokerProcess] = []

    def start() -> None:
        try:
            started.append(brokers.start(
                1, zookeeper_connect=f"127.0.0.1:{zk_proxy.port}{zk_chroot}",
                zookeeper_connection_timeout_ms="60000",
                metrics_prometheus_listener=base.removeprefix("http://")))
        except BaseException as exc:  # reported by the main thread
            started.append(exc)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    wait_until(lambda: _status(base, "/health") == 200, timeout_s=30,
               what="the endpoint to serve during start-up")
    time.sleep(1)
    assert _status(base, "/ready") == 503
    zk_proxy.restore()
    thread.join(60)
    assert started and isinstance(started[0], BrokerProcess), started
    wait_until(lambda: _status(base, "/ready") == 200, timeout_s=10, what="ready once registered")

    # Cut off from ZooKeeper for longer than the session timeout: the registration is gone
    # (the server expired the session), so the broker is not ready, though it still serves.
    zk_proxy.cut()
    cut_at = time.monotonic()
    wait_until(lambda: _status(base, "/ready") == 503, timeout_s=SESSION_TIMEOUT_MS / 1000 + 5,
               what="not ready once the session must have expired")
    assert time.monotonic() - cut_at >= SESSION_TIMEOUT_MS / 1000 - 0.5
    _, body = get(f"{base}/ready")
    assert "not registered in ZooKeeper" in body
    assert _status(base, "/health") == 200  # live all along
    # The broker judges by its own clock; the server expires a session up to a tick later.
    # Restored before that, the broker would rightly resume its old session: wait until
    # ZooKeeper (asked directly, not through the cut proxy) has dropped the registration.
    zk = kazoo_factory(zk_connect)
    wait_until(lambda: zk.exists("/brokers/ids/1") is None, timeout_s=30,
               what="ZooKeeper to expire the broker's session and drop /brokers/ids/1")
    # Back: a new session, registered again, the controller's metadata for it: ready.
    zk_proxy.restore()
    wait_until(lambda: _status(base, "/ready") == 200, timeout_s=30,
               what="ready again once registered in a new session")
    assert "expired" in started[0].stderr_text()


def test_ready_follows_the_session_timeout_zookeeper_granted(
        cluster_brokers: Callable[..., ClusterBrokers], tmp_path: Path) -> None:
    """ZooKeeper bounds a session timeout by its maxSessionTimeout: a broker asking for
    12 s gets 3 s here, and ZooKeeper expires the session after 3 s without the broker, so
    /ready must turn 503 once a cut lasted 3 s, not 12 s."""
    zk = ZooKeeper(tmp_path / "zk-max-3s", max_session_timeout_ms=GRANTED_MS).start()
    proxy = TcpProxy(int(zk.connect_string.rsplit(":", 1)[1]))
    try:
        base = f"http://127.0.0.1:{free_ports(1)[0]}"
        brokers = cluster_brokers(0)
        broker = brokers.start(1, zookeeper_connect=f"127.0.0.1:{proxy.port}/granted",
                               zookeeper_session_timeout_ms=str(REQUESTED_MS),
                               metrics_prometheus_listener=base.removeprefix("http://"))
        wait_until(lambda: _status(base, "/ready") == 200, timeout_s=15, what="ready")
        proxy.cut()
        cut_at = time.monotonic()
        wait_until(lambda: _status(base, "/ready") == 503, timeout_s=REQUESTED_MS / 1000 - 3,
                   what="not ready once the granted session timeout passed", interval_s=0.1)
        waited_s = time.monotonic() - cut_at
        assert GRANTED_MS / 1000 - 0.5 <= waited_s < REQUESTED_MS / 1000 - 3, waited_s
        assert "not registered in ZooKeeper" in get(f"{base}/ready")[1]
        proxy.restore()
        wait_until(lambda: _status(base, "/ready") == 200, timeout_s=30,
                   what="ready again once registered in a new session")
        assert re.search(rf"Connected to ZooKeeper .* \(session 0x[0-9a-f]+, timeout "
                         rf"{GRANTED_MS} ms, {REQUESTED_MS} ms requested\)",
                         broker.stderr_text()), broker.stderr_text()[-3000:]
    finally:
        proxy.close()
        zk.stop()


GRANTED_MS = 3000  # the ZooKeeper's maxSessionTimeout
REQUESTED_MS = 12000  # zookeeper.session.timeout.ms


def _status(base: str, path: str) -> int:
    try:
        return get(f"{base}{path}", timeout_s=5)[0]
    except OSError:
        return 0


def test_max_lag_while_a_follower_catches_up(
        cluster_brokers: Callable[..., ClusterBrokers]) -> None:
    """A follower that comes back behind the leader shows its lag in ReplicaFetcherManager
    MaxLag while it copies (throttled to 100 kB/s: seconds of it), and 0 once caught up."""
    from confluent_kafka import Producer
    from kafka.admin import NewTopic

    from tests.cluster.test_cluster_brokers import admin

    brokers = cluster_brokers(2, **METRICS, follower_replication_throttled_rate="100000",
                              replication_quota_window_num="2",
                              replica_fetch_max_bytes="65536")
    client = admin(brokers.bootstrap())
    try:
        client.create_topics([NewTopic("lag", replica_assignments={0: [1, 2]}, topic_configs={
            "follower.replication.throttled.replicas": "*"})], timeout_ms=60_000)
    finally:
        client.close()
    wait_until(lambda: describe(brokers.bootstrap(), "lag")[0] == (1, [1, 2], [1, 2]),
               timeout_s=30, what="the ISR of both")
    follower = brokers.brokers[2]
    assert follower.stop() == 0  # ordered: out of the ISR and of ZooKeeper at once
    leader = brokers.brokers[1]
    producer = Producer({"bootstrap.servers": leader.bootstrap, "acks": 1,
                         "batch.size": 16384, "linger.ms": 5})
    for i in range(600):
        producer.produce("lag", value=bytes([i % 256]) * 1000, partition=0)
    assert producer.flush(30) == 0
    wait_until(lambda: 2 not in alive_brokers(leader.bootstrap), timeout_s=30,
               what="broker 2 to leave the cluster", interval_s=0.2)
    brokers.start(2)
    seen: list[float] = []

    def lagging() -> bool:
        s = metrics(follower)
        seen.append(s.value("kafka_server_replicafetchermanager_maxlag", clientId="Replica"))
        return seen[-1] > 0

    wait_until(lagging, timeout_s=30, what="the returning follower to report its lag",
               interval_s=0.1)
    assert 0 < seen[-1] <= 600
    wait_until(lambda: gauge(leader, "kafka_server_replicamanager_underreplicatedpartitions")
               == 0, timeout_s=60, what="the follower to be in sync again")
    wait_until(lambda: gauge(follower, "kafka_server_replicafetchermanager_maxlag",
                             clientId="Replica") == 0, timeout_s=10,
               what="MaxLag 0 once caught up")

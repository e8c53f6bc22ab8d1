"""The pytest plugin's ``kafka_cluster`` as a user's project sees it: a test file in a
directory of its own, run by a pytest subprocess that finds the plugin through its
installed ``pytest11`` entry point, on a real ZooKeeper (started by the plugin from the
Kafka jars, or the one of this session named by ``--minikafka-zookeeper``).

The project's tests, with stock kafka-python clients on three in-process brokers: records
produced to partitions led by three different brokers all come back; a consumer group;
``move_leadership`` makes an acks=all producer follow the partition to its new leader; a
killed controller is replaced and the killed broker rejoins; a fault hook on one broker of
the cluster makes the producer retry there.

Data goes to replication factor 1 topics; leadership moves use a replication factor 3
topic."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from devcluster.zookeeper import ZooKeeper
from pytest_minikafka.cluster import ZooKeeperServer

pytestmark = [pytest.mark.timeout(300), pytest.mark.java]

PROJECT_TESTS = textwrap.dedent('''
    import time

    import pytest
    from kafka import KafkaConsumer, KafkaProducer

    pytestmark = pytest.mark.minikafka(brokers=3, faults=True, topics={
        "orders": {"partitions": 3, "replication_factor": 1},
        "prices": {"partitions": 1, "replication_factor": 3}})


    def consume(bootstrap, topic, n, **kwargs):
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap,
                                 auto_offset_reset="earliest", **kwargs)
        got, deadline = [], time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            # Long enough for a whole JoinGroup + SyncGroup (kafka-python 3.0.12 loses a
            # join that completes after poll() gave up waiting on it).
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend(r.value for r in records)
        consumer.close()
        return got


    def test_partitions_on_three_brokers(kafka_cluster):
        leaders = {kafka_cluster.leader("orders", p).broker_id for p in range(3)}
        assert leaders == {1, 2, 3}
        assert len(kafka_cluster.bootstrap.split(",")) == 3
        producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap)
        for i in range(30):
            producer.send("orders", value=b"o%d" % i, partition=i % 3)
        producer.flush()
        producer.close()
        got = consume(kafka_cluster.bootstrap, "orders", 30, group_id="billing")
        assert sorted(got) == sorted(b"o%d" % i for i in range(30))


    def test_producer_follows_a_moved_leader(kafka_cluster):
        producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap, acks="all",
                                 retry_backoff_ms=50)
        old = kafka_cluster.leader("prices")
        producer.send("prices", b"before").get(timeout=30)
        new = kafka_cluster.move_leadership("prices")
        assert new.broker_id != old.broker_id
        assert kafka_cluster.leader("prices").broker_id == new.broker_id
        # The new leader has "before" (acks=all: every in-sync replica had it).
        assert producer.send("prices", b"after").get(timeout=30).offset == 1
        producer.close()
        # Each partition of "orders" is led by its preferred replica: nothing to elect.
        assert kafka_cluster.elect_preferred_leaders({"orders": [0, 1, 2]}) == {
            ("orders", p): 84 for p in range(3)}  # ELECTION_NOT_NEEDED


    def test_a_killed_controller_is_replaced(kafka_cluster):
        controller = kafka_cluster.controller()
        controller.kill()
        others = [b.broker_id for b in kafka_cluster.brokers if b is not controller]
        kafka_cluster.wait_for_brokers(others)
        assert kafka_cluster.controller().broker_id in others
        controller.start()
        kafka_cluster.wait_for_brokers()
        assert {b.broker_id for b in kafka_cluster.brokers if b.running} == {1, 2, 3}


    def test_a_fault_on_one_broker(kafka_cluster):
        leader = kafka_cluster.leader("orders", 1)
        before = leader.faults.count("Produce")
        leader.faults.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
        producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap, retry_backoff_ms=20)
        assert producer.send("orders", b"x", partition=1).get(timeout=30).partition == 1
        producer.close()
        assert leader.faults.count("Produce") - before == 3
''')


def run_project(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "test_cluster_app.py").write_text(PROJECT_TESTS)
    # Only the installed package: no PYTHONPATH to this repository, no conftest above.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS",
                        "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
         "--rootdir", str(project), "-o", "timeout=200", *args, "test_cluster_app.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=280, check=False)


def test_a_users_cluster_tests_pass_with_the_installed_plugin(tmp_path: Path,
                                                              zookeeper: ZooKeeper) -> None:
    """On this session's ZooKeeper, one cluster per test."""
    result = run_project(tmp_path, f"--minikafka-zookeeper={zookeeper.connect_string}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout, result.stdout
    leftovers = list(tmp_path.rglob("meta.properties"))
    assert leftovers == []  # every broker's files removed
    # Every cluster's chroot removed.
    from tests.cluster.zk_support import kazoo_client

    client = kazoo_client(zookeeper.connect_string)
    try:
        assert not [c for c in client.get_children("/") if c.startswith("minikafka-")]
    finally:
        client.stop()
        client.close()


def test_the_plugin_starts_its_own_zookeeper(tmp_path: Path) -> None:
    """Without --minikafka-zookeeper, the session's clusters get a ZooKeeper the plugin
    starts from the Kafka jars, and stops at the end of the session."""
    basetemp = tmp_path / "basetemp"
    result = run_project(tmp_path, f"--basetemp={basetemp}", "-k", "partitions_on_three_brokers")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout, result.stdout
    assert len(list(basetemp.rglob("zoo.cfg"))) == 1  # it ran there
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and str(basetemp).encode()
                in _cmdline(pid)]  # and no ZooKeeper outlives the session


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone meanwhile
        return b""


@pytest.fixture(scope="session")
def minikafka_zookeeper(zookeeper: ZooKeeper) -> ZooKeeperServer:
    """The plugin's cluster fixtures in this module use this session's ZooKeeper."""
    return ZooKeeperServer(None, connect_string=zookeeper.connect_string)


def test_a_cluster_of_broker_processes(kafka_cluster_factory: Any) -> None:
    """``subprocess=True``: each broker its own process; a stopped leader's partitions move
    to the other broker (controlled shutdown), and it comes back on the same address."""
    from kafka import KafkaProducer

    cluster = kafka_cluster_factory(2, subprocess=True, topics={
        "moves": {"partitions": 2, "replication_factor": 2}})
    assert [b.broker_id for b in cluster.brokers] == [1, 2]
    assert all(isinstance(b.pid, int) for b in cluster.brokers)  # processes of their own
    leaders = {cluster.leader("moves", p).broker_id for p in range(2)}
    assert leaders == {1, 2}
    first = cluster.broker(1)
    address = first.bootstrap
    first.stop()
    cluster.wait_for_brokers([2])
    assert {cluster.leader("moves", p).broker_id for p in range(2)} == {2}
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks=1)
    assert producer.send("moves", b"x", partition=0).get(timeout=30).offset >= 0
    producer.close()
    first.start()
    cluster.wait_for_brokers([1, 2])
    assert first.bootstrap == address

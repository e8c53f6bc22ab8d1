"""The pytest plugin as a user's project sees it: a test file in a directory of its own
(no conftest, no access to this repository's tests), run by a pytest subprocess that finds
the plugin through its installed ``pytest11`` entry point.

The project's tests: produce/consume with kafka-python, a consumer group resuming from its
committed offsets, a fault hook that makes the producer retry, a broker restart (same
address, data kept); run once per test (function scope) and once with one broker for the
module (``--minikafka-scope=module``: every test sees the same broker)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(240)

PROJECT_TESTS = textwrap.dedent('''
    import time

    import pytest
    from kafka import KafkaConsumer, KafkaProducer

    # On the module: it applies to a broker per test and to one shared by the module.
    pytestmark = pytest.mark.minikafka(topics={"orders": 2}, faults=True)
    SEEN = set()


    def consume(bootstrap, topic, n, **kwargs):
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap,
                                 auto_offset_reset="earliest", **kwargs)
        got, deadline = [], time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            # Long enough for a whole JoinGroup + SyncGroup: kafka-python 3.0.12 loses a
            # join that completes after poll() gave up waiting on it (the member then
            # stays in the group with no partitions).
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend(r.value for r in records)
        consumer.close()
        return got


    def test_produce_and_consume(kafka_broker):
        SEEN.add(kafka_broker.bootstrap)
        producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
        for i in range(20):
            producer.send("orders", key=b"k%d" % i, value=b"v%d" % i)
        producer.flush()
        producer.close()
        got = consume(kafka_broker.bootstrap, "orders", 20)
        assert sorted(got) == sorted(b"v%d" % i for i in range(20))


    def test_consumer_group_resumes_from_its_commits(kafka_broker):
        SEEN.add(kafka_broker.bootstrap)
        producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
        for i in range(6):
            producer.send("events", b"e%d" % i)
        producer.flush()
        first = consume(kafka_broker.bootstrap, "events", 6, group_id="billing")
        assert first == [b"e%d" % i for i in range(6)]  # committed on close
        for i in range(6, 9):
            producer.send("events", b"e%d" % i)
        producer.flush()
        producer.close()
        assert consume(kafka_broker.bootstrap, "events", 3, group_id="billing") == [
            b"e6", b"e7", b"e8"]


    def test_producer_retries_not_leader(kafka_broker):
        SEEN.add(kafka_broker.bootstrap)
        kafka_broker.create_topics(["payments"])
        before = kafka_broker.faults.count("Produce")
        kafka_broker.faults.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
        producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, retries=5,
                                 retry_backoff_ms=20)
        metadata = producer.send("payments", b"once").get(timeout=30)
        producer.close()
        assert kafka_broker.faults.count("Produce") - before == 3  # two refused, one taken
        assert consume(kafka_broker.bootstrap, "payments", 1) == [b"once"]
        assert metadata.offset == 0


    def test_restart_keeps_address_and_data(kafka_broker):
        SEEN.add(kafka_broker.bootstrap)
        address = kafka_broker.bootstrap
        producer = KafkaProducer(bootstrap_servers=address)
        producer.send("audit", b"before").get(timeout=30)
        kafka_broker.restart()
        assert kafka_broker.bootstrap == address
        producer.send("audit", b"after").get(timeout=30)
        producer.close()
        assert consume(address, "audit", 2) == [b"before", b"after"]


    def test_scope(request):
        shared = request.config.getoption("minikafka_scope") == "module"
        assert len(SEEN) == (1 if shared else 4), SEEN
''')


def run_project(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "test_app.py").write_text(PROJECT_TESTS)
    # Only the installed package: no PYTHONPATH to this repository, no conftest above.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS",
                        "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
         "--rootdir", str(project), "-o", "timeout=120", *args, "test_app.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=200, check=False)


@pytest.mark.parametrize("scope", ["function", "module"])
def test_a_users_project_passes_with_the_installed_plugin(tmp_path: Path, scope: str) -> None:
    result = run_project(tmp_path, f"--minikafka-scope={scope}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout, result.stdout
    # Every broker's directory is removed after its clean shutdown.
    leftovers = [p for p in Path(tmp_path).rglob("meta.properties")]
    assert leftovers == []

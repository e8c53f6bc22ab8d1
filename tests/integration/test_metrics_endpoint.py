"""The Prometheus endpoint of a real broker, scraped while stock clients produce and consume.

Counters must move by exactly what happened: produce requests per API as librdkafka's own
statistics count them, records and bytes in as stored on disk, bytes out as consumed;
stage histograms count every request once; the exposition parses with
``prometheus_client``'s text and OpenMetrics parsers; the Grafana dashboard only uses
metrics the broker exports; ``/health`` and ``/ready`` answer.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.records import iter_batches
from tests.integration.broker_process import REPO_ROOT, BrokerProcess
from tests.integration.data_path_client import create_topic
from tests.integration.metrics_scrape import Scrape, base_url, get, scrape

pytestmark = pytest.mark.timeout(120)

STAGES = ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems",
          "responsesendtimems", "totaltimems")
# librdkafka's request names (its statistics' "req" object) -> Kafka's ApiKeys names
LIBRDKAFKA_NAMES = {"ApiVersion": "ApiVersions", "Offset": "ListOffsets"}


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    proc = BrokerProcess(tmp_path_factory.mktemp("metrics-broker"), {
        "metrics.prometheus.listener": "127.0.0.1:0",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "4",
    }, name="metrics-broker")
    proc.start()
    try:
        yield proc, base_url(proc)
    finally:
        code = proc.stop()
        assert code == 0, proc.stderr_text()


def _requests_by_api(s: Scrape) -> dict[str, float]:
    totals: dict[str, float] = {}
    for labels, value in s.samples("kafka_network_requestmetrics_requests_total").items():
        request = dict(labels)["request"]
        totals[request] = totals.get(request, 0.0) + value
    return totals


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    keys = set(after) | set(before)
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in keys
            if after.get(k, 0.0) != before.get(k, 0.0)}


def _stats_after(poll: Callable[[float], Any], stats: list[dict[str, Any]]) -> dict[str, float]:
    """librdkafka's per-API request counts (summed over its broker connections), from a
    statistics report emitted after this call (two reports later: one full interval)."""
    seen = len(stats)
    deadline = time.monotonic() + 10
    while len(stats) < seen + 2:
        assert time.monotonic() < deadline, "no statistics from librdkafka"
        poll(0.05)
    counts: dict[str, float] = {}
    for broker in stats[-1]["brokers"].values():
        for name, count in broker["req"].items():
            if count:
                kafka_name = LIBRDKAFKA_NAMES.get(name, name)
                counts[kafka_name] = counts.get(kafka_name, 0) + count
    return counts


def _log_bytes(broker: BrokerProcess, topic: str) -> int:
    return sum(p.stat().st_size for p in broker.log_dir.glob(f"{topic}-*/*.log"))


def _stored_batches(broker: BrokerProcess, topic: str) -> list[Any]:
    batches = []
    for path in sorted(broker.log_dir.glob(f"{topic}-*/*.log")):
        batches.extend(iter_batches(path.read_bytes()))
    return batches


def test_produce_moves_counters_by_exactly_what_was_produced(
        metrics_broker: tuple[BrokerProcess, str]) -> None:
    from confluent_kafka import Producer

    broker, url = metrics_broker
    topic = "metrics-produce"
    create_topic(broker.bootstrap, topic)
    stats: list[dict[str, Any]] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all",
                         "enable.idempotence": False, "statistics.interval.ms": 100,
                         "stats_cb": lambda s: stats.append(json.loads(s))})
    producer.produce(topic, b"warm-up")  # connections and metadata settle before we count
    assert producer.flush(10) == 0
    client_before = _stats_after(producer.poll, stats)
    before = scrape(url)
    disk_before = _log_bytes(broker, topic)

    n = 25
    for i in range(n):
        producer.produce(topic, key=b"k%d" % i, value=b"value-%d-" % i + b"x" * i)
        assert producer.flush(10) == 0  # one record per request: n Produce requests
    client_after = _stats_after(producer.poll, stats)
    after = scrape(url)

    client_delta = _delta(client_after, client_before)
    assert client_delta.get("Produce") == n
    # Every request the client sent meanwhile is counted, per API, and nothing else.
    assert _delta(_requests_by_api(after), _requests_by_api(before)) == client_delta

    def moved(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    stored = _log_bytes(broker, topic) - disk_before
    batches = _stored_batches(broker, topic)[-n:]
    assert stored == sum(b.size_bytes for b in batches) > 0
    assert [b.records_count for b in batches] == [1] * n
    assert moved("kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == stored
    assert moved("kafka_server_brokertopicmetrics_bytesin_total") == stored  # all topics
    assert moved("kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == n
    assert moved("kafka_server_brokertopicmetrics_totalproducerequests_total", topic=topic) == n
    assert moved("kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic) == 0
    assert moved("kafka_log_log_size", topic=topic, partition="0") == stored
    assert moved("kafka_log_log_logendoffset", topic=topic, partition="0") == n
    assert moved("kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") == n
    for stage in STAGES:
        assert moved(f"kafka_network_requestmetrics_{stage}_count", request="Produce") == n, stage
        assert moved(f"kafka_network_requestmetrics_{stage}_bucket", request="Produce",
                     le="+Inf") == n, stage
    # The stages add up to the total time.
    stage_sum = sum(moved(f"kafka_network_requestmetrics_{s}_sum", request="Produce")
                    for s in STAGES[:-1])
    assert moved("kafka_network_requestmetrics_totaltimems_sum", request="Produce") == \
        pytest.approx(stage_sum, rel=1e-6)


def test_consume_counts_bytes_out_and_fetches(metrics_broker: tuple[BrokerProcess, str]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    broker, url = metrics_broker
    topic = "metrics-consume"
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    n = 40
    for i in range(n):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(10) == 0
    stored = _log_bytes(broker, topic)
    before = scrape(url)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metrics-unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + 30
    while got < n and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    consumer.close()
    assert got == n
    after = scrape(url)

    def moved(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    # Each record batch was sent to the consumer once.
    assert moved("kafka_server_brokertopicmetrics_bytesout_total", topic=topic) == stored
    fetches = moved("kafka_network_requestmetrics_totaltimems_count", request="Fetch")
    assert fetches >= 1
    assert moved("kafka_network_requestmetrics_totaltimems_count", request="FetchConsumer") == fetches
    assert moved("kafka_network_requestmetrics_totaltimems_count", request="FetchFollower") == 0
    assert moved("kafka_server_brokertopicmetrics_totalfetchrequests_total", topic=topic) >= 1


def test_group_metrics_and_consumer_lag(metrics_broker: tuple[BrokerProcess, str]) -> None:
    from confluent_kafka import Consumer, Producer

    broker, url = metrics_broker
    topic, group = "metrics-lag", "metrics-group"
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, value=b"a%d" % i)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 40
    while got < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    assert got == 10
    consumer.commit(asynchronous=False)
    during = scrape(url)
    assert during.value("kafka_coordinator_group_groupmetadatamanager_numgroupsstable") >= 1
    assert during.value("kafka_consumergroup_lag", consumergroup=group, topic=topic,
                        partition="0") == 0
    for i in range(7):
        producer.produce(topic, value=b"b%d" % i)
    assert producer.flush(10) == 0
    assert scrape(url).value("kafka_consumergroup_lag", consumergroup=group, topic=topic,
                             partition="0") == 7
    consumer.close()
    after = scrape(url)
    assert after.value("kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1
    assert after.value("kafka_coordinator_group_groupmetadatamanager_numoffsets") >= 1
    assert after.value("kafka_network_requestmetrics_remotetimems_count", request="JoinGroup") >= 1


def _check_family(s: Scrape, name: str) -> None:
    family = s.families[name]
    if family.type == "histogram":
        by_labels: dict[frozenset[tuple[str, str]], list[tuple[float, float]]] = {}
        counts: dict[frozenset[tuple[str, str]], float] = {}
        for sample in family.samples:
            labels = {k: v for k, v in sample.labels.items() if k != "le"}
            key = frozenset(labels.items())
            if sample.name.endswith("_bucket"):
                by_labels.setdefault(key, []).append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_count"):
                counts[key] = sample.value
        for key, buckets in by_labels.items():
            values = [v for _le, v in sorted(buckets)]
            assert values == sorted(values), f"{name} {key}: buckets not cumulative"
            assert sorted(buckets)[-1][0] == float("inf")
            assert values[-1] == counts[key], f"{name} {key}: +Inf bucket != count"


def test_exposition_parses_with_prometheus_client(metrics_broker: tuple[BrokerProcess, str]) -> None:
    broker, url = metrics_broker
    create_topic(broker.bootstrap, "metrics-parse")
    text_format = scrape(url)
    openmetrics = scrape(url, openmetrics=True)
    assert text_format.text.startswith("#") and "# EOF" in openmetrics.text
    for s in (text_format, openmetrics):
        types = {name: f.type for name, f in s.families.items()}
        assert types["kafka_network_requestmetrics_requests"] == "counter"
        assert types["kafka_network_requestmetrics_totaltimems"] == "histogram"
        assert types["kafka_server_brokertopicmetrics_bytesin"] == "counter"
        assert types["kafka_server_replicamanager_underreplicatedpartitions"] == "gauge"
        for name in s.families:
            _check_family(s, name)
    assert text_format.value("kafka_server_kafkaserver_brokerstate") == 3  # RUNNING
    assert text_format.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert text_format.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert text_format.value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert text_format.value("kafka_server_socket_server_metrics_connection_count",
                             listener="PLAINTEXT", networkProcessor="0") >= 0
    assert text_format.value("kafka_log_log_numlogsegments", topic="metrics-parse",
                             partition="0") == 1
    assert text_format.value("process_resident_memory_bytes") > 0
    # An idle broker's event loop is mostly idle (the measure is its thread's CPU time).
    idle = text_format.value("kafka_network_socketserver_networkprocessoravgidle_percent")
    assert 0.2 < idle <= 1
    assert text_format.value(
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent") == idle


def test_dashboard_uses_only_exported_metrics(metrics_broker: tuple[BrokerProcess, str]) -> None:
    _broker, url = metrics_broker
    dashboard = json.loads((REPO_ROOT / "monitoring/grafana/dashboards/minikafka.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) > 20
    names = {m for e in exprs for m in re.findall(r"\b((?:kafka|process)_[a-z0-9_]+)", e)}
    exported = scrape(url)
    missing = sorted(n for n in names if not exported.has(n))
    assert not missing, f"dashboard metrics the broker does not export: {missing}"


def test_health_ready_and_unknown_paths(metrics_broker: tuple[BrokerProcess, str]) -> None:
    _broker, url = metrics_broker
    assert get(f"{url}/health") == (200, "alive RUNNING\n")
    assert get(f"{url}/ready") == (200, "ready RUNNING\n")
    status, _body = get(f"{url}/nothing-here")
    assert status == 404


def test_metrics_are_off_by_default(broker: BrokerProcess) -> None:
    assert "Metrics endpoint" not in broker.stderr_text()


def test_monitoring_profile_is_valid_and_points_at_the_broker() -> None:
    compose = shutil.which("docker-compose")
    assert compose is not None, "docker-compose is not installed: run ./scripts/setup"
    args = [compose, "-f", str(REPO_ROOT / "docker-compose.yml"), "--profile", "monitoring"]
    check = subprocess.run([*args, "config", "-q"], capture_output=True, text=True, timeout=30,
                           cwd=REPO_ROOT)
    assert check.returncode == 0, check.stderr
    config = subprocess.run([*args, "config"], capture_output=True, text=True, timeout=30,
                            cwd=REPO_ROOT)
    assert config.returncode == 0, config.stderr
    for service in ("prometheus:", "grafana:", "MINIKAFKA_METRICS_PROMETHEUS_LISTENER: 0.0.0.0:9404",
                    "9404/ready"):
        assert service in config.stdout
    # Every file the profile mounts from the repository exists.
    mounts = re.findall(r"^\s*- (/\S+?):/\S+:ro$", config.stdout, re.M)
    assert len(mounts) == 3, config.stdout
    assert all(Path(m).exists() for m in mounts), mounts
    targets = (REPO_ROOT / "monitoring/prometheus.yml").read_text()
    assert all(f"broker-{i}:9404" in targets for i in (1, 2, 3))


def test_log_flushes_are_timed(metrics_broker: tuple[BrokerProcess, str]) -> None:
    from confluent_kafka import Producer

    broker, url = metrics_broker
    topic = "metrics-flush"
    create_topic(broker.bootstrap, topic, configs={"flush.messages": "1"})
    name = "kafka_log_logflushstats_logflushrateandtimems_count"
    before = scrape(url).value(name)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, b"flushed")
    assert producer.flush(10) == 0
    deadline = time.monotonic() + 10  # the flush runs in a thread after the append
    while scrape(url).value(name) == before:
        assert time.monotonic() < deadline, "no flush was timed"
        time.sleep(0.05)


def test_a_parked_fetch_waits_in_remote_time(metrics_broker: tuple[BrokerProcess, str]) -> None:
    """A long-poll Fetch with nothing to return parks in the fetch purgatory: its wait is
    RemoteTimeMs (the handler's task is found when it parks), not LocalTimeMs."""
    from client.sync import SyncClient
    from protocol.messages.fetch import FetchRequest

    broker, url = metrics_broker
    topic = "metrics-parked"
    create_topic(broker.bootstrap, topic)
    wait_ms = 400
    fetch = FetchRequest(
        replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as client:
        version = min(client.version_for(FetchRequest), 12)  # v12: topics by name
        before = scrape(url)
        started = time.monotonic()
        response = client.send(fetch, version)
        waited_s = time.monotonic() - started
        assert response.responses[0].partitions[0].error_code == 0
        assert waited_s >= wait_ms / 1000 * 0.9
        after = scrape(url)

    def moved(name: str) -> float:
        return after.value(name, request="FetchConsumer") - before.value(name, request="FetchConsumer")

    assert moved("kafka_network_requestmetrics_totaltimems_count") == 1
    assert moved("kafka_network_requestmetrics_remotetimems_sum") >= wait_ms * 0.9
    assert moved("kafka_network_requestmetrics_localtimems_sum") < wait_ms / 4

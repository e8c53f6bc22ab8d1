"""The broker process: configuration errors fail start-up naming the property, a config
file is honoured, SIGTERM/SIGINT shut down in order with exit 0 while requests are in
flight, the log dir is locked against a second broker, restarts keep the cluster id."""

from __future__ import annotations

import re
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.config import BrokerConfig, ConfigError
from client.sync import SyncClient
from protocol.frames import RequestHeader, decode_response, encode_request
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from tests.integration.broker_process import (
    REPO_ROOT,
    BrokerProcess,
    BrokerStartError,
    register_topic,
)
from tests.integration.data_path_client import batch, create_topic, produce
from tests.integration.netclient import ConnectionClosed, RawClient
from tests.integration.test_network_bad_input import api_versions_ok
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(90)


def run_cli(*args: str, timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout_s)


def test_unknown_property_fails_startup_naming_it(tmp_path: Path) -> None:
    result = run_cli("broker", "--override", f"log.dirs={tmp_path}/d",
                     "--override", "no.such.property=1")
    assert result.returncode == 1
    assert "Unknown configuration 'no.such.property'" in result.stderr
    assert "minikafka: started" not in result.stdout


@pytest.mark.parametrize(("override", "named"), [
    ("num.io.threads=abc", "configuration num.io.threads"),
    ("num.io.threads=0", "configuration num.io.threads: Value must be at least 1"),
    ("auto.create.topics.enable=maybe", "configuration auto.create.topics.enable"),
    ("listeners=FOO://127.0.0.1:0", "configuration listeners"),
    ("listeners=SSL://127.0.0.1:0", "configuration security.inter.broker.protocol"),
    ("log.retention.hours=x", "configuration log.retention.hours"),
    ("log.dirs=/a,/a", "configuration log.dirs"),  # several dirs are fine, the same twice not
    ("max.connections.per.ip.overrides=host", "configuration max.connections.per.ip.overrides"),
])
def test_invalid_value_is_refused_naming_the_property(override: str, named: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(named)):
        BrokerConfig.load(None, ["log.dirs=/tmp/x", override])


def test_invalid_value_fails_startup_with_exit_1(tmp_path: Path) -> None:
    result = run_cli("broker", "--override", f"log.dirs={tmp_path}/d",
                     "--override", "socket.request.max.bytes=-3")
    assert result.returncode == 1
    assert "configuration socket.request.max.bytes" in result.stderr


def test_bad_property_in_config_file_fails_startup(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"# comment\nlog.dirs={tmp_path}/d\nlisteners=PLAINTEXT://127.0.0.1:0\n"
                      "log.segment.byte=1000\n")
    result = run_cli("broker", "--config", str(config))
    assert result.returncode == 1
    assert "Unknown configuration 'log.segment.byte'" in result.stderr


def test_config_file_and_overrides_are_used(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("broker.id=7\n"
                      "listeners = PLAINTEXT://127.0.0.1:9\n"  # overridden below
                      f"log.dirs: {tmp_path}/data\n"
                      "num.io.threads=2\n")
    proc = BrokerProcess(tmp_path, {"listeners": "PLAINTEXT://127.0.0.1:0"})
    proc.overrides.pop("log.dirs")
    cmd = proc.command
    proc.command = lambda: [*cmd()[:4], "--config", str(config), *cmd()[4:]]  # type: ignore[method-assign]
    with proc:
        assert api_versions_ok(RawClient(proc.bootstrap))
        meta = (tmp_path / "data" / "meta.properties").read_text()
    assert "broker.id=7" in meta
    assert proc.broker_id == 7
    assert proc.exit_codes == [0]


def test_sigterm_with_requests_in_flight_exits_0_in_order(broker: BrokerProcess) -> None:
    """Thousands of requests are pipelined on 4 connections; SIGTERM arrives after the first
    answers: every connection gets an in-order prefix of its answers, then EOF; exit 0; the
    shutdown steps are logged in order."""
    per_connection = 3000
    clients = [RawClient(broker.bootstrap, timeout_s=20) for _ in range(4)]
    try:
        for client in clients:
            data = b"".join(encode_request(RequestHeader(18, 0, cid, "c"), ApiVersionsRequest())
                            for cid in range(per_connection))
            client.send(data)
        first = _read_frame(clients[0])
        assert first is not None and struct.unpack_from(">i", first)[0] == 0
        broker.signal(signal.SIGTERM)
        counts = []
        for index, client in enumerate(clients):
            expected = 1 if index == 0 else 0
            while (frame := _read_frame(client)) is not None:
                cid, body = decode_response(frame, 18, 0)
                assert cid == expected, "responses out of order"
                assert isinstance(body, ApiVersionsResponse) and body.error_code == 0
                expected += 1
            counts.append(expected)
        assert broker.wait() == 0
    finally:
        for client in clients:
            client.close()
    assert all(count <= per_connection for count in counts)
    assert min(counts) < per_connection, "SIGTERM arrived after everything was answered"
    log = broker.stderr_text()
    steps = [log.index(f"Shutdown step {i}/4") for i in range(1, 5)]
    assert steps == sorted(steps)
    assert log.index("Received SIGTERM") < steps[0]
    assert "shut down completed" in log[steps[-1]:]


def _read_frame(client: RawClient) -> bytes | None:
    """One response frame, or None at EOF / reset."""
    try:
        return client.recv_frame()
    except (ConnectionClosed, ConnectionResetError):
        return None


def test_sigint_shuts_down_with_exit_0(broker: BrokerProcess) -> None:
    broker.signal(signal.SIGINT)
    assert broker.wait() == 0
    assert "Received SIGINT" in broker.stderr_text()


@pytest.mark.broker_errors(r"Start-up failed: Failed to acquire lock on file \.lock", exit_codes=(1,))
def test_second_broker_on_same_log_dir_fails(broker: BrokerProcess, tmp_path: Path) -> None:
    other = BrokerProcess(tmp_path / "other", {"log.dirs": str(broker.log_dir)}, name="other")
    with pytest.raises(BrokerStartError, match=r"Failed to acquire lock on file \.lock"):
        other.start()
    assert other.exit_codes == [1]
    assert broker.is_running()


def test_restart_and_kill9_keep_cluster_id_and_clean_marker(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory()
    meta = proc.log_dir / "meta.properties"
    marker = proc.log_dir / ".kafka_cleanshutdown"
    cluster_line = next(line for line in meta.read_text().splitlines() if line.startswith("cluster.id="))
    assert not marker.exists()  # removed at start-up: from now on a crash is unclean
    assert proc.stop() == 0
    assert marker.exists()  # written last by the ordered shutdown
    proc.start()
    assert not marker.exists()
    assert api_versions_ok(RawClient(proc.bootstrap))
    proc.kill9_and_restart()  # kill -9 leaves no marker: the start recovers
    assert api_versions_ok(RawClient(proc.bootstrap))
    assert cluster_line in meta.read_text()
    assert proc.exit_codes[0] == 0 and proc.exit_codes[1] == -signal.SIGKILL


def test_cli_help_and_unknown_command() -> None:
    assert run_cli("--help").returncode == 0
    result = run_cli("frobnicate")
    assert result.returncode == 2 and "unknown command 'frobnicate'" in result.stderr


def test_periodic_checkpoints_while_running(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(log_flush_offset_checkpoint_interval_ms=200)
    checkpoint = proc.log_dir / "recovery-point-offset-checkpoint"
    deadline = time.monotonic() + 10
    while not checkpoint.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert checkpoint.exists(), "no checkpoint written by the periodic job"
    assert checkpoint.read_text().splitlines()[:2] == ["0", "0"]  # version 0, no partitions
    assert proc.is_running()


def test_flush_ms_flushes_in_the_background(broker_factory: Callable[..., BrokerProcess]) -> None:
    """A topic with flush.ms is fsynced by the periodic flush job (its recovery point, in
    the checkpoint, reaches its end); one with the broker's log.flush.interval.ms of an
    hour is not."""
    proc = broker_factory(log_flush_scheduler_interval_ms=100, log_flush_interval_ms=3_600_000,
                          log_flush_offset_checkpoint_interval_ms=200)
    create_topic(proc.bootstrap, "timed", 1, {"flush.ms": "300"})
    create_topic(proc.bootstrap, "untimed", 1)
    with SyncClient(proc.bootstrap, timeout_ms=10_000) as client:
        for topic in ("timed", "untimed"):
            produce(client, topic, 0, batch([b"a", b"b", b"c", b"d", b"e"]), acks=1)
    checkpoint = proc.log_dir / "recovery-point-offset-checkpoint"

    def points() -> dict[str, int]:
        lines = checkpoint.read_text().splitlines() if checkpoint.exists() else []
        return {line.split()[0]: int(line.split()[2]) for line in lines[2:]}

    wait_for(lambda: points().get("timed") == 5, timeout_s=15,
             what="the timed topic's recovery point at 5")
    assert points().get("untimed", 0) == 0


def test_dump_log_and_topics_subcommands_are_wired(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path)
    register_topic(proc.log_dir, "wired")
    with proc:
        listed = run_cli("topics", "--bootstrap-server", proc.bootstrap, "--list")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.split() == ["wired"]
    segment = proc.log_dir / "wired-0" / "00000000000000000000.log"
    dumped = run_cli("dump-log", str(segment))
    assert dumped.returncode == 0, dumped.stderr
    assert f"Dumping {segment}" in dumped.stdout and "Log starting offset: 0" in dumped.stdout


# ``-X importtime`` (PYTHONPROFILEIMPORTTIME) writes each module to stderr as it is first
# imported, lazy imports included: "import time: <self us> | <cumulative us> | <name>".
_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$", re.MULTILINE)
# Only a cluster (zookeeper.connect) or a SCRAM exchange needs these.
_CLUSTER_OR_SCRAM_ONLY = re.compile(r"^(kazoo|scramp|controller\.zk\w*|broker\.cluster_mode"
                                    r"|broker\.security\.zk_\w+)(\.|$)")
# Only the metrics endpoint (metrics.prometheus.listener) needs these; the request log
# (kafka.request.logger at DEBUG) needs broker.metrics.requests, not the others.
_METRICS_ENDPOINT_ONLY = re.compile(r"^(prometheus_client|wsgiref|http\.server"
                                    r"|broker\.metrics\.(endpoint|collectors|requests|topics"
                                    r"|loop_idle|histogram))(\.|$)")


def test_single_node_broker_does_not_load_zookeeper_scram_or_metrics_modules(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    proc = broker_factory(env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert api_versions_ok(RawClient(proc.bootstrap))
    producer = KafkaProducer(bootstrap_servers=proc.bootstrap, request_timeout_ms=10_000,
                             max_block_ms=10_000)
    try:
        producer.send("lazy", b"one").get(timeout=20)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer("lazy", bootstrap_servers=proc.bootstrap, group_id="lazy",
                             auto_offset_reset="earliest", request_timeout_ms=10_000)
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        assert got == [b"one"]
        consumer.commit()
    finally:
        consumer.close()
    assert proc.stop() == 0
    imported = _IMPORTED.findall(proc.stderr_text())
    # The record is complete: the server, the lazily imported uvloop (run_broker) and the
    # group coordinator (the consumer group) are in it.
    assert {"broker.server", "uvloop", "broker.group.service"} <= set(imported)
    assert [m for m in imported if _CLUSTER_OR_SCRAM_ONLY.match(m)] == []
    # Metrics are off (the default): prometheus_client is not loaded, not even once the
    # broker has served produce, fetch and a group.
    assert [m for m in imported if _METRICS_ENDPOINT_ONLY.match(m)] == []

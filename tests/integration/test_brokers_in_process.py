"""Several brokers in one interpreter: nothing is process-global.

Two ``BrokerServer``s (separate log dirs, ephemeral ports, one event loop in a thread of
this process) serve kafka-python clients side by side: each is its own single-node cluster
with its own controller, topics and data, and both shut down cleanly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import uvloop
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from broker.config import BrokerConfig
from broker.server import BrokerServer
from tests.integration.netclient import RawClient

pytestmark = pytest.mark.timeout(120)


class InProcessBrokers:
    """N brokers on one event loop in a background thread."""

    def __init__(self, configs: list[BrokerConfig]) -> None:
        self.configs = configs
        self.servers: list[BrokerServer] = []
        self.bootstraps: list[str] = []
        self.cluster_ids: list[str] = []
        self.exit_codes: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=lambda: uvloop.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.servers = [BrokerServer(c, install_signal_handlers=False) for c in self.configs]
        tasks = [asyncio.create_task(s.run()) for s in self.servers]
        try:
            for server in self.servers:
                broker = await asyncio.wait_for(server.wait_started(), 60)
                endpoint = broker.advertised
                self.bootstraps.append(f"{endpoint.host}:{endpoint.port}")
                self.cluster_ids.append(broker.cluster_id)
        finally:
            self._started.set()
        self.exit_codes = list(await asyncio.gather(*tasks, return_exceptions=True))

    def start(self) -> InProcessBrokers:
        self._thread.start()
        assert self._started.wait(90) and len(self.bootstraps) == len(self.configs)
        return self

    def stop(self) -> None:
        assert self._loop is not None
        for server in self.servers:
            self._loop.call_soon_threadsafe(server.request_stop)
        self._thread.join(60)
        assert not self._thread.is_alive()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10_000,
                             max_block_ms=10_000)
    try:
        for value in values:
            producer.send(topic, value=value, partition=0)
        producer.flush(timeout=20)
    finally:
        producer.close(timeout=5)


def consume(bootstrap: str, topic: str, n: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, request_timeout_ms=10_000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        return got
    finally:
        consumer.close()


def test_two_brokers_in_one_process_serve_clients_side_by_side(tmp_path: Path) -> None:
    configs = [BrokerConfig.from_properties({
        "broker.id": str(i), "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / f"broker{i}"), "num.partitions": "1"}) for i in (0, 1)]
    brokers = InProcessBrokers(configs).start()
    try:
        assert brokers.bootstraps[0] != brokers.bootstraps[1]
        assert brokers.cluster_ids[0] != brokers.cluster_ids[1]
        for i, bootstrap in enumerate(brokers.bootstraps):
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
            try:
                admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}
                                     for name in ("same-name", f"only-{i}")})
                described = admin.describe_cluster()
                (node,) = described["brokers"]
                assert f"{node['host']}:{node['port']}" == bootstrap
                assert described["controller_id"] == i
                assert set(admin.list_topics()) == {"same-name", f"only-{i}"}
            finally:
                admin.close()
        # Interleaved: each broker's data stays its own.
        for round_ in range(2):
            for i, bootstrap in enumerate(brokers.bootstraps):
                produce(bootstrap, "same-name", [b"b%d-r%d-%d" % (i, round_, k) for k in range(50)])
        for i, bootstrap in enumerate(brokers.bootstraps):
            got = consume(bootstrap, "same-name", 100)
            assert got == [b"b%d-r%d-%d" % (i, r, k) for r in range(2) for k in range(50)]
            assert consume(bootstrap, f"only-{i}", 0) == []
    finally:
        brokers.stop()
    assert brokers.exit_codes == [0, 0]
    for i in (0, 1):
        log_dir = tmp_path / f"broker{i}"
        assert (log_dir / ".kafka_cleanshutdown").exists()
        assert (log_dir / "same-name-0").is_dir() and (log_dir / f"only-{i}-0").is_dir()
        assert not (log_dir / f"only-{1 - i}-0").exists()


class _LoadedLines(logging.Handler):
    """When (monotonic) each log dir logged 'loaded N partition logs'."""

    def __init__(self) -> None:
        super().__init__()
        self.at: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "partition logs (clean shutdown" in message:
            self.at[message.split(":", 1)[0]] = time.monotonic()


def _api_versions_s(port: int) -> float:
    """Seconds for one ApiVersions v0 on a new connection (raw socket)."""
    request = struct.pack(">hhih", 18, 0, 1, -1)
    t0 = time.monotonic()
    with RawClient(f"127.0.0.1:{port}", timeout_s=30) as client:
        client.send(struct.pack(">i", len(request)) + request)
        client.recv_frame()
    return time.monotonic() - t0


def test_a_broker_loading_many_logs_leaves_the_loop_to_the_others(tmp_path: Path) -> None:
    """The logs load in worker threads (num.recovery.threads.per.data.dir): while broker B
    loads 1,500 partition logs, broker A on the same event loop answers ApiVersions, one
    after another. Before, B's LogManager.startup held the loop for the whole load: A
    answered nothing until it was over."""
    partitions = 1500

    def config(i: int) -> BrokerConfig:
        return BrokerConfig.from_properties({
            "broker.id": str(i), "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / f"broker{i}"), "num.partitions": "1",
            "log.cleaner.enable": "false"})

    first = InProcessBrokers([config(1)]).start()  # B's logs, then a clean stop
    try:
        admin = KafkaAdminClient(bootstrap_servers=first.bootstraps[0], request_timeout_ms=60_000)
        try:
            admin.create_topics({"many": {"num_partitions": partitions,
                                          "replication_factor": 1}}, timeout_ms=60_000)
        finally:
            admin.close()
    finally:
        first.stop()
    assert first.exit_codes == [0]

    loaded = _LoadedLines()
    dir_log = logging.getLogger("storage.log_dir")
    level = dir_log.level
    dir_log.setLevel(logging.INFO)
    dir_log.addHandler(loaded)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    servers = [BrokerServer(config(i), install_signal_handlers=False) for i in (0, 1)]
    tasks: list[concurrent.futures.Future[int]] = []
    try:
        tasks.append(asyncio.run_coroutine_threadsafe(servers[0].run(), loop))
        a = asyncio.run_coroutine_threadsafe(servers[0].wait_started(), loop).result(60)
        port = a.advertised.port
        _api_versions_s(port)
        samples: list[tuple[float, float]] = []  # (sent, seconds) of A's answers
        b_launched = time.monotonic()
        tasks.append(asyncio.run_coroutine_threadsafe(servers[1].run(), loop))
        b_started = asyncio.run_coroutine_threadsafe(servers[1].wait_started(), loop)
        while not b_started.done() and time.monotonic() - b_launched < 60:
            sent = time.monotonic()
            samples.append((sent, _api_versions_s(port)))
        b_started.result(1)
    finally:
        dir_log.removeHandler(loaded)
        dir_log.setLevel(level)
        for server in servers:
            loop.call_soon_threadsafe(server.request_stop)
        for task in tasks:
            assert task.result(60) == 0
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
    b_loaded = loaded.at[str(tmp_path / "broker1")]
    load_s = b_loaded - b_launched
    assert load_s > 0.1, f"B loaded {partitions} logs in {load_s:.3f} s: too fast to tell"
    during = [seconds for sent, seconds in samples if sent + seconds <= b_loaded]
    assert len(during) >= 10, f"A answered {len(during)} requests in B's {load_s:.2f} s load"

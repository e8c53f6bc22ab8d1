"""Readiness across start-up and shutdown, and the request log (``kafka.request.logger``).

Start-up is held before the logs load with the test-only pause file
(``MINIKAFKA_TEST_PAUSE_BEFORE_LOG_LOADING``): while it exists the broker is loading
(state RECOVERY), ``/ready`` must answer 503 and ``/health`` 200; once it is removed the
broker finishes starting and ``/ready`` answers 200.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from broker.server import PAUSE_ENV
from tests.broker_checks import Expectations, unexpected_entries
from tests.integration.broker_process import REPO_ROOT, BrokerProcess
from tests.integration.data_path_client import create_topic
from tests.integration.metrics_scrape import get, scrape
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(90)


class LineReader:
    """Lines of a process's stdout, each wait bounded."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self._proc = proc
        self._selector = selectors.DefaultSelector()
        self._selector.register(proc.stdout.fileno(), selectors.EVENT_READ)
        self._pending = b""

    def until(self, pattern: str, timeout_s: float = 30.0) -> re.Match[str]:
        """Raw reads of the pipe: a buffered readline() could take several lines at once and
        leave select() waiting for bytes already read."""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\n" in self._pending:
                line, self._pending = self._pending.split(b"\n", 1)
                match = re.search(pattern, line.decode(errors="replace"))
                if match is not None:
                    return match
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no line matching {pattern!r} within {timeout_s} s"
            if self._selector.select(remaining):
                chunk = os.read(fd, 65536)
                assert chunk, f"the broker exited ({self._proc.poll()}) before {pattern!r}"
                self._pending += chunk


def test_ready_is_503_while_logs_load_and_200_after(tmp_path: Path) -> None:
    pause = tmp_path / "hold-log-loading"
    pause.touch()
    stderr = (tmp_path / "stderr.log").open("wb")
    env = {**os.environ, PAUSE_ENV: str(pause), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "broker",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'data'}",
         "--override", "metrics.prometheus.listener=127.0.0.1:0"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL,
        text=True)
    try:
        lines = LineReader(proc)
        url = lines.until(r"metrics at (http://\S+)/metrics").group(1)
        # Just after that line the state goes STARTING, then RECOVERY, where the pause holds it.
        wait_for(lambda: get(f"{url}/ready") == (503, "not ready RECOVERY\n"), 30, "state RECOVERY")
        # Held before loading: not ready, but alive; metrics show the state.
        for _ in range(3):
            assert get(f"{url}/ready") == (503, "not ready RECOVERY\n")
            assert get(f"{url}/health") == (200, "alive RECOVERY\n")
        assert scrape(url).value("kafka_server_kafkaserver_brokerstate") == 2
        pause.unlink()
        lines.until(r"minikafka: started broker")
        assert get(f"{url}/ready") == (200, "ready RUNNING\n")
        assert get(f"{url}/health") == (200, "alive RUNNING\n")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=40) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=40)
        stderr.close()
    # Started outside BrokerProcess, so its log is checked here (tests/broker_checks.py).
    assert unexpected_entries((tmp_path / "stderr.log").read_text(), Expectations()) == []


def test_request_log_lines(broker_factory: Any) -> None:
    from confluent_kafka import Producer

    broker: BrokerProcess = broker_factory(
        env={"MINIKAFKA_LOG_LEVELS": "kafka.request.logger=DEBUG"})
    create_topic(broker.bootstrap, "logged")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                         "client.id": "request-log-test"})
    producer.produce("logged", b"x" * 100)
    assert producer.flush(10) == 0
    entries = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        entries = [json.loads(m) for m in re.findall(r"Completed request:(\{.*\}) \(kafka\.request\.logger\)",
                                                      broker.stderr_text())]
        if any(e["request"] == "Produce" for e in entries):
            break
        time.sleep(0.05)
    produce = [e for e in entries if e["request"] == "Produce"]
    assert len(produce) == 1, entries
    (entry,) = produce
    assert entry["requestHeader"]["requestApiKey"] == 0
    assert entry["requestHeader"]["clientId"] == "request-log-test"
    assert entry["clientAddress"].startswith("127.0.0.1:")
    assert entry["connection"].startswith(broker.bootstrap + "-127.0.0.1:")
    assert entry["requestBytes"] > 100 and entry["responseBytes"] > 0
    assert entry["outcome"] == "response"
    stages = ("requestQueueTimeMs", "localTimeMs", "remoteTimeMs", "responseQueueTimeMs",
              "sendTimeMs")
    assert all(entry[s] >= 0 for s in stages)
    assert sum(entry[s] for s in stages) == pytest.approx(entry["totalTimeMs"], abs=0.01)
    # The metrics endpoint stays off: only the request log asked for timing.
    assert "Metrics endpoint" not in broker.stderr_text()

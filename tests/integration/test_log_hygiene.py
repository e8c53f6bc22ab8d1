"""The broker's log stays readable under abuse and says nothing false at start-up.

- A flood of bad frames (each on its own connection, as a fuzzer sends them) is logged at
  a bounded rate, with a count of the lines dropped, and the broker keeps serving.
- The broker's own files in the log dir (topic registry, producer-id block) are not
  reported as stray at start-up.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest

from client.sync import SyncClient
from tests.integration.data_path_client import create_topic, init_producer_id
from tests.integration.netclient import RawClient
from tests.integration.test_network_bad_input import api_versions_ok
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

FRAMES = 2000


def test_bad_frame_flood_is_logged_at_a_bounded_rate(broker: Any) -> None:
    mark = len(broker.stderr_text())
    host, port = broker.bootstrap.rsplit(":", 1)
    started = time.monotonic()
    bad = struct.pack(">i", -7)  # a negative frame size: the connection is closed
    for _ in range(FRAMES):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(bad)
            sock.recv(1)  # until the broker closes it
    with RawClient(broker.bootstrap) as client:
        assert api_versions_ok(client)
    wait_for(lambda: "similar lines dropped" in broker.stderr_text()[mark:], 30,
             "a line saying how many were dropped")
    log = broker.stderr_text()[mark:]
    elapsed = time.monotonic() - started
    closing = [line for line in log.splitlines() if "Closing connection" in line]
    # burst of 100, then 10 a second (plus slack for lines written while we counted)
    assert 100 <= len(closing) <= 100 + 10 * (elapsed + 1) + 5, (len(closing), elapsed)
    assert len(closing) < FRAMES / 2
    assert any("similar lines dropped" in line for line in closing)


def test_no_stray_file_warning_for_the_brokers_own_files(broker: Any) -> None:
    create_topic(broker.bootstrap, "own-files")
    with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
        init_producer_id(c)  # writes the producer-id block
    assert (broker.log_dir / "producer-id-block").exists()
    mark = len(broker.stderr_text())
    broker.restart()
    log = broker.stderr_text()[mark:]
    assert "ignoring stray" not in log, [ln for ln in log.splitlines() if "ignoring stray" in ln]

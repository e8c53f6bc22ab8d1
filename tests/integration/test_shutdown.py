"""Shutdown claims (broker/server.py), each on a real broker process:

- produce requests pipelined on one connection when SIGTERM arrives: the one in flight is
  answered before the connection closes, answers come in order, and after a restart the log
  holds exactly the acknowledged records (none lost, none appended without an answer);
- a shutdown that cannot finish (the log dir stops answering) ends at the 30 s bound with
  exit code 1 and one ERROR line, and the next start recovers every acknowledged record;
- a second signal during a shutdown exits at once (exit code 1), without waiting for it.

A log dir that "stops answering" is a FIFO where the shutdown writes its clean-shutdown
marker last (``.kafka_cleanshutdown``): opening it for writing blocks until a reader comes,
as a write to a hung disk would. The test removes it before the restart.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.server import SHUTDOWN_TIMEOUT_S
from client.sync import SyncClient
from protocol.frames import decode_response
from protocol.messages.produce import ProduceRequest, ProduceResponse
from tests.integration.broker_process import BrokerProcess
from tests.integration.data_path_client import (
    EARLIEST,
    LATEST,
    batch,
    create_topic,
    fetch,
    list_offset,
    produce,
    records_of,
)
from tests.integration.netclient import ConnectionClosed, RawClient
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

TOPIC = "shutdown"
MARKER = ".kafka_cleanshutdown"
WAIT_S = 60.0  # bound on waits for log lines and exits that take well under a second


def produce_frame(client: RawClient, value: bytes) -> tuple[int, bytes]:
    return client.frame(0, 9, ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        ProduceRequest.TopicProduceData(TOPIC, [ProduceRequest.PartitionProduceData(0, batch([value]))])]))


def log_offsets(proc: BrokerProcess) -> tuple[int, int]:
    with SyncClient(proc.bootstrap, timeout_ms=10_000) as client:
        return list_offset(client, TOPIC, 0, EARLIEST)[2], list_offset(client, TOPIC, 0, LATEST)[2]


def values(proc: BrokerProcess, end: int) -> list[bytes | None]:
    got: list[bytes | None] = []
    with SyncClient(proc.bootstrap, timeout_ms=10_000) as client:
        while len(got) < end:
            part = fetch(client, TOPIC, 0, len(got)).responses[0].partitions[0]
            assert part.error_code == 0
            got += [r.value for r in records_of(part.records) if r.offset >= len(got)]
    return got


def wait_log(proc: BrokerProcess, text: str) -> None:
    wait_for(lambda: text in proc.stderr_text(), WAIT_S, f"{text!r} in the broker's log")


def hang_the_marker_write(proc: BrokerProcess) -> Path:
    marker = proc.log_dir / MARKER
    assert not marker.exists()  # removed at start-up
    os.mkfifo(marker)
    return marker


def test_pipelined_produces_in_flight_at_sigterm_are_answered_in_order(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory()
    create_topic(proc.bootstrap, TOPIC)
    # Enough that SIGTERM comes while some are still unanswered: the broker starts up to
    # 65 of a connection's buffered produce requests in a turn (broker/network/connection.py);
    # few enough that neither side's socket buffers fill before the client reads (~100 KB
    # of requests, ~60 KB of answers).
    sent = 1000
    with RawClient(proc.bootstrap, timeout_s=WAIT_S) as client:
        frames = [produce_frame(client, b"v%d" % i) for i in range(sent)]
        client.send(b"".join(frame for _cid, frame in frames))
        answered: list[tuple[int, int]] = []  # (correlation id, base offset)

        def read_answer() -> bool:
            try:
                data = client.recv_frame()
            except (ConnectionClosed, ConnectionResetError):
                return False
            cid, body = decode_response(data, 0, 9)
            assert isinstance(body, ProduceResponse)
            partition = body.responses[0].partition_responses[0]
            assert partition.error_code == 0, partition
            answered.append((cid, partition.base_offset))
            return True

        assert read_answer()
        proc.signal(signal.SIGTERM)
        while read_answer():
            pass
    assert proc.wait() == 0
    assert answered == [(cid, offset) for offset, (cid, _frame) in enumerate(frames[:len(answered)])]
    assert 1 <= len(answered) < sent, "SIGTERM came after every request was answered"
    proc.start()
    # Every acknowledged record is there, and nothing the broker did not answer.
    assert log_offsets(proc) == (0, len(answered))
    assert values(proc, len(answered)) == [b"v%d" % i for i in range(len(answered))]


@pytest.mark.broker_errors(rf"ERROR Shutdown did not finish within {SHUTDOWN_TIMEOUT_S:.0f} s",
                           exit_codes=(1,))
def test_shutdown_that_cannot_finish_ends_at_the_bound_with_exit_1(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory()
    create_topic(proc.bootstrap, TOPIC)
    with SyncClient(proc.bootstrap, timeout_ms=10_000) as client:
        for i in range(10):
            assert produce(client, TOPIC, 0, batch([b"kept%d" % i])).error_code == 0
    marker = hang_the_marker_write(proc)
    started = time.monotonic()
    proc.signal(signal.SIGTERM)
    code = proc.wait(SHUTDOWN_TIMEOUT_S + WAIT_S)  # the bound, with a wide margin
    waited_s = time.monotonic() - started
    assert code == 1
    assert waited_s >= SHUTDOWN_TIMEOUT_S - 1  # it did wait for the shutdown, up to the bound
    log = proc.stderr_text()
    assert "Shutdown step 3/4" in log and "Shutdown step 4/4" not in log
    assert "shut down completed" not in log
    marker.unlink()  # the disk answers again; no clean-shutdown marker was written
    proc.start()
    assert log_offsets(proc) == (0, 10)
    assert values(proc, 10) == [b"kept%d" % i for i in range(10)]


@pytest.mark.broker_errors("ERROR Second signal during shutdown: exiting at once", exit_codes=(1,))
def test_second_signal_during_shutdown_exits_at_once(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory()
    hang_the_marker_write(proc)
    proc.signal(signal.SIGTERM)
    wait_log(proc, "Shutdown step 3/4")  # the shutdown is under way (and will hang in step 4)
    proc.signal(signal.SIGTERM)
    assert proc.wait(WAIT_S) == 1
    log = proc.stderr_text()
    # It exited on the second signal, not at the shutdown's bound.
    assert "Shutdown did not finish" not in log and "Shutdown step 4/4" not in log
    assert log.count("Received SIGTERM") == 1

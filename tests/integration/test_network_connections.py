"""Connection limits against a real broker: max.connections.per.ip, max.connections,
connections.max.idle.ms, and 1,000 concurrent connections with bounded memory."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable

import pytest

from protocol.errors import ErrorCode
from protocol.frames import RequestHeader, decode_response, encode_request
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from tests.integration.broker_process import BrokerProcess
from tests.integration.netclient import ConnectionClosed, RawClient
from tests.integration.test_network_bad_input import api_versions_ok, wait_for_log

pytestmark = pytest.mark.timeout(90)
HANG_S = 60  # bound on the 1,000-connection waits (seconds on a quiet machine): only a stall reaches it


def until(predicate: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """Retry ``predicate`` (bounded) for state the broker changes asynchronously."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_max_connections_per_ip_closes_the_extra_connection(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(max_connections_per_ip=3)
    mark = len(proc.stderr_text())
    clients = [RawClient(proc.bootstrap) for _ in range(3)]
    try:
        for client in clients:
            assert api_versions_ok(client)
        with RawClient(proc.bootstrap) as extra:
            assert extra.is_closed_by_peer(timeout_s=30)
        assert "Too many connections from 127.0.0.1 (maximum = 3)" in wait_for_log(
            proc, "Too many connections", mark)
        for client in clients:  # the three are still served
            assert api_versions_ok(client)
        clients.pop().close()

        def fourth_accepted() -> bool:
            # Until the broker has seen the close, it still counts three and closes this one:
            # the read then ends in ConnectionClosed (EOF), or a reset (ConnectionError).
            with RawClient(proc.bootstrap) as again:
                try:
                    return api_versions_ok(again)
                except (ConnectionClosed, ConnectionError, OSError):
                    return False

        assert until(fourth_accepted), "a slot did not free up after a connection closed"
    finally:
        for client in clients:
            client.close()


def test_max_connections_makes_new_connections_wait(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(max_connections=2)
    first, second = RawClient(proc.bootstrap), RawClient(proc.bootstrap)
    try:
        assert api_versions_ok(first) and api_versions_ok(second)
        waiting = RawClient(proc.bootstrap, timeout_s=1.0)  # sits in the listen backlog
        cid, frame = waiting.frame(18, 0, ApiVersionsRequest())
        waiting.send(frame)
        with pytest.raises(TimeoutError):
            waiting.recv_frame()
        first.close()  # frees a slot: the waiting connection is accepted and answered
        waiting.sock.settimeout(10.0)
        got_cid, body = decode_response(waiting.recv_frame(), 18, 0)
        assert got_cid == cid and isinstance(body, ApiVersionsResponse) and body.error_code == ErrorCode.NO_ERROR
        waiting.close()
        assert api_versions_ok(second)
    finally:
        first.close()
        second.close()


def test_idle_connection_is_closed_after_connections_max_idle_ms(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(connections_max_idle_ms=300)
    mark = len(proc.stderr_text())
    with RawClient(proc.bootstrap) as client:
        assert api_versions_ok(client)
        started = time.monotonic()
        assert client.is_closed_by_peer(timeout_s=30)  # 100 x connections.max.idle.ms
        waited_s = time.monotonic() - started
    assert waited_s >= 0.25, waited_s  # not before it was idle for connections.max.idle.ms
    assert "connections.max.idle.ms=300" in wait_for_log(proc, "Closing idle connection", mark)
    with RawClient(proc.bootstrap) as fresh:  # an active client is served
        assert api_versions_ok(fresh)


def test_max_connection_creation_rate_spaces_out_accepts(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(max_connection_creation_rate=5)
    started = time.monotonic()
    clients = []
    try:
        for _ in range(20):  # a burst of 5, then 5 per second: about 3 s for 20
            client = RawClient(proc.bootstrap)
            clients.append(client)
            assert api_versions_ok(client)
        elapsed_s = time.monotonic() - started
    finally:
        for client in clients:
            client.close()
    assert elapsed_s >= 2.7, elapsed_s


async def _one_connection(port: int, index: int, connecting: asyncio.Semaphore,
                          opened: list[int], all_open: asyncio.Event, gate: asyncio.Event) -> int:
    # Connect in waves (the listen backlog is socket.listen.backlog.size = 50, as in
    # Kafka), then every connection sends at the same moment.
    async with connecting:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    opened.append(index)
    if len(opened) == 1000:
        all_open.set()
    try:
        await gate.wait()
        writer.write(encode_request(RequestHeader(18, 3, index, "c"), ApiVersionsRequest(
            client_software_name="many", client_software_version="1")))
        await writer.drain()
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        cid, body = decode_response(await reader.readexactly(size), 18, 3)
        assert cid == index
        assert isinstance(body, ApiVersionsResponse)
        return int(body.error_code)
    finally:
        writer.close()


async def test_thousand_concurrent_connections_do_not_stall_and_rss_stays_bounded(
        module_broker: BrokerProcess) -> None:
    port = module_broker.port
    rss_before_kib = module_broker.rss_kib()
    gate = asyncio.Event()
    connecting = asyncio.Semaphore(40)
    opened: list[int] = []
    all_open = asyncio.Event()
    tasks = [asyncio.create_task(_one_connection(port, i, connecting, opened, all_open, gate))
             for i in range(1000)]
    connect_started = time.monotonic()
    async with asyncio.timeout(HANG_S):
        await all_open.wait()
    connect_s = time.monotonic() - connect_started
    rss_open_kib = module_broker.rss_kib()
    started = time.monotonic()
    gate.set()
    async with asyncio.timeout(HANG_S):  # every one is answered: none stalls
        codes = await asyncio.gather(*tasks)
    elapsed_s = time.monotonic() - started
    rss_after_kib = module_broker.rss_kib()
    assert codes == [0] * 1000
    # Served while all 1,000 were open; the broker still answers a new client.
    with RawClient(module_broker.bootstrap) as client:
        assert api_versions_ok(client)
    print(f"1000 connections: opened in {connect_s:.2f} s, answered in {elapsed_s:.2f} s; RSS {rss_before_kib} KiB before, "
          f"{rss_open_kib} KiB with 1000 open, {rss_after_kib} KiB after")
    assert rss_after_kib - rss_before_kib < 64 * 1024, (rss_before_kib, rss_after_kib)
    assert rss_after_kib < 256 * 1024


def _closed_at(client: RawClient, timeout_s: float) -> float | None:
    """monotonic time at which the broker closed ``client`` (None: still open)."""
    if client.is_closed_by_peer(timeout_s=timeout_s):
        return time.monotonic()
    return None


def test_half_received_frame_counts_as_idle_from_its_last_byte(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    """Kafka's idle expiry runs from the last byte: a client that stops inside a frame is
    closed after connections.max.idle.ms; one still sending (slowly) is not."""
    idle_ms = 1000
    proc = broker_factory(connections_max_idle_ms=idle_ms)
    mark = len(proc.stderr_text())
    frame = RawClient.frame(RawClient.__new__(RawClient), 18, 3, ApiVersionsRequest(
        client_software_name="t", client_software_version="1"), correlation_id=7)[1]
    with RawClient(proc.bootstrap) as stalled, RawClient(proc.bootstrap) as trickler:
        stalled.send(struct.pack(">i", 1000) + b"\x00" * 10)  # announces 1000, sends 10
        last_byte = time.monotonic()
        # The trickler sends its frame a byte every idle/4: never idle for idle_ms.
        for i, byte in enumerate(frame):
            trickler.send(bytes([byte]))
            if i == len(frame) - 2:
                break
            time.sleep(idle_ms / 4000 if i < 12 else 0)
        trickler.send(frame[-1:])
        (size,) = struct.unpack(">i", trickler.recv_exactly(4))
        assert struct.unpack_from(">i", trickler.recv_exactly(size))[0] == 7  # answered
        closed = _closed_at(stalled, timeout_s=30)  # a bound on a hang, not a measurement
        assert closed is not None, "the stalled half frame was never closed"
        assert closed - last_byte >= idle_ms / 1000 - 0.05  # not before its idle time
    assert "Closing idle connection" in wait_for_log(proc, "Closing idle connection", mark)


def test_stalled_sender_holding_the_request_memory_pool_is_closed_and_others_served(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    """queued.max.request.bytes = socket.request.max.bytes = 1 MiB. A client announces a
    1 MiB frame, sends 10 bytes and goes quiet: it holds the whole pool. Another announces
    1 MiB too and sends nothing more (whichever the broker reads first holds the pool). The
    holder is closed connections.max.idle.ms after its last byte (Kafka's idle expiry); the
    other gets the pool and, as quiet, is closed connections.max.idle.ms after that; a third
    client, waiting for memory all that time, is not closed for it (waiting for memory is not
    idle) and is answered."""
    idle_ms = 1500
    pool = 1024 * 1024
    proc = broker_factory({"socket.request.max.bytes": pool, "queued.max.request.bytes": pool,
                           "connections.max.idle.ms": idle_ms})
    with RawClient(proc.bootstrap, timeout_s=30) as holder, \
            RawClient(proc.bootstrap, timeout_s=30) as waiter, \
            RawClient(proc.bootstrap, timeout_s=30) as client:
        holder.send(struct.pack(">i", pool) + b"\x00" * 10)
        started = time.monotonic()
        waiter.send(struct.pack(">i", pool))  # the other 1 MiB announce, then nothing more
        cid, frame = client.frame(18, 3, ApiVersionsRequest(client_software_name="t",
                                                             client_software_version="1"))
        client.send(frame)  # waits for memory: answered once the stalled ones are gone
        (size,) = struct.unpack(">i", client.recv_exactly(4))
        answered = time.monotonic() - started
        got_cid, body = decode_response(client.recv_exactly(size), 18, 3)
        assert got_cid == cid and body.error_code == ErrorCode.NO_ERROR
        assert answered >= 2 * idle_ms / 1000 - 0.1  # only once both stalled ones expired
        assert holder.is_closed_by_peer(timeout_s=1) and waiter.is_closed_by_peer(timeout_s=10)
        assert api_versions_ok(client)  # the pool is whole again

"""The network pipeline in-process (real sockets, real uvloop loop, real SocketServer) with
test handlers registered on API keys the broker does not serve: a handler that raises
closes only its connection (with a traceback in the log), NO_RESPONSE writes nothing and
keeps order, CloseConnection closes, a full request queue is backpressure, not loss, and a
large controller request is decoded in a worker thread with its connection's order kept."""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from broker.config import BrokerConfig
from broker.handlers.base import (
    LOADED_SPECS,
    NO_RESPONSE,
    REGISTRY,
    ApiSpec,
    CloseConnection,
    RequestContext,
    Respond,
    api,
    find_spec,
)
from broker.network.request_channel import DECODE_OFF_LOOP_BYTES
from broker.network.socket_server import SocketServer
from protocol.frames import RequestHeader, decode_response, encode_request
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from tests.waiting import async_wait_for

pytestmark = pytest.mark.timeout(60)

# Keys with generated messages that no broker module registers (UpdateFeatures, ...).
RAISES_KEY, SILENT_KEY, CLOSES_KEY, SLOW_KEY = 57, 58, 59, 61


@pytest.fixture
def test_handlers() -> Iterator[dict[str, Any]]:
    state: dict[str, Any] = {"running": 0, "max_running": 0}

    @api(RAISES_KEY, min_version=0, max_version=4, request=ApiVersionsRequest)
    async def raises(ctx: RequestContext, request: ApiVersionsRequest) -> Any:
        raise RuntimeError("deliberate handler bug")

    @api(SILENT_KEY, min_version=0, max_version=4, request=ApiVersionsRequest)
    async def silent(ctx: RequestContext, request: ApiVersionsRequest) -> Any:
        return NO_RESPONSE

    @api(CLOSES_KEY, min_version=0, max_version=4, request=ApiVersionsRequest)
    async def closes(ctx: RequestContext, request: ApiVersionsRequest) -> Any:
        return CloseConnection("test handler asked to close")

    @api(SLOW_KEY, min_version=0, max_version=4, request=ApiVersionsRequest)
    async def slow(ctx: RequestContext, request: ApiVersionsRequest) -> Any:
        state["running"] += 1
        state["max_running"] = max(state["max_running"], state["running"])
        await asyncio.sleep(0.01)
        state["running"] -= 1
        return Respond(ApiVersionsResponse(error_code=0))

    try:
        yield state
    finally:
        for key in (RAISES_KEY, SILENT_KEY, CLOSES_KEY, SLOW_KEY):
            REGISTRY.pop(key, None)


@pytest.fixture
async def server(test_handlers: dict[str, Any], tmp_path: Any) -> AsyncIterator[tuple[SocketServer, int]]:
    async for started in start_server({"queued.max.requests": "2", "num.io.threads": "2"}, tmp_path):
        yield started


@pytest.fixture
async def pooled_server(test_handlers: dict[str, Any], tmp_path: Any) -> AsyncIterator[tuple[SocketServer, int]]:
    props = {"socket.request.max.bytes": "3000", "queued.max.request.bytes": "3000"}
    async for started in start_server(props, tmp_path):
        yield started


async def start_server(props: dict[str, str], tmp_path: Any) -> AsyncIterator[tuple[SocketServer, int]]:
    import broker.handlers  # noqa: F401 - ApiVersions registered

    config = BrokerConfig.from_properties({"listeners": "PLAINTEXT://127.0.0.1:0",
                                           "log.dirs": str(tmp_path), **props})
    socket_server = SocketServer(config)
    (endpoint,) = socket_server.bind()
    socket_server.start(None)  # type: ignore[arg-type]  # these handlers never use ctx.broker
    try:
        yield socket_server, endpoint.port
    finally:
        socket_server.stop_accepting()
        await socket_server.drain(5)
        await socket_server.close()


async def call(port: int, requests: list[tuple[int, int]],
               padding_bytes: int = 0) -> tuple[list[int], bool]:
    """Send (api key, correlation id) requests back to back (bodies padded with bytes the
    decoder ignores, as Kafka does); return the correlation ids answered and whether the
    broker closed the connection afterwards."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"".join(encode_request(RequestHeader(key, 0, cid, "t"), b"\x00" * padding_bytes)
                              for key, cid in requests))
        answered: list[int] = []
        async with asyncio.timeout(10):
            while True:
                try:
                    head = await reader.readexactly(4)
                except asyncio.IncompleteReadError:
                    return answered, True
                (size,) = struct.unpack(">i", head)
                frame = await reader.readexactly(size)
                answered.append(struct.unpack_from(">i", frame)[0])
                if len(answered) == sum(1 for k, _ in requests if k in (18, SLOW_KEY)):
                    return answered, False
    finally:
        writer.close()


@pytest.mark.broker_errors(rf"Handler for api key {RAISES_KEY} v0 .*failed; closing connection"
                           r"(.|\n)*RuntimeError: deliberate handler bug")
async def test_handler_exception_closes_only_that_connection(
        server: tuple[SocketServer, int], caplog: pytest.LogCaptureFixture) -> None:
    _server, port = server
    bystander_reader, bystander_writer = await asyncio.open_connection("127.0.0.1", port)
    with caplog.at_level(logging.ERROR, logger="broker.network.request_channel"):
        answered, closed = await call(port, [(18, 1), (RAISES_KEY, 2), (18, 3)])
    assert answered == [1] and closed  # answered before the bug, nothing after it
    record = next(r for r in caplog.records if "failed; closing connection" in r.getMessage())
    assert record.exc_info is not None and "deliberate handler bug" in str(record.exc_info[1])
    bystander_writer.write(encode_request(RequestHeader(18, 0, 9, "b"), ApiVersionsRequest()))
    (size,) = struct.unpack(">i", await bystander_reader.readexactly(4))
    cid, body = decode_response(await bystander_reader.readexactly(size), 18, 0)
    assert cid == 9 and isinstance(body, ApiVersionsResponse) and body.error_code == 0
    bystander_writer.close()


async def test_no_response_writes_nothing_and_keeps_order(server: tuple[SocketServer, int]) -> None:
    _server, port = server
    answered, closed = await call(port, [(SILENT_KEY, 1), (18, 2), (SILENT_KEY, 3), (18, 4)])
    assert answered == [2, 4] and not closed


async def test_close_connection_result_closes(server: tuple[SocketServer, int],
                                              caplog: pytest.LogCaptureFixture) -> None:
    _server, port = server
    with caplog.at_level(logging.WARNING, logger="broker.network.connection"):
        answered, closed = await call(port, [(18, 1), (CLOSES_KEY, 2), (18, 3)])
    assert answered == [1] and closed
    assert any("test handler asked to close" in r.getMessage() for r in caplog.records)


async def test_full_request_queue_is_backpressure_not_loss(
        server: tuple[SocketServer, int], test_handlers: dict[str, Any]) -> None:
    """queued.max.requests=2, 30 connections x 10 pipelined slow requests: every request is
    answered, in order per connection."""
    _server, port = server
    results = await asyncio.gather(*(
        call(port, [(SLOW_KEY, c * 100 + i) for i in range(10)]) for c in range(30)))
    for c, (answered, closed) in enumerate(results):
        assert answered == [c * 100 + i for i in range(10)] and not closed
    # Handlers of different connections did run concurrently (one per muted connection).
    assert test_handlers["max_running"] > 1


async def test_queued_max_request_bytes_bounds_frames_held(
        pooled_server: tuple[SocketServer, int], test_handlers: dict[str, Any]) -> None:
    """Pool of 3000 bytes, frames of ~2000: one request is held at a time, however many
    connections send; every request is still answered, in order."""
    socket_server, port = pooled_server
    results = await asyncio.gather(*(
        call(port, [(SLOW_KEY, c * 100 + i) for i in range(3)], padding_bytes=1980)
        for c in range(8)))
    for c, (answered, closed) in enumerate(results):
        assert answered == [c * 100 + i for i in range(3)] and not closed
    assert test_handlers["max_running"] == 1
    # Every frame's bytes go back to the pool (releases notify waiters through a task).
    await async_wait_for(lambda: socket_server.memory_pool.available_bytes == 3000, 30,
                         "all pool bytes released")


def _update_metadata(partitions: int, topic: str = "t") -> UpdateMetadataRequest:
    _U = UpdateMetadataRequest
    return _U(controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=[
        _U.UpdateMetadataTopicState(topic_name=topic, topic_id=uuid.uuid4(), partition_states=[
            _U.UpdateMetadataPartitionState(
                topic_name=topic, partition_index=i, controller_epoch=1, leader=i % 3,
                leader_epoch=0, isr=[0, 1, 2], zk_version=0, replicas=[0, 1, 2],
                offline_replicas=[]) for i in range(partitions)])], live_brokers=[])


@pytest.fixture
def update_metadata_spy(test_handlers: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """UpdateMetadata (key 6) served by a test handler over the real request class, whose
    decode records the thread it runs on; the broker's own spec is put back after."""
    seen: dict[str, Any] = {"decoded_on": [], "handled": []}

    class Spied(UpdateMetadataRequest):
        @classmethod
        def decode_at(cls, buf: Any, version: int, offset: int) -> Any:
            seen["decoded_on"].append(threading.get_ident())
            return UpdateMetadataRequest.decode_at(buf, version, offset)

    async def handler(ctx: RequestContext, request: UpdateMetadataRequest) -> Any:
        seen["handled"].append(sum(len(t.partition_states) for t in request.topic_states))
        return Respond(UpdateMetadataResponse(error_code=0))

    original = find_spec(6)
    LOADED_SPECS[6] = ApiSpec(6, 0, 8, Spied, handler)
    try:
        yield seen
    finally:
        if original is not None:
            LOADED_SPECS[6] = original


async def test_large_control_requests_are_decoded_off_the_loop_in_order(
        server: tuple[SocketServer, int], update_metadata_spy: dict[str, Any],
        caplog: pytest.LogCaptureFixture) -> None:
    """An UpdateMetadata of DECODE_OFF_LOOP_BYTES or more is decoded in a worker thread, a
    small one on the loop; pipelined with other requests on one connection, every answer
    comes in request order and each body is the one sent. A large one that does not
    decode closes its connection with the one log line, as on the loop."""
    _server, port = server
    loop_thread = threading.get_ident()
    big, small = _update_metadata(2000), _update_metadata(3)
    assert len(big.encode(8)) >= DECODE_OFF_LOOP_BYTES > len(small.encode(8))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        sent = [(6, big), (18, ApiVersionsRequest()), (6, small), (6, big),
                (18, ApiVersionsRequest())]
        writer.write(b"".join(encode_request(RequestHeader(key, 8 if key == 6 else 0, cid, "t"),
                                             body) for cid, (key, body) in enumerate(sent)))
        answered = []
        async with asyncio.timeout(10):
            for _ in sent:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                answered.append(struct.unpack_from(">i", await reader.readexactly(size))[0])
    finally:
        writer.close()
    assert answered == list(range(len(sent)))
    assert update_metadata_spy["handled"] == [2000, 3, 2000]
    big_on, small_on, big_again_on = update_metadata_spy["decoded_on"]
    assert big_on != loop_thread and big_again_on != loop_thread and small_on == loop_thread
    # A large body that does not decode: that connection closes, with one clear line.
    frame = encode_request(RequestHeader(6, 8, 7, "t"), big)
    truncated = struct.pack(">i", len(frame) - 4 - 100) + frame[4:-100]
    with caplog.at_level(logging.WARNING, logger="broker.network.connection"):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(truncated)
            async with asyncio.timeout(10):
                assert await reader.read() == b""  # closed, unanswered
        finally:
            writer.close()
    assert any("malformed Spied v8 body" in r.getMessage() for r in caplog.records)

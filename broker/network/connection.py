"""One client connection (the "processor" side of Kafka's SocketServer).

Frame handling, in order, for each request::

    int32 size       > socket.request.max.bytes or < 0  -> log + close (Kafka: InvalidReceive)
                     then ``size`` bytes are reserved in the queued.max.request.bytes pool
                     (waiting, muted, when it is exhausted) until the response is out
    header           (protocol.frames.decode_request_header)
                     malformed                           -> log + close
                     unknown api key                     -> log + close (Kafka closes too)
                     version outside the handler's range -> log + close, except ApiVersions,
                                                            answered with the v0 error (KIP-511,
                                                            Kafka's isUnsupportedApiVersionsRequest)
    body             decoded by an IO worker (truncated -> log + close)

The connection is **muted** while a request is in flight: it reads the next frame only
after the response to the previous one is written (or dropped for acks=0), so responses
go out strictly in request order, as in Kafka. While muted, reading stops once the
StreamReader holds 2 x its limit (asyncio's flow control), so a client that pipelines many
requests costs at most that much memory.

Idle connections (no request for ``connections.max.idle.ms``) are closed by the socket
server's sweeper. Errors are caught here, per connection: it is logged and closed; the
broker keeps serving everyone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from typing import TYPE_CHECKING

from broker.handlers.base import REGISTRY, CloseConnection
from broker.network.memory_pool import MemoryPool
from broker.network.request_channel import NoOp, Request, SendResponse
from broker.network.sendfile import SendfileError, write_parts
from protocol.errors import ProtocolError
from protocol.frames import API_VERSIONS_KEY, decode_frame_size, decode_request_header

if TYPE_CHECKING:
    from broker.network.request_channel import RequestChannel

log = logging.getLogger(__name__)

_ids = itertools.count()


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 channel: RequestChannel, *, max_frame_bytes: int, copy_fetch_data: bool,
                 memory_pool: MemoryPool) -> None:
        self.reader = reader
        self.writer = writer
        self._channel = channel
        self._max_frame_bytes = max_frame_bytes
        self._copy = copy_fetch_data
        self._pool = memory_pool
        peer = writer.get_extra_info("peername") or ("?", 0)
        local = writer.get_extra_info("sockname") or ("?", 0)
        self.host: str = str(peer[0])
        self.port: int = int(peer[1])
        # Kafka's connection id: localHost:localPort-remoteHost:remotePort-index
        self.id = f"{local[0]}:{local[1]}-{self.host}:{self.port}-{next(_ids)}"
        self.last_active_ns = time.monotonic_ns()
        self.in_flight = False
        self._stopping = False

    @property
    def idle(self) -> bool:
        return not self.in_flight

    def stop_reading(self) -> None:
        """Shut-down: finish the request in flight, read no more; close if idle now."""
        self._stopping = True
        if not self.in_flight:
            self.close()

    def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()

    async def serve(self) -> None:
        """Read requests and write responses until the peer leaves or an error closes us."""
        try:
            while not self._stopping:
                if not await self._serve_one():
                    break
        except (ConnectionError, SendfileError) as exc:
            log.debug("Connection %s: %s", self.id, exc)
        except ProtocolError as exc:
            log.warning("Closing connection %s (client %s:%d): %s", self.id, self.host,
                        self.port, exc)
        finally:
            self.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self.writer.wait_closed()

    async def _serve_one(self) -> bool:
        """One request/response round; False when the connection should close."""
        try:
            prefix = await self.reader.readexactly(4)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                log.warning("Connection %s closed inside a frame size prefix", self.id)
            return False
        self.in_flight = True
        self.last_active_ns = time.monotonic_ns()
        size = decode_frame_size(prefix, self._max_frame_bytes)  # ProtocolError -> close
        await self._pool.reserve(size)  # queued.max.request.bytes: wait, muted, for memory
        try:
            return await self._handle_frame(size)
        finally:
            self._pool.release(size)

    async def _handle_frame(self, size: int) -> bool:
        try:
            frame = await self.reader.readexactly(size)
        except asyncio.IncompleteReadError as exc:
            log.warning("Connection %s closed after %d of a %d-byte request frame",
                        self.id, len(exc.partial), size)
            return False
        header, body_offset = decode_request_header(frame)
        spec = REGISTRY.get(header.api_key)
        if spec is None:
            raise ProtocolError(f"unknown api key {header.api_key} "
                                f"(correlation id {header.correlation_id}, client {header.client_id!r})")
        if (not spec.min_version <= header.api_version <= spec.max_version
                and header.api_key != API_VERSIONS_KEY):
            raise ProtocolError(f"unsupported version {header.api_version} of api key "
                                f"{header.api_key} (supported {spec.min_version}-{spec.max_version}, "
                                f"client {header.client_id!r})")
        request = Request(header, frame, body_offset, self.id, self.host, self.port)
        await self._channel.send_request(request)
        outcome = await request.outcome
        if isinstance(outcome, SendResponse):
            await write_parts(self.writer, outcome.parts, copy=self._copy)
        elif isinstance(outcome, CloseConnection):
            log.warning("Closing connection %s (client %s:%d): %s", self.id, self.host,
                        self.port, outcome.reason)
            return False
        else:
            assert isinstance(outcome, NoOp)
        self.in_flight = False
        self.last_active_ns = time.monotonic_ns()
        return True

"""One TCP connection to one broker: frames, correlation ids, negotiated versions, a bound on
requests in flight, a timeout on each.

Layout on the wire: ``protocol.frames`` (int32 size, request header v0-2, body; responses
int32 size, response header v0-1, body). Requests go out in the order they are sent, and a
Kafka broker answers one connection's requests in that order, so the oldest request awaiting
an answer owns the next response frame. A frame whose correlation id is not the oldest
request's, a frame with no request waiting, a frame over ``max_response_bytes`` or the
broker closing the socket breaks the connection: every request waiting on it fails with
NETWORK_EXCEPTION (retriable) and the connection is closed for good (``closed``); the owner
(``KafkaClient``) opens a new one.

A request that gets no answer within its timeout fails with REQUEST_TIMED_OUT and closes the
connection, as Kafka's NetworkClient does: an answer may still be on its way, and nothing
else could then be matched. A caller that is cancelled does not break the connection: its
answer is read and dropped when it comes, and its in-flight slot is freed then.

At most ``max_in_flight`` requests await answers (``max.in.flight.requests.per.connection``);
a sender waits for a slot, within its timeout. Produce with acks=0 gets no answer
(``send_no_response``).

Opening a connection includes TLS (``security.protocol`` SSL / SASL_SSL), the ApiVersions
exchange (``client.versions``) and, for SASL_PLAINTEXT / SASL_SSL, the SASL exchange
(``client.security``), all within ``socket.connection.setup.timeout.ms``; ``version_for``
then picks the highest version of a request both sides support. All of it runs on one
event loop; nothing here is thread-safe.

Re-authentication (KIP-368): when the broker gives the SASL session a lifetime
(``connections.max.reauth.ms``), the connection runs the SASL exchange again on the same
socket once 85-95% of it has passed, before the next request it sends (as Kafka's client
does: an idle connection re-authenticates when it is used again, which the broker accepts
even after the session ended). Requests already written are answered first (the broker
answers in order); no other request is written until the exchange is over. A failed
re-authentication closes the connection with the broker's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol, TypeVar

from client.config import ClientConfig
from client.errors import ClientError, check, network_error, timeout_error
from client.security import authenticate, reauthentication_delay_ms, ssl_context, uses_sasl
from client.versions import (
    VersionRanges,
    api_versions_request,
    pick_version,
    ranges_of,
    retry_version,
)
from protocol import frames
from protocol.errors import ErrorCode, ProtocolError
from protocol.fileslice import ResponseParts
from protocol.messages.api_versions import ApiVersionsRequest

log = logging.getLogger(__name__)

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

MAX_API_VERSIONS_ATTEMPTS: Final = 3
CLOSE_TIMEOUT_S: Final = 1.0
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


class Request(Protocol[R_co]):
    """A generated request message (``protocol.messages``); ``R_co`` is its response."""

    API_KEY: ClassVar[int]
    LOWEST_VERSION: ClassVar[int]
    HIGHEST_VERSION: ClassVar[int]

    def encode_parts(self, version: int) -> ResponseParts: ...

    def response_class(self) -> type[R_co]: ...


@dataclass(slots=True)
class _Waiting:
    correlation_id: int
    api_key: int
    version: int
    future: asyncio.Future[object]


class BrokerConnection:
    """A connection made by ``open``; ``send`` a request, get its decoded response."""

    def __init__(self, node_id: int, host: str, port: int, config: ClientConfig,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self._config = config
        self._reader = reader
        self._writer = writer
        self._waiting: deque[_Waiting] = deque()
        self._slots = asyncio.Semaphore(config.max_in_flight_requests_per_connection)
        self._next_correlation_id = 0
        self._closed: ClientError | None = None
        self._read_task = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"minikafka-client-read-{node_id}")
        self.api_versions: VersionRanges = {}
        # KIP-368: when to re-authenticate (monotonic ns; None: never), and the exchange
        # under way; ``reauthentications`` counts the completed ones.
        self._reauth_at_ns: int | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self.reauthentications = 0

    @classmethod
    async def open(cls, host: str, port: int, config: ClientConfig, node_id: int = -1) -> BrokerConnection:
        """Connect and negotiate versions within ``socket.connection.setup.timeout.ms``."""
        where = f"node {node_id} ({host}:{port})"
        conn: BrokerConnection | None = None
        try:
            tls = config.tls
            context = None if tls is None else ssl_context(tls)
            async with asyncio.timeout(config.connection_setup_timeout_ms / 1000):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=context, server_hostname=host if context is not None else None)
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn = cls(node_id, host, port, config, reader, writer)
                await conn._negotiate()
                if uses_sasl(config.security_protocol):
                    conn._session_started(await authenticate(conn._send, config.sasl, where))
        except TimeoutError:
            if conn is not None:
                await conn.close()
            raise network_error(f"Connection to {where} timed out after "
                                f"{config.connection_setup_timeout_ms} ms") from None
        except ssl.SSLError as exc:  # Kafka's SslAuthenticationException: not retriable
            if conn is not None:
                await conn.close()
            # A refused certificate says why (host name mismatch, unknown CA, expired).
            why = exc.reason or exc
            if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
                why = f"{why}: {exc.verify_message}"
            raise ClientError("SSL_AUTHENTICATION_FAILED",
                              f"SSL handshake with {where} failed: {why}") from None
        except OSError as exc:
            if conn is not None:
                await conn.close()
            raise network_error(f"Connection to {where} failed: {exc.strerror or exc}") from None
        except BaseException:
            if conn is not None:
                await conn.close()
            raise
        log.debug("connected to %s; %d APIs", where, len(conn.api_versions))
        return conn

    async def _negotiate(self) -> None:
        version = ApiVersionsRequest.HIGHEST_VERSION
        for _ in range(MAX_API_VERSIONS_ATTEMPTS):
            response = await self.send(api_versions_request(), version=version)
            again = retry_version(response, version)
            if again is None:
                break
            version = again
        check(response.error_code, None, f"ApiVersions v{version} to node {self.node_id}")
        self.api_versions = ranges_of(response)

    # -- state ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def in_flight(self) -> int:
        return len(self._waiting)

    def version_for(self, request_cls: Any, our_max: int | None = None) -> int:
        """Highest version of ``request_cls`` both sides support; UNSUPPORTED_VERSION if none."""
        return pick_version(request_cls, self.api_versions, our_max)

    # -- requests ------------------------------------------------------------------------

    async def send(self, request: Request[R], *, version: int | None = None,
                   timeout_ms: int | None = None) -> R:
        """Send ``request`` (at ``version``, else the negotiated one) and await its response."""
        return await self._send(request, version=version, timeout_ms=timeout_ms, gated=True)

    async def _send(self, request: Request[R], *, version: int | None = None,
                    timeout_ms: int | None = None, gated: bool = False) -> R:
        """``gated``: a request outside the SASL exchange, written only once no
        re-authentication is due or under way."""
        v = self.version_for(type(request)) if version is None else version
        timeout_s = (self._config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        api_key = request.API_KEY
        try:
            async with asyncio.timeout(timeout_s):
                await self._acquire_slot(gated)
                try:
                    waiting = self._write(request, api_key, v, expect_response=True)
                except BaseException:
                    self._slots.release()
                    raise
                assert waiting is not None
                try:
                    await self._writer.drain()
                    body = await waiting.future
                finally:
                    waiting.future.cancel()  # no-op when answered; else its answer is dropped
        except TimeoutError:
            what = f"{type(request).__name__} v{v} to node {self.node_id}"
            self._break(network_error(f"Connection to node {self.node_id} closed: "
                                      f"request timed out after {timeout_s * 1000:.0f} ms"))
            raise timeout_error(f"{what}: no answer within {timeout_s * 1000:.0f} ms") from None
        except (ConnectionError, OSError) as exc:
            self._break(network_error(f"Connection to node {self.node_id} failed: {exc}"))
            raise self._closed or network_error(str(exc)) from None
        cls = request.response_class()
        if not isinstance(body, cls):  # the reader decodes by api key: cannot happen
            raise ClientError(ErrorCode.CORRUPT_MESSAGE.name, f"expected {cls.__name__}, got {type(body).__name__}")
        return body

    async def send_no_response(self, request: Request[Any], *, version: int | None = None) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        v = self.version_for(type(request)) if version is None else version
        try:
            async with asyncio.timeout(self._config.request_timeout_ms / 1000):
                while self._reauth_pending():
                    await self._reauthenticated()
                self._write(request, request.API_KEY, v, expect_response=False)
                await self._writer.drain()
        except (TimeoutError, ConnectionError, OSError) as exc:
            self._break(network_error(f"Connection to node {self.node_id} failed: {exc!r}"))
            raise network_error(f"Connection to node {self.node_id} failed: {exc!r}") from None

    async def _acquire_slot(self, gated: bool) -> None:
        """An in-flight slot; for a gated request, held only while no re-authentication is
        due or under way (checked after the wait for the slot, when it is written at once)."""
        while True:
            if gated:
                await self._reauthenticated()
            await self._slots.acquire()
            if not gated or not self._reauth_pending():
                return
            self._slots.release()

    # -- re-authentication (KIP-368) -----------------------------------------------------

    def _session_started(self, lifetime_ms: int) -> None:
        """A SASL exchange succeeded; ``lifetime_ms`` from its last SaslAuthenticate."""
        self._reauth_at_ns = (None if lifetime_ms <= 0 else
                              time.monotonic_ns() + int(reauthentication_delay_ms(lifetime_ms) * 1e6))

    def _reauth_pending(self) -> bool:
        if self._reauth_task is not None and not self._reauth_task.done():
            return True
        return self._reauth_at_ns is not None and time.monotonic_ns() >= self._reauth_at_ns

    async def _reauthenticated(self) -> None:
        """Start the re-authentication if it is due; wait for the one under way."""
        if self._reauth_task is None or self._reauth_task.done():
            if self._reauth_at_ns is None or time.monotonic_ns() < self._reauth_at_ns:
                return
            self._reauth_at_ns = None
            self._reauth_task = asyncio.get_running_loop().create_task(
                self._reauthenticate(), name=f"minikafka-client-reauth-{self.node_id}")
        # A caller giving up does not stop the exchange: others wait on it too.
        await asyncio.shield(self._reauth_task)

    async def _reauthenticate(self) -> None:
        where = f"node {self.node_id} ({self.host}:{self.port})"
        try:
            lifetime_ms = await authenticate(self._send, self._config.sasl, where)
        except ClientError as exc:
            log.warning("Re-authentication with %s failed: %s", where, exc)
            self._break(exc)
            return
        self.reauthentications += 1
        self._session_started(lifetime_ms)
        log.debug("re-authenticated with %s; session lifetime %d ms", where, lifetime_ms)

    def _write(self, request: Request[Any], api_key: int, version: int,
               expect_response: bool) -> _Waiting | None:
        if self._closed is not None:
            raise self._closed
        self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
        cid = self._next_correlation_id
        header = frames.RequestHeader(api_key, version, cid, self._config.client_id)
        data = frames.encode_request(header, request)
        waiting = None
        if expect_response:
            waiting = _Waiting(cid, api_key, version, asyncio.get_running_loop().create_future())
            self._waiting.append(waiting)
        self._writer.write(data)
        return waiting

    # -- responses -----------------------------------------------------------------------

    async def _read_loop(self) -> None:
        reader = self._reader
        try:
            while True:
                head = await reader.readexactly(4)
                size = frames.decode_frame_size(head, self._config.max_response_bytes)
                self._deliver(await reader.readexactly(size))
        except asyncio.IncompleteReadError:
            self._break(network_error(f"Connection to node {self.node_id} was closed by the broker"))
        except (ConnectionError, OSError) as exc:
            self._break(network_error(f"Connection to node {self.node_id} failed: {exc}"))
        except ProtocolError as exc:
            self._break(network_error(f"Connection to node {self.node_id} closed: {exc}"))

    def _deliver(self, frame: bytes) -> None:
        if len(frame) < 4:
            raise ProtocolError(f"a response frame of {len(frame)} bytes")
        (cid,) = _I32.unpack_from(frame, 0)
        if not self._waiting:
            raise ProtocolError(f"a response (correlation id {cid}) with no request waiting")
        waiting = self._waiting[0]
        if cid != waiting.correlation_id:
            raise ProtocolError(f"correlation id {cid} does not match request {waiting.correlation_id}")
        self._waiting.popleft()
        self._slots.release()
        if waiting.future.done():  # the caller gave up
            return
        try:
            body = self._decode(frame, waiting)
        except ProtocolError as exc:
            waiting.future.set_exception(ClientError(
                ErrorCode.CORRUPT_MESSAGE.name, f"Bad response from node {self.node_id}: {exc}"))
        else:
            waiting.future.set_result(body)

    @staticmethod
    def _decode(frame: bytes, waiting: _Waiting) -> object:
        version = waiting.version
        # A broker that does not know our ApiVersions version answers in the v0 layout
        # (response header v0, error code first): read it as v0 (KIP-511).
        if (waiting.api_key == ApiVersionsRequest.API_KEY and version > 0 and len(frame) >= 6
                and _I16.unpack_from(frame, 4)[0] == ErrorCode.UNSUPPORTED_VERSION):
            version = 0
        return frames.decode_response(frame, waiting.api_key, version)[1]

    # -- closing -------------------------------------------------------------------------

    def _break(self, error: ClientError) -> None:
        """Close for good: fail every waiting request with ``error``."""
        if self._closed is None:
            self._closed = error
            log.debug("%s", error)
        while self._waiting:
            waiting = self._waiting.popleft()
            self._slots.release()
            if not waiting.future.done():
                waiting.future.set_exception(error)
        self._writer.close()
        if asyncio.current_task() is not self._read_task:
            self._read_task.cancel()

    async def close(self) -> None:
        self._break(network_error(f"Connection to node {self.node_id} was closed by the client"))
        if self._reauth_task is not None and not self._reauth_task.done():
            self._reauth_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reauth_task
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError, TimeoutError):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await self._writer.wait_closed()
        if asyncio.current_task() is not self._read_task:
            with contextlib.suppress(asyncio.CancelledError):
                await self._read_task

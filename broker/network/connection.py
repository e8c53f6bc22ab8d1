"""One client connection (the "processor" side of Kafka's SocketServer), as an
``asyncio.Protocol``: bytes arrive in ``data_received``, frames are cut from a buffer, and
responses are written straight to the transport from the handler's task.

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
    body             decoded by the request channel (truncated -> log + close), or, for a
                     request a handler's fast path serves (RequestChannel.serve_fast: a
                     produce of one batch, a consumer's fetch of one partition), read by
                     that fast path and answered at once (or, a fetch waiting for data,
                     when it completes)

The connection is **muted** while a request is in flight: the next frame is taken from the
buffer only after the response to the previous one is written, or held for the end of the
turn (below), or dropped for acks=0, so responses go out strictly in request order, as in
Kafka. A request the fast path serves is answered within the callback that read it, its
response frame held and written at the end of the loop's turn with the other responses of
that turn (``write_batch.WriteBatch``), and before anything else the connection writes; the
next frame already buffered is taken at the loop's next turn (one request per connection per
turn, like a Kafka processor), so a client pipelining thousands of requests does not hold
the loop.

One exception, for a producer's backlog (its requests queue on its one connection while the
broker is held up, then arrive together): when the request just started is a Produce request
the fast path served (answered at once, or waiting for the end of the turn's appends:
``broker.produce_appends``) and the buffer holds the next frame whole and it is a Produce
request too, that one is started in the same turn, and so on (at most ``GROUP_MAX_BEHIND``
behind the one in flight), so that they are appended in the turn's one group append and
wake a waiting consumer once, not one request per turn. Each answer waits in ``_behind``
until those of the requests before it are out, so answers still go out in request order
(across partitions too: the group append answers partition by partition). The run stops at
any other request (left in the buffer for its turn), after a request the fast path did not
serve (acks 0 or -1, several partitions, ...: started once those before it are answered,
so no append overtakes another) and after an answer that is not a plain success (an error,
a throttle time: answered in its place, the connection muted after it as for any). Not on
a SASL listener, with ``queued.max.request.bytes`` (one frame reserved at a time) nor while
a producer_byte_rate quota is configured (a throttled answer mutes the connection before
its next request is read, as Kafka's does).
The answers of such a run are held and written together at the end of the turn.

A response of bytes
only is one ``transport.write`` (parts joined); one with record data (``FileSlice``) is
copied into one ``transport.write`` when small (``sendfile.SMALL_COPY_BYTES``), else goes
out at once with ``os.sendfile`` on a duplicate of the socket's descriptor kept for the
connection (``sendfile.write_parts_now``), and whatever the socket does not take then is
finished by ``sendfile.write_parts`` in a task. After a write, the next request waits while
the transport's buffer is over its high-water mark (``pause_writing`` / ``resume_writing``),
as ``StreamWriter.drain`` would. While muted, or while whole frames wait for the next turn,
reading from the socket stops once the buffer holds ``2 x read_limit_bytes``, so a client that
pipelines many requests costs at most that much memory (plus one frame being read, at most
``socket.request.max.bytes``, and one read beyond it).

On a TLS listener (SSL, SASL_SSL) the transport encrypts, so record data cannot leave with
``sendfile``: it is copied (``sendfile.copy_parts_now``, or ``write_parts(copy=True)`` for a
response over 1 MiB). The connection's principal (``User:ANONYMOUS``, or the client
certificate's DN mapped by ``ssl.principal.mapping.rules``) is set when the connection is
made and travels with every request.

On a SASL listener every frame goes to the connection's ``SaslAuthenticator`` until it
authenticates (answered here, never queued; frames limited to ``sasl.server.max.receive.size``);
a failure closes the connection after ``connection.failed.authentication.delay.ms``, muted
meanwhile. Once authenticated, a SaslHandshake may start re-authentication, and any other
request after the session's lifetime (``connections.max.reauth.ms``) closes the connection.

A response to a client over its quota carries ``throttle_ms``: the connection stays muted
that long after writing it (for an old client version the response itself waits), so the
client's next request is read only once the throttle has passed, as Kafka throttles channels.

Idle connections (no byte received or response written for ``connections.max.idle.ms``,
no request being handled, not waiting for pool memory) are closed by the socket server's
sweeper, also when they stopped inside a frame: a stalled sender holds the pool at most
that long after it was granted memory, and the connections waiting for it are served.
Errors are caught here, per connection: they are logged and the
connection closes; the broker keeps serving everyone else.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import os
import struct
import time
from collections import deque
from typing import TYPE_CHECKING, cast

from broker.handlers.base import LOADED_SPECS, ApiSpec, CloseConnection, Parked, find_spec
from broker.network.memory_pool import MemoryPool
from broker.network.request_channel import NoOp, Outcome, Request, SendResponse
from broker.network.sendfile import (
    SMALL_COPY_BYTES,
    SendfileError,
    copy_parts_now,
    write_parts,
    write_parts_now,
)
from broker.network.write_batch import WriteBatch
from broker.security.listener import ListenerSecurity
from broker.security.principal import ANONYMOUS, KafkaPrincipal, user
from broker.security.tls import peer_dn
from protocol.errors import ProtocolError
from protocol.fileslice import ResponseParts
from protocol.frames import (
    API_VERSIONS_KEY,
    RequestHeader,
    decode_frame_size,
    decode_request_header,
)
from storage.throttled_log import BurstLog

if TYPE_CHECKING:
    from collections.abc import Callable

    from broker.network.request_channel import RequestChannel
    from broker.security.sasl.authenticator import Failure, SaslAuthenticator

log = logging.getLogger(__name__)
# What clients can cause at will (bad frames, aborted frames, refused requests) is logged at
# a bounded rate: a fuzzer's 100,000 frames cost at most 10 lines a second, not 21 MB.
bad_input_log = BurstLog(log, rate_per_s=10, burst=100)

_ids = itertools.count()

_SIZE = struct.Struct(">i")  # a frame's size prefix
# Responses up to this size whose parts are all bytes are joined into one write.
JOIN_MAX_BYTES = 1 << 20
# A frame at least this large that the buffer does not hold whole is gathered as a list of
# the reads that bring it and joined once (see _take_frame).
GATHER_MIN_BYTES = 1 << 16  # (a size prefix whose first two bytes are not both 0)
PRODUCE_KEY = 0
# At most this many requests started behind the one in flight (a producer's backlog).
GROUP_MAX_BEHIND = 64


class Connection:
    """An asyncio protocol (its six methods), not an ``asyncio.Protocol`` subclass: so that
    where mypyc compiles this module (``protocol.native``) it is a native class, whose
    attributes are struct fields rather than a dict (the loop only calls the methods).

    Slotted where it runs as Python (the default): its 45 attributes are more than CPython
    3.11 keeps in an instance's shared-key dict (28 here), so without slots each instance has a
    plain dict and each of the ~100 attribute reads and writes of a request is a dict
    lookup rather than the specialised slot access."""

    __slots__ = ("_authenticator", "_behind", "_buf", "_channel", "_copy", "_drain_waiter",
                 "_eof", "_frame_size", "_grouping", "_groups_produce", "_held", "_loop",
                 "_lost", "_max_frame_bytes", "_metrics", "_on_outcome_cb", "_parts",
                 "_parts_bytes", "_pause_at_bytes", "_pool", "_pool_bounded",
                 "_process_scheduled", "_processing", "_reading_paused", "_request",
                 "_reserve_task", "_reserved_bytes", "_send_now_cb", "_sendfile_fd",
                 "_socket_fd", "_stopping", "_throttle_ms", "_transport", "_write_batch",
                 "_write_task", "_writing_paused", "active", "closed", "host", "id",
                 "in_flight", "last_active_ns", "port", "principal", "security")

    def __init__(self, channel: RequestChannel, *, max_frame_bytes: int, copy_fetch_data: bool,
                 memory_pool: MemoryPool, read_limit_bytes: int,
                 security: ListenerSecurity, write_batch: WriteBatch,
                 authenticator: SaslAuthenticator | None = None) -> None:
        self._channel = channel
        self._write_batch = write_batch
        self._held: bytes | None = None  # a response frame to write at the end of the turn
        self.security = security
        self._authenticator = authenticator
        self.principal: KafkaPrincipal = ANONYMOUS
        self._max_frame_bytes = max_frame_bytes
        self._copy = copy_fetch_data
        self._pool = memory_pool
        # queued.max.request.bytes -1 (Kafka's default): no pool, nothing to reserve or
        # release per request (the pool's capacity is fixed at start-up).
        self._pool_bounded = memory_pool.capacity_bytes > 0
        self._pause_at_bytes = 2 * read_limit_bytes
        self._transport: asyncio.Transport | None = None
        self.host = "?"
        self.port = 0
        self.id = "?"
        # Idle time (connections.max.idle.ms): since last_active_ns, or since the socket
        # server's sweep that finds ``active`` set (a byte read or an answer finished since
        # the sweep before; it then clears it). A flag per read and per answer, not a clock
        # read each (two per request): the idle time counts from at most one sweep interval
        # after the last activity, so a connection is closed that much later, never earlier.
        self.last_active_ns = time.monotonic_ns()
        self.active = False
        # The loop this connection lives on, looked up once: on CPython 3.11
        # asyncio.get_running_loop() makes a getpid system call each time (fork check).
        self._loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[None] = self._loop.create_future()
        self._buf = bytearray()
        # A large frame being gathered: its reads as they came (the first holds its size
        # prefix), and their total; _buf then holds nothing (see _take_frame).
        self._parts: list[bytes | bytearray] | None = None
        self._parts_bytes = 0
        self._frame_size = -1  # size of the frame being read (reserved in the pool), or -1
        self._reserved_bytes = 0  # pool bytes held for the frame being read or in flight
        self.in_flight = False  # a request is being handled: muted
        self._processing = False  # inside _process (outcomes arriving then do not recurse)
        self._process_scheduled = False  # _process runs at the loop's next turn
        self._reading_paused = False
        self._writing_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._eof = False
        self._stopping = False
        self._lost = False
        self._reserve_task: asyncio.Task[None] | None = None
        self._write_task: asyncio.Task[None] | None = None
        self._sendfile_fd = -1  # a duplicate of the socket's descriptor, for os.sendfile
        # The socket's descriptor, for the turn's answers sent together (write_batch), on a
        # plain TCP listener only (TLS: the transport encrypts); -1 where not.
        self._socket_fd = -1
        self._metrics = channel.metrics  # None: requests are not timed
        self._request: Request | None = None  # the request in flight
        self._throttle_ms = 0  # muted this long once the response in flight is out
        # Requests started behind the one in flight, in order (a producer's buffered Produce
        # requests, started in one turn): each answered once those before it are.
        self._behind: deque[_Behind] = deque()
        # The request just started is a Produce request the fast path served (so the next
        # buffered one may start in the same turn, where _groups_produce allows it: no SASL
        # exchange, no pool reservation per frame).
        self._grouping = False
        self._groups_produce = authenticator is None and not self._pool_bounded
        # Its callbacks each request hands on (to serve_fast, to a Parked request, to a
        # Request) as bound methods made once: one made per request costs ~500 instructions
        # to make and to free.
        # (Each refers back to this connection: connection_lost drops them, so that a closed
        # connection is freed by reference counting, not left to the cycle collector, which
        # never frees it if a gc.freeze caught it alive: broker.heap.)
        self._on_outcome_cb: Callable[[Outcome], None] = self._on_outcome
        self._send_now_cb: Callable[[bytes], None] = self._send_now

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is not an asyncio.Transport subclass, but has its methods.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername") or ("?", 0)
        local = transport.get_extra_info("sockname") or ("?", 0)
        self.host = str(peer[0])
        self.port = int(peer[1])
        # Kafka's connection id: localHost:localPort-remoteHost:remotePort-index
        self.id = f"{local[0]}:{local[1]}-{self.host}:{self.port}-{next(_ids)}"
        if not self.security.uses_tls:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                self._socket_fd = sock.fileno()
        if self.security.principal_mapper is not None:
            # Loaded with the mapper (broker.security.listener): a lookup.
            from broker.security.ssl_principal import NoMatchingRule

            dn = peer_dn(transport.get_extra_info("ssl_object"))
            if dn is not None:
                try:
                    self.principal = user(self.security.principal_mapper.name(dn))
                except NoMatchingRule as exc:
                    log.warning("Failed authentication with %s (%s) on listener %s", self.host,
                                exc, self.security.name)
                    self.close()
                    return
        if self._stopping:
            self.close()

    def data_received(self, data: bytes) -> None:
        self.active = True  # idle time counts from the last byte (at most a sweep later)
        parts = self._parts
        n = len(data)
        if (n > 4 and parts is None and not self._buf and self._frame_size == -1
                and self._authenticator is None and not self._pool_bounded
                and not (self.in_flight or self._processing or self._stopping
                         or self._writing_paused or self._lost or self._reading_paused)):
            # The common read (a client with one request in flight): exactly one whole
            # frame, nothing buffered, no pool, no SASL. What _process would do, without
            # the buffer: the frame is copied once out of the read. Anything else (a size
            # out of bounds included: the general path closes for it) goes the long way.
            size: int = _SIZE.unpack_from(data, 0)[0]
            transport = self._transport
            if (size == n - 4 and size <= self._max_frame_bytes and transport is not None
                    and not transport.is_closing()):
                self._processing = True
                try:
                    self._start_request(data[4:])
                except Exception as exc:  # per connection: log, close, keep serving
                    self._close_for(exc)
                finally:
                    self._processing = False
                return
        if parts is not None:  # (never in flight: the frame gathered is the next one)
            parts.append(data)
            self._parts_bytes += len(data)
            if self._parts_bytes - 4 < self._frame_size and not self._eof:
                return  # nothing to do until the frame is whole
        elif (len(data) >= 4 and (data[0] or data[1])  # a size of GATHER_MIN_BYTES or more
              and not self._buf and self._frame_size == -1 and not self.in_flight
              and int.from_bytes(data[:4], "big") > len(data) - 4):
            # A read that starts a large frame without holding it: gathered from this
            # read on, not copied into the buffer first (its size is checked as any, below).
            self._parts, self._parts_bytes = [data], len(data)
        else:
            self._buf += data
        if not self.in_flight:
            self._process()
        elif len(self._buf) >= self._pause_at_bytes:
            self._pause_reading()

    def eof_received(self) -> bool:
        # Keep the transport open: requests already buffered are still answered, then
        # _process closes once it needs bytes that will never come.
        self._eof = True
        if not self.in_flight:
            self._process()
        return True

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if not self.in_flight:
            self._process()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if exc is not None:
            log.debug("Connection %s: %s", self.id, exc)
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionResetError("connection lost"))
        if self._reserve_task is not None:
            self._reserve_task.cancel()
        if not self.in_flight:  # else the request's outcome releases its bytes
            self._release()
        self._buf = bytearray()
        self._parts = None
        self._held = None
        # (A request still in flight holds the bound methods it was given, not these.)
        self._on_outcome_cb = self._send_now_cb = _after_close
        if self._sendfile_fd >= 0:
            os.close(self._sendfile_fd)
            self._sendfile_fd = -1
        if not self.closed.done():
            self.closed.set_result(None)

    # -- what sendfile.write_parts needs (PartsWriter) ---------------------------------

    @property
    def transport(self) -> asyncio.Transport:
        assert self._transport is not None
        return self._transport

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.transport.write(data)

    async def drain(self) -> None:
        """Wait while the transport's buffer is over its high-water mark."""
        if self._lost:
            raise ConnectionResetError("connection lost")
        if not self._writing_paused:
            return
        if self._drain_waiter is None:
            self._drain_waiter = self._loop.create_future()
        await self._drain_waiter

    # -- life cycle ----------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """No request being handled and not waiting for pool memory. A frame half received
        is idle too: its idle time runs from the last byte (Kafka's LRU of channel
        activity), so a client that goes quiet mid-frame is closed and what it held in the
        queued.max.request.bytes pool is released. Waiting for memory is the broker's
        delay, not the client's: that clock starts when the memory is granted."""
        return not self.in_flight and self._frame_size != -2

    @property
    def _closing(self) -> bool:
        return self._lost or self._transport is None or self._transport.is_closing()

    def stop_reading(self) -> None:
        """Shut-down: finish the request in flight, read no more; close if idle now."""
        self._stopping = True
        if not self.in_flight:
            self.close()

    def close(self) -> None:
        if self._held is not None:
            self.write_held()
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def _close_for(self, exc: BaseException) -> None:
        if isinstance(exc, ProtocolError):
            bad_input_log.warning("Closing connection %s (client %s:%d): %s", self.id,
                                  self.host, self.port, exc)
        elif isinstance(exc, ConnectionError | SendfileError):
            log.debug("Connection %s: %s", self.id, exc)
        else:
            log.error("Closing connection %s (client %s:%d) after an error", self.id,
                      self.host, self.port, exc_info=exc)
        self.close()

    def _release(self) -> None:
        if self._reserved_bytes:
            self._pool.release(self._reserved_bytes)
            self._reserved_bytes = 0

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None and not self._lost:
            self._reading_paused = True
            self._transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self._transport is not None and not self._lost:
            self._reading_paused = False
            self._transport.resume_reading()

    # -- frames in -----------------------------------------------------------------------

    def _process(self) -> None:
        """Start every request the buffer holds, one at a time (stops while one is in
        flight, the writer is paused, or the pool has no room for the next frame)."""
        if self._processing:
            return
        self._processing = True
        try:
            self._process_frames()
        except Exception as exc:  # per connection: log, close, keep serving the others
            self._close_for(exc)
        finally:
            self._processing = False

    def _process_frames(self) -> None:
        started = False
        grouped = False  # the request about to start follows a Produce request of this turn
        transport = self._transport  # (not self._closing: a property call per turn)
        while not (self._stopping or self._writing_paused or self._lost
                   or transport is None or transport.is_closing()):
            if started:
                if not (self._grouping and self._groups_produce and self._produce_buffered()
                        and not self._channel.throttles_produce()):
                    # The request just started was answered at once (its handler did not
                    # wait), or waits. A next one already buffered waits for the loop's
                    # next turn (or for the answer), so that a client pipelining many
                    # requests gets one served per turn, as a Kafka processor serves a
                    # connection, and other connections, timers and signals come in
                    # between. (Nothing buffered: the next read calls _process.)
                    self._grouping = False
                    if not self.in_flight and (self._buf or self._eof):
                        self._process_next_turn()
                    break
                # A fast-path Produce request just started and the next, buffered whole,
                # is one too: a producer's backlog, started in this turn (module doc).
                grouped = True
            elif self.in_flight:
                break
            buf = self._buf
            if self._frame_size < 0:
                head: bytes | bytearray = buf
                if len(buf) < 4:
                    parts = self._parts
                    if parts is None:
                        if self._eof:
                            if buf:
                                bad_input_log.warning(
                                    "Connection %s closed inside a frame size prefix", self.id)
                            self.close()
                        break
                    head = parts[0]  # a frame gathered from its first read, which has its size
                auth = self._authenticator
                limit = (self._max_frame_bytes if auth is None or auth.complete
                         else self._frame_limit())
                size = decode_frame_size(head, limit)  # ProtocolError -> close
                if self._pool_bounded:
                    if not self._pool.try_reserve(size):
                        # queued.max.request.bytes: wait, muted, for memory.
                        self._pause_reading()
                        self._frame_size = -2  # waiting for the pool
                        self._reserve_task = self._loop.create_task(self._reserve(size))
                        self._reserve_task.add_done_callback(_retrieve)
                        break
                    self._reserved_bytes = size
                self._frame_size = size
            elif self._frame_size == -2:
                break
            size = self._frame_size
            if len(buf) == 4 + size and self._parts is None:
                # The common case inline (no call): the buffer holds this frame exactly. Its
                # prefix is dropped in place (a bytearray's start moves), the rest copied once.
                del buf[:4]
                frame = bytes(buf)
                self._buf = bytearray()
            else:
                taken = self._take_frame(size)
                if taken is None:
                    if self._eof:
                        got = len(self._buf) if self._parts is None else self._parts_bytes
                        bad_input_log.warning(
                            "Connection %s closed after %d of a %d-byte request frame",
                            self.id, got - 4, size)
                        self.close()
                    self._resume_reading()  # a frame in progress is always read in full
                    break
                frame = taken
            self._frame_size = -1
            if self.in_flight:
                self._start_behind(frame)
            else:
                self._start_request(frame, grouped)
            started = True
        # Muted, or frames already buffered waiting for the next turn: read no more than
        # the bound (without the second, a pipelining client's reads between turns, up to
        # 32 of 256 KiB each in one turn of uvloop's, grew the buffer without limit).
        if (self.in_flight or self._process_scheduled) and len(self._buf) >= self._pause_at_bytes:
            self._pause_reading()
        elif (self._reading_paused and not self.in_flight and self._frame_size != -2
              and not self._stopping):
            self._resume_reading()

    def _take_frame(self, size: int) -> bytes | None:
        """The next frame's ``size`` bytes (after its 4-byte size prefix) once they are all
        buffered, taken out of the buffer; None until then.

        The bytes are copied once, into the frame. A frame the buffer holds whole is cut
        out of it; a large one that it does not (``GATHER_MIN_BYTES``) is gathered from
        then on as the list of reads that bring it, not appended to the buffer (a copy
        per read, and a bytearray grown read by read: freshly faulted-in pages whenever
        its size passes the allocator's mmap threshold), and joined once whole. Whatever
        its last read holds beyond the frame is the buffer again."""
        parts = self._parts
        if parts is None:
            buf = self._buf
            if len(buf) >= 4 + size:
                with memoryview(buf) as view:  # (a bytearray slice would be a second copy)
                    frame = bytes(view[4:4 + size])
                if len(buf) == 4 + size:
                    self._buf = bytearray()
                else:
                    del buf[:4 + size]
                return frame
            if size >= GATHER_MIN_BYTES:
                self._parts, self._parts_bytes, self._buf = [buf], len(buf), bytearray()
            return None
        if self._parts_bytes < 4 + size:
            return None
        # parts[0] holds the prefix and is not the whole frame (else it was cut above);
        # the frame ends in the last part.
        last = parts[-1]
        end = len(last) - (self._parts_bytes - (4 + size))  # the frame's end in ``last``
        pieces: list[bytes | bytearray | memoryview] = [memoryview(parts[0])[4:]]
        pieces += parts[1:-1]
        pieces.append(memoryview(last)[:end] if end < len(last) else last)
        frame = b"".join(pieces)
        self._buf = bytearray(memoryview(last)[end:]) if end < len(last) else bytearray()
        self._parts, self._parts_bytes = None, 0
        return frame

    def _produce_buffered(self) -> bool:
        """Whether the buffer holds the next frame whole and it is a Produce request, with
        fewer than ``GROUP_MAX_BEHIND`` requests started behind the one in flight."""
        buf = self._buf
        if self._parts is not None or len(buf) < 6 or len(self._behind) >= GROUP_MAX_BEHIND:
            return False
        size: int = _SIZE.unpack_from(buf, 0)[0]
        return (0 <= size <= self._max_frame_bytes and len(buf) >= 4 + size
                and buf[4] == 0 and buf[5] == PRODUCE_KEY)

    def _process_next_turn(self) -> None:
        if not self._process_scheduled:
            self._process_scheduled = True
            self._loop.call_soon(self._process_scheduled_turn)

    def _process_scheduled_turn(self) -> None:
        self._process_scheduled = False
        if not self.in_flight:
            self._process()

    async def _reserve(self, size: int) -> None:
        await self._pool.reserve(size)
        self._reserve_task = None
        if self._lost:
            self._pool.release(size)
            return
        self._reserved_bytes = size
        self._frame_size = size
        self.last_active_ns = time.monotonic_ns()  # its idle time starts now
        self._resume_reading()
        self._process()

    def _frame_limit(self) -> int:
        """socket.request.max.bytes; sasl.server.max.receive.size before authentication."""
        auth = self._authenticator
        if auth is not None and not auth.complete:
            return min(self._max_frame_bytes, auth.max_receive_bytes)
        return self._max_frame_bytes

    def _checked_spec(self, header: RequestHeader) -> ApiSpec:
        """The handler of the request, checked: unknown API or version -> ProtocolError
        (but ApiVersions of any version, answered with its v0 error: KIP-511)."""
        spec = LOADED_SPECS.get(header.api_key) or find_spec(header.api_key)
        if spec is None:
            raise ProtocolError(f"unknown api key {header.api_key} "
                                f"(correlation id {header.correlation_id}, client {header.client_id!r})")
        if (not spec.min_version <= header.api_version <= spec.max_version
                and header.api_key != API_VERSIONS_KEY):
            raise ProtocolError(f"unsupported version {header.api_version} of api key "
                                f"{header.api_key} (supported {spec.min_version}-{spec.max_version}, "
                                f"client {header.client_id!r})")
        return spec

    def _start_request(self, frame: bytes, grouped: bool = False) -> None:
        """Start the request of ``frame``; ``grouped``: it follows a Produce request of a
        backlog in this turn (module doc), and is one too."""
        self._grouping = False
        if self._held is not None and not grouped:
            # The previous response first (a client pipelining); in a backlog, its answer
            # goes with theirs at the end of the turn (and any answer written on its own
            # writes what is held first).
            self.write_held()
        auth = self._authenticator
        if auth is not None:
            if not auth.complete or auth.begins_reauthentication(frame):
                self._authenticate(auth, frame)
                return
            if auth.session_expired():
                log.info("Closing connection %s (client %s:%d, %s): its SASL session expired "
                         "(connections.max.reauth.ms)", self.id, self.host, self.port, self.principal)
                self._release()
                self.close()
                return
        header, body_offset = decode_request_header(frame)
        spec = LOADED_SPECS.get(header.api_key)
        if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
            spec = self._checked_spec(header)
        self.in_flight = True
        fast = spec.fast
        if fast is not None and self._metrics is None:
            outcome = self._channel.serve_fast(fast, header, frame, body_offset, self.principal,
                                               self.id, self._on_outcome_cb)
            if type(outcome) is bytes:
                self._grouping = header.api_key == PRODUCE_KEY
                self._send_now(outcome)
                return
            if isinstance(outcome, list):
                self._send_parts(outcome)
                return
            if outcome is not None:
                if isinstance(outcome, Parked):  # answered later
                    if header.api_key == PRODUCE_KEY:
                        # Waiting for the end of the turn's appends: its answer held with
                        # the turn's others (in a backlog too), and written with them.
                        outcome.send_frame = self._send_now_cb
                        self._grouping = True
                    else:
                        outcome.send_frame = self._send_parked
                elif not isinstance(outcome, bytes):
                    self._on_outcome(outcome)
                return
        request = Request(header, frame, body_offset, self.id, self.host, self.port,
                          self._on_outcome_cb, self.principal, self.security.name,
                          self.security.protocol)
        if self._metrics is not None:
            request.start_ns = time.monotonic_ns()
            self._request = request
        self._channel.submit(request)

    def _start_behind(self, frame: bytes) -> None:
        """Start a Produce request read while the one before it is in flight (a producer's
        backlog, module doc): served by the fast path now, its answer kept in ``_behind``
        until those before it are out; one the fast path does not serve is started there,
        in its turn."""
        self._grouping = False
        behind = _Behind(self)
        self._behind.append(behind)
        try:
            header, body_offset = decode_request_header(frame)
            fast = self._checked_spec(header).fast
        except ProtocolError as exc:  # the connection closes in its turn, as for any
            behind.error = exc
            return
        outcome = (None if fast is None else
                   self._channel.serve_fast(fast, header, frame, body_offset, self.principal,
                                            self.id, behind.on_outcome))
        if outcome is None:  # not served (nothing done): started once those before it are out
            behind.frame = frame
        elif type(outcome) is bytes:
            behind.data = outcome
            self._grouping = True
        elif isinstance(outcome, list):
            behind.parts = outcome
        elif isinstance(outcome, Parked):
            outcome.send_frame = behind.send_frame
            self._grouping = True
        elif not isinstance(outcome, bytes):
            behind.outcome = outcome

    def _next_behind(self) -> None:
        """The request in flight is answered and others were started behind it: the first of
        those is the one in flight now, its answer written now if it has come, else when it
        comes (``_Behind``)."""
        behind = self._behind[0]
        if (behind.data is None and behind.outcome is None and behind.parts is None
                and behind.frame is None and behind.error is None):
            behind.awaited = True
            return
        self._behind.popleft()
        self._answer_behind(behind)

    def _answer_behind(self, behind: _Behind) -> None:
        """Hand the answer of ``behind`` (now the request in flight) to the writer its kind
        of answer goes to, as if it had just been started; or start it (not served)."""
        data = behind.data
        if data is not None:
            self._send_now(data)
            return
        outcome = behind.outcome
        if outcome is not None:
            self._on_outcome(outcome)
            return
        parts = behind.parts
        if parts is not None:
            self._send_parts(parts)
            return
        error = behind.error
        if error is not None:  # once the requests before it are answered, as Kafka would
            self._close_for(error)
            self._finish_request()
            return
        frame = behind.frame
        assert frame is not None
        try:
            self._start_request(frame)
        except Exception as exc:  # per connection: log, close, keep serving the others
            self._close_for(exc)

    # -- SASL ----------------------------------------------------------------------------

    def _authenticate(self, auth: SaslAuthenticator, frame: bytes) -> None:
        """A frame of the SASL exchange: answered here, never reaches the request channel."""
        step = auth.receive(frame)
        self._release()
        if step.failure is not None:
            self._fail_authentication(step.failure, auth.failed_delay_ms)
            return
        if step.reply is not None:
            self.transport.write(step.reply)
        if step.authenticated is not None:
            self.principal = step.authenticated
            log.debug("Connection %s authenticated as %s (%s)", self.id, self.principal,
                      auth.mechanism)

    def _fail_authentication(self, failure: Failure, delay_ms: int) -> None:
        log.warning("Failed authentication with %s (connection %s, listener %s): %s",
                    self.host, self.id, self.security.name, failure.reason)
        # Muted for good: nothing more is read or processed on this connection.
        self._stopping = True
        self._pause_reading()

        def send_and_close() -> None:
            if failure.reply is not None and not self._closing:
                self.transport.write(failure.reply)
            self.close()

        if failure.delayed and delay_ms > 0:
            # Kafka delays the answer and the close (connection.failed.authentication.delay.ms)
            # so that a client retrying bad credentials cannot spin.
            self._loop.call_later(delay_ms / 1000, send_and_close)
        else:
            send_and_close()

    # -- responses out -------------------------------------------------------------------

    def _on_outcome(self, outcome: Outcome) -> None:
        """The request's outcome (called once, from the handler's task or from submit)."""
        try:
            if self._closing:
                self._finish_request()
                return
            if not isinstance(outcome, CloseConnection) and outcome.throttle_ms > 0:
                # A client quota was exceeded: stay muted for the throttle time after the
                # response (Kafka's channel throttling); an old client's response waits too.
                self._throttle_ms = outcome.throttle_ms
                if isinstance(outcome, SendResponse) and outcome.hold:
                    held = SendResponse(outcome.parts)
                    self._throttle_ms = 0
                    self._loop.call_later(outcome.throttle_ms / 1000,
                                                          self._on_outcome, held)
                    return
            if isinstance(outcome, SendResponse):
                if self._held is not None:  # answers of requests before it, not yet written
                    self.write_held()
                data = _joined(outcome.parts)
                if data is None:
                    # Record data (sendfile) or a big response; a small one copied in one write.
                    if self._write_parts(outcome.parts, copy_small=True):
                        return
                else:
                    self.transport.write(data)
            elif isinstance(outcome, CloseConnection):
                bad_input_log.warning("Closing connection %s (client %s:%d): %s", self.id,
                                      self.host, self.port, outcome.reason)
                self.close()
                self._finish_request()
                return
            else:
                assert isinstance(outcome, NoOp)
            self._finish_request()
        except Exception as exc:
            self._close_for(exc)
            self._finish_request()

    def _send_parts(self, parts: ResponseParts) -> None:
        """``_on_outcome`` of a fast path's response parts (a fetch's record data, more than
        ``SMALL_COPY_BYTES``: the fast path copies smaller answers itself; no throttle
        time): written at once, head, sendfile and tail, what cannot go now by a task."""
        try:
            if self._closing:
                self._finish_request()
                return
            if self._held is not None:  # answers of requests before it, not yet written
                self.write_held()
            if self._write_parts(parts, copy_small=False):
                return
            self._finish_request()
        except Exception as exc:
            self._close_for(exc)
            self._finish_request()

    def _write_parts(self, parts: ResponseParts, *, copy_small: bool) -> bool:
        """Write a response with record data now: copied (TLS), or head, sendfile and tail
        (first copied in one write when ``copy_small`` and it is under ``SMALL_COPY_BYTES``).
        What cannot go now is written by a task of its own (held here: the loop keeps only
        weak references to tasks); True when that task finishes the request."""
        if self._copy:
            rest = copy_parts_now(self.transport, parts, JOIN_MAX_BYTES)
        else:
            rest = copy_parts_now(self.transport, parts, SMALL_COPY_BYTES) if copy_small else parts
            if rest:
                rest = write_parts_now(self.transport, self._out_fd(), rest)
        if rest:
            self._write_task = self._loop.create_task(self._write_slow(rest))
            self._write_task.add_done_callback(_retrieve)
            return True
        return False

    def _send_now(self, data: bytes) -> None:
        """``_on_outcome`` of a response frame of bytes only, without a throttle time (what a
        handler's fast path answers): held, and written with the other responses of this
        turn of the loop (``write_batch``) once the turn's requests are served."""
        transport = self._transport
        if not (self._lost or transport is None or transport.is_closing()):
            held = self._held
            if held is None:
                self._held = data
                self._write_batch.add(self)
            else:  # after the answers of requests started before it (already added)
                self._held = held + data
        self._finish_request()

    def _send_parked(self, data: bytes) -> None:
        """``_on_outcome`` of the answer to a request a fast path parked when it is one
        response frame of bytes without a throttle time: written now (it comes from a
        callback of its own, after the turn's requests were read)."""
        transport = self._transport
        if not (self._lost or transport is None or transport.is_closing()):
            try:
                if self._held is not None:
                    self.write_held()
                transport.write(data)
            except Exception as exc:
                self._close_for(exc)
        self._finish_request()

    def write_held(self) -> None:
        """Write the response frame held for the end of the turn (``WriteBatch``), if any."""
        data, self._held = self._held, None
        if data is None:
            return
        transport = self._transport
        if self._lost or transport is None or transport.is_closing():
            return
        try:
            transport.write(data)
        except Exception as exc:
            self._close_for(exc)

    def take_held(self) -> tuple[int, bytes] | None:
        """``WriteBatch``: the frames held, with the socket's descriptor, when they may be
        sent straight to the socket (plain TCP, nothing in the transport's buffer that
        they would overtake); they are no longer held. Else None."""
        data = self._held
        transport = self._transport
        if (data is None or type(data) is not bytes or self._socket_fd < 0 or self._lost
                or transport is None or transport.is_closing()
                or transport.get_write_buffer_size() != 0):
            return None
        self._held = None
        return self._socket_fd, data

    def sent_held(self, data: bytes, sent: int) -> None:
        """``WriteBatch``: ``data`` from ``take_held`` went out up to ``sent`` bytes, or not
        (``-errno``: -EAGAIN a full socket buffer, -ECANCELED not sent): the rest goes
        through the transport; an error of the socket closes the connection."""
        if sent == len(data):
            return
        transport = self._transport
        if self._lost or transport is None or transport.is_closing():
            return
        try:
            if sent >= 0 or sent in (-errno.EAGAIN, -errno.ECANCELED):
                transport.write(data[max(0, sent):])
            else:
                raise OSError(-sent, os.strerror(-sent))  # EPIPE, ECONNRESET, ...: closed
        except Exception as exc:
            self._close_for(exc)

    def _out_fd(self) -> int:
        if self._sendfile_fd < 0:
            sock = self.transport.get_extra_info("socket")
            if sock is None:
                raise ConnectionResetError("connection has no socket")
            self._sendfile_fd = os.dup(sock.fileno())  # shares the non-blocking flag
        return self._sendfile_fd

    async def _write_slow(self, parts: ResponseParts) -> None:
        try:
            await write_parts(self, parts, copy=self._copy)
        except Exception as exc:
            self._close_for(exc)
        self._write_task = None
        self._finish_request()

    def _finish_request(self) -> None:
        """The response is out (or dropped): release its bytes, unmute (after the throttle
        time, if any), take the next."""
        request, self._request = self._request, None
        if request is not None and self._metrics is not None:
            try:
                self._metrics.record(request)
            except Exception:  # a metrics bug must not leave this connection muted
                log.exception("Recording request metrics failed (connection %s)", self.id)
        if self._reserved_bytes:
            self._release()
        throttle_ms, self._throttle_ms = self._throttle_ms, 0
        if throttle_ms > 0 and not self._closing:
            self._loop.call_later(throttle_ms / 1000, self._finish_request)
            return
        if self._behind:
            if not self._closing:
                self._next_behind()
                return
            self._behind.clear()  # their answers, when they come, go nowhere
        self.in_flight = False
        self.active = True
        transport = self._transport
        if self._lost or transport is None or transport.is_closing():  # self._closing
            return
        if self._stopping:
            self.close()
            return
        if not self._buf and self._parts is None and not self._eof and not self._reading_paused:
            return  # nothing buffered, reading on: what _process would find (the next read calls it)
        self._process()


class _Behind:
    """A request started behind the one in flight on its connection (``_start_behind``),
    until it is the one in flight: its answer once it has come (one of ``data``, ``outcome``,
    ``parts``), its frame when the fast path did not serve it (started in its turn), or why
    its frame is broken (the connection closed in its turn, with the log line)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.data: bytes | None = None  # a response frame of bytes, without a throttle time
        self.outcome: Outcome | None = None
        self.parts: ResponseParts | None = None
        self.frame: bytes | None = None
        self.error: ProtocolError | None = None  # its frame is broken: close in its turn
        # The requests before it are answered: its connection waits for this answer.
        self.awaited = False

    def send_frame(self, data: bytes) -> None:
        """``Parked.send_frame`` of the request (a produce waiting for the turn's appends)."""
        self.data = data
        self._came()

    def on_outcome(self, outcome: Outcome) -> None:
        """The request's outcome callback (``RequestChannel.serve_fast``'s ``on_outcome``)."""
        self.outcome = outcome
        self._came()

    def _came(self) -> None:
        if self.awaited:
            self.awaited = False
            connection = self.connection
            behind = connection._behind
            if behind and behind[0] is self:  # (else dropped: the connection closed)
                behind.popleft()
                connection._answer_behind(self)


def _after_close(_: object) -> None:
    """What a closed connection's callbacks are (``connection_lost``): nothing starts a
    request on it any more."""


def _joined(parts: ResponseParts) -> bytes | bytearray | memoryview | None:
    """The response as one buffer, or None when it holds record data (FileSlice) or is big."""
    if len(parts) == 1:
        only = parts[0]
        return only if isinstance(only, bytes | bytearray | memoryview) else None
    total = 0
    for part in parts:
        if not isinstance(part, bytes | bytearray | memoryview):
            return None
        total += len(part)
    if total > JOIN_MAX_BYTES:
        return None
    return b"".join(parts)  # type: ignore[arg-type]  # checked above: bytes-like only


def _retrieve(task: asyncio.Task[None]) -> None:
    """Done callback: surface a task's unexpected exception in the log."""
    if not task.cancelled() and task.exception() is not None:
        log.error("Connection task failed", exc_info=task.exception())

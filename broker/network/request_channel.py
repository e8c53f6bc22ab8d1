"""The bounded request queue and the IO workers (Kafka's ``RequestChannel`` and
``KafkaRequestHandlerPool``).

A connection hands each request it reads to ``submit``. When the queue is empty the request
is dispatched at once (no queue hop: the IO workers would take it off at once anyway, since
dispatching only starts a handler task); otherwise it joins the bounded queue
(``queued.max.requests``, Kafka's default 500) behind the others, waiting while the queue
is full, so load turns into backpressure on the sockets instead of memory growth.
``num.io.threads`` worker tasks take queued requests off, decode the body with the
generated class for the request's version, and start the handler (the count is a dynamic
broker config: ``resize_workers``).

Each handler runs as its own task so that a handler parked in the purgatory (a long-poll
fetch, acks=all) does not hold a worker: that is Kafka's model too (a handler thread hands
a delayed operation to the purgatory and moves on). Produce, Fetch and ApiVersions
(``FIRST_STEP_INLINE``) run their first step at once instead, in the caller's turn of the
loop: produce with acks 0 or 1 and a fetch with data never wait and are done there, their
outcome delivered, with no task made for them; one that waits goes on as a task from that
point. Handler tasks are bounded by the number of connections (``max.connections``): a
connection is muted while its request is in flight, so it has at most one, and responses
leave in request order either way.

A handler may have a fast path (``ApiSpec.fast``: Produce's, for one batch to one partition
with acks=1; Fetch's, for a sessionless consumer fetch of one partition): the connection
offers it each request it reads (``serve_fast``), which serves it at once where nothing is
queued ahead of it and the broker neither times requests (metrics, the request log),
injects faults nor enforces request quotas; what the fast path does not serve, having done
nothing, is submitted as any other request. A fast path's fetch that waits for data is
parked in the purgatory (``Parked``) and answered through the connection's callback.

The outcome of every request is one of a closed set (``Outcome``): frame parts to write,
nothing (acks=0), or close the connection; it is handed, exactly once, to the request's
``on_outcome`` callback (the connection's), from the handler's task. A body that does not
decode, a handler that raises, or a response that does not encode closes that connection
with a log line (with a traceback for handler bugs); other connections are not affected.

With metrics (or the request log) on, a request carries its stage times (set here, by its
connection and by ``broker.metrics.stages``) and the stats it counts in; the connection
records it once its response is written (``broker.metrics.requests``).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from mypy_extensions import mypyc_attr

from broker.handlers.base import (
    LOADED_SPECS,
    ApiSpec,
    CloseConnection,
    FastHandler,
    FastResult,
    Parked,
    RequestContext,
    Respond,
    find_spec,
)
from broker.metrics import stages
from broker.quota.manager import NANOS_TO_PERCENTAGE, ClientQuotaManager
from broker.quota.throttling import REQUEST_QUOTA_EXEMPT, client_throttles
from broker.security.principal import ANONYMOUS, KafkaPrincipal
from protocol.errors import ProtocolError
from protocol.fileslice import ResponseParts
from protocol.frames import API_VERSIONS_KEY, RequestHeader, encode_response

if TYPE_CHECKING:
    from broker.faults import FaultInjector
    from broker.handlers.base import _NoResponse
    from broker.metrics.requests import RequestMetrics, RequestStats
    from broker.services import Broker

log = logging.getLogger(__name__)


# Handlers whose first step runs inline, outside any task (RequestChannel._start_inline):
# Produce, Fetch and ApiVersions, the per-request hot path. Their paths only await futures
# and events (the purgatory), none of the asyncio APIs that need a current task
# (asyncio.timeout, TaskGroup: the ZooKeeper calls of the admin handlers use them).
FIRST_STEP_INLINE: Final = frozenset({0, 1, API_VERSIONS_KEY})

# The controller's requests (LeaderAndIsr, StopReplica, UpdateMetadata) of this size or more
# are decoded in a worker thread: a body over thousands of partitions is tens of ms of
# pure decoding into new objects, which nothing else shares until it is dispatched.
DECODE_OFF_LOOP_KEYS: Final = frozenset({4, 5, 6})
DECODE_OFF_LOOP_BYTES: Final = 32 * 1024

# spent_ns of a request whose handler time is not measured (never written).
_NOT_MEASURED: list[int] = [0]


@dataclass(slots=True)  # not frozen: one per request, and frozen __init__ costs a setattr call per field
class SendResponse:
    parts: ResponseParts
    throttle_ms: int = 0  # client quota: the connection stays muted this long after the write
    hold: bool = False  # an old client version: the response itself waits out the throttle


@dataclass(frozen=True, slots=True)
class NoOp:
    throttle_ms: int = 0


Outcome: TypeAlias = "SendResponse | NoOp | CloseConnection"


@dataclass(eq=False, slots=True)
class Request:
    """A request read from a connection, waiting for its outcome."""

    header: RequestHeader
    frame: bytes  # the whole frame after the size prefix
    body_offset: int
    connection_id: str
    client_host: str
    client_port: int
    on_outcome: Callable[[Outcome], None]  # called once, with the outcome; must not raise
    principal: KafkaPrincipal = ANONYMOUS
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    finished: bool = False
    # Timing (broker.metrics.requests), monotonic ns; all 0 unless the connection set
    # start_ns (metrics or the request log are on).
    start_ns: int = 0
    dequeue_ns: int = 0
    local_done_ns: int = 0
    response_ns: int = 0
    stats: tuple[RequestStats, ...] | None = None  # where it counts, chosen at dispatch
    outcome: Outcome | None = None

    def finish(self, outcome: Outcome) -> None:
        if not self.finished:
            self.finished = True
            if self.start_ns:
                self.response_ns = time.monotonic_ns()
                self.outcome = outcome
            self.on_outcome(outcome)


# A regular Python class even where this module is compiled (protocol.native): mypyc's
# native classes cannot be weakly referenced, and broker.metrics.stages keeps a weak
# reference to each channel. Its methods are compiled all the same.
@mypyc_attr(native_class=False)
class RequestChannel:
    def __init__(self, broker: Broker, *, queued_max_requests: int, num_workers: int,
                 metrics: RequestMetrics | None = None,
                 request_quotas: ClientQuotaManager | None = None,
                 faults: FaultInjector | None = None) -> None:
        self._broker = broker
        # Looked up once (made on the loop, by SocketServer.start): on CPython 3.11
        # asyncio.get_running_loop() makes a getpid system call each time (fork check).
        self._loop = asyncio.get_running_loop()
        self._faults = faults  # armed by tests of an in-process broker only (broker.faults)
        self.metrics = metrics  # None: requests are not timed (connections read this)
        self._request_quotas = request_quotas  # request_percentage (None: not enforced)
        self.queue: asyncio.Queue[Request] = asyncio.Queue(maxsize=queued_max_requests)
        self._num_workers = num_workers
        self._workers: list[asyncio.Task[None]] = []
        # Handler tasks running, with their requests (broker.metrics.stages asks for the
        # request of a task that parks).
        self._handler_tasks: dict[asyncio.Task[None], Request] = {}
        self._first_step: Request | None = None  # its handler's first step is running
        if metrics is not None:
            stages.watch(self)
        # Connections waiting to put a request on a full queue (each connection has one).
        self._put_tasks: dict[asyncio.Task[None], Request] = {}
        # Bodies being decoded in a worker thread (DECODE_OFF_LOOP_KEYS), with their requests.
        self._decoding: dict[asyncio.Future[tuple[object, int]], Request] = {}
        # How a parked fast-path request is answered (Parked.answer_via), a bound method made
        # once: one made per request costs ~500 instructions to make and to free.
        self._deliver = self._deliver_fast

    def start(self) -> None:
        for i in range(self._num_workers):
            self._workers.append(asyncio.create_task(self._worker(), name=f"io-worker-{i}"))

    def resize_workers(self, count: int) -> None:
        """``num.io.threads`` changed dynamically: start or stop workers. A worker only
        awaits in ``queue.get``, so one cancelled holds no request."""
        self._num_workers = count
        if not self._workers:
            return  # not started (or stopped): ``start`` uses the new count
        while len(self._workers) < count:
            name = f"io-worker-{len(self._workers)}"
            self._workers.append(asyncio.create_task(self._worker(), name=name))
        while len(self._workers) > count:
            self._workers.pop().cancel()

    @property
    def worker_count(self) -> int:
        return len(self._workers)

    def request_of(self, task: asyncio.Task[Any] | None) -> Request | None:
        """The request being handled (``broker.metrics.stages``): the one whose handler
        runs its first step now (no task yet), else the one ``task`` handles, if it is a
        handler task here."""
        if self._first_step is not None:
            return self._first_step
        return self._handler_tasks.get(task) if task is not None else None

    def submit(self, request: Request) -> None:
        """Dispatch ``request`` now if nothing is queued ahead of it, else queue it (waiting,
        in a task, while the queue is full); its outcome reaches ``request.on_outcome``."""
        if self.queue.empty():
            request.dequeue_ns = request.start_ns  # not queued: no queue time
            self._dispatch_guarded(request)
        elif not self.queue.full():
            self.queue.put_nowait(request)
        else:
            task = asyncio.create_task(self.queue.put(request))
            self._put_tasks[task] = request
            task.add_done_callback(self._put_done)

    def _put_done(self, task: asyncio.Task[None]) -> None:
        request = self._put_tasks.pop(task)
        if task.cancelled():
            request.finish(CloseConnection("broker shutting down"))

    async def send_request(self, request: Request) -> None:
        """Queue ``request`` (waits while the queue is full)."""
        await self.queue.put(request)

    @property
    def in_flight(self) -> int:
        return (self.queue.qsize() + len(self._put_tasks) + len(self._decoding)
                + len(self._handler_tasks))

    async def drain(self) -> None:
        """Wait until the queue is empty and every started handler has finished."""
        while self._put_tasks:
            await asyncio.wait(set(self._put_tasks))
        await self.queue.join()
        while self._decoding:
            await asyncio.wait(set(self._decoding))
        while self._handler_tasks:
            await asyncio.wait(set(self._handler_tasks))

    async def stop(self) -> None:
        """Cancel the workers and any handler still running (after ``drain`` timed out)."""
        tasks = [*self._put_tasks, *self._workers, *self._handler_tasks]
        for task in tasks:
            task.cancel()
        for decoding in list(self._decoding):
            decoding.cancel()  # its callback closes the connection
        await asyncio.gather(*tasks, return_exceptions=True)
        self._workers.clear()
        # Requests still queued are answered by closing their connections.
        while not self.queue.empty():
            self.queue.get_nowait().finish(CloseConnection("broker shutting down"))
            self.queue.task_done()

    async def _worker(self) -> None:
        while True:
            request = await self.queue.get()
            if request.start_ns:
                request.dequeue_ns = time.monotonic_ns()
            try:
                self._dispatch_guarded(request)
            finally:
                self.queue.task_done()

    def _dispatch_guarded(self, request: Request) -> None:
        try:
            self._dispatch(request)
        except Exception:  # a bug in dispatch: this request's connection closes, the worker lives
            log.exception("Dispatch of api key %d failed; closing connection %s",
                          request.header.api_key, request.connection_id)
            request.finish(CloseConnection("dispatch error"))

    def _dispatch(self, request: Request) -> None:
        header = request.header
        spec = LOADED_SPECS.get(header.api_key) or find_spec(header.api_key)
        if spec is None:  # the connection checks this first; kept for safety
            request.finish(CloseConnection(f"unknown api key {header.api_key}"))
            return
        if (header.api_key == API_VERSIONS_KEY
                and not spec.min_version <= header.api_version <= spec.max_version):
            # KIP-511: answer an unsupported ApiVersions version with the v0 error response.
            from broker.handlers.api_versions import unsupported_version_response

            request.finish(_encode(header.correlation_id, API_VERSIONS_KEY, 0,
                                   unsupported_version_response()))
            return
        if (header.api_key in DECODE_OFF_LOOP_KEYS
                and len(request.frame) >= DECODE_OFF_LOOP_BYTES):
            self._decode_off_loop(spec, request)
            return
        try:
            body, _end = spec.request.decode_at(request.frame, header.api_version,
                                                request.body_offset)
        except ProtocolError as exc:
            request.finish(CloseConnection(
                f"malformed {spec.request.__name__} v{header.api_version} body: {exc}"))
            return
        self._dispatch_decoded(spec, request, body)

    def _decode_off_loop(self, spec: ApiSpec, request: Request) -> None:
        """Decode the body in a worker thread, then dispatch it on the loop. The connection
        reads nothing more until this request's outcome, so its requests stay in order."""
        header = request.header
        future = self._loop.run_in_executor(None, spec.request.decode_at, request.frame,
                                            header.api_version, request.body_offset)
        self._decoding[future] = request
        # A bound method and partial, not a closure: mypyc fails on a nested function here.
        future.add_done_callback(functools.partial(self._decoded_off_loop, spec))

    def _decoded_off_loop(self, spec: ApiSpec, f: asyncio.Future[tuple[object, int]]) -> None:
        """The outcome of ``_decode_off_loop``'s decode: the request dispatched, or its
        connection closed (a malformed body, the broker shutting down, a dispatch error)."""
        request = self._decoding.pop(f)
        header = request.header
        if f.cancelled():
            request.finish(CloseConnection("broker shutting down"))
            return
        exc = f.exception()
        if isinstance(exc, ProtocolError):
            request.finish(CloseConnection(
                f"malformed {spec.request.__name__} v{header.api_version} body: {exc}"))
            return
        try:
            if exc is not None:
                raise exc
            self._dispatch_decoded(spec, request, f.result()[0])
        except Exception:  # as _dispatch_guarded: this connection closes, nothing else
            log.exception("Dispatch of api key %d failed; closing connection %s",
                          header.api_key, request.connection_id)
            request.finish(CloseConnection("dispatch error"))

    def _dispatch_decoded(self, spec: ApiSpec, request: Request, body: object) -> None:
        header = request.header
        metrics = self.metrics
        if metrics is not None:
            request.stats = (metrics.by_key[header.api_key]
                             or metrics.stats_for(header.api_key, body))
        if self._faults is not None and self._inject(request, body):
            return
        ctx = RequestContext(
            broker=self._broker, api_key=header.api_key, api_version=header.api_version,
            correlation_id=header.correlation_id, client_id=header.client_id,
            client_host=request.client_host, client_port=request.client_port,
            connection_id=request.connection_id, principal=request.principal,
            listener_name=request.listener_name, security_protocol=request.security_protocol,
            request_size_bytes=len(request.frame) + 4,
        )
        run = self._run_handler(spec, ctx, body, request)
        if header.api_key in FIRST_STEP_INLINE:
            self._start_inline(run, request)
            return
        # The loop's own create_task: asyncio.create_task adds a Python-level call that only
        # names the task (no name here).
        task = self._loop.create_task(run)
        self._handler_tasks[task] = request
        task.add_done_callback(self._handler_tasks.pop)

    def _start_inline(self, run: Coroutine[Any, Any, None], request: Request) -> None:
        """Run a handler at once, up to its first wait: produce with acks 0/1, a fetch with
        data and ApiVersions never wait and finish here, with no task made, scheduled and
        stepped for them. One that waits goes on as a task from that point. Either way it
        runs in a context of its own, as a task's step would."""
        context = contextvars.copy_context()
        outer, self._first_step = self._first_step, request  # nested: an outcome started one
        try:
            awaited = context.run(run.send, None)
        except StopIteration:
            return
        except asyncio.CancelledError:  # raised by the handler itself: _run_handler closed
            return
        finally:
            self._first_step = outer
        # The loop's own create_task: asyncio.create_task adds a Python-level call that only
        # names the task (no name here).
        task = self._loop.create_task(_Resumed(run, awaited), context=context)
        self._handler_tasks[task] = request
        task.add_done_callback(self._handler_tasks.pop)

    def _inject(self, request: Request, body: object) -> bool:
        """Apply an armed fault (broker.faults); True when the request is answered by it."""
        assert self._faults is not None
        # Loaded with the injector (tests of an in-process broker only): a lookup.
        from broker.faults import Delay, Drop, Fail

        header = request.header
        action = self._faults.take(header.api_key, header.api_version, body)
        if isinstance(action, Fail):
            request.finish(_encode(header.correlation_id, header.api_key, header.api_version,
                                   action.response))
            return True
        if isinstance(action, Drop):
            request.finish(CloseConnection("fault injected: connection dropped"))
            return True
        if isinstance(action, Delay):
            # A partial, not a closure: mypyc cannot compile a closure in a method of a
            # class that is not native (this one).
            request.on_outcome = functools.partial(_deliver_later, action.delay_ms / 1000,
                                                   request.on_outcome)
        return False

    async def _run_handler(self, spec: ApiSpec, ctx: RequestContext, body: object,
                           request: Request) -> None:
        quotas = self._request_quotas
        measure = (quotas is not None and quotas.enabled
                   and ctx.api_key not in REQUEST_QUOTA_EXEMPT)
        spent_ns = [0] if measure else _NOT_MEASURED
        try:
            handling = spec.handler(ctx, body)
            result = await (timed(handling, spent_ns) if measure else handling)
        except asyncio.CancelledError:
            request.finish(CloseConnection("handler cancelled (broker shutting down)"))
            raise
        except Exception:
            log.exception("Handler for api key %d v%d (correlation id %d, client %s) failed; "
                          "closing connection %s", ctx.api_key, ctx.api_version,
                          ctx.correlation_id, ctx.client_id, ctx.connection_id)
            request.finish(CloseConnection("handler error"))
            return
        if isinstance(result, CloseConnection):
            request.finish(result)
            return
        throttle_ms = result.throttle_ms
        if measure and quotas is not None:
            # request_percentage: this request's handler time, as a percentage of a second.
            throttle_ms = max(throttle_ms, quotas.record(ctx.principal.name, ctx.client_id or "",
                                                         spent_ns[0] * NANOS_TO_PERCENTAGE))
        self._complete(request, result, throttle_ms)

    def _complete(self, request: Request, result: Respond | _NoResponse, throttle_ms: int
                  ) -> None:
        """Encode a handler's answer and hand the outcome to the connection."""
        request.finish(self._outcome_of(request.header, result, throttle_ms, request.stats))

    def _outcome_of(self, header: RequestHeader, result: Respond | _NoResponse, throttle_ms: int,
                    stats: tuple[RequestStats, ...] | None = None) -> Outcome:
        if isinstance(result, Respond):
            response = result.body
            if stats:
                try:
                    stats[0].count_errors(response)
                except (IndexError, TypeError):  # an error code outside every known range
                    log.warning("Response to api key %d has an unknown error code",
                                header.api_key)
            if throttle_ms and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)
            outcome = _encode(header.correlation_id, header.api_key, header.api_version,
                              response)
            if throttle_ms and isinstance(outcome, SendResponse):
                outcome = SendResponse(outcome.parts, throttle_ms,
                                       hold=not client_throttles(header.api_key,
                                                                 header.api_version))
            return outcome
        return NoOp(throttle_ms)

    def serve_fast(self, fast: FastHandler, header: RequestHeader, frame: bytes,
                   body_offset: int, principal: KafkaPrincipal, connection_id: str,
                   on_outcome: Callable[[Outcome], None]
                   ) -> Outcome | bytes | ResponseParts | Parked | None:
        """A handler's fast path (``ApiSpec.fast``: Produce, Fetch), called by the connection
        for a request it has just read: where nothing is queued ahead of it (as ``submit``
        would dispatch it at once) and the broker neither times requests (metrics), injects
        faults nor enforces request quotas, the request is answered here, without a
        ``Request``, decoding its body into message classes, a context or a coroutine:
        the outcome, the whole response frame as bytes, or its parts (a list: a fetch's
        record data for sendfile, no throttle time); or Parked (a long-poll fetch
        waiting in the purgatory), whose outcome goes to ``on_outcome`` later, once. None:
        not served (nothing was done); the connection submits it."""
        if self.metrics is not None or self._faults is not None or not self.queue.empty():
            return None
        quotas = self._request_quotas
        if quotas is not None and quotas.enabled:
            return None
        try:
            result = fast(self._broker, header, frame, body_offset, principal)
        except Exception:
            log.exception("Handler for api key %d v%d (correlation id %d, client %s) failed; "
                          "closing connection %s", header.api_key, header.api_version,
                          header.correlation_id, header.client_id, connection_id)
            return CloseConnection("handler error")
        if (result is None or type(result) is bytes or type(result) is list
                or isinstance(result, CloseConnection)):
            return result
        if isinstance(result, Parked):
            result.answer_via = self._deliver  # Parked.deliver calls it with these
            result.header = header
            result.on_outcome = on_outcome
            result.connection_id = connection_id
            return result
        return self._fast_outcome(header, result)

    def throttles_produce(self) -> bool:
        """Whether a producer_byte_rate quota is configured: then a connection starts its
        Produce requests one at a time (an answer's throttle time mutes it before the next
        is read, as in Kafka), not a buffered run of them together (broker.network.connection)."""
        return self._broker.quotas.produce.enabled

    def _fast_outcome(self, header: RequestHeader, result: FastResult) -> Outcome:
        if isinstance(result, list):
            return SendResponse(result)
        if isinstance(result, bytes):
            return SendResponse([result])
        if isinstance(result, CloseConnection):
            return result
        return self._outcome_of(header, result, result.throttle_ms)

    def _deliver_fast(self, header: RequestHeader, on_outcome: Callable[[Outcome], None],
                      connection_id: str, result: FastResult) -> None:
        """The answer of a request the fast path parked, once it completed."""
        try:
            outcome = self._fast_outcome(header, result)
        except Exception:
            log.exception("Response to api key %d v%d (correlation id %d, client %s) failed; "
                          "closing connection %s", header.api_key, header.api_version,
                          header.correlation_id, header.client_id, connection_id)
            outcome = CloseConnection("handler error")
        on_outcome(outcome)


def _deliver_later(delay_s: float, deliver: Callable[[Outcome], None], outcome: Outcome) -> None:
    asyncio.get_running_loop().call_later(delay_s, deliver, outcome)


@types.coroutine
def timed(awaitable: Awaitable[Any], spent_ns: list[int]) -> Generator[Any, Any, Any]:
    """Await ``awaitable``, adding to ``spent_ns[0]`` the time spent running its steps (not
    the time it waits, e.g. parked in the purgatory): Kafka's request handler thread time."""
    steps = awaitable.__await__()
    to_send: Any = None
    to_throw: BaseException | None = None
    while True:
        started = time.perf_counter_ns()
        try:
            awaited = steps.throw(to_throw) if to_throw is not None else steps.send(to_send)
        except StopIteration as stop:
            spent_ns[0] += time.perf_counter_ns() - started
            return stop.value
        spent_ns[0] += time.perf_counter_ns() - started
        try:
            to_send, to_throw = (yield awaited), None
        except BaseException as exc:  # delivered into the coroutine (cancellation included)
            to_send, to_throw = None, exc


class _Resumed(Coroutine[Any, Any, None]):
    """The rest of ``run``, whose first step has already run and yielded ``awaited`` (what
    it waits on), for a task to drive: the task's first step gets ``awaited``, every later
    one goes to ``run``. A cancellation, even before that first step, is thrown into
    ``run``, so its handler always sees it (and closes the connection)."""

    __slots__ = ("_awaited", "_run", "_started")

    def __init__(self, run: Coroutine[Any, Any, None], awaited: Any) -> None:
        self._run = run
        self._awaited = awaited
        self._started = False

    def send(self, value: Any) -> Any:
        if not self._started:
            self._started = True
            awaited, self._awaited = self._awaited, None
            return awaited
        return self._run.send(value)

    def __next__(self) -> Any:  # what a task calls to send None
        return self.send(None)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        self._started = True
        self._awaited = None
        if val is None and tb is None:
            return self._run.throw(typ)
        return self._run.throw(typ, val, tb)

    def close(self) -> None:
        self._run.close()

    def __await__(self) -> Generator[Any, None, None]:
        raise TypeError("driven by a task only")


def _encode(correlation_id: int, api_key: int, api_version: int, body: object) -> Outcome:
    try:
        parts = encode_response(correlation_id, api_key, api_version, body)  # type: ignore[arg-type]
    except (ProtocolError, ValueError, TypeError) as exc:
        log.exception("Cannot encode the response to api key %d v%d", api_key, api_version)
        return CloseConnection(f"response does not encode: {exc}")
    return SendResponse(parts)

"""The contract between the network layer and the API handlers.

A handler module registers one API key and the version range it fully implements::

    @api(ApiKey.PRODUCE, min_version=3, max_version=9, request=ProduceRequest)
    async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> HandlerResult: ...

The IO worker decodes the body with ``spec.request.decode(body, version)`` and awaits the
handler, which returns one of a small closed set (Kafka's RequestChannel: Send, NoOp, Close):

- ``Respond(body)``: a generated response message, encoded for the request's version;
- ``NO_RESPONSE``: nothing is written (Produce with acks=0), the connection is unmuted
  (``no_response(throttle_ms)``: after the throttle time);
- ``CloseConnection(reason)``: the connection is closed and the reason logged.

A handler whose answer must wait (acks=all, long-poll fetch, join) awaits a delayed
operation in the purgatory; the connection stays muted meanwhile, so each connection's
responses go out strictly in request order. ApiVersions is built from ``REGISTRY``, so
what is advertised is exactly what is implemented.

Handler modules are imported on first use: ``broker.handlers.index`` says which module
handles each key and its versions (checked against the module's ``@api`` when it loads),
so start-up imports only what its first requests need.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from broker.handlers.index import HANDLER_INDEX
from broker.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from broker.services import Broker
    from protocol.fileslice import ResponseParts
    from protocol.frames import RequestHeader


class RequestContext:
    """What a handler knows about the request besides its body. Read-only (``Final``): one is
    built per request, so it is a plain slotted class (a frozen dataclass's ``__init__``
    pays an ``object.__setattr__`` call per field)."""

    __slots__ = (
        "api_key",
        "api_version",
        "broker",
        "client_host",
        "client_id",
        "client_port",
        "connection_id",
        "correlation_id",
        "listener_name",
        "principal",
        "request_size_bytes",
        "security_protocol",
    )

    def __init__(self, broker: Broker, api_key: int, api_version: int, correlation_id: int,
                 client_id: str | None, client_host: str, client_port: int, connection_id: str,
                 principal: KafkaPrincipal = ANONYMOUS, listener_name: str = "PLAINTEXT",
                 security_protocol: str = "PLAINTEXT", request_size_bytes: int = 0) -> None:
        self.broker: Final = broker
        self.api_key: Final = api_key
        self.api_version: Final = api_version
        self.correlation_id: Final = correlation_id
        self.client_id: Final = client_id
        self.client_host: Final = client_host
        self.client_port: Final = client_port
        self.connection_id: Final = connection_id
        # who sent it (the connection's authenticated principal)
        self.principal: Final = principal
        self.listener_name: Final = listener_name  # the listener it came in on
        self.security_protocol: Final = security_protocol
        # the request's frame (client quotas count produce bytes)
        self.request_size_bytes: Final = request_size_bytes

    def __repr__(self) -> str:
        return (f"RequestContext(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r}, "
                f"connection_id={self.connection_id!r}, principal={self.principal})")


@dataclass(slots=True)  # not frozen: one per request, and frozen __init__ costs a setattr call per field
class Respond:
    body: Any  # a generated response message class instance (protocol.messages)
    # A client quota was exceeded: the connection reads no further request for this long
    # (the response carries throttle_time_ms; see broker.quota.throttling).
    throttle_ms: int = 0


@dataclass(frozen=True, slots=True)
class CloseConnection:
    reason: str


@dataclass(frozen=True, slots=True)
class _NoResponse:
    throttle_ms: int = 0  # acks=0 produce over its quota: mute the connection this long

    def __repr__(self) -> str:
        return "NO_RESPONSE" if not self.throttle_ms else f"NO_RESPONSE(throttle_ms={self.throttle_ms})"


NO_RESPONSE: Final = _NoResponse()


def no_response(throttle_ms: int = 0) -> _NoResponse:
    return _NoResponse(throttle_ms) if throttle_ms else NO_RESPONSE

HandlerResult: TypeAlias = "Respond | _NoResponse | CloseConnection"
Handler: TypeAlias = Callable[[RequestContext, Any], Awaitable["Respond | _NoResponse | CloseConnection"]]
# What a fast path answers: a result, the whole response frame as bytes, or its parts
# (bytes and the FileSlices of record data, size prefix and header included).
FastResult: TypeAlias = "Respond | _NoResponse | CloseConnection | bytes | ResponseParts"


class Parked:
    """A fast path's request that waits (a long-poll fetch parked in the purgatory, a produce
    waiting for the end of the turn's appends): it is answered later, exactly once, through
    ``deliver``. The request channel sets how (``answer_via`` with the request's header, the
    connection's outcome callback and id: slots, not a ``functools.partial`` of them made
    per request) as soon as the fast path returns this, before the loop runs anything else.
    The connection stays muted meanwhile, as for any request in flight (but for the Produce
    requests of a backlog, started behind it: broker.network.connection)."""

    __slots__ = ("answer_via", "connection_id", "header", "on_outcome", "send_frame")
    # Set with ``answer_via``; read only through it.
    header: RequestHeader
    on_outcome: Any  # the connection's Callable[[Outcome], None] (broker.network)
    connection_id: str

    def __init__(self) -> None:
        # (header, on_outcome, connection_id, result): the request channel's delivery.
        self.answer_via: Callable[[RequestHeader, Any, str, FastResult], None] | None = None
        # The connection's writer of an answer that is one response frame of bytes without a
        # throttle time, set by the connection: either it or ``deliver`` is called, once.
        self.send_frame: Callable[[bytes], None] | None = None

    def deliver(self, result: FastResult) -> None:
        """Answer the request with ``result`` (only once ``answer_via`` is set)."""
        answer_via = self.answer_via
        assert answer_via is not None
        answer_via(self.header, self.on_outcome, self.connection_id, result)


# A handler's fast path (see ApiSpec.fast): (broker, request header, frame, body offset,
# principal) -> the answer (FastResult), or Parked; None: not served here.
FastHandler: TypeAlias = Callable[
    ["Broker", "RequestHeader", bytes, int, KafkaPrincipal],
    "Respond | _NoResponse | CloseConnection | bytes | ResponseParts | Parked | None",
]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    request: type[Any]  # generated request class, has .decode(buf, version)
    handler: Handler
    # Serves the common request of this key at once, from the frame (no message classes,
    # context or coroutine), where the broker neither times requests nor injects faults
    # nor enforces request quotas; it answers exactly as ``handler`` would, and returns
    # None, having done nothing, for any request it does not serve.
    fast: FastHandler | None = None


# API key -> spec of every handler module loaded so far. A module in the index registers
# into _PENDING while it executes, and its spec moves here once its import is complete, so
# that a broker on another thread never finds a handler whose module is half executed.
LOADED_SPECS: dict[int, ApiSpec] = {}
_PENDING: dict[int, ApiSpec] = {}
_LOAD_LOCK = threading.Lock()


def _load(api_key: int) -> ApiSpec | None:
    """Import the module that handles ``api_key`` (it registers itself); None if none does."""
    entry = HANDLER_INDEX.get(api_key)
    if entry is None:
        return None
    with _LOAD_LOCK:
        spec = LOADED_SPECS.get(api_key)
        if spec is None:
            importlib.import_module(f"broker.handlers.{entry.module}")
            spec = _PENDING.pop(api_key, None)
            if spec is None:
                raise RuntimeError(
                    f"broker.handlers.{entry.module} did not register API key {api_key}")
            LOADED_SPECS[api_key] = spec
    return spec


def find_spec(api_key: int) -> ApiSpec | None:
    """The spec of ``api_key``, its module imported on first use; None: no handler."""
    spec = LOADED_SPECS.get(api_key)
    return spec if spec is not None else _load(api_key)


class HandlerRegistry(Mapping[int, ApiSpec]):
    """API key -> spec, for every key with a handler: the indexed modules (loaded when a
    key is looked up, all of them when the mapping is walked) and any registered outside
    the index (tests). The request path calls ``find_spec``; ApiVersions reads ``ranges``,
    which loads nothing."""

    def __getitem__(self, api_key: int) -> ApiSpec:
        spec = find_spec(api_key)
        if spec is None:
            raise KeyError(api_key)
        return spec

    def __contains__(self, api_key: object) -> bool:
        return api_key in LOADED_SPECS or api_key in HANDLER_INDEX

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(HANDLER_INDEX.keys() | LOADED_SPECS.keys()))

    def __len__(self) -> int:
        return len(HANDLER_INDEX.keys() | LOADED_SPECS.keys())

    def ranges(self) -> list[tuple[int, int, int]]:
        """(api key, min version, max version) of every key, sorted, without loading."""
        found = {key: (e.min_version, e.max_version) for key, e in HANDLER_INDEX.items()}
        for key, spec in LOADED_SPECS.items():
            found[key] = (spec.min_version, spec.max_version)
        return [(key, lo, hi) for key, (lo, hi) in sorted(found.items())]

    def names(self) -> dict[int, str]:
        """API key -> Kafka's name of the API, without loading."""
        found = {key: e.name for key, e in HANDLER_INDEX.items()}
        for key, spec in LOADED_SPECS.items():
            found[key] = spec.request.__name__.removesuffix("Request")
        return found

    def pop(self, api_key: int, default: ApiSpec | None = None) -> ApiSpec | None:
        """Unregister (tests that registered their own handlers)."""
        _PENDING.pop(api_key, None)
        return LOADED_SPECS.pop(api_key, default)


REGISTRY: Final = HandlerRegistry()


def api(
    api_key: int, *, min_version: int, max_version: int, request: type[Any],
    fast: FastHandler | None = None,
) -> Callable[[Handler], Handler]:
    """Register ``handler`` for ``api_key`` over ``[min_version, max_version]``, which must
    be the range ``HANDLER_INDEX`` lists for it (keys outside the index: tests)."""

    def register(handler: Handler) -> Handler:
        entry = HANDLER_INDEX.get(api_key)
        if entry is not None and (entry.min_version, entry.max_version) != (min_version,
                                                                            max_version):
            raise RuntimeError(
                f"API key {api_key}: {handler.__module__} registers versions {min_version}-"
                f"{max_version}, broker.handlers.index lists {entry.min_version}-"
                f"{entry.max_version}")
        if api_key in LOADED_SPECS or api_key in _PENDING:
            raise RuntimeError(f"API key {api_key} registered twice")
        if not 0 <= min_version <= max_version:
            raise RuntimeError(f"API key {api_key}: bad version range {min_version}-{max_version}")
        spec = ApiSpec(api_key, min_version, max_version, request, handler, fast)
        (LOADED_SPECS if entry is None else _PENDING)[api_key] = spec
        return handler

    return register

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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from broker.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from broker.services import Broker


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


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    request: type[Any]  # generated request class, has .decode(buf, version)
    handler: Handler


# API key -> its spec. Filled by the @api decorator when broker.handlers imports the modules.
REGISTRY: dict[int, ApiSpec] = {}


def api(
    api_key: int, *, min_version: int, max_version: int, request: type[Any]
) -> Callable[[Handler], Handler]:
    """Register ``handler`` for ``api_key`` over ``[min_version, max_version]``."""

    def register(handler: Handler) -> Handler:
        if api_key in REGISTRY:
            raise RuntimeError(f"API key {api_key} registered twice")
        if not 0 <= min_version <= max_version:
            raise RuntimeError(f"API key {api_key}: bad version range {min_version}-{max_version}")
        REGISTRY[api_key] = ApiSpec(api_key, min_version, max_version, request, handler)
        return handler

    return register

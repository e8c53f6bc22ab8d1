"""The HTTP endpoint: ``/metrics`` for Prometheus, ``/health`` and ``/ready`` for probes.

Served by ``wsgiref``'s single-threaded server in a daemon thread of its own (the event
loop may be busy, or blocked loading the logs at start-up, and the probes must still
answer), one request at a time, each bounded by ``HTTP_TIMEOUT_S``. ``/metrics`` is
``prometheus_client``'s WSGI app over this broker's own registry (content negotiation,
OpenMetrics, gzip and ``name[]`` filters are the library's).

Reading the broker happens on the event loop: the scrape thread hands the loop a function
(``call_soon_threadsafe``) that builds every metric family from the broker's state and
waits for it, at most ``LOOP_TIMEOUT_S``; the thread then renders the text. A loop that
does not answer in time makes ``/metrics`` answer 503 (so Prometheus's ``up`` shows it)
instead of serving half the metrics.

- ``/health`` (liveness): 200 while the process serves HTTP, with the broker state in the
  body; 503 only when the broker is RUNNING and its event loop does not answer within
  ``LOOP_TIMEOUT_S`` (a wedged loop serves no client). Start-up (log recovery can take
  long) is live.
- ``/ready`` (readiness): 200 once the broker state is RUNNING (logs loaded, listeners
  accepting) and ``readiness`` (set by the server) has no objection, else 503 with the
  state and the reason. In a cluster the server's objections are: not registered in
  ZooKeeper (before registration, after a session expiry until registered again, or cut
  off from ZooKeeper for longer than the session timeout ZooKeeper granted, which its
  min/maxSessionTimeout may make differ from the one requested), and no UpdateMetadata
  from the controller since the registration. ``readiness`` runs on the HTTP thread and only reads
  attributes (a busy event loop does not delay the probe).

Broker state (``view.BrokerState``, exported as ``kafka_server_kafkaserver_brokerstate``):
the server sets it from the loop; the HTTP thread only reads it (one int).

Process metrics (``process_*``: CPU seconds, resident memory, open descriptors) and
``python_*`` (GC, version) come from ``prometheus_client``'s own collectors.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import socketserver
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    make_wsgi_app,
)
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.metrics.view import BrokerState

log = logging.getLogger(__name__)

LOOP_TIMEOUT_S: Final = 10.0
HTTP_TIMEOUT_S: Final = 10.0


class LoopUnavailable(RuntimeError):
    """The event loop did not run the scrape in time (or is gone)."""


def parse_listener(value: str) -> tuple[str, int]:
    """``host:port`` (``[v6addr]:port``) -> (host, port); ValueError when malformed."""
    host, sep, port_text = value.strip().rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"expected host:port, got {value!r}")
    port = int(port_text)
    if port > 65535:
        raise ValueError(f"port {port} out of range")
    return host.strip("[]"), port


class _Server(WSGIServer):
    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN (a DNS lookup); not needed.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)
        self.setup_environ()


class _QuietHandler(WSGIRequestHandler):
    timeout = HTTP_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        """No access log (scrapes every few seconds would flood it)."""


class MetricsEndpoint:
    """Broker state, a registry of collectors and the HTTP server. See the module docstring."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.state = BrokerState.NOT_RUNNING
        self.registry = CollectorRegistry(auto_describe=False)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sources: list[Callable[[], Iterable[Metric]]] = []
        self._httpd: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        # Once RUNNING: None when ready, else why not (read on the HTTP thread).
        self.readiness: Callable[[], str | None] | None = None
        self.registry.register(_StateCollector(self))
        self.registry.register(_LoopCollector(self))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._metrics_app = make_wsgi_app(self.registry)

    # -- life cycle (the event loop's thread) ----------------------------------------------

    def start(self) -> tuple[str, int]:
        """Bind and serve in a daemon thread; returns the bound (host, port). OSError when
        the address cannot be bound."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET

        class Server(_Server):
            address_family = family

        self._httpd = make_server(self.host, self.port, self._app, server_class=Server,
                                  handler_class=_QuietHandler)
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.25},
                                        name="metrics-http", daemon=True)
        self._thread.start()
        return self.host, self.port

    def attach(self, loop: asyncio.AbstractEventLoop,
               sources: Iterable[Callable[[], Iterable[Metric]]]) -> None:
        """Read the broker through ``sources`` on ``loop`` from now on."""
        self._sources = list(sources)
        self._loop = loop

    def stop(self) -> None:
        """Stop serving (blocks up to the server's poll interval)."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=HTTP_TIMEOUT_S + 1)
            self._thread = None

    # -- the HTTP thread -------------------------------------------------------------------

    def on_loop(self, fn: Callable[[], list[Metric]], timeout_s: float = LOOP_TIMEOUT_S
                ) -> list[Metric]:
        """Run ``fn`` on the broker's event loop and return its result."""
        loop = self._loop
        if loop is None:
            raise LoopUnavailable("the broker is not serving yet")
        try:
            if asyncio.get_running_loop() is loop:
                return fn()  # called from the loop itself (tests)
        except RuntimeError:
            pass
        future: concurrent.futures.Future[list[Metric]] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError as exc:  # loop closed
            raise LoopUnavailable(str(exc)) from None
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise LoopUnavailable(f"the event loop did not answer within {timeout_s:.0f} s"
                                  ) from None

    def collect_from_loop(self) -> list[Metric]:
        if self.state is not BrokerState.RUNNING or not self._sources:
            return []
        sources = self._sources
        return self.on_loop(lambda: [m for source in sources for m in source()])

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            try:
                return self._metrics_app(environ, start_response)  # type: ignore[no-any-return]
            except LoopUnavailable as exc:
                log.warning("Metrics scrape failed: %s", exc)
                return _text(start_response, "503 Service Unavailable", f"{exc}\n")
            except Exception:
                log.exception("Metrics scrape failed")
                return _text(start_response, "500 Internal Server Error", "scrape failed\n")
        if path == "/health":
            return self._health(start_response)
        if path == "/ready":
            state = self.state
            if state is not BrokerState.RUNNING:
                return _text(start_response, "503 Service Unavailable",
                             f"not ready {state.name}\n")
            readiness = self.readiness
            reason = readiness() if readiness is not None else None
            if reason is not None:
                return _text(start_response, "503 Service Unavailable",
                             f"not ready {state.name}: {reason}\n")
            return _text(start_response, "200 OK", f"ready {state.name}\n")
        return _text(start_response, "404 Not Found", "try /metrics, /health or /ready\n")

    def _health(self, start_response: Callable[..., Any]) -> list[bytes]:
        state = self.state
        if state is BrokerState.RUNNING:
            try:
                self.on_loop(list)
            except LoopUnavailable as exc:
                return _text(start_response, "503 Service Unavailable", f"unhealthy: {exc}\n")
        return _text(start_response, "200 OK", f"alive {state.name}\n")


def _text(start_response: Callable[..., Any], status: str, body: str) -> list[bytes]:
    data = body.encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(data)))])
    return [data]


class _StateCollector(Collector):
    def __init__(self, endpoint: MetricsEndpoint) -> None:
        self._endpoint = endpoint

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("kafka_server_kafkaserver_brokerstate",
                                "Broker state, Kafka's BrokerState values (3 RUNNING) "
                                "(Kafka: KafkaServer BrokerState)",
                                value=int(self._endpoint.state))


class _LoopCollector(Collector):
    def __init__(self, endpoint: MetricsEndpoint) -> None:
        self._endpoint = endpoint

    def collect(self) -> Iterator[Metric]:
        yield from self._endpoint.collect_from_loop()

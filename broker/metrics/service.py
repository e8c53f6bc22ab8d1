"""The broker's metrics as one object the server builds from its configuration.

- ``metrics.prometheus.listener`` empty (the default): no endpoint, no topic counters, and
  requests are timed only if ``kafka.request.logger`` is enabled for DEBUG at start-up
  (the request log needs the stage times). ``prometheus_client`` and the modules built on
  it are not even imported then (they are ~5% of a single node's start-up).
- set (``host:port``; port 0 binds an ephemeral port): the endpoint serves ``/metrics``,
  ``/health`` and ``/ready``; requests are timed and topics counted.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING

from broker.metrics.view import REQUEST_LOGGER, BrokerState, BrokerView

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from broker.metrics.endpoint import MetricsEndpoint
    from broker.metrics.loop_idle import LoopIdle
    from broker.metrics.requests import RequestMetrics
    from broker.metrics.topics import BrokerTopicStats

log = logging.getLogger(__name__)

LISTENER_PROPERTY = "metrics.prometheus.listener"


def kafka_api_names() -> dict[int, str]:
    """API key -> Kafka's name for it (``ApiKeys.name``), for every registered handler."""
    from broker.handlers import REGISTRY

    return REGISTRY.names()


class BrokerMetrics:
    def __init__(self, listener: str) -> None:
        self.endpoint: MetricsEndpoint | None = None
        self.requests: RequestMetrics | None = None
        self.topic_stats: BrokerTopicStats | None = None
        self.loop_idle: LoopIdle | None = None
        if listener:
            from broker.metrics.endpoint import MetricsEndpoint, parse_listener
            from broker.metrics.loop_idle import LoopIdle
            from broker.metrics.topics import BrokerTopicStats

            self.endpoint = MetricsEndpoint(*parse_listener(listener))
            self.topic_stats = BrokerTopicStats()
            self.loop_idle = LoopIdle()
        if self.endpoint is not None or logging.getLogger(REQUEST_LOGGER).isEnabledFor(logging.DEBUG):
            from broker.metrics.requests import RequestMetrics

            self.requests = RequestMetrics(kafka_api_names())

    def start_endpoint(self, ready_stream: IO[str] | None) -> None:
        """Serve HTTP (before the logs load, so probes answer during start-up)."""
        if self.endpoint is None:
            return
        host, port = self.endpoint.start()
        shown = f"[{host}]" if ":" in host else host
        log.info("Metrics endpoint at http://%s:%d/metrics (also /health, /ready)", shown, port)
        if ready_stream is not None:
            print(f"minikafka: metrics at http://{shown}:{port}/metrics", file=ready_stream,
                  flush=True)
        self.endpoint.state = BrokerState.STARTING

    def set_state(self, state: BrokerState) -> None:
        if self.endpoint is not None:
            self.endpoint.state = state

    def serve(self, view: BrokerView,
              readiness: Callable[[], str | None] | None = None) -> None:
        """The broker is up: read it through ``view`` at scrape time; state RUNNING;
        ``/ready`` also asks ``readiness`` (None: ready, else why not)."""
        if self.endpoint is None:
            return
        self.endpoint.readiness = readiness
        sources: list[Callable[[], Iterable[Metric]]] = (
            [self.requests.collect] if self.requests is not None else [])
        if self.topic_stats is not None:
            sources.append(self.topic_stats.collect)
        if self.loop_idle is not None:
            self.loop_idle.start()
            sources.append(self.loop_idle.collect)
        from broker.metrics.collectors import COLLECTORS

        sources.extend(functools.partial(collect, view) for collect in COLLECTORS)
        self.endpoint.attach(asyncio.get_running_loop(), sources)
        self.endpoint.state = BrokerState.RUNNING

    async def stop(self) -> None:
        if self.loop_idle is not None:
            self.loop_idle.stop()
        if self.endpoint is not None:
            self.endpoint.state = BrokerState.NOT_RUNNING
            await asyncio.to_thread(self.endpoint.stop)

    def stop_now(self) -> None:
        """Start-up failed: stop serving (blocking, briefly)."""
        if self.endpoint is not None:
            self.endpoint.stop()

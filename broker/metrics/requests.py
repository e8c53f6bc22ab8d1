"""Per-request-type metrics and the request log (Kafka's ``RequestMetrics`` and
``kafka.request.logger``).

What a request is timed by (all ``time.monotonic_ns``, stamped on the ``Request`` only
while this object exists, i.e. metrics or the request log are on)::

    start_ns        the connection has the whole frame       (Kafka: startTimeNanos)
    dequeue_ns      dispatch begins (off the queue, or at once when it is empty)
    local_done_ns   the handler starts waiting on others (broker.metrics.stages), else
                    the handler returned                     (apiLocalCompleteTimeNanos)
    response_ns     the outcome is handed to the connection  (responseCompleteTimeNanos)
    end             the response is written (or dropped)     (endTimeNanos)

    RequestQueueTimeMs = dequeue - start      LocalTimeMs = local_done - dequeue
    RemoteTimeMs = response - local_done      ResponseQueueTimeMs = 0 (see below)
    ResponseSendTimeMs = end - response       TotalTimeMs = end - start

The outcome goes from the handler's task straight to the connection's transport (there is
no response queue between them), so ResponseQueueTimeMs is 0 by construction; it is kept
so dashboards built for Kafka find it. "Written" means handed to the transport (the rest
of a large response, with sendfile, when it is all out), as Kafka's send completes into
the socket buffer.

Fetch requests are counted twice, as in Kafka: under ``Fetch`` and under ``FetchConsumer``
or ``FetchFollower`` (replica id >= 0). Errors (``ErrorsPerSec``) are counted under the
API's own name from the response body (``response_errors``), ``NONE`` included.

Hot path cost (``record``, once per request): one bisect per stage over integer bounds
and a few list-slot increments on objects chosen before (``stats_for``: a list index);
no ``prometheus_client`` call, no lock, no dict or label lookup. Everything runs on the
event loop. ``collect`` turns the counts into metric families at scrape time.

Request log: when ``kafka.request.logger`` is enabled for DEBUG, each completed request
logs one line ``Completed request:{json}`` with Kafka's field names (requestHeader,
connection, totalTimeMs, requestQueueTimeMs, localTimeMs, remoteTimeMs, throttleTimeMs,
responseQueueTimeMs, sendTimeMs, securityProtocol, principal, listener) plus request (the
API's name), clientAddress, requestBytes, responseBytes and outcome.
Request and response bodies are not logged.
"""

from __future__ import annotations

import json
import logging
import time
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from typing import Any, Final

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric

from broker.handlers.base import CloseConnection
from broker.metrics.histogram import (
    NS_PER_MS,
    SIZE_BOUNDS,
    SIZE_SLOTS,
    TIME_BOUNDS_NS,
    TIME_SLOTS,
    add_size_histogram,
    add_time_histogram,
)
from broker.metrics.response_errors import ERROR_SLOTS, Counter, error_counter
from broker.network.request_channel import Request, SendResponse
from protocol.errors import ErrorCode
from protocol.fileslice import parts_length

REQUEST_LOG: Final = logging.getLogger("kafka.request.logger")

FETCH_KEY: Final = 1
VERSION_SLOTS: Final = 64  # request versions counted (Kafka's highest today is 17)

# Stages, in Kafka's order; the index is the histogram's slot block in RequestStats.times.
STAGES: Final = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs",
                 "ResponseSendTimeMs", "TotalTimeMs")
_QUEUE, _LOCAL, _REMOTE, _RESPONSE_QUEUE, _SEND, _TOTAL = (i * TIME_SLOTS for i in range(6))

_STAGE_HELP: Final = {
    "RequestQueueTimeMs": "time the request waited in the request queue",
    "LocalTimeMs": "time the request was processed by the broker itself",
    "RemoteTimeMs": "time the request waited on others (purgatory, rebalance, group writes)",
    "ResponseQueueTimeMs": "time the response waited in a response queue (none here: 0)",
    "ResponseSendTimeMs": "time to hand the response to the socket",
    "TotalTimeMs": "time from the whole request read to the response written",
}


def kafka_error_name(code: int) -> str:
    """Kafka's ``Errors`` name for a code (``NONE`` for 0)."""
    if code == 0:
        return "NONE"
    try:
        return ErrorCode(code).name
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR.name


class RequestStats:
    """One request name's counts (Kafka's RequestMetrics for ``request=<name>``)."""

    __slots__ = ("count_errors", "errors", "name", "size_sum", "sizes", "time_sums_ns",
                 "times", "versions")

    def __init__(self, name: str) -> None:
        self.name = name
        self.versions = [0] * VERSION_SLOTS
        self.times = [0] * (len(STAGES) * TIME_SLOTS)  # stage-major blocks of TIME_SLOTS
        self.time_sums_ns = [0] * len(STAGES)
        self.sizes = [0] * SIZE_SLOTS
        self.size_sum = 0
        self.errors = [0] * ERROR_SLOTS  # indexed by error code; -1 is the last slot
        self.count_errors: Counter | None = None  # built from the first response's class

    @property
    def requests(self) -> int:
        """Requests recorded (every version, also those outside ``VERSION_SLOTS``)."""
        return sum(self.times[_TOTAL:_TOTAL + TIME_SLOTS])


class RequestMetrics:
    """Request counts, stage histograms, sizes and errors per request name, on the loop."""

    def __init__(self, apis: Mapping[int, str]) -> None:
        """``apis``: API key -> Kafka's name for it (``ApiKeys.name``: "Produce", ...)."""
        # The request log's level is read once, here (minikafka changes no log level at
        # run time; Kafka's KIP-412 is not served).
        self.log_requests = REQUEST_LOG.isEnabledFor(logging.DEBUG)
        size = max(apis, default=0) + 1
        self._by_key: list[tuple[RequestStats, ...]] = [()] * size
        self._all: list[RequestStats] = []
        for key, name in sorted(apis.items()):
            stats = RequestStats(name)
            self._all.append(stats)
            self._by_key[key] = (stats,)
        fetch = self._by_key[FETCH_KEY] if size > FETCH_KEY else ()
        self._fetch_consumer = fetch + self._extra("FetchConsumer") if fetch else ()
        self._fetch_follower = fetch + self._extra("FetchFollower") if fetch else ()

    def _extra(self, name: str) -> tuple[RequestStats]:
        stats = RequestStats(name)
        self._all.append(stats)
        return (stats,)

    # -- hot path (the event loop) --------------------------------------------------------

    def stats_for(self, api_key: int, body: Any) -> tuple[RequestStats, ...]:
        """The stats a request of ``api_key`` with decoded ``body`` counts in (first: the
        API's own, where its errors go)."""
        if api_key == FETCH_KEY:
            follower = body.replica_id >= 0 or body.replica_state.replica_id >= 0
            return self._fetch_follower if follower else self._fetch_consumer
        return self._by_key[api_key]

    def count_errors(self, stats: RequestStats, body: Any) -> None:
        """Count the error codes of response ``body`` under ``stats`` (its API's)."""
        counter = stats.count_errors
        if counter is None:
            counter = stats.count_errors = error_counter(type(body))
        try:  # noqa: SIM105 - hot path: contextlib.suppress costs more than try
            counter(body, stats.errors)
        except (IndexError, TypeError):  # a code outside every known range: not counted
            pass

    def record(self, request: Request) -> None:
        """The request's response is written (or dropped): count it everywhere it counts."""
        end = time.monotonic_ns()
        start = request.start_ns
        dequeue = request.dequeue_ns or start
        response = request.response_ns or end
        local = request.local_done_ns or response
        queue_ns = dequeue - start
        local_ns = local - dequeue
        remote_ns = response - local
        send_ns = end - response
        total_ns = end - start
        body_bytes = len(request.frame) - request.body_offset
        version = request.header.api_version
        bounds = TIME_BOUNDS_NS
        find = bisect_left
        qi = _QUEUE + find(bounds, queue_ns)
        li = _LOCAL + find(bounds, local_ns)
        ri = _REMOTE + find(bounds, remote_ns)
        si = _SEND + find(bounds, send_ns)
        ti = _TOTAL + find(bounds, total_ns)
        zi = find(SIZE_BOUNDS, body_bytes)
        stats_list = request.stats
        if stats_list is None:  # never dispatched (e.g. closed on shutdown while queued)
            key = request.header.api_key
            stats_list = self._by_key[key] if 0 <= key < len(self._by_key) else ()
        for stats in stats_list:
            if 0 <= version < VERSION_SLOTS:
                stats.versions[version] += 1
            times = stats.times
            times[qi] += 1
            times[li] += 1
            times[ri] += 1
            times[si] += 1
            times[ti] += 1
            sums = stats.time_sums_ns  # ResponseQueueTimeMs (always 0) and the total's
            sums[0] += queue_ns        # sum are derived at scrape time
            sums[1] += local_ns
            sums[2] += remote_ns
            sums[4] += send_ns
            stats.sizes[zi] += 1
            stats.size_sum += body_bytes
        if self.log_requests:
            _log_request(request, stats_list, body_bytes, queue_ns, local_ns, remote_ns,
                         send_ns, total_ns)

    # -- scrape (on the loop, from broker.metrics.endpoint) ---------------------------------

    def collect(self) -> Iterator[Metric]:
        active = [s for s in self._all if s.requests]
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests per request type and version (Kafka: RequestMetrics RequestsPerSec)",
            labels=["request", "version"])
        for s in active:
            for version, count in enumerate(s.versions):
                if count:
                    requests.add_metric([s.name, str(version)], count)
        yield requests
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Error codes in responses per request type (Kafka: RequestMetrics ErrorsPerSec)",
            labels=["request", "error"])
        for s in active:
            for index, count in enumerate(s.errors):
                if count:
                    code = index if index < ERROR_SLOTS - 1 else -1
                    errors.add_metric([s.name, kafka_error_name(code)], count)
        yield errors
        for stage, stage_name in enumerate(STAGES):
            family = HistogramMetricFamily(
                f"kafka_network_requestmetrics_{stage_name.lower()}",
                f"{_STAGE_HELP[stage_name]}, ms (Kafka: RequestMetrics {stage_name})",
                labels=["request"])
            block = stage * TIME_SLOTS
            for s in active:
                counts = s.times[block:block + TIME_SLOTS]
                sum_ns = s.time_sums_ns[stage]
                if block == _RESPONSE_QUEUE:  # every request: 0 ms, in the first slot
                    counts[0] = s.requests
                elif block == _TOTAL:  # the stages add up to the total exactly
                    sum_ns = sum(s.time_sums_ns)
                add_time_histogram(family, [s.name], counts, sum_ns)
            yield family
        sizes = HistogramMetricFamily(
            "kafka_network_requestmetrics_requestbytes",
            "Request body sizes, bytes (Kafka: RequestMetrics RequestBytes)", labels=["request"])
        for s in active:
            add_size_histogram(sizes, [s.name], s.sizes, s.size_sum)
        yield sizes


def _ms(ns: int) -> float:
    return round(ns / NS_PER_MS, 3)


def _log_request(request: Request, stats: tuple[RequestStats, ...], body_bytes: int,
                 queue_ns: int, local_ns: int, remote_ns: int, send_ns: int,
                 total_ns: int) -> None:
    header = request.header
    outcome = request.outcome
    response_bytes = 0
    if isinstance(outcome, SendResponse):
        response_bytes = parts_length(outcome.parts)
        result = "response"
    elif isinstance(outcome, CloseConnection):
        result = f"connection closed: {outcome.reason}"
    else:
        result = "no response"
    desc = {
        "requestHeader": {
            "requestApiKey": header.api_key,
            "requestApiVersion": header.api_version,
            "correlationId": header.correlation_id,
            "clientId": header.client_id,
        },
        "request": stats[0].name if stats else str(header.api_key),
        "connection": request.connection_id,
        "clientAddress": f"{request.client_host}:{request.client_port}",
        "requestBytes": body_bytes,
        "responseBytes": response_bytes,
        "outcome": result,
        "totalTimeMs": _ms(total_ns),
        "requestQueueTimeMs": _ms(queue_ns),
        "localTimeMs": _ms(local_ns),
        "remoteTimeMs": _ms(remote_ns),
        "throttleTimeMs": 0,
        "responseQueueTimeMs": 0.0,
        "sendTimeMs": _ms(send_ns),
        "securityProtocol": request.security_protocol,
        "principal": str(request.principal),
        "listener": request.listener_name,
    }
    REQUEST_LOG.debug("Completed request:%s", json.dumps(desc, separators=(",", ":")))

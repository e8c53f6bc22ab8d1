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

Hot path cost (``record``, once per request): a table lookup by bit length per stage
(``broker.metrics.histogram``) and a few increments in one flat list per request name,
chosen at dispatch (``stats_for``: a list index); stages that are 0 (not queued, not
parked: most requests) skip the lookup; no ``prometheus_client`` call, no lock, no dict
or label lookup. Measured with valgrind under P5's load (``bench.metrics_p5_instructions``):
metrics on add ~13,800 user-space instructions to a ~330,000-instruction P5 produce
request (+4.2%), of which this function is about 8,000 (each list increment is ~400:
the interpreter's bytecodes, not the int allocation); bench/results/metrics-cost/README.md.
Everything runs on the event loop. ``collect`` turns the counts into metric families at
scrape time.

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
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric

from broker.handlers.base import CloseConnection
from broker.metrics.histogram import (
    NS_PER_MS,
    TIME_SLOT,
    TIME_SLOTS,
    add_time_histogram,
)
from broker.metrics.response_errors import ERROR_SLOTS, error_counter
from broker.metrics.view import REQUEST_LOGGER
from broker.network.request_channel import Request, SendResponse
from protocol.errors import ErrorCode
from protocol.fileslice import parts_length

REQUEST_LOG: Final = logging.getLogger(REQUEST_LOGGER)
_now = time.monotonic_ns

FETCH_KEY: Final = 1
VERSION_SLOTS: Final = 64  # request versions counted (Kafka's highest today is 17)

# Stages, in Kafka's order.
STAGES: Final = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs",
                 "ResponseSendTimeMs", "TotalTimeMs")
# RequestStats.c, one flat list of ints per request name (fewest lookups on the hot path):
#   [stage * TIME_SLOTS + slot]  time histograms, stage-major, in STAGES order
#   [_SUM + 0..3]                time sums in ns: queue, local, remote, send (the response
#                                queue's is 0, the total's is their sum)
#   [_VERSIONS + version]        requests per version (VERSION_SLOTS)
_QUEUE, _LOCAL, _REMOTE, _RESPONSE_QUEUE, _SEND, _TOTAL = (i * TIME_SLOTS for i in range(6))
_SUM: Final = len(STAGES) * TIME_SLOTS
_SUM_QUEUE, _SUM_LOCAL, _SUM_REMOTE, _SUM_SEND = (_SUM + i for i in range(4))
_VERSIONS: Final = _SUM + 4
_SLOTS: Final = _VERSIONS + VERSION_SLOTS
_QUEUE_SLOT, _LOCAL_SLOT, _REMOTE_SLOT, _, _SEND_SLOT, _TOTAL_SLOT = (
    [block + slot for slot in TIME_SLOT] for block in range(0, 6 * TIME_SLOTS, TIME_SLOTS))
# Stages whose zeros are not recorded (slot 0 gets every request not counted elsewhere).
_ZEROS_IMPLIED: Final = frozenset({_QUEUE, _REMOTE, _RESPONSE_QUEUE})
# Where each stage's time sum is (None: always 0; the total: the sum of the others).
_STAGE_SUM: Final = (_SUM_QUEUE, _SUM_LOCAL, _SUM_REMOTE, None, _SUM_SEND, None)

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

    __slots__ = ("c", "count_errors", "errors", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.c = [0] * _SLOTS  # layout above
        self.errors = [0] * ERROR_SLOTS  # indexed by error code; -1 is the last slot
        # count_errors(response body): counts its error codes into ``errors``; the first
        # call builds the counter for the response's class and puts it in its own place.
        # IndexError for a code outside every known range (the caller skips that response).
        self.count_errors: Callable[[Any], None] = self._first_count

    def _first_count(self, body: Any) -> None:
        self.count_errors = error_counter(type(body), self.errors)
        self.count_errors(body)

    @property
    def requests(self) -> int:
        """Requests recorded (every version, also those outside ``VERSION_SLOTS``)."""
        return sum(self.c[_TOTAL:_TOTAL + TIME_SLOTS])

    def histogram(self, stage: int) -> tuple[list[int], int]:
        """(slot counts, sum in ns) of stage ``stage`` (an index into STAGES)."""
        c = self.c
        block = stage * TIME_SLOTS
        counts = c[block:block + TIME_SLOTS]
        where = _STAGE_SUM[stage]
        if block in _ZEROS_IMPLIED:  # requests not recorded here took 0 ms: slot 0
            counts[0] += self.requests - sum(counts)
        if where is None and block == _RESPONSE_QUEUE:
            return counts, 0
        if where is None:  # the total: the stages add up to it exactly
            return counts, c[_SUM_QUEUE] + c[_SUM_LOCAL] + c[_SUM_REMOTE] + c[_SUM_SEND]
        return counts, c[where]


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
        # by_key[api_key]: the stats of a request whatever its body (what stats_for answers
        # without looking), () for Fetch, whose depend on the body: the dispatch reads this
        # list and calls stats_for only when it is empty (one call fewer per request).
        self.by_key: list[tuple[RequestStats, ...]] = list(self._by_key)
        if size > FETCH_KEY:
            self.by_key[FETCH_KEY] = ()

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

    def record(self, request: Request) -> None:
        """The request's response is written (or dropped): count it everywhere it counts."""
        end = _now()
        start = request.start_ns
        dequeue = request.dequeue_ns or start
        response = request.response_ns or end
        local = request.local_done_ns or response
        local_ns = local - dequeue
        send_ns = end - response
        total_ns = end - start
        # Slot tables per stage, offsets included: slot of v is TABLE[(v - 1).bit_length()].
        li = _LOCAL_SLOT[(local_ns - 1).bit_length()]
        si = _SEND_SLOT[(send_ns - 1).bit_length()]
        ti = _TOTAL_SLOT[(total_ns - 1).bit_length()]
        # Most requests are neither queued nor parked: a 0 there is not recorded (the scrape
        # puts every request without a recorded value in slot 0).
        queue_ns = dequeue - start
        remote_ns = response - local
        # Dispatch chose the stats after decoding the body: the version is one the handler
        # serves (< VERSION_SLOTS). Requests never dispatched (closed while queued at
        # shutdown, ApiVersions in an unsupported version) are counted by key here.
        vi = _VERSIONS + request.header.api_version
        stats_list = request.stats
        if stats_list is None:
            key = request.header.api_key
            stats_list = self._by_key[key] if 0 <= key < len(self._by_key) else ()
            if not 0 <= request.header.api_version < VERSION_SLOTS:
                vi = -1
        for stats in stats_list:
            c = stats.c
            c[li] += 1
            c[si] += 1
            c[ti] += 1
            c[_SUM_LOCAL] += local_ns
            c[_SUM_SEND] += send_ns
            if vi >= 0:
                c[vi] += 1
            if queue_ns:
                c[_QUEUE_SLOT[(queue_ns - 1).bit_length()]] += 1
                c[_SUM_QUEUE] += queue_ns
            if remote_ns:
                c[_REMOTE_SLOT[(remote_ns - 1).bit_length()]] += 1
                c[_SUM_REMOTE] += remote_ns
        if self.log_requests:
            _log_request(request, stats_list, queue_ns, local_ns, remote_ns, send_ns, total_ns)

    # -- scrape (on the loop, from broker.metrics.endpoint) ---------------------------------

    def collect(self) -> Iterator[Metric]:
        active = [s for s in self._all if s.requests]
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests per request type and version (Kafka: RequestMetrics RequestsPerSec)",
            labels=["request", "version"])
        for s in active:
            for version, count in enumerate(s.c[_VERSIONS:_VERSIONS + VERSION_SLOTS]):
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
            for s in active:
                counts, sum_ns = s.histogram(stage)
                add_time_histogram(family, [s.name], counts, sum_ns)
            yield family


def _ms(ns: int) -> float:
    return round(ns / NS_PER_MS, 3)


def _log_request(request: Request, stats: tuple[RequestStats, ...], queue_ns: int,
                 local_ns: int, remote_ns: int, send_ns: int, total_ns: int) -> None:
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
        "requestBytes": len(request.frame) - request.body_offset,
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

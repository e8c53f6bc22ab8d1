"""broker.metrics without a broker: error counting over every response schema, the stage
arithmetic and bucket placement of RequestMetrics, topic totals that never go down, and
the listener property's validation."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.config import BrokerConfig, ConfigError
from broker.metrics.requests import RequestMetrics, kafka_error_name
from broker.metrics.response_errors import ERROR_SLOTS, error_counter
from broker.metrics.topics import BrokerTopicStats
from broker.network.request_channel import NoOp, Request
from broker.partition import AppendResult, ReadResult
from protocol.errors import ErrorCode
from protocol.frames import RequestHeader
from tests.unit.message_strategies import all_message_versions, message_strategy

RESPONSES = [(name, v) for name, v in all_message_versions() if name.endswith("Response")]


def _walk(obj: Any, visit: Any) -> None:
    """Every dataclass instance reachable from obj (an independent, reflective oracle)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        visit(obj)
        for f in dataclasses.fields(obj):
            _walk(getattr(obj, f.name), visit)
    elif isinstance(obj, list):
        for item in obj:
            _walk(item, visit)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(RESPONSES).flatmap(
    lambda nv: st.tuples(st.just(nv), message_strategy(*nv))))
def test_error_counter_counts_every_error_code(case: tuple[tuple[str, int], Any]) -> None:
    _name_version, message = case
    expected = [0] * ERROR_SLOTS

    def normalize_and_count(obj: Any) -> None:
        if hasattr(obj, "error_code"):
            obj.error_code = abs(obj.error_code) % 130 - 1  # -1..128: codes Kafka has
            expected[obj.error_code] += 1

    _walk(message, normalize_and_count)
    counts = [0] * ERROR_SLOTS
    error_counter(type(message), counts)(message)
    assert counts == expected


def test_error_names_are_kafkas() -> None:
    assert kafka_error_name(0) == "NONE"
    assert kafka_error_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert kafka_error_name(3) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert kafka_error_name(9999) == "UNKNOWN_SERVER_ERROR"


def _request(api_key: int, version: int, *, start: int, dequeue: int, local: int,
             response: int, body_bytes: int) -> Request:
    header = RequestHeader(api_key, version, 7, "client")
    request = Request(header, b"h" * 10 + b"b" * body_bytes, 10, "conn", "127.0.0.1", 5000,
                      lambda _outcome: None)
    request.start_ns, request.dequeue_ns = start, dequeue
    request.local_done_ns, request.response_ns = local, response
    request.outcome = NoOp()
    return request


def _samples(metrics: RequestMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in metrics.collect() for s in family.samples}


def test_stages_land_in_their_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = RequestMetrics({0: "Produce", 1: "Fetch", 18: "ApiVersions"})
    ms = 1_000_000
    # queue 0.2 ms, local 3 ms, remote 40 ms (parked), send 0.02 ms: total 43.22 ms
    request = _request(0, 9, start=100 * ms, dequeue=100 * ms + ms // 5,
                       local=103 * ms + ms // 5, response=143 * ms + ms // 5, body_bytes=300)
    request.stats = metrics.stats_for(0, None)
    monkeypatch.setattr("broker.metrics.requests._now", lambda: 143 * ms + ms // 5 + 20_000)
    metrics.record(request)
    s = _samples(metrics)

    def bucket(stage: str, le: str) -> float:
        return s[(f"kafka_network_requestmetrics_{stage}_bucket", (("le", le), ("request", "Produce")))]

    # Bounds double from 2**13 ns: 0.131072, 0.262144, ... 2.097152, 4.194304, ... ms
    assert bucket("requestqueuetimems", "0.131072") == 0
    assert bucket("requestqueuetimems", "0.262144") == 1
    assert bucket("localtimems", "2.097152") == 0 and bucket("localtimems", "4.194304") == 1
    assert bucket("remotetimems", "33.554432") == 0 and bucket("remotetimems", "67.108864") == 1
    assert bucket("responsequeuetimems", "0.008192") == 1
    assert bucket("responsesendtimems", "0.016384") == 0
    assert bucket("responsesendtimems", "0.032768") == 1
    assert bucket("totaltimems", "33.554432") == 0 and bucket("totaltimems", "67.108864") == 1
    total_sum = s[("kafka_network_requestmetrics_totaltimems_sum", (("request", "Produce"),))]
    assert total_sum == pytest.approx(43.22)
    assert s[("kafka_network_requestmetrics_requests_total",
              (("request", "Produce"), ("version", "9")))] == 1
    # No other request type is exported before it is seen.
    assert not any(labels and ("request", "Fetch") in labels for _n, labels in s)


@pytest.mark.parametrize("bits", [13, 20, 35])
def test_slots_by_bit_length_match_the_bounds(bits: int) -> None:
    from bisect import bisect_left

    from broker.metrics.histogram import TIME_BOUNDS_NS, TIME_SLOT

    for value in (0, 1, (1 << bits) - 1, 1 << bits, (1 << bits) + 1, 1 << 40):
        assert TIME_SLOT[(value - 1).bit_length()] == bisect_left(TIME_BOUNDS_NS, value)


def test_fetch_counts_twice_and_odd_versions_still_count() -> None:
    from protocol.messages.fetch import FetchRequest

    metrics = RequestMetrics({1: "Fetch", 18: "ApiVersions"})
    consumer = FetchRequest(replica_id=-1)
    follower = FetchRequest(replica_id=2)
    for body in (consumer, consumer, follower):
        request = _request(1, 11, start=1, dequeue=1, local=2, response=3, body_bytes=50)
        request.stats = metrics.stats_for(1, body)
        metrics.record(request)
    # ApiVersions in a version it does not serve is answered without being dispatched.
    odd = _request(18, 300, start=1, dequeue=1, local=2, response=3, body_bytes=5)
    metrics.record(odd)
    s = _samples(metrics)

    def count(request: str) -> float:
        return s[("kafka_network_requestmetrics_totaltimems_count", (("request", request),))]

    assert (count("Fetch"), count("FetchConsumer"), count("FetchFollower")) == (3, 2, 1)
    # A version beyond the counted range still counts in the histograms (consistently).
    assert count("ApiVersions") == 1
    assert s[("kafka_network_requestmetrics_responsequeuetimems_count",
              (("request", "ApiVersions"),))] == 1


class _FakePartition:
    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.topic_stats = None


def test_topic_totals_never_go_down_when_a_topic_goes() -> None:
    stats = BrokerTopicStats()
    a, b = _FakePartition("a"), _FakePartition("b")
    ok = AppendResult(ErrorCode.NO_ERROR, base_offset=10, last_offset=14)
    stats.on_append(a, 100, ok)  # type: ignore[arg-type]
    stats.on_append(b, 50, ok)  # type: ignore[arg-type]
    stats.on_append(b, 70, AppendResult(ErrorCode.MESSAGE_TOO_LARGE))  # type: ignore[arg-type]
    stats.on_read(a, ReadResult(ErrorCode.NO_ERROR), follower=False)  # type: ignore[arg-type]
    totals = stats.totals()
    assert (totals.bytes_in, totals.messages_in, totals.bytes_rejected) == (150, 10, 70)
    assert totals.total_produce == 3 and totals.failed_produce == 0 and totals.total_fetch == 1
    stats.remove_topic("a", [a])  # type: ignore[list-item]
    assert a.topic_stats is None and stats.get("a") is None
    after = stats.totals()
    assert (after.bytes_in, after.messages_in, after.total_fetch) == (150, 10, 1)


@pytest.mark.parametrize("value", ["127.0.0.1:9404", "0.0.0.0:0", "[::1]:9404", "localhost:1", ""])
def test_listener_property_accepts(value: str) -> None:
    config = BrokerConfig.from_properties({"metrics.prometheus.listener": value})
    assert config.values["metrics.prometheus.listener"] == value


@pytest.mark.parametrize("value", ["9404", ":9404", "host:port", "127.0.0.1:70000", "a b:1"])
def test_listener_property_refuses(value: str) -> None:
    with pytest.raises(ConfigError, match=r"metrics\.prometheus\.listener"):
        BrokerConfig.from_properties({"metrics.prometheus.listener": value})

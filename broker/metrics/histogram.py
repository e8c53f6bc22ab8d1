"""Bucket bounds, and turning plain bucket counts into a Prometheus histogram at scrape time.

The hot path never touches a ``prometheus_client`` object: it finds a bucket with
``bisect`` over integer bounds (nanoseconds or bytes) and adds one to a slot of a plain
list (``RequestStats``); this module turns such counts into ``HistogramMetricFamily``
samples when Prometheus scrapes. Layout of one histogram's counts: ``len(bounds) + 1``
slots, slot ``i`` counts values ``<= bounds[i]`` (and ``> bounds[i-1]``), the last slot the
values above every bound (``+Inf``); ``bisect_left(bounds, v)`` is the slot of ``v``.

Bounds are Kafka's units where Kafka names one (``...TimeMs``: milliseconds, exported as
such; ``RequestBytes``: bytes), kept in integers internally (ns, bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from prometheus_client.metrics_core import HistogramMetricFamily

NS_PER_MS: Final = 1_000_000

# Request stage and flush times, in ms: fine at the bottom (this broker answers small
# requests in tens of microseconds), up to Kafka's 30 s request timeout.
TIME_BOUNDS_MS: Final[tuple[float, ...]] = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500,
    5000, 10000, 30000,
)
TIME_BOUNDS_NS: Final[tuple[int, ...]] = tuple(int(b * NS_PER_MS) for b in TIME_BOUNDS_MS)
TIME_SLOTS: Final = len(TIME_BOUNDS_NS) + 1

# Request sizes, in bytes: 64 B .. 64 MiB in powers of 4.
SIZE_BOUNDS: Final[tuple[int, ...]] = tuple(64 * 4**i for i in range(11))
SIZE_SLOTS: Final = len(SIZE_BOUNDS) + 1

_TIME_LE: Final = (*(repr(float(b)) for b in TIME_BOUNDS_MS), "+Inf")
_SIZE_LE: Final = (*(repr(float(b)) for b in SIZE_BOUNDS), "+Inf")


def _cumulative(les: Sequence[str], counts: Sequence[int]) -> list[tuple[str, float]]:
    buckets: list[tuple[str, float]] = []
    total = 0
    for le, count in zip(les, counts, strict=True):
        total += count
        buckets.append((le, float(total)))
    return buckets


def add_time_histogram(family: HistogramMetricFamily, labels: Sequence[str],
                       counts: Sequence[int], sum_ns: int) -> None:
    """Add one labelled time histogram (``TIME_SLOTS`` counts, sum in ns) in ms."""
    family.add_metric(list(labels), _cumulative(_TIME_LE, counts), sum_ns / NS_PER_MS)


def add_size_histogram(family: HistogramMetricFamily, labels: Sequence[str],
                       counts: Sequence[int], sum_bytes: int) -> None:
    """Add one labelled size histogram (``SIZE_SLOTS`` counts, sum in bytes)."""
    family.add_metric(list(labels), _cumulative(_SIZE_LE, counts), float(sum_bytes))

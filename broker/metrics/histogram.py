"""Bucket bounds, slot lookup by bit length, and plain counts turned into Prometheus
histograms at scrape time.

The hot path never touches a ``prometheus_client`` object: it finds a value's bucket with
``TABLE[(value - 1).bit_length()]`` (bounds are powers of two, so the bit length of
``value - 1`` says which bound is the first at or above ``value``: one int method and one
list index, about half the cost of ``bisect`` over the bounds) and adds one to a slot of
a plain list (``RequestStats``); this module turns such counts into
``HistogramMetricFamily`` samples when Prometheus scrapes. Layout of one histogram's
counts: ``len(bounds) + 1`` slots, slot ``i`` counts values ``<= bounds[i]`` (and
``> bounds[i-1]``), the last slot the values above every bound (``+Inf``).

Times are in Kafka's unit (``...TimeMs``: milliseconds, exported as such), kept in
integer nanoseconds internally.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from prometheus_client.metrics_core import HistogramMetricFamily

NS_PER_MS: Final = 1_000_000


def power_of_two_bounds(low_bits: int, high_bits: int, step: int = 1) -> tuple[int, ...]:
    """2**low_bits, 2**(low_bits + step), ... up to 2**high_bits."""
    return tuple(1 << b for b in range(low_bits, high_bits + 1, step))


def slot_table(bounds: Sequence[int]) -> list[int]:
    """``table[(v - 1).bit_length()]`` is the slot of ``v >= 0`` for power-of-two bounds:
    the first bound ``>= v``, or ``len(bounds)`` (``+Inf``)."""
    bits = [b.bit_length() - 1 for b in bounds]  # bound i is 2**bits[i]
    # (v - 1).bit_length() <= k  <=>  v <= 2**k (for v >= 1; v = 0 gives 1)
    return [next((i for i, k in enumerate(bits) if n <= k), len(bounds)) for n in range(65)]


# Request stage times: 2**13 ns (8.2 us: this broker answers small requests in tens of
# microseconds) to 2**35 ns (34 s, beyond Kafka's 30 s request timeout), doubling.
TIME_BOUNDS_NS: Final = power_of_two_bounds(13, 35)
TIME_SLOT: Final = slot_table(TIME_BOUNDS_NS)
TIME_SLOTS: Final = len(TIME_BOUNDS_NS) + 1


def le_labels(bounds: Sequence[int], scale: int = 1) -> tuple[str, ...]:
    """The ``le`` label of each slot (bounds divided by ``scale``), ``+Inf`` last."""
    return (*(repr(b / scale) for b in bounds), "+Inf")


TIME_LE: Final = le_labels(TIME_BOUNDS_NS, NS_PER_MS)


def add_histogram(family: HistogramMetricFamily, labels: Sequence[str], les: Sequence[str],
                  counts: Sequence[int], total: float) -> None:
    """Add one labelled histogram from per-slot counts (cumulated here) and its sum."""
    buckets: list[tuple[str, float]] = []
    running = 0
    for le, count in zip(les, counts, strict=True):
        running += count
        buckets.append((le, float(running)))
    family.add_metric(list(labels), buckets, total)


def add_time_histogram(family: HistogramMetricFamily, labels: Sequence[str],
                       counts: Sequence[int], sum_ns: int) -> None:
    """Add one labelled request-time histogram (``TIME_SLOTS`` counts, sum in ns) in ms."""
    add_histogram(family, labels, TIME_LE, counts, sum_ns / NS_PER_MS)

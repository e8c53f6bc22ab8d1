"""Small statistics: percentiles (nearest rank) and the median/min/max summary of runs."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def percentiles(values: Sequence[float], points: Sequence[float]) -> list[float]:
    """Nearest-rank percentiles of values for each point in [0, 100]; NaN when values is empty."""
    if not values:
        return [math.nan for _ in points]
    ordered = sorted(values)
    out: list[float] = []
    for point in points:
        if not 0.0 <= point <= 100.0:
            raise ValueError(f"percentile {point} outside [0, 100]")
        rank = max(1, math.ceil(point / 100.0 * len(ordered)))
        out.append(ordered[rank - 1])
    return out


@dataclass(frozen=True, slots=True)
class Summary:
    """Median, min and max of repeated runs."""

    median: float
    low: float
    high: float
    runs: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        if not values:
            return cls(math.nan, math.nan, math.nan, 0)
        return cls(statistics.median(values), min(values), max(values), len(values))

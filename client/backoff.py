"""Kafka's ExponentialBackoff: ``initial * 2**failures``, capped at ``maximum``, +-20% jitter."""

from __future__ import annotations

import random
from typing import Final

JITTER: Final = 0.2
MULTIPLIER: Final = 2


def backoff_ms(failures: int, initial_ms: int, maximum_ms: int) -> float:
    """The wait after ``failures`` failures in a row (0 -> about ``initial_ms``)."""
    if initial_ms <= 0:
        return 0.0
    term = initial_ms * MULTIPLIER ** min(failures, 32)
    capped = min(term, max(maximum_ms, initial_ms))
    return float(capped * random.uniform(1 - JITTER, 1 + JITTER))

"""Kafka's sampled rate (``org.apache.kafka.common.metrics.stats.Rate`` over ``SampledStat``)
and its throttle time (``QuotaUtils.throttleTime``), to the same arithmetic.

A rate keeps ``samples`` windows of ``window_ms`` each. Recording adds to the current
window, starting a new one (at the recording time, not aligned) once the current one is
``window_ms`` old; windows older than ``samples * window_ms`` are cleared before use. The
rate is the sum over the windows divided by the elapsed time since the oldest window began,
counted as at least ``samples - 1`` whole windows (so a fresh client is measured over ten
seconds by default, not over its first instant) and at least 1 ms.

When a recording makes the rate exceed the quota bound, the throttle time is the time, with
nothing more recorded, for the rate to fall back to the bound:
``(rate - bound) / bound * window_size_ms``.

Thread-safety: none (the broker's event loop).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: float
    value: float = 0.0


class SampledRate:
    def __init__(self, samples: int, window_ms: int, now_ms: float) -> None:
        assert samples >= 1 and window_ms >= 1
        self.samples = samples
        self.window_ms = window_ms
        self._samples = [_Sample(now_ms)]
        self._current = 0

    def _purge(self, now_ms: float) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire_age:
                sample.start_ms = now_ms
                sample.value = 0.0

    def record(self, value: float, now_ms: float) -> None:
        sample = self._samples[self._current]
        if now_ms >= sample.start_ms + self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms))
            else:
                self._samples[self._current].start_ms = now_ms
                self._samples[self._current].value = 0.0
            sample = self._samples[self._current]
        sample.value += value

    def window_size_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        oldest = min(s.start_ms for s in self._samples)
        elapsed = now_ms - oldest
        full_windows = int(elapsed // self.window_ms)
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1.0)

    def rate_per_s(self, now_ms: float) -> float:
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def throttle_time_ms(rate: float, bound: float, window_size_ms: float) -> int:
    """Kafka's QuotaUtils.throttleTime."""
    if rate <= bound or bound <= 0:
        return 0
    return round((rate - bound) / bound * window_size_ms)

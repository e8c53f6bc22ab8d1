"""Log lines at a bounded rate: one condition, one line per interval, not one per event.

``ThrottledLog(logger, interval_s).log(level, key, msg, *args)`` writes the first line
for ``key`` at once, then at most one line per ``interval_s`` for that key, suffixed with
how many were suppressed since the last one written. Keys name a condition ("disk full
in /data"); at most ``max_keys`` are remembered (the oldest is forgotten).

``BurstLog`` bounds lines by count instead (a token bucket): for events that differ in
every detail but come in floods (bad frames from a fuzzer, rejected connections).

Thread-safety: a lock guards the table (storage reports from thread-pool workers too).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

DEFAULT_INTERVAL_S = 60.0
MAX_KEYS = 1024


class ThrottledLog:
    def __init__(self, logger: logging.Logger, interval_s: float = DEFAULT_INTERVAL_S, *,
                 max_keys: int = MAX_KEYS,
                 clock_s: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self.interval_s = interval_s
        self._max_keys = max_keys
        self._clock_s = clock_s
        self._lock = threading.Lock()
        self._last: OrderedDict[Hashable, tuple[float, int]] = OrderedDict()  # key -> (at, suppressed)

    def log(self, level: int, key: Hashable, msg: str, *args: object) -> bool:
        """Write the line unless one for ``key`` went out less than ``interval_s`` ago;
        True if written."""
        now = self._clock_s()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last[0] < self.interval_s:
                self._last[key] = (last[0], last[1] + 1)
                return False
            suppressed = last[1] if last is not None else 0
            self._last[key] = (now, 0)
            self._last.move_to_end(key)
            while len(self._last) > self._max_keys:
                self._last.popitem(last=False)
        if suppressed:
            msg += " (%d more like this in the last %.0f s)"
            args = (*args, suppressed, self.interval_s)
        self._logger.log(level, msg, *args)
        return True

    def warning(self, key: Hashable, msg: str, *args: object) -> bool:
        return self.log(logging.WARNING, key, msg, *args)

    def error(self, key: Hashable, msg: str, *args: object) -> bool:
        return self.log(logging.ERROR, key, msg, *args)


class BurstLog:
    """Log lines at a bounded rate whatever they say: a token bucket of ``burst`` lines,
    refilled at ``rate_per_s``. For events a client can cause at will (bad frames,
    rejected connections): the first ones are logged in full, a flood costs at most
    ``rate_per_s`` lines a second, and the next line written says how many were dropped."""

    def __init__(self, logger: logging.Logger, *, rate_per_s: float = 10.0, burst: int = 100,
                 clock_s: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._rate_per_s = rate_per_s
        self._burst = burst
        self._clock_s = clock_s
        self._tokens = float(burst)
        self._last_s = clock_s()
        self._dropped = 0
        self._lock = threading.Lock()

    def log(self, level: int, msg: str, *args: object) -> bool:
        """Write the line if the bucket allows; True if written."""
        with self._lock:
            now = self._clock_s()
            self._tokens = min(float(self._burst),
                               self._tokens + (now - self._last_s) * self._rate_per_s)
            self._last_s = now
            if self._tokens < 1.0:
                self._dropped += 1
                return False
            self._tokens -= 1.0
            dropped, self._dropped = self._dropped, 0
        if dropped:
            msg += " (%d similar lines dropped: more than %.0f a second)"
            args = (*args, dropped, self._rate_per_s)
        self._logger.log(level, msg, *args)
        return True

    def warning(self, msg: str, *args: object) -> bool:
        return self.log(logging.WARNING, msg, *args)

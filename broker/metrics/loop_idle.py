"""How idle the event loop is (Kafka's NetworkProcessorAvgIdlePercent and
RequestHandlerAvgIdlePercent).

Kafka's network threads and request handler threads are here one event loop, so both
metrics report the same thing: the share of wall time over the last ``WINDOW_S`` seconds
in which the loop's thread used no CPU (``1 - thread CPU time / wall time``), a fraction
from 0 (saturated) to 1 (idle), as Kafka's are. A task samples the loop thread's CPU clock
(``time.thread_time``) once per ``SAMPLE_S``; the scrape compares now with the oldest
sample. Blocking calls made on the loop (which the design avoids) would count as idle, and
so would time the loop was ready to run but waited for a core.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterator
from typing import Final

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

SAMPLE_S: Final = 1.0
WINDOW_S: Final = 30.0


class LoopIdle:
    def __init__(self) -> None:
        self._samples: deque[tuple[float, float]] = deque(maxlen=int(WINDOW_S / SAMPLE_S) + 1)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start sampling (on the event loop whose thread is measured)."""
        self._samples.append((time.monotonic(), time.thread_time()))
        self._task = asyncio.get_running_loop().create_task(self._sample(), name="loop-idle")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _sample(self) -> None:
        while True:
            await asyncio.sleep(SAMPLE_S)
            self._samples.append((time.monotonic(), time.thread_time()))

    def idle_fraction(self) -> float:
        """Over the window, from the loop's thread (call it on the loop)."""
        if not self._samples:
            return 1.0
        wall0, cpu0 = self._samples[0]
        wall = time.monotonic() - wall0
        if wall <= 0:
            return 1.0
        return min(1.0, max(0.0, 1.0 - (time.thread_time() - cpu0) / wall))

    def collect(self) -> Iterator[Metric]:
        idle = self.idle_fraction()
        yield GaugeMetricFamily(
            "kafka_network_socketserver_networkprocessoravgidle_percent",
            "Share of the last 30 s the event loop's thread was idle, 0-1 (Kafka: "
            "SocketServer NetworkProcessorAvgIdlePercent; one loop serves the network)",
            value=idle)
        yield GaugeMetricFamily(
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
            "Share of the last 30 s the event loop's thread was idle, 0-1 (Kafka: "
            "KafkaRequestHandlerPool RequestHandlerAvgIdlePercent; handlers run on the loop)",
            value=idle)

"""Periodic log work (Kafka's ``LogManager`` scheduler tasks), run off the event loop.

Jobs, each on its own interval, each run in the default thread pool (they block on disk):

- retention (``log.retention.check.interval.ms``, default 5 min): ``retention_pass`` deletes
  segments past ``retention.ms`` / ``retention.bytes`` and directories whose
  ``file.delete.delay.ms`` passed;
- flush (every ``log.flush.scheduler.interval.ms``, at most every 1 s): fsyncs the logs
  whose ``flush.ms`` passed (``flush.messages`` is checked on append by the log). Which
  logs are due is asked on the loop (a cheap check); a thread gets work only when some
  are: with ``flush.ms`` at its default (never) no thread is woken each second, whose
  interpreter-lock hand-offs with the loop delayed requests;
- recovery-point and log-start-offset checkpoints (``log.flush.offset.checkpoint.interval.ms``,
  default 60 s) and high watermarks (``replica.high.watermark.checkpoint.interval.ms``,
  default 5 s).

A failing job is logged and retried at its next interval; it never stops the broker.
``stop()`` cancels the timers and waits for a job that is running, so the log manager's
shutdown never overlaps one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from broker.config import BrokerConfig
from storage.manager import LogManager
from storage.naming import TopicPartition

log = logging.getLogger(__name__)

MAX_FLUSH_CHECK_INTERVAL_MS = 1000

HighWatermarks = Callable[[], Mapping[TopicPartition, int]]


class LogMaintenance:
    def __init__(self, config: BrokerConfig, log_manager: LogManager,
                 high_watermarks: HighWatermarks | None = None) -> None:
        self._config = config
        self._log_manager = log_manager
        self._high_watermarks = high_watermarks
        self._tasks: list[asyncio.Task[None]] = []
        # Jobs in their threads (one per periodic task at most): stop() waits for them.
        self._running: set[asyncio.Future[object]] = set()

    def start(self) -> None:
        cfg = self._config
        lm = self._log_manager
        # Each entry makes, on the event loop, the blocking call that then runs in a thread
        # (high watermarks are read on the loop, where the replica manager lives), or None
        # when there is nothing to do.
        jobs: list[tuple[str, int, Callable[[], Callable[[], object] | None]]] = [
            ("retention", cfg.get_int("log.retention.check.interval.ms"), self._retention),
            ("flush", min(cfg.get_int("log.flush.scheduler.interval.ms"), MAX_FLUSH_CHECK_INTERVAL_MS),
             self._flush),
            ("checkpoints", cfg.get_int("log.flush.offset.checkpoint.interval.ms"),
             lambda: lm.write_checkpoints),
        ]
        if self._high_watermarks is not None:
            jobs.append(("high-watermarks",
                         cfg.get_int("replica.high.watermark.checkpoint.interval.ms"),
                         self._write_high_watermarks))
        for name, interval_ms, job in jobs:
            if interval_ms > 0:
                self._tasks.append(asyncio.create_task(self._every(name, interval_ms, job),
                                                       name=f"log-{name}"))

    def _flush(self) -> Callable[[], object] | None:
        due = self._log_manager.due_for_flush()
        if not due:
            return None
        return lambda: self._log_manager.flush_logs(due)

    def _retention(self) -> Callable[[], object]:
        hws = dict(self._high_watermarks()) if self._high_watermarks is not None else None
        return lambda: self._log_manager.retention_pass(
            None, (lambda tp: hws.get(tp)) if hws is not None else None)

    def _write_high_watermarks(self) -> Callable[[], object]:
        assert self._high_watermarks is not None
        hws = dict(self._high_watermarks())
        return lambda: self._log_manager.write_high_watermarks(hws)

    async def _every(self, name: str, interval_ms: int,
                     make_job: Callable[[], Callable[[], object] | None]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            job = make_job()
            if job is None:
                continue
            # Shielded: cancelling this task (stop) does not abandon a job mid-run in its thread.
            running = asyncio.ensure_future(asyncio.to_thread(job))
            self._running.add(running)
            try:
                result = await asyncio.shield(running)
            except asyncio.CancelledError:
                raise
            except Exception:  # one failed pass must not stop the others
                log.exception("Log %s job failed; retrying in %d ms", name, interval_ms)
                continue
            finally:
                if running.done():
                    self._running.discard(running)
            if isinstance(result, int) and result:
                log.info("Log %s job: %d done", name, result)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        running, self._running = self._running, set()
        if running:  # jobs already in their threads finish first
            await asyncio.gather(*running, return_exceptions=True)

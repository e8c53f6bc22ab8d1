"""The broker's side of the log cleaner (``storage.cleaner``): its settings and what the
cleaner threads must learn from the event loop.

- ``cleaner_config``: ``log.cleaner.enable``, ``log.cleaner.threads``,
  ``log.cleaner.dedupe.buffer.size``, ``log.cleaner.io.buffer.load.factor``,
  ``log.cleaner.io.buffer.size``, ``log.cleaner.io.max.bytes.per.second``,
  ``log.cleaner.backoff.ms`` and ``message.max.bytes``, by Kafka's names and defaults,
  each from the dynamic broker configs where one is set.
- ``CleanerReconfigurer``: the cleaner as a dynamic broker config reconfigurable (Kafka's
  ``LogCleaner`` is a ``BrokerReconfigurable``): ``check`` refuses a change as Kafka does
  (``reconfiguration_error``: at least 1 thread, at least half and at most double the
  threads in force; KafkaConfig's ``log.cleaner.dedupe.buffer.size must be at least 1MB
  per cleaner thread``; and the dedupe buffer must hold one key per thread, as at
  start-up), ``apply`` restarts the running cleaner with the new settings
  (``LogCleaner.reconfigure``) in a worker thread, one restart at a time, the newest
  settings last. Without a running cleaner (``log.cleaner.enable=false``) nothing is
  checked beyond the values' types and nothing restarts, as in Kafka.
- ``partition_states_from_loop``: the cleaner's ``PartitionStates``. The high watermark
  (the last stable offset here) and the producers' last offsets are the partition's, owned
  by the event loop; a cleaner thread asks for them with one call scheduled on the loop
  (``call_soon_threadsafe``) and waits at most ``STATE_TIMEOUT_S``. A partition the loop
  does not host, or no answer in time, means no cleaning of it on that pass.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Mapping, Sequence

from broker.config import PROPERTIES, BrokerConfig, ConfigError, PropValue, parse_value
from broker.replica_manager import ReplicaManager
from storage.cleaner import CleanerConfig, LogCleaner, PartitionState, PartitionStates
from storage.cleaner_stats import LastRecord
from storage.naming import TopicPartition
from storage.offset_map import OffsetMap

log = logging.getLogger(__name__)

STATE_TIMEOUT_S = 5.0
RESTARTS_MAX = 100  # restarts one change of settings may chain (newer ones arriving)
MIN_DEDUPE_BYTES_PER_THREAD = 1024 * 1024  # KafkaConfig's require (exclusive)


def _number(config: BrokerConfig, dynamic: Mapping[str, str], name: str) -> int | float:
    raw = dynamic.get(name)
    value: PropValue = config.values[name] if raw is None else parse_value(PROPERTIES[name], raw)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"{name} is not a number")
    return value


def cleaner_config(config: BrokerConfig,
                   dynamic: Mapping[str, str] | None = None) -> CleanerConfig:
    """The cleaner's settings, ``dynamic`` values (dynamic broker configs, checked) over
    the static ones; ``ConfigError`` (start-up fails, naming the property) when
    ``log.cleaner.dedupe.buffer.size`` cannot hold one key per cleaner thread."""
    result = _cleaner_config(config, dynamic or {})
    if result.enable and result.threads > 0:
        try:
            OffsetMap(result.dedupe_buffer_size // result.threads,
                      result.dedupe_buffer_load_factor)
        except ValueError as exc:
            raise ConfigError(f"Invalid value {result.dedupe_buffer_size} for configuration "
                              f"log.cleaner.dedupe.buffer.size: {exc}") from None
    return result


def _cleaner_config(config: BrokerConfig, dynamic: Mapping[str, str]) -> CleanerConfig:
    def number(name: str) -> int | float:
        return _number(config, dynamic, name)

    return CleanerConfig(
        enable=config.get_bool("log.cleaner.enable"),
        threads=int(number("log.cleaner.threads")),
        dedupe_buffer_size=int(number("log.cleaner.dedupe.buffer.size")),
        dedupe_buffer_load_factor=float(number("log.cleaner.io.buffer.load.factor")),
        io_buffer_size=int(number("log.cleaner.io.buffer.size")),
        max_message_size=int(number("message.max.bytes")),
        max_io_bytes_per_second=float(number("log.cleaner.io.max.bytes.per.second")),
        backoff_ms=int(number("log.cleaner.backoff.ms")),
    )


def reconfiguration_error(current: CleanerConfig, new: CleanerConfig) -> str | None:
    """Why the running cleaner may not take ``new`` (Kafka's KafkaConfig require on the
    dedupe buffer, then ``LogCleaner.validateReconfiguration``), None when it may."""
    threads, now = new.threads, current.threads
    if threads < 1:  # Kafka divides by it first (an ArithmeticException); its own rule
        return "Log cleaner threads should be at least 1"
    if new.dedupe_buffer_size // threads <= MIN_DEDUPE_BYTES_PER_THREAD:
        return ("requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB "
                "per cleaner thread.")
    if threads < now // 2:
        return f"Log cleaner threads cannot be reduced to less than half the current value {now}"
    if threads > now * 2:
        return (f"Log cleaner threads cannot be increased to more than double the current "
                f"value {now}")
    return None


class CleanerReconfigurer:
    """The running cleaner's side of the dynamic broker configs (see the module
    docstring). On the event loop; ``attach`` the cleaner once it runs."""

    def __init__(self, config: BrokerConfig) -> None:
        self._config = config
        self._cleaner: LogCleaner | None = None
        self._target: CleanerConfig | None = None  # the settings in force or being applied
        self._restarting: asyncio.Task[None] | None = None

    def initial(self, dynamic: Mapping[str, str]) -> CleanerConfig:
        """The settings to start the cleaner with: the dynamic values over the static
        ones, or the static ones alone if together they cannot run (logged)."""
        try:
            return cleaner_config(self._config, dynamic)
        except ConfigError as exc:
            log.error("log cleaner: ignoring the dynamic configs %s: %s", dict(dynamic), exc)
            return cleaner_config(self._config)

    def attach(self, cleaner: LogCleaner | None) -> None:
        self._cleaner = cleaner
        self._target = None if cleaner is None else cleaner.config

    def check(self, dynamic: Mapping[str, str]) -> str | None:
        """Why the cleaner may not take these dynamic values, None when it may."""
        if self._cleaner is None or self._target is None:
            return None
        try:
            new = cleaner_config(self._config, dynamic)
        except ConfigError as exc:
            return str(exc)
        return reconfiguration_error(self._target, new)

    def apply(self, dynamic: Mapping[str, str]) -> None:
        """Restart the cleaner with these (checked) dynamic values, if they change it."""
        if self._cleaner is None or self._target is None:
            return
        new = cleaner_config(self._config, dynamic)
        if new == self._target:
            return
        log.info("Reconfiguring the log cleaner: %s", new)
        self._target = new
        if self._restarting is None or self._restarting.done():
            self._restarting = asyncio.get_running_loop().create_task(
                self._restart(self._cleaner), name="log-cleaner-reconfiguration")

    async def _restart(self, cleaner: LogCleaner) -> None:
        for _ in range(RESTARTS_MAX):  # bounded: each turn applies the newest settings
            target = self._target
            if target is None or target == cleaner.config:
                return
            try:
                await asyncio.to_thread(cleaner.reconfigure, target)
            except Exception:  # the old threads stopped; the next change tries again
                log.exception("log cleaner: reconfiguration failed")
                return

    async def stop(self) -> None:
        """No restart from now on; wait for one in progress (before the cleaner shuts
        down)."""
        self._cleaner = self._target = None
        if self._restarting is not None:
            await asyncio.shield(self._restarting)


def _states(replica_manager: ReplicaManager,
            tps: Sequence[TopicPartition]) -> dict[TopicPartition, PartitionState]:
    out: dict[TopicPartition, PartitionState] = {}
    for tp in tps:
        p = replica_manager.get_partition(tp.topic, tp.partition)
        if p is None:
            continue
        producers = {
            pid: LastRecord(entry.last_offset if entry.last_offset >= 0 else None,
                            entry.producer_epoch)
            for pid, entry in p.producer_state.producers.items()
        }
        out[tp] = PartitionState(p.last_stable_offset, producers)
    return out


def partition_states_from_loop(loop: asyncio.AbstractEventLoop,
                               replica_manager: ReplicaManager) -> PartitionStates:
    def states(tps: Sequence[TopicPartition]) -> Mapping[TopicPartition, PartitionState]:
        answer: concurrent.futures.Future[dict[TopicPartition, PartitionState]] = (
            concurrent.futures.Future())

        def collect() -> None:
            if answer.set_running_or_notify_cancel():
                try:
                    answer.set_result(_states(replica_manager, tps))
                except Exception as exc:  # handed to the cleaner thread
                    answer.set_exception(exc)

        try:
            loop.call_soon_threadsafe(collect)
            return answer.result(timeout=STATE_TIMEOUT_S)
        except (RuntimeError, concurrent.futures.TimeoutError) as exc:
            answer.cancel()
            log.info("log cleaner: no partition state from the event loop (%s); skipping a pass",
                     exc or type(exc).__name__)
            return {}

    return states

"""The broker's side of the log cleaner (``storage.cleaner``): its settings and what the
cleaner threads must learn from the event loop.

- ``cleaner_config``: ``log.cleaner.enable``, ``log.cleaner.threads``,
  ``log.cleaner.dedupe.buffer.size``, ``log.cleaner.io.buffer.load.factor``,
  ``log.cleaner.io.buffer.size``, ``log.cleaner.io.max.bytes.per.second``,
  ``log.cleaner.backoff.ms`` and ``message.max.bytes``, by Kafka's names and defaults.
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

from broker.config import BrokerConfig, ConfigError
from broker.replica_manager import ReplicaManager
from storage.cleaner import CleanerConfig, PartitionState, PartitionStates
from storage.cleaner_stats import LastRecord
from storage.naming import TopicPartition
from storage.offset_map import OffsetMap

log = logging.getLogger(__name__)

STATE_TIMEOUT_S = 5.0


def _double(config: BrokerConfig, name: str) -> float:
    value = config.values[name]
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"{name} is not a number")
    return float(value)


def cleaner_config(config: BrokerConfig) -> CleanerConfig:
    """The cleaner's settings; ``ConfigError`` (start-up fails, naming the property) when
    ``log.cleaner.dedupe.buffer.size`` cannot hold one key per cleaner thread."""
    result = _cleaner_config(config)
    if result.enable and result.threads > 0:
        try:
            OffsetMap(result.dedupe_buffer_size // result.threads,
                      result.dedupe_buffer_load_factor)
        except ValueError as exc:
            raise ConfigError(f"Invalid value {result.dedupe_buffer_size} for configuration "
                              f"log.cleaner.dedupe.buffer.size: {exc}") from None
    return result


def _cleaner_config(config: BrokerConfig) -> CleanerConfig:
    return CleanerConfig(
        enable=config.get_bool("log.cleaner.enable"),
        threads=config.get_int("log.cleaner.threads"),
        dedupe_buffer_size=config.get_int("log.cleaner.dedupe.buffer.size"),
        dedupe_buffer_load_factor=_double(config, "log.cleaner.io.buffer.load.factor"),
        io_buffer_size=config.get_int("log.cleaner.io.buffer.size"),
        max_message_size=config.message_max_bytes,
        max_io_bytes_per_second=_double(config, "log.cleaner.io.max.bytes.per.second"),
        backoff_ms=config.get_int("log.cleaner.backoff.ms"),
    )


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

"""Topic operations that span the registry and the live partitions.

The registry is the source of truth, and every operation is ordered so that a crash at
any point leaves a state that start-up repairs by opening every registered partition
(broker.server does, creating the logs that are missing):

- create: registry first (durable), then one log per partition, led by this broker; a
  crash in between leaves a registered topic whose missing logs start-up creates;
- delete: the partitions first (storage renames their directories to ``-delete`` and
  removes them later), then the registry; a crash in between leaves the topic registered
  and empty (the client got no answer and may retry), never unregistered logs;
- add partitions: registry, then the new logs (as create);
- config change: registry, then the live logs (``update_log_config``).

Also the broker-config lookups the admin handlers share: the broker's explicitly set
properties (for config sources and synonyms) and the numbers auto-creation uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker import topic_config
from broker.topic_config import ResolvedConfig
from broker.topics import TopicError, TopicInfo, log_config_for
from protocol.errors import ErrorCode
from storage.naming import TopicPartition as StorageTopicPartition

if TYPE_CHECKING:
    from broker.services import Broker

log = logging.getLogger(__name__)


def explicit_broker_props(broker: Broker) -> dict[str, str]:
    """The broker properties set in server.properties or by --override (not defaults)."""
    return dict(broker.config.explicit)


def broker_id(broker: Broker) -> int:
    return broker.config.broker_id


def advertised_endpoint(broker: Broker, listener_name: str) -> tuple[str, int]:
    """(host, port) Metadata and DescribeCluster answer a client on ``listener_name`` with;
    an empty listener host is advertised as the machine's canonical host name, as Kafka does."""
    endpoint = broker.advertised_for(listener_name)
    host = endpoint.host or socket.getfqdn()
    return host, endpoint.port


def broker_rack(broker: Broker) -> str | None:
    rack = broker.config.values.get("broker.rack")
    return rack if isinstance(rack, str) and rack else None


def auto_create_enabled(broker: Broker) -> bool:
    return broker.config.auto_create_topics_enable


def default_num_partitions(broker: Broker) -> int:
    return broker.config.num_partitions


def default_replication_factor(broker: Broker) -> int:
    return broker.config.default_replication_factor


def topic_configs(broker: Broker, overrides: Mapping[str, str]) -> list[ResolvedConfig]:
    """Every topic config of a topic with ``overrides``, resolved, by name."""
    explicit = explicit_broker_props(broker)
    return [topic_config.resolve(name, overrides, explicit) for name in sorted(topic_config.TOPIC_CONFIGS)]


def create_topic(
    broker: Broker,
    name: str,
    num_partitions: int,
    replication_factor: int,
    configs: Mapping[str, str | None] | None = None,
) -> TopicInfo:
    """Register ``name`` and open its partitions; TopicError with Kafka's code on refusal.
    Runs wholly on the caller's thread (the handlers use ``create_topic_async``)."""
    info = broker.topics.create(name, num_partitions, replication_factor, configs)
    try:
        _open_partitions(broker, info, range(info.num_partitions))
    except Exception as exc:
        raise _rolled_back(broker, info, exc) from exc
    _log_created(info)
    return info


async def create_topic_async(
    broker: Broker,
    name: str,
    num_partitions: int,
    replication_factor: int,
    configs: Mapping[str, str | None] | None = None,
) -> TopicInfo:
    """``create_topic`` with its disk work (registry write, new logs: several fsyncs per
    partition) on a worker thread, so the event loop keeps serving other clients; admin
    changes are serialized by one lock so a concurrent delete cannot interleave."""
    async with _admin_lock():
        info = await asyncio.to_thread(
            broker.topics.create, name, num_partitions, replication_factor, configs)
        try:
            await asyncio.to_thread(_create_logs, broker, info, range(info.num_partitions))
            await _open_partitions_yielding(broker, info, range(info.num_partitions))
        except Exception as exc:
            raise _rolled_back(broker, info, exc) from exc
        _log_created(info)
        return info


def _require(broker: Broker, name: str) -> TopicInfo:
    info = broker.topics.get(name)
    if info is None:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         "This server does not host this topic-partition.")
    return info


def delete_topic(broker: Broker, name: str) -> TopicInfo:
    """Delete ``name``'s partition logs, then forget the topic (durably)."""
    info = _require(broker, name)
    for partition in range(info.num_partitions):
        broker.replica_manager.delete_partition(info.name, partition)
    broker.topics.delete(name)
    if broker.group_coordinator is not None:  # its committed offsets go too (issue 5)
        broker.group_coordinator.on_topic_deleted(name)
    log.info("deleted topic %s (id %s)", name, info.topic_id)
    return info


async def delete_topic_async(broker: Broker, name: str) -> TopicInfo:
    """``delete_topic`` yielding to the event loop between partitions (each deletion closes
    files, renames a directory and fsyncs the log dir), so other clients are not stalled."""
    async with _admin_lock():
        info = _require(broker, name)
        for partition in range(info.num_partitions):
            broker.replica_manager.delete_partition(info.name, partition)
            await asyncio.sleep(0)
        await asyncio.to_thread(broker.topics.delete, name)
        if broker.group_coordinator is not None:  # its committed offsets go too (issue 5)
            broker.group_coordinator.on_topic_deleted(name)
        log.info("deleted topic %s (id %s)", name, info.topic_id)
        return info


async def add_partitions_async(broker: Broker, name: str, total: int) -> TopicInfo:
    """Grow ``name`` to ``total`` partitions: registry, then the new logs (thread), then
    the new partitions are led here."""
    async with _admin_lock():
        old = broker.topics.check_add_partitions(name, total)
        info = await asyncio.to_thread(broker.topics.add_partitions, name, total)
        added = range(old.num_partitions, info.num_partitions)
        try:
            await asyncio.to_thread(_create_logs, broker, info, added)
            await _open_partitions_yielding(broker, info, added)
        except Exception as exc:
            # The registry already counts them: the next start-up opens what is missing.
            log.error("opening the new partitions of %s failed: %s", name, exc)
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"Cannot create the new logs of {name}: {exc}") from exc
        log.info("topic %s now has %d partitions", name, total)
        return info


async def set_topic_configs_async(
    broker: Broker, name: str, configs: Mapping[str, str | None]
) -> TopicInfo:
    """Replace the topic's overrides (registry write on a thread) and apply them to its
    live logs."""
    async with _admin_lock():
        info = await asyncio.to_thread(broker.topics.set_configs, name, configs)
        broker.replica_manager.update_log_config(name, log_config_for(broker.config, info))
        log.info("topic %s configs now %s", name, info.configs)
        return info


def _open_partitions(broker: Broker, info: TopicInfo, partitions: range) -> None:
    log_config = log_config_for(broker.config, info)
    for partition in partitions:
        broker.replica_manager.ensure_partition(info.name, partition, info.topic_id, log_config)


async def _open_partitions_yielding(broker: Broker, info: TopicInfo, partitions: range) -> None:
    log_config = log_config_for(broker.config, info)
    for partition in partitions:
        broker.replica_manager.ensure_partition(info.name, partition, info.topic_id, log_config)
        await asyncio.sleep(0)


def _create_logs(broker: Broker, info: TopicInfo, partitions: range) -> None:
    """Create the partitions' logs on disk (worker thread; LogManager is thread-safe), so
    ``ensure_partition`` on the loop finds them open."""
    log_config = log_config_for(broker.config, info)
    for partition in partitions:
        broker.log_manager.get_or_create_log(
            StorageTopicPartition(info.name, partition), log_config, topic_id=info.topic_id.bytes)


def _log_created(info: TopicInfo) -> None:
    log.info("created topic %s (id %s, %d partitions, configs %s)",
             info.name, info.topic_id, info.num_partitions, info.configs)


def _rolled_back(broker: Broker, info: TopicInfo, exc: Exception) -> TopicError:
    """Undo a half-made topic (partitions, then the registry entry); the error to answer."""
    log.error("creating the partitions of topic %s failed (%s); rolling back", info.name, exc)
    for partition in range(info.num_partitions):
        try:
            broker.replica_manager.delete_partition(info.name, partition)
            broker.log_manager.delete_log(StorageTopicPartition(info.name, partition))
        except Exception:
            log.exception("deleting %s-%d failed", info.name, partition)
    with contextlib.suppress(TopicError):
        broker.topics.delete(info.name)
    return TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot create the logs of {info.name}: {exc}")


# Serializes the admin changes that await (the broker process runs one event loop).
_ADMIN_LOCK = asyncio.Lock()


def _admin_lock() -> asyncio.Lock:
    return _ADMIN_LOCK

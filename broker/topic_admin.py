"""Topic operations that span the registry and the live partitions.

The registry is the source of truth, and every operation is ordered so that a crash at
any point leaves a state start-up repairs by opening every registered partition
(``open_registered_partitions``):

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

import contextlib
import logging
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker import topic_config
from broker.topic_config import ResolvedConfig
from broker.topics import TopicError, TopicInfo, log_config_for
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.services import Broker

log = logging.getLogger(__name__)


def explicit_broker_props(broker: Broker) -> dict[str, str]:
    """The broker properties set in server.properties or by --override (not defaults)."""
    return dict(broker.config.explicit)


def broker_id(broker: Broker) -> int:
    return broker.config.broker_id


def advertised_endpoint(broker: Broker) -> tuple[str, int]:
    """(host, port) Metadata and DescribeCluster answer with; an empty listener host is
    advertised as the machine's canonical host name, as Kafka does."""
    endpoint = broker.advertised
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
    """Register ``name`` and open its partitions; TopicError with Kafka's code on refusal."""
    info = broker.topics.create(name, num_partitions, replication_factor, configs)
    try:
        _open_partitions(broker, info, range(info.num_partitions))
    except Exception as exc:
        log.exception("creating the partitions of topic %s failed; rolling back", name)
        _drop(broker, info)
        raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot create the logs of {name}: {exc}") from exc
    log.info("created topic %s (id %s, %d partitions, configs %s)",
             name, info.topic_id, info.num_partitions, info.configs)
    return info


def delete_topic(broker: Broker, name: str) -> TopicInfo:
    """Delete ``name``'s partition logs, then forget the topic (durably)."""
    info = broker.topics.get(name)
    if info is None:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         "This server does not host this topic-partition.")
    for partition in range(info.num_partitions):
        broker.replica_manager.delete_partition(info.name, partition)
    broker.topics.delete(name)
    log.info("deleted topic %s (id %s)", name, info.topic_id)
    return info


def add_partitions(broker: Broker, name: str, total: int) -> TopicInfo:
    old = broker.topics.check_add_partitions(name, total)
    info = broker.topics.add_partitions(name, total)
    _open_partitions(broker, info, range(old.num_partitions, info.num_partitions))
    log.info("topic %s now has %d partitions", name, total)
    return info


def set_topic_configs(broker: Broker, name: str, configs: Mapping[str, str | None]) -> TopicInfo:
    """Replace the topic's overrides and apply them to its live logs."""
    info = broker.topics.set_configs(name, configs)
    broker.replica_manager.update_log_config(name, log_config_for(broker.config, info))
    log.info("topic %s configs now %s", name, info.configs)
    return info


def open_registered_partitions(broker: Broker) -> int:
    """Open (or create) every partition of every registered topic; returns the count.
    Logs on disk that no registered topic owns are left alone, with a warning."""
    count = 0
    hosted: set[tuple[str, int]] = set()
    for info in broker.topics.all():
        _open_partitions(broker, info, range(info.num_partitions))
        hosted.update((info.name, p) for p in range(info.num_partitions))
        count += info.num_partitions
    if broker.log_manager is not None:
        for tp in broker.log_manager.logs():
            if (tp[0], tp[1]) not in hosted:
                log.warning("log %s-%d belongs to no registered topic: not served", tp[0], tp[1])
    return count


def _open_partitions(broker: Broker, info: TopicInfo, partitions: range) -> None:
    log_config = log_config_for(broker.config, info)
    for partition in partitions:
        broker.replica_manager.ensure_partition(info.name, partition, info.topic_id, log_config)


def _drop(broker: Broker, info: TopicInfo) -> None:
    if broker.topics.get(info.name) is not None:
        with contextlib.suppress(TopicError):
            broker.topics.delete(info.name)
    for partition in range(info.num_partitions):
        try:
            broker.replica_manager.delete_partition(info.name, partition)
        except Exception:
            log.exception("deleting %s-%d failed", info.name, partition)

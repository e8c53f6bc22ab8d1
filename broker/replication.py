"""Replication's parts of a cluster broker, built from its configuration: the replica
fetchers (``broker.replica_fetcher``), the AlterPartition sender
(``broker.alter_partition``) and the ISR expiration task, attached to the replica
manager. A single node has none of them (its partitions have one replica).

Fetchers and AlterPartition connect to the peers' inter-broker listener as every
broker-to-broker client does (``broker.security.inter_broker``: TLS, SASL)."""

from __future__ import annotations

from collections.abc import Callable

from broker.alter_partition import AlterPartitionManager
from broker.config import BrokerConfig, ConfigError
from broker.metadata_cache import MetadataCache
from broker.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from broker.replica_manager import ReplicaManager
from broker.replication_quota import FOLLOWER_RATE, LEADER_RATE, apply_throttle_rates
from broker.security.inter_broker import inter_broker_client_properties


def fetcher_settings(config: BrokerConfig) -> FetcherSettings:
    return FetcherSettings(
        broker_id=config.broker_id,
        listener=config.inter_broker_listener_name,
        num_fetchers=max(1, config.get_int("num.replica.fetchers")),
        max_bytes=config.get_int("replica.fetch.max.bytes"),
        response_max_bytes=config.get_int("replica.fetch.response.max.bytes"),
        min_bytes=config.get_int("replica.fetch.min.bytes"),
        max_wait_ms=config.get_int("replica.fetch.wait.max.ms"),
        backoff_ms=config.get_int("replica.fetch.backoff.ms"),
        socket_timeout_ms=config.get_int("replica.socket.timeout.ms"),
        client_properties=inter_broker_client_properties(config))


RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"


def replica_selector(config: BrokerConfig) -> str | None:
    """replica.selector.class: Kafka's rack-aware selector, or none (the leader)."""
    value = config.values.get("replica.selector.class")
    if not value or value == LEADER_SELECTOR:
        return None
    if value != RACK_AWARE_SELECTOR:
        raise ConfigError(f"replica.selector.class: {value} is not available (known: "
                          f"{RACK_AWARE_SELECTOR}, {LEADER_SELECTOR})")
    return str(value)


def start(config: BrokerConfig, replica_manager: ReplicaManager, cache: MetadataCache,
          broker_epoch: Callable[[], int]) -> None:
    """Attach replication to ``replica_manager`` (before any LeaderAndIsr reaches it)."""
    replica_manager.fetchers = ReplicaFetcherManager(
        fetcher_settings(config), cache, replica_manager, broker_epoch)
    replica_manager.alter_partition = AlterPartitionManager(
        config.broker_id, broker_epoch, cache, config.inter_broker_listener_name,
        replica_manager.on_high_watermark_moved,
        request_timeout_ms=config.get_int("controller.socket.timeout.ms"),
        client_properties=inter_broker_client_properties(config))
    replica_manager.replica_selector = replica_selector(config)
    apply_throttle_rates(config, replica_manager, {
        LEADER_RATE: config.get_int(LEADER_RATE), FOLLOWER_RATE: config.get_int(FOLLOWER_RATE)})
    replica_manager.start_isr_expiration(config.get_int("replica.lag.time.max.ms"))

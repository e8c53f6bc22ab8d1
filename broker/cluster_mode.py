"""A broker in a ZooKeeper cluster (``zookeeper.connect`` set): what start-up and shutdown
add to the single node's (``broker.server`` calls these; Kafka's ``KafkaServer`` order).

- ``zk_controller(config, advertised)``: the broker's ``ZkController`` (its ZooKeeper
  session, registration, the controller it may become, the topic store in Kafka's znodes),
  with the controller's channel to the other brokers over the network;
- ``connect``: the session and the cluster id, before the logs load (a ZooKeeper that
  does not answer within ``zookeeper.connection.timeout.ms`` fails start-up here);
  ``check_cluster_id`` once they are loaded (``meta.properties`` naming another cluster
  fails start-up);
- ``register``: ``/brokers/ids/<id>`` once the listeners are bound (a duplicate id fails
  start-up here); then ``elect``; once the network serves, ``wait_for_metadata``: a bounded
  wait for the controller's first UpdateMetadata (it comes over the network, even from this
  broker's own controller), so the ready line means the broker knows the cluster (cut
  short when this broker refused it, e.g. CLUSTER_AUTHORIZATION_FAILED: nothing follows
  until the controller's next change);
  ``not_ready_reason``: what ``/ready`` of the metrics endpoint checks while the broker
  runs (registered, metadata for this registration);
- ``shutdown_first``: controlled shutdown (``controlled.shutdown.enable``) before the
  broker stops serving.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from broker.config import BrokerConfig, Endpoint
from broker.control_requests import FINAL_REFUSALS, ControlRequestHandler
from broker.controlled_shutdown import ControlledShutdownSettings, controlled_shutdown
from broker.metadata_cache import MetadataCache
from broker.security.inter_broker import inter_broker_client_properties
from controller import zk_data as zd
from controller import zk_registration
from controller.network_channel import NetworkChannel
from controller.zk import ZkController, ZkControllerSettings
from controller.zk_client import ZkError
from controller.zk_session import ZkSettings

log = logging.getLogger(__name__)

FIRST_METADATA_TIMEOUT_S: Final = 30.0
CONTROLLED_SHUTDOWN_TIMEOUT_S: Final = 20.0


class ClusterStartupError(RuntimeError):
    """ZooKeeper unreachable, a duplicate broker id, another cluster's log dir, ..."""


def zk_controller(config: BrokerConfig,
                  advertised: Callable[[], Sequence[tuple[Endpoint, str]]]) -> ZkController:
    """``advertised`` gives (endpoint with its advertised host, security protocol) pairs."""
    connect = config.zookeeper_connect
    assert connect is not None
    broker_id = config.broker_id
    settings = ZkControllerSettings(
        broker_id=broker_id,
        zk=ZkSettings(connect, config.zookeeper_session_timeout_ms,
                      config.zookeeper_connection_timeout_ms),
        inter_broker_listener=config.inter_broker_listener_name,
        unclean_leader_election=config.get_bool("unclean.leader.election.enable"),
        auto_leader_rebalance=config.get_bool("auto.leader.rebalance.enable"),
        imbalance_percentage=config.get_int("leader.imbalance.per.broker.percentage"),
        imbalance_check_interval_s=float(config.get_int("leader.imbalance.check.interval.seconds")))
    rack = config.broker_rack

    def registration() -> zd.BrokerRegistration:
        return zd.BrokerRegistration(
            broker_id,
            tuple(zd.BrokerEndpoint(e.listener_name, e.host, e.port, protocol)
                  for e, protocol in advertised()),
            int(time.time() * 1000), rack=rack)

    channel = NetworkChannel(broker_id, config.inter_broker_listener_name,
                             socket_timeout_ms=config.get_int("controller.socket.timeout.ms"),
                             client_properties=inter_broker_client_properties(config))
    return ZkController(settings, registration, channel)


async def connect(controller: ZkController, proposed_cluster_id: str) -> str:
    """The session and ``/cluster/id`` (created with ``proposed_cluster_id`` by the first
    broker of a cluster), before the logs load, as Kafka's getOrGenerateClusterId."""
    try:
        return await controller.connect(None, "", proposed_cluster_id)
    except ZkError as exc:
        raise ClusterStartupError(str(exc)) from None


def check_cluster_id(zk_cluster_id: str, stored: str | None, log_dirs: Sequence[Path]) -> None:
    """The log dirs' meta.properties must name the cluster ``/cluster/id`` names."""
    try:
        zk_registration.check_cluster_id(
            zk_cluster_id, stored, ", ".join(str(d / "meta.properties") for d in log_dirs))
    except ZkError as exc:
        raise ClusterStartupError(str(exc)) from None


async def register(controller: ZkController) -> int:
    """Register; returns the broker epoch."""
    try:
        return await controller.session.register()
    except ZkError as exc:
        raise ClusterStartupError(str(exc)) from None


async def elect(controller: ZkController) -> None:
    """Join the controller election (this broker may become the controller)."""
    try:
        await controller.session.elect()
    except ZkError as exc:
        raise ClusterStartupError(str(exc)) from None


async def wait_for_metadata(cache: MetadataCache, control: ControlRequestHandler,
                            broker_id: int,
                            timeout_s: float = FIRST_METADATA_TIMEOUT_S) -> None:
    """Once the broker serves: wait until a controller's UpdateMetadata named it among the
    live brokers, so clients are not told of an empty cluster right away -- unless this
    broker refused one in a way its controller does not follow up by itself (then it may
    take long: Kafka's broker serves once registered, whatever its metadata), or
    ``timeout_s`` passed. Until an UpdateMetadata arrives, Metadata answers named topics
    LEADER_NOT_AVAILABLE (``broker.handlers.metadata``) and ``/ready`` says no."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    answered = control.update_metadata_answered
    while True:
        answered.clear()
        if cache.has_alive_broker(broker_id):
            return
        error = control.update_metadata_error
        if error in FINAL_REFUSALS:
            assert error is not None
            log.warning("[KafkaServer id=%d] refused the controller's UpdateMetadata (%s): "
                        "serving without cluster metadata until the controller's next one",
                        broker_id, error.name)
            return
        try:
            await asyncio.wait_for(answered.wait(), deadline - loop.time())
        except TimeoutError:
            log.warning("[KafkaServer id=%d] no UpdateMetadata from a controller within %.0f s;"
                        " serving anyway", broker_id, timeout_s)
            return


def not_ready_reason(controller: ZkController, control: ControlRequestHandler,
                     cache: MetadataCache, broker_id: int) -> str | None:
    """Why ``/ready`` says no in a cluster (None: ready): the broker must be registered
    in ZooKeeper and have had the controller's UpdateMetadata for this registration. Only
    reads attributes: safe from the metrics endpoint's thread."""
    if not controller.session.is_registered:
        return "not registered in ZooKeeper"
    if not control.has_current_metadata or not cache.has_alive_broker(broker_id):
        return "no metadata from the controller since registering"
    return None


async def shutdown_first(config: BrokerConfig, controller: ZkController,
                         cache: MetadataCache) -> None:
    """Controlled shutdown, if enabled: move this broker's leaderships away first."""
    if not config.get_bool("controlled.shutdown.enable"):
        return
    settings = ControlledShutdownSettings(
        broker_id=config.broker_id, inter_broker_listener=config.inter_broker_listener_name,
        max_retries=config.get_int("controlled.shutdown.max.retries"),
        retry_backoff_ms=config.get_int("controlled.shutdown.retry.backoff.ms"),
        socket_timeout_ms=config.get_int("controller.socket.timeout.ms"),
        client_properties=inter_broker_client_properties(config))
    await controlled_shutdown(settings, cache, lambda: controller.broker_epoch,
                              timeout_s=CONTROLLED_SHUTDOWN_TIMEOUT_S)

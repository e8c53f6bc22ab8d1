"""The shutting-down broker's side of controlled shutdown (Kafka's ``KafkaServer.controlledShutdown``).

Before it stops serving, a broker of a cluster (``controlled.shutdown.enable``) asks the
controller to move its leaderships away: a ControlledShutdown request (v3: broker id and
epoch) to the controller its metadata cache names, on the controller's inter-broker
listener. The answer lists the partitions it still leads; the broker asks again until the
list is empty, ``controlled.shutdown.max.retries`` times, sleeping
``controlled.shutdown.retry.backoff.ms`` between attempts (also after an error, no known
controller, or no answer within ``controller.socket.timeout.ms``), and shuts down either
way, as Kafka does ("Proceeding to do an unclean shutdown as all the controlled shutdown
attempts failed"). The whole exchange is bounded by ``timeout_s``.

While it runs the broker still serves requests: the controller's LeaderAndIsr and
StopReplica reach it, and clients get NOT_LEADER_OR_FOLLOWER and move to the new leaders.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.metadata_cache import MetadataCache
from client.config import ClientConfig
from client.connection import BrokerConnection
from client.errors import ClientError
from protocol.errors import ErrorCode
from protocol.messages.controlled_shutdown import ControlledShutdownRequest

log = logging.getLogger(__name__)

REQUEST_VERSION = 3


@dataclass(frozen=True, slots=True)
class ControlledShutdownSettings:
    broker_id: int
    inter_broker_listener: str
    max_retries: int = 3  # controlled.shutdown.max.retries
    retry_backoff_ms: int = 5000  # controlled.shutdown.retry.backoff.ms
    socket_timeout_ms: int = 30000  # controller.socket.timeout.ms
    # How to reach the inter-broker listener (TLS, SASL: the client's property names).
    client_properties: Mapping[str, str] = field(default_factory=dict)


async def controlled_shutdown(settings: ControlledShutdownSettings, cache: MetadataCache,
                              broker_epoch: Callable[[], int], *, timeout_s: float) -> bool:
    """True once the controller reports no partition led by this broker."""
    try:
        async with asyncio.timeout(timeout_s):
            return await _attempts(settings, cache, broker_epoch)
    except TimeoutError:
        log.warning("[KafkaServer id=%d] Controlled shutdown did not finish within %.0f s; "
                    "proceeding to do an unclean shutdown", settings.broker_id, timeout_s)
        return False


async def _attempts(settings: ControlledShutdownSettings, cache: MetadataCache,
                    broker_epoch: Callable[[], int]) -> bool:
    config = ClientConfig.from_properties(settings.client_properties, ClientConfig(
        client_id=f"broker-{settings.broker_id}-controlled-shutdown",
        request_timeout_ms=settings.socket_timeout_ms,
        connection_setup_timeout_ms=settings.socket_timeout_ms,
        max_in_flight_requests_per_connection=1))
    for attempt in range(1, settings.max_retries + 1):
        log.info("[KafkaServer id=%d] Starting controlled shutdown (attempt %d of %d)",
                 settings.broker_id, attempt, settings.max_retries)
        problem = await _attempt(settings, cache, broker_epoch(), config)
        if problem is None:
            log.info("[KafkaServer id=%d] Controlled shutdown request returned successfully",
                     settings.broker_id)
            return True
        log.warning("[KafkaServer id=%d] Retrying controlled shutdown after the previous "
                    "attempt failed: %s", settings.broker_id, problem)
        if attempt < settings.max_retries:
            await asyncio.sleep(settings.retry_backoff_ms / 1000)
    log.warning("[KafkaServer id=%d] Proceeding to do an unclean shutdown as all the "
                "controlled shutdown attempts failed", settings.broker_id)
    return False


async def _attempt(settings: ControlledShutdownSettings, cache: MetadataCache, epoch: int,
                   config: ClientConfig) -> str | None:
    """None on success, else what went wrong."""
    controller_id = cache.controller_id
    controller = None if controller_id is None else cache.alive_broker(controller_id)
    endpoint = None if controller is None else controller.endpoint(settings.inter_broker_listener)
    if controller_id is None or endpoint is None:
        return "no controller known"
    try:
        connection = await BrokerConnection.open(endpoint.host, endpoint.port, config,
                                                 node_id=controller_id)
    except ClientError as exc:
        return f"cannot reach controller {controller_id}: {exc}"
    try:
        response = await connection.send(
            ControlledShutdownRequest(broker_id=settings.broker_id, broker_epoch=epoch),
            version=REQUEST_VERSION)
    except ClientError as exc:
        return f"controller {controller_id}: {exc}"
    finally:
        await connection.close()
    if response.error_code != ErrorCode.NO_ERROR:
        return f"controller {controller_id} answered {ErrorCode(response.error_code).name}"
    if response.remaining_partitions:
        remaining = ", ".join(f"{p.topic_name}-{p.partition_index}"
                              for p in response.remaining_partitions[:20])
        return (f"{len(response.remaining_partitions)} partitions still led here: "
                f"{remaining}")
    return None

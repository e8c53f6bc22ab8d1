"""``NetworkChannel``: the controller's ``ControllerChannel`` over the network, on the project's
client (Kafka's ``ControllerChannelManager`` with one ``RequestSendThread`` per broker).

One FIFO and one sender task per live broker. The sender keeps a connection to the
broker's inter-broker listener (the endpoint of ``inter_broker_listener`` in its
registration) and sends one request at a time, waiting for its answer, so a broker gets
the controller's requests in the order decided. A request that fails (connection refused,
closed, or no answer within ``controller.socket.timeout.ms``) is sent again on a new
connection after ``RETRY_BACKOFF_S``, until it is answered or the broker is removed (it
left the cluster; its queued requests then resolve to None), as Kafka's send thread does.

The versions are the controller's own (``controller.channel``: LeaderAndIsr 7,
UpdateMetadata 8, StopReplica 4), not negotiated: a broker that cannot take them is not a
broker of this cluster. Each queue holds at most ``MAX_QUEUED_PER_BROKER`` requests; past
that ``send`` resolves to None at once and logs it (the controller resends state on the
next change anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Final

from client.config import ClientConfig
from client.connection import BrokerConnection
from client.errors import ClientError
from controller.channel import (
    LEADER_AND_ISR_VERSION,
    STOP_REPLICA_VERSION,
    UPDATE_METADATA_VERSION,
    BrokerRegistration,
    ControlRequest,
    ControlResponse,
)
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.update_metadata import UpdateMetadataRequest

log = logging.getLogger(__name__)

MAX_QUEUED_PER_BROKER: Final = 10_000
RETRY_BACKOFF_S: Final = 0.1  # Kafka's RequestSendThread backs off 100 ms
DEFAULT_SOCKET_TIMEOUT_MS: Final = 30_000  # controller.socket.timeout.ms

_Item = tuple[ControlRequest, "asyncio.Future[ControlResponse | None]"]


def _version(request: ControlRequest) -> int:
    if isinstance(request, LeaderAndIsrRequest):
        return LEADER_AND_ISR_VERSION
    if isinstance(request, UpdateMetadataRequest):
        return UPDATE_METADATA_VERSION
    return STOP_REPLICA_VERSION


class _BrokerSender:
    """The queue, connection and task of one broker."""

    def __init__(self, controller_id: int, broker: BrokerRegistration, listener: str,
                 config: ClientConfig) -> None:
        self.controller_id = controller_id
        self.broker = broker
        self.listener = listener
        self.config = config
        self.queue: asyncio.Queue[_Item] = asyncio.Queue(MAX_QUEUED_PER_BROKER)
        self.connection: BrokerConnection | None = None
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-{controller_id}-to-broker-{broker.broker_id}")

    async def _run(self) -> None:
        while True:
            request, future = await self.queue.get()
            if future.done():
                continue
            response = await self._deliver(request)
            if not future.done():
                future.set_result(response)

    async def _deliver(self, request: ControlRequest) -> ControlResponse:
        """Send until answered (the task is cancelled when the broker goes)."""
        broker_id = self.broker.broker_id
        attempt = 0
        while True:
            attempt += 1
            try:
                connection = await self._connect()
                response: ControlResponse = await connection.send(
                    request, version=_version(request))
                return response
            except ClientError as exc:
                await self._close()
                level = logging.WARNING if attempt in (1, 10) or attempt % 100 == 0 else logging.DEBUG
                log.log(level, "[Controller id=%d] %s to broker %d failed (attempt %d): %s",
                        self.controller_id, type(request).__name__, broker_id, attempt, exc)
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def _connect(self) -> BrokerConnection:
        if self.connection is not None and not self.connection.closed:
            return self.connection
        endpoint = self.broker.endpoint(self.listener)
        if endpoint is None:
            raise ClientError("LISTENER_NOT_FOUND", f"broker {self.broker.broker_id} has no "
                              f"listener {self.listener}")
        self.connection = await BrokerConnection.open(endpoint.host, endpoint.port, self.config,
                                                      node_id=self.broker.broker_id)
        return self.connection

    async def _close(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            await connection.close()

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        while not self.queue.empty():
            _, future = self.queue.get_nowait()
            if not future.done():
                future.set_result(None)
        await self._close()


class NetworkChannel:
    """A ``ControllerChannel`` to brokers over TCP (see the module docstring)."""

    def __init__(self, controller_id: int, inter_broker_listener: str, *,
                 socket_timeout_ms: int = DEFAULT_SOCKET_TIMEOUT_MS,
                 client_properties: Mapping[str, str] | None = None) -> None:
        """``client_properties``: how to reach the inter-broker listener (TLS, SASL: the
        client's property names)."""
        self.controller_id = controller_id
        self.listener = inter_broker_listener
        self.config = ClientConfig.from_properties(client_properties or {}, ClientConfig(
            client_id=f"controller-{controller_id}", request_timeout_ms=socket_timeout_ms,
            connection_setup_timeout_ms=socket_timeout_ms, max_in_flight_requests_per_connection=1))
        self._senders: dict[int, _BrokerSender] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    def add_broker(self, broker: BrokerRegistration) -> None:
        if broker.broker_id not in self._senders:
            self._senders[broker.broker_id] = _BrokerSender(self.controller_id, broker,
                                                            self.listener, self.config)

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is None:
            return
        task = asyncio.get_running_loop().create_task(sender.stop())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    def send(self, broker_id: int,
             request: ControlRequest) -> asyncio.Future[ControlResponse | None]:
        future: asyncio.Future[ControlResponse | None] = (
            asyncio.get_running_loop().create_future())
        sender = self._senders.get(broker_id)
        if sender is None or sender.queue.full():
            log.error("[Controller id=%d] cannot queue %s for broker %d (%s)",
                      self.controller_id, type(request).__name__, broker_id,
                      "unknown broker" if sender is None else "queue full")
            future.set_result(None)
        else:
            sender.queue.put_nowait((request, future))
        return future

    async def close(self) -> None:
        for broker_id in list(self._senders):
            self.remove_broker(broker_id)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

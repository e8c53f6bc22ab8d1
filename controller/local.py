"""The controller of a single node: always active, its own broker the only live one.

``LocalController`` owns a ``ControllerCore`` and makes it active at start-up with one
live broker (the node's), controller epoch ``LOCAL_CONTROLLER_EPOCH``. It watches the
topic store and turns its notifications into controller events; it reaches the broker
only through an ``InProcessChannel``, in the same LeaderAndIsr / UpdateMetadata /
StopReplica requests a ZooKeeper controller sends over the network. Its ZooKeeper twin
(``controller.zk``) differs only in how it becomes active (the ``/controller`` election,
a controller epoch from ``/controller_epoch``), where live brokers come from
(``/brokers/ids``) and the channel (the network).

``InProcessChannel`` delivers each request to a handler the broker registered for its id
(``ControlRequestHandler``: the broker's side of the three APIs), one request at a time
per broker, in order. Requests and responses are encoded and decoded at the versions a
ZooKeeper controller uses (``controller.channel``), so both ends see exactly what the wire
would carry; the encoding and decoding run in a worker thread, not on the event loop (the
requests of a start-up over thousands of partitions are large).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from controller.channel import (
    LEADER_AND_ISR_VERSION,
    STOP_REPLICA_VERSION,
    UPDATE_METADATA_VERSION,
    BrokerRegistration,
    ControlRequest,
    ControlResponse,
)
from controller.core import (
    ControllerCore,
    DeletionsRequested,
    PartitionsChanged,
    TopicsChanged,
)
from controller.stats import ControllerStats
from controller.topic_store import TopicStore
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.update_metadata import UpdateMetadataRequest

log = logging.getLogger(__name__)

LOCAL_CONTROLLER_EPOCH: Final = 1
MAX_QUEUED_PER_BROKER: Final = 10_000
STARTUP_TIMEOUT_S: Final = 120.0

ControlRequestHandler = Callable[[ControlRequest], Awaitable[ControlResponse]]


def _version(request: ControlRequest) -> int:
    if isinstance(request, LeaderAndIsrRequest):
        return LEADER_AND_ISR_VERSION
    if isinstance(request, UpdateMetadataRequest):
        return UPDATE_METADATA_VERSION
    return STOP_REPLICA_VERSION


def _wire(request: ControlRequest) -> ControlRequest:
    """The request as the receiving broker would decode it from the wire."""
    version = _version(request)
    return type(request).decode(request.encode(version), version)


def _wire_response(response: ControlResponse, request: ControlRequest) -> ControlResponse:
    version = _version(request)
    return type(response).decode(response.encode(version), version)


class InProcessChannel:
    """A ``ControllerChannel`` to brokers in this process (see the module docstring)."""

    def __init__(self) -> None:
        self._handlers: dict[int, ControlRequestHandler] = {}
        self._queues: dict[int, asyncio.Queue[tuple[ControlRequest,
                                                     asyncio.Future[ControlResponse | None]]]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}

    def register_handler(self, broker_id: int, handler: ControlRequestHandler) -> None:
        """Where requests for ``broker_id`` go (the broker registers itself)."""
        self._handlers[broker_id] = handler

    def add_broker(self, broker: BrokerRegistration) -> None:
        if broker.broker_id in self._queues:
            return
        queue: asyncio.Queue[tuple[ControlRequest, asyncio.Future[ControlResponse | None]]]
        queue = asyncio.Queue(MAX_QUEUED_PER_BROKER)
        self._queues[broker.broker_id] = queue
        self._senders[broker.broker_id] = asyncio.get_running_loop().create_task(
            self._sender(broker.broker_id, queue), name=f"controller-send-{broker.broker_id}")

    def remove_broker(self, broker_id: int) -> None:
        queue = self._queues.pop(broker_id, None)
        task = self._senders.pop(broker_id, None)
        if task is not None:
            task.cancel()
        while queue is not None and not queue.empty():
            _, future = queue.get_nowait()
            if not future.done():
                future.set_result(None)

    def send(self, broker_id: int,
             request: ControlRequest) -> asyncio.Future[ControlResponse | None]:
        future: asyncio.Future[ControlResponse | None] = (
            asyncio.get_running_loop().create_future())
        queue = self._queues.get(broker_id)
        if queue is None or queue.full():
            log.error("controller: cannot queue %s for broker %d (%s)", type(request).__name__,
                      broker_id, "unknown broker" if queue is None else "queue full")
            future.set_result(None)
        else:
            queue.put_nowait((request, future))
        return future

    async def _sender(self, broker_id: int, queue: asyncio.Queue[
            tuple[ControlRequest, asyncio.Future[ControlResponse | None]]]) -> None:
        while True:
            request, future = await queue.get()
            handler = self._handlers.get(broker_id)
            try:
                if handler is None:
                    raise LookupError(f"no broker {broker_id} in this process")
                # The wire round trips in a worker thread: at thousands of partitions an
                # UpdateMetadata's encode and decode take tens of ms of pure Python, which
                # would hold the loop in one go; a thread gives it back every few ms
                # (the interpreter's switch interval).
                received = await asyncio.to_thread(_wire, request)
                answer = await handler(received)
                response = await asyncio.to_thread(_wire_response, answer, request)
            except asyncio.CancelledError:
                if not future.done():
                    future.set_result(None)
                raise
            except Exception:
                log.exception("controller: %s to broker %d failed", type(request).__name__,
                              broker_id)
                response = None
            if not future.done():
                future.set_result(response)

    async def close(self) -> None:
        for broker_id in list(self._queues):
            self.remove_broker(broker_id)


class LocalController:
    """Controller of a one-broker cluster; see the module docstring."""

    def __init__(self, *, broker: BrokerRegistration, store: TopicStore,
                 channel: InProcessChannel, inter_broker_listener: str,
                 unclean_leader_election: bool = False) -> None:
        self.broker = broker
        self.store = store
        self.channel = channel
        self.core = ControllerCore(
            controller_id=broker.broker_id, controller_epoch=LOCAL_CONTROLLER_EPOCH,
            store=store, channel=channel, inter_broker_listener=inter_broker_listener,
            unclean_leader_election=unclean_leader_election)

    @property
    def controller_epoch(self) -> int:
        return self.core.controller_epoch

    # What the controller metrics read (Kafka's KafkaController gauges).

    @property
    def is_active(self) -> bool:
        return True  # a single node is always its own controller

    @property
    def stats(self) -> ControllerStats:
        return self.core.stats

    @property
    def state(self) -> int:
        return int(self.core.stats.state)

    @property
    def global_topic_count(self) -> int:
        return len(self.core.context.topics)

    @property
    def global_partition_count(self) -> int:
        return sum(t.num_partitions for t in self.core.context.topics.values())

    @property
    def offline_partitions_count(self) -> int:
        ctx = self.core.context
        return sum(1 for tp in ctx.all_partitions()
                   if tp not in ctx.leadership
                   or ctx.leadership[tp].leader_and_isr.leader not in ctx.live_brokers)

    @property
    def preferred_replica_imbalance_count(self) -> int:
        ctx = self.core.context
        return sum(1 for tp, state in ctx.leadership.items()
                   if tp.topic not in ctx.topics_to_delete and ctx.replicas(tp)
                   and state.leader_and_isr.leader != ctx.replicas(tp)[0])

    async def startup(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """Become active and wait until the broker has its partitions and metadata."""
        self.store.watch(self)
        sent = await self.core.activate([self.broker])
        self.core.events.start()
        if sent:
            await asyncio.wait_for(asyncio.gather(*(f for _, _, f in sent)), timeout_s)
        await asyncio.wait_for(self.core.events.wait_idle(), timeout_s)

    async def shutdown(self) -> None:
        await self.core.close()
        await self.channel.close()

    # TopicStoreWatcher: each notification becomes a controller event.

    def on_topics_changed(self) -> None:
        self.core.events.put(TopicsChanged())

    def on_partitions_changed(self, topic: str) -> None:
        self.core.events.put(PartitionsChanged(topic))

    def on_deletions_requested(self) -> None:
        self.core.events.put(DeletionsRequested())

    def on_configs_changed(self, topic: str) -> None:
        pass  # brokers apply configs; the controller reads them when it elects

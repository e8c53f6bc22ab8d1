"""What the server hands the metrics: the broker's state and the parts a scrape reads.

Nothing here imports ``prometheus_client``: the server uses these names whether or not the
metrics endpoint is on, and with it off (the default) the Prometheus modules are never
loaded (``service`` imports them when ``metrics.prometheus.listener`` is set).

Broker state (Kafka's ``BrokerState``, also exported as ``kafka_server_kafkaserver_brokerstate``):
NOT_RUNNING 0 -> STARTING 1 -> RECOVERY 2 (loading the log dirs) -> RUNNING 3 ->
SHUTTING_DOWN 7 -> NOT_RUNNING 0.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from broker.group.service import GroupService
    from broker.network.socket_server import SocketServer
    from broker.replica_manager import ReplicaManager
    from controller.stats import ControllerStats

# Kafka's request log (log4j's kafka.request.logger): DEBUG logs every completed request.
REQUEST_LOGGER: Final = "kafka.request.logger"


class BrokerState(enum.IntEnum):
    """Kafka's ``org.apache.kafka.metadata.BrokerState`` values."""

    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


class ControllerView(Protocol):
    """What the controller metrics read (``controller.local.LocalController`` and its
    ZooKeeper twin): whether it is the active controller, its state, and its counts."""

    @property
    def is_active(self) -> bool: ...

    @property
    def state(self) -> int:
        """Kafka's ControllerState value (0 Idle, 1 ControllerChange, 2 BrokerChange, ...)."""
        ...

    @property
    def global_topic_count(self) -> int: ...

    @property
    def global_partition_count(self) -> int: ...

    @property
    def offline_partitions_count(self) -> int:
        """Partitions without a live leader."""
        ...

    @property
    def preferred_replica_imbalance_count(self) -> int:
        """Partitions not led by their preferred (first) replica."""
        ...

    @property
    def stats(self) -> ControllerStats:
        """Leader election times and unclean elections since start-up."""
        ...


@dataclass(slots=True)
class BrokerView:
    """The parts of the broker the scrape reads (all on the event loop)."""

    socket_server: SocketServer
    replica_manager: ReplicaManager
    groups: GroupService
    controller: ControllerView

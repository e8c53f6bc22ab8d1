"""The broker's services: everything a handler reaches through ``ctx.broker``.

Built once by ``broker.server`` at start-up, fully (no field is filled in later), in this
order: config -> topic store and log configs -> log manager (loads and recovers every
partition log) -> metadata cache -> replica manager -> admin manager -> group service ->
control-request handler -> producer ids. Partitions are hosted only once the controller's
first LeaderAndIsr arrives (``controller.local``). Handlers never build services of their
own; they read and change state through these objects, on the broker's event loop.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from broker.admin_manager import AdminManager
from broker.cluster_ops import ClusterOps
from broker.config import BrokerConfig, Endpoint
from broker.control_requests import ControlRequestHandler
from broker.group.service import GroupService
from broker.metadata_cache import MetadataCache
from broker.produce_appends import ProduceAppends
from broker.producer_ids import ProducerIdManager
from broker.quota.manager import ClientQuotas
from broker.replica_manager import ReplicaManager
from broker.security.authorizer import AclAuthorizer
from broker.security.credentials import CredentialStore
from storage.manager import LogManager


@dataclass(slots=True)
class Broker:
    config: BrokerConfig
    cluster_id: str
    log_manager: LogManager
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    admin: AdminManager
    group_coordinator: GroupService
    control: ControlRequestHandler
    producer_ids: ProducerIdManager
    started_at_ms: int
    # SCRAM credentials (user entity configs: a file in the log dir on a single node).
    credentials: CredentialStore
    # authorizer.class.name set: ACLs (a file in the log dir on a single node); else None
    # and every request is allowed (the ACL APIs answer SECURITY_DISABLED).
    authorizer: AclAuthorizer | None
    # Client quotas (produce / fetch byte rates, request percentage) from the entity configs.
    quotas: ClientQuotas
    cluster: ClusterOps  # the controller's answers (ControlledShutdown, ElectLeaders, AlterPartition)
    # The produce fast path's appends, done together at the end of each turn of the loop.
    produce_appends: ProduceAppends
    # The endpoints clients are told to use (advertised.listeners, else the bound
    # listeners with the ports actually bound: port 0 in listeners binds an ephemeral one).
    advertised_listeners: list[Endpoint] = field(default_factory=list)

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    @property
    def advertised(self) -> Endpoint:
        """The first advertised endpoint."""
        return self.advertised_listeners[0] if self.advertised_listeners else self.config.advertised_listeners[0]


def advertised_host(endpoint: Endpoint) -> str:
    """An empty listener host is advertised as the machine's canonical host name, as Kafka
    does."""
    return endpoint.host or socket.getfqdn()

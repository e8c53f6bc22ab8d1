"""The broker's services: everything a handler reaches through ``ctx.broker``.

Built once by ``broker.server`` at start-up, in this order: config -> log manager (loads and
recovers every partition log) -> topic registry -> replica manager (a partition per
registered topic partition) -> producer ids -> network. Handlers never build services of
their own; they read and change state through these objects, on the broker's event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.config import BrokerConfig, Endpoint
from broker.producer_ids import ProducerIdManager
from broker.quota.manager import ClientQuotas
from broker.replica_manager import ReplicaManager
from broker.security.authorizer import AclAuthorizer
from broker.security.credentials import CredentialStore
from broker.topics import TopicRegistry
from storage.manager import LogManager

if TYPE_CHECKING:
    from broker.group.service import GroupService


@dataclass(slots=True)
class Broker:
    config: BrokerConfig
    cluster_id: str
    log_manager: LogManager
    topics: TopicRegistry
    replica_manager: ReplicaManager
    producer_ids: ProducerIdManager
    started_at_ms: int
    # SCRAM credentials (user entity configs: a file in the log dir on a single node).
    credentials: CredentialStore
    # authorizer.class.name set: ACLs (a file in the log dir on a single node); else None
    # and every request is allowed (the ACL APIs answer SECURITY_DISABLED).
    authorizer: AclAuthorizer | None
    # Client quotas (produce / fetch byte rates, request percentage) from the entity configs.
    quotas: ClientQuotas
    # The endpoints clients are told to use (advertised.listeners, else the bound
    # listeners with the ports actually bound: port 0 in listeners binds an ephemeral one).
    advertised_listeners: list[Endpoint] = field(default_factory=list)
    # The group coordinator (broker.group.service.GroupService), set by the server once the
    # replica manager is up; None until then (group APIs answer COORDINATOR_NOT_AVAILABLE).
    group_coordinator: GroupService | None = None

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    @property
    def advertised(self) -> Endpoint:
        """The first advertised endpoint."""
        return self.advertised_listeners[0] if self.advertised_listeners else self.config.advertised_listeners[0]

    def advertised_for(self, listener_name: str) -> Endpoint:
        """The endpoint advertised for ``listener_name``: what Metadata, FindCoordinator and
        DescribeCluster answer a client that came in on that listener (as Kafka does)."""
        for endpoint in self.advertised_listeners:
            if endpoint.listener_name == listener_name:
                return endpoint
        return self.advertised

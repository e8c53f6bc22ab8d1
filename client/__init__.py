"""The project's one Kafka client (asyncio), built on ``protocol``.

- ``KafkaClient`` (``client.kafka_client``): connections per broker, routing to leaders and
  coordinators, metadata, retries; ``send(node_id, request)`` for any generated request.
- ``BrokerConnection`` (``client.connection``): one connection: framing, correlation ids,
  ApiVersions negotiation, request timeouts, bounded requests in flight.
- ``Admin`` / ``Groups``: the admin calls the tools use; ``list_offsets``, ``fetch``,
  ``produce``: the data calls; ``FetchSession``: incremental fetch sessions (KIP-227).
- ``SyncClient`` (``client.sync``): the same client for blocking code.
- ``ClientConfig``: settings by Kafka's client property names; ``ClientError``: every failure.
Names are loaded on first use (PEP 562): importing one module of the package (the broker
takes ``client.connection`` and ``client.config`` for its replica fetchers) does not load
the admin, group and data calls with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from client.admin import Admin, AlterOp, ConfigSource, ResourceType
    from client.config import ClientConfig, parse_bootstrap
    from client.connection import BrokerConnection, Request
    from client.errors import ClientError, error_name
    from client.fetch_session import FetchPosition, FetchSession, response_partitions
    from client.groups import Groups
    from client.kafka_client import KafkaClient
    from client.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
    from client.offsets import (
        EARLIEST_TIMESTAMP,
        LATEST_TIMESTAMP,
        MAX_TIMESTAMP,
        ListedOffset,
        list_offsets,
    )

# ``fetch`` and ``produce`` are also the names of submodules: importing ``client.fetch``
# (as ``client.fetch_session`` and ``client.sync`` do) binds the package attribute ``fetch``
# to the module, and ``__getattr__`` is never asked again, so ``from client import fetch``
# would give the module or the function depending on what was imported first. These two are
# bound here, after their submodules, so the package attribute is always the function (and
# the other names of those two modules with them, since they are loaded anyway).
from client.fetch import FetchedPartition, fetch
from client.produce import ProducedBatch, produce

_MODULE_OF = {
    **dict.fromkeys(("Admin", "AlterOp", "ConfigSource", "ResourceType"), "client.admin"),
    **dict.fromkeys(("ClientConfig", "parse_bootstrap"), "client.config"),
    **dict.fromkeys(("BrokerConnection", "Request"), "client.connection"),
    **dict.fromkeys(("ClientError", "error_name"), "client.errors"),
    **dict.fromkeys(("FetchPosition", "FetchSession", "response_partitions"),
                    "client.fetch_session"),
    "Groups": "client.groups",
    "KafkaClient": "client.kafka_client",
    **dict.fromkeys(("BrokerInfo", "ClusterMetadata", "PartitionInfo", "TopicInfo"),
                    "client.metadata"),
    **dict.fromkeys(("EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "ListedOffset",
                     "list_offsets"), "client.offsets"),
}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it directly
    return value


__all__ = [
    "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP",
    "Admin", "AlterOp", "BrokerConnection", "BrokerInfo", "ClientConfig", "ClientError",
    "ClusterMetadata", "ConfigSource", "FetchPosition", "FetchSession", "FetchedPartition", "Groups", "KafkaClient", "ListedOffset",
    "PartitionInfo", "ProducedBatch", "Request", "ResourceType", "TopicInfo", "error_name", "fetch",
    "list_offsets", "parse_bootstrap", "produce", "response_partitions",
]

"""API handlers, one module per API key; importing this package registers them all.

``HANDLER_MODULES`` lists every handler module; importing each runs its ``@api``
registration into ``base.REGISTRY``, which ApiVersions answers from. A new handler module
is added to the list when it lands (one line).
"""

from __future__ import annotations

import importlib

from broker.handlers.base import REGISTRY

__all__ = ["HANDLER_MODULES", "REGISTRY", "load_all"]

HANDLER_MODULES: tuple[str, ...] = (
    "api_versions",
    # data path
    "produce",
    "fetch",
    "list_offsets",
    "delete_records",
    "init_producer_id",
    "offset_for_leader_epoch",
    # admin and metadata
    "metadata",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "describe_cluster",
    "describe_log_dirs",
    # group coordinator
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "list_groups",
    "describe_groups",
    "delete_groups",
    "offset_delete",
    # security
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "describe_client_quotas",
    "alter_client_quotas",
    # controller requests
    "leader_and_isr",
    "update_metadata",
    "stop_replica",
    # cluster requests to the controller
    "controlled_shutdown",
    "elect_leaders",
    "alter_partition",
    "alter_partition_reassignments",
    "list_partition_reassignments",
)


def load_all() -> None:
    """Import every handler module (idempotent)."""
    for name in HANDLER_MODULES:
        importlib.import_module(f"{__name__}.{name}")


load_all()

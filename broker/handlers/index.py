"""Which module handles each API key, and the versions it implements: read without importing
the handlers, so that start-up loads only the modules its requests need.

A handler module's ``@api`` registration must match its line here (``base.api`` refuses a
mismatch when the module loads; ``tests/unit/test_handler_index.py`` loads them all); a new
handler module adds one line. ApiVersions advertises these ranges, and the request path
imports a module the first time a request of its key arrives (``base.find_spec``).
"""

from __future__ import annotations

from typing import Final, NamedTuple


class HandlerEntry(NamedTuple):
    module: str  # under broker.handlers
    name: str  # Kafka's name of the API (ApiKeys), the generated request class without "Request"
    min_version: int
    max_version: int


HANDLER_INDEX: Final[dict[int, HandlerEntry]] = {
    0: HandlerEntry("produce", "Produce", 3, 11),
    1: HandlerEntry("fetch", "Fetch", 4, 17),
    2: HandlerEntry("list_offsets", "ListOffsets", 1, 9),
    3: HandlerEntry("metadata", "Metadata", 1, 12),
    4: HandlerEntry("leader_and_isr", "LeaderAndIsr", 5, 7),
    5: HandlerEntry("stop_replica", "StopReplica", 3, 4),
    6: HandlerEntry("update_metadata", "UpdateMetadata", 7, 8),
    7: HandlerEntry("controlled_shutdown", "ControlledShutdown", 1, 3),
    8: HandlerEntry("offset_commit", "OffsetCommit", 1, 9),
    9: HandlerEntry("offset_fetch", "OffsetFetch", 1, 9),
    10: HandlerEntry("find_coordinator", "FindCoordinator", 0, 6),
    11: HandlerEntry("join_group", "JoinGroup", 0, 9),
    12: HandlerEntry("heartbeat", "Heartbeat", 0, 4),
    13: HandlerEntry("leave_group", "LeaveGroup", 0, 5),
    14: HandlerEntry("sync_group", "SyncGroup", 0, 5),
    15: HandlerEntry("describe_groups", "DescribeGroups", 0, 5),
    16: HandlerEntry("list_groups", "ListGroups", 0, 5),
    17: HandlerEntry("sasl_handshake", "SaslHandshake", 0, 1),
    18: HandlerEntry("api_versions", "ApiVersions", 0, 4),
    19: HandlerEntry("create_topics", "CreateTopics", 2, 7),
    20: HandlerEntry("delete_topics", "DeleteTopics", 1, 6),
    21: HandlerEntry("delete_records", "DeleteRecords", 0, 2),
    22: HandlerEntry("init_producer_id", "InitProducerId", 0, 5),
    23: HandlerEntry("offset_for_leader_epoch", "OffsetForLeaderEpoch", 0, 4),
    29: HandlerEntry("describe_acls", "DescribeAcls", 0, 3),
    30: HandlerEntry("create_acls", "CreateAcls", 0, 3),
    31: HandlerEntry("delete_acls", "DeleteAcls", 0, 3),
    32: HandlerEntry("describe_configs", "DescribeConfigs", 1, 4),
    33: HandlerEntry("alter_configs", "AlterConfigs", 0, 2),
    35: HandlerEntry("describe_log_dirs", "DescribeLogDirs", 1, 4),
    36: HandlerEntry("sasl_authenticate", "SaslAuthenticate", 0, 2),
    37: HandlerEntry("create_partitions", "CreatePartitions", 0, 3),
    42: HandlerEntry("delete_groups", "DeleteGroups", 0, 2),
    43: HandlerEntry("elect_leaders", "ElectLeaders", 0, 2),
    44: HandlerEntry("incremental_alter_configs", "IncrementalAlterConfigs", 0, 1),
    45: HandlerEntry("alter_partition_reassignments", "AlterPartitionReassignments", 0, 0),
    46: HandlerEntry("list_partition_reassignments", "ListPartitionReassignments", 0, 0),
    47: HandlerEntry("offset_delete", "OffsetDelete", 0, 0),
    48: HandlerEntry("describe_client_quotas", "DescribeClientQuotas", 0, 1),
    49: HandlerEntry("alter_client_quotas", "AlterClientQuotas", 0, 1),
    50: HandlerEntry("describe_user_scram_credentials", "DescribeUserScramCredentials", 0, 0),
    51: HandlerEntry("alter_user_scram_credentials", "AlterUserScramCredentials", 0, 0),
    56: HandlerEntry("alter_partition", "AlterPartition", 0, 3),
    60: HandlerEntry("describe_cluster", "DescribeCluster", 0, 1),
}

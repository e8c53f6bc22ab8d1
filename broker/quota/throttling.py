"""How a throttled response reaches the client (KIP-219).

A response of a version at or above its API's entry here carries ``throttle_time_ms`` and is
sent at once: the client waits out the throttle itself, and the broker mutes the connection
(reads no further request) for that long. An older version's response is held back for the
throttle time instead, the connection muted meanwhile. Versions as Kafka's responses'
``shouldClientThrottle``; APIs not listed are always held back.
"""

from __future__ import annotations

from typing import Final

CLIENT_THROTTLES_FROM: Final[dict[int, int]] = {
    0: 6,  # Produce
    1: 8,  # Fetch
    2: 3,  # ListOffsets
    3: 6,  # Metadata
    8: 4,  # OffsetCommit
    9: 4,  # OffsetFetch
    10: 2,  # FindCoordinator
    11: 3,  # JoinGroup
    12: 2,  # Heartbeat
    13: 2,  # LeaveGroup
    14: 2,  # SyncGroup
    15: 2,  # DescribeGroups
    16: 2,  # ListGroups
    18: 2,  # ApiVersions
    19: 3,  # CreateTopics
    20: 2,  # DeleteTopics
    21: 1,  # DeleteRecords
    22: 1,  # InitProducerId
    24: 1,  # AddPartitionsToTxn
    25: 1,  # AddOffsetsToTxn
    26: 1,  # EndTxn
    28: 1,  # TxnOffsetCommit
    29: 1,  # DescribeAcls
    30: 1,  # CreateAcls
    31: 1,  # DeleteAcls
    32: 2,  # DescribeConfigs
    33: 1,  # AlterConfigs
    34: 1,  # AlterReplicaLogDirs
    35: 1,  # DescribeLogDirs
    37: 1,  # CreatePartitions
    38: 1,  # CreateDelegationToken
    39: 1,  # RenewDelegationToken
    40: 1,  # ExpireDelegationToken
    41: 1,  # DescribeDelegationToken
    42: 1,  # DeleteGroups
    43: 0,  # ElectLeaders
    44: 0,  # IncrementalAlterConfigs
    45: 0,  # AlterPartitionReassignments
    46: 0,  # ListPartitionReassignments
    47: 0,  # OffsetDelete
    50: 0,  # DescribeUserScramCredentials
    51: 0,  # AlterUserScramCredentials
    75: 0,  # DescribeTopicPartitions
}

# Requests never counted against request quotas (the SASL exchange is answered before
# the request channel; ApiVersions must stay answerable).
REQUEST_QUOTA_EXEMPT: Final = frozenset({17, 18, 36})


def client_throttles(api_key: int, api_version: int) -> bool:
    first = CLIENT_THROTTLES_FROM.get(api_key)
    return first is not None and api_version >= first

"""What the replica manager needs of replica fetchers, without the fetchers themselves:
where a follower starts (``InitialFetchState``), the ``FetcherManager`` interface, and
``NoFetchers``, which stands in on a single node (it never has followers). The fetchers
(``broker.replica_fetcher``, with the client they fetch through) are loaded by a cluster
broker only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class InitialFetchState:
    """Where a follower starts fetching (Kafka's ``InitialFetchState``)."""

    topic_id: uuid.UUID
    leader_id: int
    leader_epoch: int
    fetch_offset: int


class FetcherManager(Protocol):
    """Replica fetchers (Kafka's ``ReplicaFetcherManager``): added for followers, removed
    for leaders and stopped replicas."""

    def add_fetchers(self, partitions: Mapping[TopicPartition, InitialFetchState]) -> None: ...
    def remove_fetchers(self, partitions: Iterable[TopicPartition]) -> None: ...
    def max_lag(self) -> int: ...
    async def shutdown(self) -> None: ...


class NoFetchers:
    """A single node: followers never exist, so nothing fetches."""

    def add_fetchers(self, partitions: Mapping[TopicPartition, InitialFetchState]) -> None:
        for tp, state in partitions.items():
            log.warning("%s: follower of broker %d, but this broker has no replica fetchers",
                        tp, state.leader_id)

    def remove_fetchers(self, partitions: Iterable[TopicPartition]) -> None:
        pass

    def max_lag(self) -> int:
        return 0

    async def shutdown(self) -> None:
        pass

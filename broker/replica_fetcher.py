"""Replica fetchers: how a follower copies its leader's log (Kafka's
``ReplicaFetcherManager``), as seen by the replica manager.

The replica manager adds fetchers for the partitions a LeaderAndIsr makes follower (with
where to start: ``InitialFetchState``) and removes them for partitions that become leader
or are stopped, before it changes their state, exactly where Kafka does. Replication
implements ``FetcherManager`` with fetch loops (one connection per source broker, Fetch
with the replica id set, ``append_as_follower``); until then ``NoFetchers`` stands in: a
single node never has followers, and a follower without a fetcher simply does not copy.

Thread-safety: the broker's event loop only.
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
    for leaders and stopped replicas. Replication provides the real one."""

    def add_fetchers(self, partitions: Mapping[TopicPartition, InitialFetchState]) -> None: ...
    def remove_fetchers(self, partitions: Iterable[TopicPartition]) -> None: ...


class NoFetchers:
    """No replication yet: followers do not fetch (a single node never has followers)."""

    def add_fetchers(self, partitions: Mapping[TopicPartition, InitialFetchState]) -> None:
        for tp, state in partitions.items():
            log.warning("%s: follower of broker %d, but this broker has no replica fetchers",
                        tp, state.leader_id)

    def remove_fetchers(self, partitions: Iterable[TopicPartition]) -> None:
        pass

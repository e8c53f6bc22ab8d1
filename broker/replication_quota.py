"""Replica throttling (Kafka's ``ReplicationQuotaManager``): a byte rate for the replication
of chosen partitions, one quota for this broker as leader (what it sends to followers) and
one as follower (what it fetches).

- The bound: ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``
  (bytes/s; unset: no bound), measured as Kafka's sampled rate: the bytes recorded in the
  last ``replication.quota.window.num`` windows of ``replication.quota.window.size.seconds``
  over the time they span.
- Which partitions: the topic configs ``leader.replication.throttled.replicas`` and
  ``follower.replication.throttled.replicas``: ``*`` (every replica) or a list of
  ``partition:broker``; an entry counts on the broker it names (Kafka's
  ``parseThrottledPartitions``).
- Use: while the rate is above the bound, a leader answers a throttled partition's fetch by
  a follower outside the ISR with no records, and a follower leaves its throttled
  partitions that are behind the leader's HW out of its fetches; the bytes of throttled
  partitions sent or fetched are recorded. In-sync replicas are never throttled.

Thread-safety: the broker's event loop only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final, Protocol

from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.config import BrokerConfig

_LONG_MAX: Final = 2**63 - 1
LEADER_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_RATE: Final = "follower.replication.throttled.rate"
LEADER_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS: Final = "follower.replication.throttled.replicas"
ALL: Final = -1  # every partition of the topic


def throttled_partitions(value: str, broker_id: int) -> frozenset[int]:
    """The partitions a throttled-replicas value names for ``broker_id`` ({ALL} for ``*``)."""
    value = value.strip()
    if not value:
        return frozenset()
    if value == "*":
        return frozenset({ALL})
    out: set[int] = set()
    for item in value.split(","):
        partition, sep, broker = item.strip().partition(":")
        if sep and broker.strip() == str(broker_id) and partition.strip().isdigit():
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuota:
    """One direction's quota (see the module docstring)."""

    def __init__(self, rate_bytes_per_s: float | None, *, samples: int = 11,
                 window_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.bound = rate_bytes_per_s
        self._samples = max(2, samples)
        self._window_s = window_s
        self._clock = clock
        self._windows: list[tuple[float, int]] = []  # (window start, bytes), oldest first
        self._throttled: dict[str, frozenset[int]] = {}

    def configure(self, rate_bytes_per_s: float | None, *, samples: int,
                  window_s: float) -> None:
        self.bound = rate_bytes_per_s
        self._samples = max(2, samples)
        self._window_s = window_s

    # ------------------------------------------------------------ which partitions

    def mark_throttled(self, topic: str, partitions: frozenset[int]) -> None:
        if partitions:
            self._throttled[topic] = partitions
        else:
            self._throttled.pop(topic, None)

    def is_throttled(self, tp: TopicPartition) -> bool:
        parts = self._throttled.get(tp.topic)
        return parts is not None and (ALL in parts or tp.partition in parts)

    # ------------------------------------------------------------ the rate

    def _expire(self, now: float) -> None:
        horizon = now - self._samples * self._window_s
        while self._windows and self._windows[0][0] < horizon:
            self._windows.pop(0)

    def record(self, nbytes: int) -> None:
        if nbytes <= 0 or self.bound is None:
            return
        now = self._clock()
        self._expire(now)
        if self._windows and now - self._windows[-1][0] < self._window_s:
            start, total = self._windows[-1]
            self._windows[-1] = (start, total + nbytes)
        else:
            self._windows.append((now, nbytes))

    def rate(self) -> float:
        """Bytes/s over the kept windows (Kafka's Rate: at least samples-1 windows long)."""
        now = self._clock()
        self._expire(now)
        if not self._windows:
            return 0.0
        elapsed = max(now - self._windows[0][0], (self._samples - 1) * self._window_s)
        return sum(b for _, b in self._windows) / elapsed

    def is_quota_exceeded(self) -> bool:
        return self.bound is not None and self.rate() > self.bound


def apply_topic_configs(leader: ReplicationQuota, follower: ReplicationQuota, topic: str,
                        configs: Mapping[str, str], broker_id: int) -> None:
    """A topic's throttled-replica lists (its configs changed, or it was loaded)."""
    leader.mark_throttled(topic, throttled_partitions(configs.get(LEADER_REPLICAS, ""),
                                                      broker_id))
    follower.mark_throttled(topic, throttled_partitions(configs.get(FOLLOWER_REPLICAS, ""),
                                                        broker_id))


class _Quotas(Protocol):
    @property
    def leader_quota(self) -> ReplicationQuota: ...
    @property
    def follower_quota(self) -> ReplicationQuota: ...


def apply_throttle_rates(config: BrokerConfig, replica_manager: _Quotas,
                         rates: Mapping[str, int]) -> None:
    """The replication quotas' bounds (bytes/s; Long.MAX_VALUE: none): at start-up, and
    whenever the broker's dynamic configs change (a single node's too)."""
    for quota, name in ((replica_manager.leader_quota, LEADER_RATE),
                        (replica_manager.follower_quota, FOLLOWER_RATE)):
        rate = rates[name]
        quota.configure(None if rate >= _LONG_MAX else rate,
                        samples=config.get_int("replication.quota.window.num"),
                        window_s=float(config.get_int("replication.quota.window.size.seconds")))

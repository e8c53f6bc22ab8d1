"""``ControllerContext``: what the active controller knows (Kafka's ``ControllerContext``).

Live brokers (with their epochs and endpoints), the topics with their ids and replica
assignments, each partition's current leadership (as last written to the topic store),
brokers shutting down, topics queued for deletion, and the replicas that live brokers
reported in a failed log dir (``replicas_on_offline_dirs``: they answered a LeaderAndIsr
with KAFKA_STORAGE_ERROR; a replica there is not online although its broker is, until
that broker restarts). Filled from the topic store when a
controller becomes active, then kept current by the controller's own decisions and the
store's notifications. Only the controller's event task touches it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from controller.channel import BrokerRegistration
from controller.leader_and_isr import LeaderIsrAndControllerEpoch
from controller.topic_store import TopicRecord
from protocol.topic_partition import TopicPartition

ZERO_UUID = uuid.UUID(int=0)


@dataclass(slots=True)
class ControllerContext:
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    topics: dict[str, TopicRecord] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def topic_id(self, topic: str) -> uuid.UUID:
        record = self.topics.get(topic)
        return ZERO_UUID if record is None else record.topic_id

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        record = self.topics.get(tp.topic)
        if record is None:
            return ()
        return record.assignment.get(tp.partition, ())

    def live_replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        """The replicas of ``tp`` on live brokers, but not in a failed log dir."""
        return tuple(b for b in self.replicas(tp)
                     if b in self.live_brokers and not self.is_on_offline_dir(b, tp))

    def is_replica_online(self, broker_id: int, tp: TopicPartition | None = None) -> bool:
        """Kafka's ``isReplicaOnline``: the broker is live and not shutting down, and (with
        ``tp``) its replica of ``tp`` is not in a failed log dir."""
        return (broker_id in self.live_brokers and broker_id not in self.shutting_down
                and (tp is None or not self.is_on_offline_dir(broker_id, tp)))

    def is_on_offline_dir(self, broker_id: int, tp: TopicPartition) -> bool:
        offline = self.replicas_on_offline_dirs.get(broker_id)
        return offline is not None and tp in offline

    def online_brokers_for(self, tp: TopicPartition) -> set[int]:
        """Brokers that may lead or join the ISR of ``tp``: live, not shutting down, their
        replica of it not in a failed log dir."""
        return {b for b in self.live_brokers
                if b not in self.shutting_down and not self.is_on_offline_dir(b, tp)}

    def all_partitions(self) -> list[TopicPartition]:
        return [tp for record in self.topics.values() for tp in record.partitions()]

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        record = self.topics.get(topic)
        return [] if record is None else record.partitions()

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, s in self.leadership.items() if s.leader_and_isr.leader == broker_id]

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            self.leadership.pop(tp, None)
            for offline in self.replicas_on_offline_dirs.values():
                offline.discard(tp)
        self.topics.pop(topic, None)
        self.topics_to_delete.discard(topic)

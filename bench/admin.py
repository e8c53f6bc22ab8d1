"""Admin steps the harness runs itself (not load): readiness checks and topic creation.

Uses librdkafka's AdminClient (confluent-kafka) against either broker: Metadata to see that
the broker answers, CreateTopics (replication factor 1) to make each workload's topic.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.procs import BenchError

_QUIET: dict[str, Any] = {"log_level": 0}


def _admin(bootstrap: str) -> Any:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, **_QUIET})


def wait_ready(bootstrap: str, *, timeout_s: float) -> None:
    """Wait until the broker answers Metadata and lists itself; raise BenchError otherwise."""
    deadline = time.monotonic() + timeout_s
    last_error = "no answer"
    admin = _admin(bootstrap)
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=min(2.0, max(0.1, deadline - time.monotonic())))
            if metadata.brokers:
                return
            last_error = "metadata lists no brokers"
        except KafkaException as exc:
            last_error = str(exc)
        time.sleep(0.1)
    raise BenchError(f"broker {bootstrap} not ready after {timeout_s:.0f} s: {last_error}")


def create_topic(bootstrap: str, topic: str, partitions: int, *, timeout_s: float = 30.0) -> None:
    """Create topic (replication factor 1) and wait until every partition has a leader."""
    admin = _admin(bootstrap)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout_s,
        request_timeout=timeout_s,
    )
    try:
        futures[topic].result(timeout=timeout_s)
    except KafkaException as exc:
        raise BenchError(f"CreateTopics {topic} on {bootstrap}: {exc}") from exc
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        metadata = admin.list_topics(topic=topic, timeout=5.0)
        meta = metadata.topics.get(topic)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise BenchError(f"topic {topic} on {bootstrap} has no leaders after {timeout_s:.0f} s")

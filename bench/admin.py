"""Admin steps the harness runs itself (not load): readiness checks and topic creation.

Uses librdkafka's AdminClient (confluent-kafka) against either broker: Metadata to see that
the broker answers, CreateTopics (replication factor 1) to make each workload's topic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.procs import BenchError

_QUIET: dict[str, Any] = {"log_level": 0}


def _admin(bootstrap: str, *, socket_timeout_ms: int = 5000) -> Any:
    return AdminClient(
        {"bootstrap.servers": bootstrap, "socket.timeout.ms": socket_timeout_ms, **_QUIET}
    )


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


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    timeout_s: float = 30.0,
    alive: Callable[[], bool] | None = None,
) -> None:
    """Create topic (replication factor 1) and wait until every partition has a leader.
    Each request may take up to timeout_s, at most 300 s, librdkafka's limit (a broker
    creating thousands of partitions answers once it has created them). ``alive``, if
    given, is asked while waiting: a broker that has exited fails the wait at once."""
    admin = _admin(bootstrap, socket_timeout_ms=int(min(max(5.0, timeout_s), 300.0) * 1000))
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout_s,
        request_timeout=timeout_s,
    )
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            futures[topic].result(timeout=max(0.01, min(1.0, deadline - time.monotonic())))
            break
        except KafkaException as exc:
            raise BenchError(f"CreateTopics {topic} on {bootstrap}: {exc}") from exc
        except TimeoutError:
            if alive is not None and not alive():
                raise BenchError(f"{bootstrap} exited while creating {topic}") from None
            if time.monotonic() >= deadline:
                raise BenchError(f"CreateTopics {topic} on {bootstrap}: no answer after "
                                 f"{timeout_s:.0f} s") from None
    last_error = "no leaders"
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(topic=topic, timeout=10.0)
        except KafkaException as exc:  # a broker busy creating partitions may answer late
            last_error = str(exc)
            if alive is not None and not alive():
                raise BenchError(f"{bootstrap} exited while creating {topic}") from exc
            time.sleep(0.1)
            continue
        meta = metadata.topics.get(topic)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise BenchError(
        f"topic {topic} on {bootstrap} has no leaders after {timeout_s:.0f} s ({last_error})"
    )

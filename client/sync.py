"""``SyncClient``: the same ``KafkaClient`` for blocking code (Spark executors, tests, scripts).

The client runs on an event loop in a thread of its own (uvloop, like the broker); each call
hands a coroutine to that loop and blocks until it finishes. The client's own timeouts bound
every call (``request.timeout.ms``, ``default.api.timeout.ms``); ``CALL_SLACK_S`` on top of
them guards against a loop that stopped answering. ``close`` closes the connections and
stops the thread. Calls may come from any thread, one at a time or concurrently.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import threading
from collections.abc import Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Self, TypeVar

import uvloop

from client.admin import Admin, ClusterDescription, ConfigEntry, LogDirInfo
from client.config import ClientConfig
from client.connection import Request
from client.errors import timeout_error
from client.fetch import FetchedPartition, fetch
from client.groups import GroupDescription, GroupListing, Groups
from client.kafka_client import KafkaClient
from client.metadata import ClusterMetadata, TopicInfo
from client.offsets import ListedOffset, list_offsets
from client.produce import ProducedBatch, produce
from protocol.topic_partition import TopicPartition

T = TypeVar("T")
R = TypeVar("R")

CALL_SLACK_S: Final = 30.0
STOP_TIMEOUT_S: Final = 10.0


class SyncClient:
    """A ``KafkaClient`` (``.client``) driven from blocking code; use as a context manager."""

    def __init__(self, bootstrap_servers: str, config: ClientConfig | None = None, *,
                 timeout_ms: int | None = None, connect: bool = True) -> None:
        """``timeout_ms``: ``request.timeout.ms`` and ``default.api.timeout.ms`` of ``config``;
        ``connect``: reach a bootstrap broker now (a wrong address fails here)."""
        if timeout_ms is not None:
            config = dataclasses.replace(config or ClientConfig(), request_timeout_ms=timeout_ms,
                                         default_api_timeout_ms=timeout_ms)
        self.client = KafkaClient(bootstrap_servers, config)
        self.admin = Admin(self.client)
        self.groups = Groups(self.client)
        self._loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="minikafka-client",
                                        daemon=True)
        self._thread.start()
        self._closed = False
        if connect:
            try:
                self.run(self.client.start())
            except BaseException:
                self.close()
                raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def config(self) -> ClientConfig:
        return self.client.config

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the client's loop and return its result (or raise its error)."""
        if self._closed:
            coro.close()
            raise RuntimeError("SyncClient is closed")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        bound_s = (self.config.default_api_timeout_ms + self.config.request_timeout_ms) / 1000 + CALL_SLACK_S
        try:
            return future.result(bound_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise timeout_error(f"No result within {bound_s:.0f} s") from None
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: stop the coroutine too
            raise

    def close(self) -> None:
        if self._closed:
            return
        try:
            if self._thread.is_alive():
                self.run(self.client.close())
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(STOP_TIMEOUT_S)
            if not self._thread.is_alive():
                self._loop.close()

    # -- requests ------------------------------------------------------------------------

    def send(self, request: Request[R], version: int | None = None, *, node_id: int | None = None,
             timeout_ms: int | None = None) -> R:
        """Send ``request`` to ``node_id`` (the least loaded broker when None)."""
        if node_id is None:
            return self.run(self.client.send_any(request, version=version, timeout_ms=timeout_ms))
        return self.run(self.client.send(node_id, request, version=version, timeout_ms=timeout_ms))

    def version_for(self, request_cls: Any, our_max: int | None = None, *, node_id: int | None = None) -> int:
        return self.run(self.client.version_for(node_id, request_cls, our_max))

    def api_versions(self, node_id: int | None = None) -> dict[int, tuple[int, int]]:
        return self.run(self.client.api_versions(node_id))

    def refresh_metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        return self.run(self.client.refresh_metadata(topics))

    def leader_for(self, tp: TopicPartition, *, timeout_ms: int | None = None) -> int:
        return self.run(self.client.leader_for(tp, timeout_ms=timeout_ms))

    def invalidate(self, topics: Sequence[str]) -> None:
        self.client.invalidate(topics)

    def list_offsets(self, wanted: Mapping[TopicPartition, int], *, isolation_level: int = 0,
                     timeout_ms: int | None = None) -> dict[TopicPartition, ListedOffset]:
        return self.run(list_offsets(self.client, wanted, isolation_level=isolation_level,
                                     timeout_ms=timeout_ms))

    def fetch(self, tp: TopicPartition, offset: int, *, max_bytes: int = 1 << 20, max_wait_ms: int = 500,
              isolation_level: int = 0, timeout_ms: int | None = None) -> FetchedPartition:
        return self.run(fetch(self.client, tp, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms,
                              isolation_level=isolation_level, timeout_ms=timeout_ms))

    def produce(self, tp: TopicPartition, records: bytes, *, acks: int = -1,
                timeout_ms: int = 30_000) -> ProducedBatch | None:
        return self.run(produce(self.client, tp, records, acks=acks, timeout_ms=timeout_ms))

    # -- admin ---------------------------------------------------------------------------

    def list_topics(self, include_internal: bool = True) -> list[TopicInfo]:
        return self.run(self.admin.list_topics(include_internal))

    def describe_topics(self, names: Sequence[str]) -> list[TopicInfo]:
        return self.run(self.admin.describe_topics(names))

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None) -> None:
        self.run(self.admin.create_topic(name, num_partitions, replication_factor, configs))

    def delete_topics(self, names: Sequence[str]) -> None:
        self.run(self.admin.delete_topics(names))

    def create_partitions(self, name: str, total: int) -> None:
        self.run(self.admin.create_partitions(name, total))

    def describe_configs(self, resource_type: int, name: str,
                         keys: Sequence[str] | None = None) -> list[ConfigEntry]:
        return self.run(self.admin.describe_configs(resource_type, name, keys))

    def topic_config_overrides(self, name: str) -> dict[str, str]:
        return self.run(self.admin.topic_config_overrides(name))

    def alter_topic_configs(self, name: str, set_configs: Mapping[str, str],
                            delete: Sequence[str] = ()) -> None:
        self.run(self.admin.alter_topic_configs(name, set_configs, delete))

    def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return self.run(self.admin.delete_records(before))

    def describe_cluster(self) -> ClusterDescription:
        return self.run(self.admin.describe_cluster())

    def describe_log_dirs(self, broker_id: int) -> list[LogDirInfo]:
        return self.run(self.admin.describe_log_dirs(broker_id))

    def list_groups(self, states: Sequence[str] = ()) -> list[GroupListing]:
        return self.run(self.groups.list_groups(states))

    def describe_group(self, group_id: str) -> GroupDescription:
        return self.run(self.groups.describe_group(group_id))

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        return self.run(self.groups.committed_offsets(group_id))

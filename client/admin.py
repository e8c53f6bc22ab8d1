"""Admin calls (Kafka's Admin API, the parts the tools use), over ``KafkaClient``.

Routing as Kafka's AdminClient: CreateTopics, DeleteTopics and CreatePartitions go to the
controller (from Metadata; NOT_CONTROLLER refreshes it and retries); DescribeConfigs and
IncrementalAlterConfigs of a broker go to that broker, of a topic to any broker;
DescribeLogDirs to the broker asked about; DeleteRecords to each partition's leader.
Errors raise ``ClientError`` with Kafka's error name and the broker's message when it gave
one; retriable ones are retried until ``default.api.timeout.ms``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from client.errors import ClientError, check
from client.kafka_client import KafkaClient
from client.metadata import TopicInfo
from protocol.config_codes import AlterConfigOpType, ConfigResourceType
from protocol.config_codes import ConfigSource as ConfigSource  # re-exported for the tools
from protocol.errors import ErrorCode
from protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from protocol.messages.create_partitions import CreatePartitionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.delete_records import DeleteRecordsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from protocol.topic_partition import TopicPartition

T = TypeVar("T")

NOT_CONTROLLER: Final = ErrorCode.NOT_CONTROLLER


# Kafka's config codes (protocol.config_codes) by the names the tools use.
ResourceType = ConfigResourceType
AlterOp = AlterConfigOpType


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[tuple[str, str | None, int], ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    path: str
    error_code: int
    total_bytes: int
    usable_bytes: int
    # partition -> (size bytes, offset lag, is future)
    partitions: dict[TopicPartition, tuple[int, int, bool]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int
    brokers: dict[int, tuple[str, int, str | None]]


def _config_node(resource_type: int, name: str) -> int | None:
    """The broker a config request must go to (a broker's own configs), else None: any."""
    if resource_type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and name:
        try:
            return int(name)
        except ValueError:
            raise ClientError(ErrorCode.INVALID_REQUEST.name, f"Invalid broker id '{name}'") from None
    return None


class Admin:
    """Admin calls over ``client`` (which it does not own: close the client, not this)."""

    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    async def _retry(self, op: Callable[[], Awaitable[T]], what: str) -> T:
        return await self.client.retry(op, what=what)

    # -- topics --------------------------------------------------------------------------

    async def list_topics(self, include_internal: bool = True) -> list[TopicInfo]:
        meta = await self._retry(lambda: self.client.refresh_metadata(None), "Metadata")
        return sorted((t for t in meta.topics.values() if include_internal or not t.is_internal),
                      key=lambda t: t.name)

    async def describe_topics(self, names: Sequence[str]) -> list[TopicInfo]:
        """The topics in the order asked; ClientError for one that does not exist."""
        meta = await self._retry(lambda: self.client.refresh_metadata(names), "Metadata")
        out = []
        for name in names:
            topic = meta.topics.get(name)
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic is None else topic.error_code
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise ClientError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.name,
                                  f"Topic '{name}' does not exist as expected")
            check(code, None, f"Topic '{name}'")
            assert topic is not None
            out.append(topic)
        return out

    async def _controller(self) -> int:
        if self.client.cluster.controller_id < 0:
            await self.client.refresh_metadata([])
        node = self.client.cluster.controller_id
        if node < 0:
            raise ClientError(ErrorCode.NOT_CONTROLLER.name, "The cluster has no controller now")
        return node

    async def _controller_call(self, op: Callable[[int], Awaitable[T]], what: str) -> T:
        async def attempt() -> T:
            node = await self._controller()
            try:
                return await op(node)
            except ClientError as exc:
                if exc.error_code in (NOT_CONTROLLER, ErrorCode.NETWORK_EXCEPTION):
                    self.client.cluster.controller_id = -1
                raise

        return await self._retry(attempt, what)

    async def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                           configs: Mapping[str, str] | None = None, *,
                           assignments: Mapping[int, Sequence[int]] | None = None,
                           validate_only: bool = False) -> None:
        """Create one topic (-1: the broker's default partitions / replication factor)."""
        topic = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=-1 if assignments else num_partitions,
            replication_factor=-1 if assignments else replication_factor,
            assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=list(b))
                         for p, b in sorted((assignments or {}).items())],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                     for k, v in (configs or {}).items()])
        timeout_ms = self.client.config.request_timeout_ms

        async def op(node: int) -> None:
            request = CreateTopicsRequest(topics=[topic], timeout_ms=timeout_ms, validate_only=validate_only)
            for result in (await self.client.send(node, request)).topics:
                check(result.error_code, result.error_message, f"Create topic '{name}'")

        await self._controller_call(op, f"Create topic '{name}'")

    async def delete_topics(self, names: Sequence[str]) -> None:
        timeout_ms = self.client.config.request_timeout_ms

        async def op(node: int) -> None:
            version = await self.client.version_for(node, DeleteTopicsRequest)
            request = DeleteTopicsRequest(timeout_ms=timeout_ms)
            if version >= 6:
                request.topics = [DeleteTopicsRequest.DeleteTopicState(name=n) for n in names]
            else:
                request.topic_names = list(names)
            for result in (await self.client.send(node, request, version=version)).responses:
                check(result.error_code, result.error_message, f"Delete topic '{result.name}'")

        await self._controller_call(op, "Delete topics")

    async def create_partitions(self, name: str, total: int,
                                assignments: Sequence[Sequence[int]] | None = None) -> None:
        """Grow ``name`` to ``total`` partitions (``assignments``: replicas of each new one)."""
        topic = CreatePartitionsRequest.CreatePartitionsTopic(
            name=name, count=total,
            assignments=None if assignments is None else [
                CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=list(b)) for b in assignments])
        timeout_ms = self.client.config.request_timeout_ms

        async def op(node: int) -> None:
            request = CreatePartitionsRequest(topics=[topic], timeout_ms=timeout_ms)
            for result in (await self.client.send(node, request)).results:
                check(result.error_code, result.error_message, f"Create partitions of '{name}'")

        await self._controller_call(op, f"Create partitions of '{name}'")

    async def alter_partition_reassignments(
            self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, tuple[str, str | None]]:
        """Start (a replica list) or cancel (None) reassignments; per partition the error
        name (``NONE`` when started) and message, as the controller answered."""
        by_topic: dict[str, list[AlterPartitionReassignmentsRequest.ReassignablePartition]] = {}
        for tp, replicas in sorted(targets.items()):
            by_topic.setdefault(tp.topic, []).append(
                AlterPartitionReassignmentsRequest.ReassignablePartition(
                    partition_index=tp.partition,
                    replicas=None if replicas is None else list(replicas)))
        timeout_ms = self.client.config.request_timeout_ms

        async def op(node: int) -> dict[TopicPartition, tuple[str, str | None]]:
            request = AlterPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=[
                AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=ps)
                for t, ps in by_topic.items()])
            response = await self.client.send(node, request)
            check(response.error_code, response.error_message, "Alter partition reassignments")
            return {TopicPartition(t.name, p.partition_index):
                    (ErrorCode(p.error_code).name, p.error_message)
                    for t in response.responses for p in t.partitions}

        return await self._controller_call(op, "Alter partition reassignments")

    async def list_partition_reassignments(
            self, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """Partitions in motion: (replicas, adding, removing)."""
        topics = None
        if partitions is not None:
            wanted: dict[str, list[int]] = {}
            for tp in partitions:
                wanted.setdefault(tp.topic, []).append(tp.partition)
            topics = [ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
                name=t, partition_indexes=sorted(ps)) for t, ps in wanted.items()]
        timeout_ms = self.client.config.request_timeout_ms

        async def op(node: int) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
            request = ListPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=topics)
            response = await self.client.send(node, request)
            check(response.error_code, response.error_message, "List partition reassignments")
            return {TopicPartition(t.name, p.partition_index):
                    (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                    for t in response.topics for p in t.partitions}

        return await self._controller_call(op, "List partition reassignments")

    async def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Move each partition's log start up to the offset given; the new low watermarks."""
        out: dict[TopicPartition, int] = {}
        timeout_ms = self.client.config.request_timeout_ms

        async def attempt() -> dict[TopicPartition, int]:
            pending = {TopicPartition(*tp): o for tp, o in before.items() if TopicPartition(*tp) not in out}
            for node, tps in (await self.client.leaders_now(pending)).items():
                topics: dict[str, list[DeleteRecordsRequest.DeleteRecordsPartition]] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(
                        DeleteRecordsRequest.DeleteRecordsPartition(partition_index=tp.partition, offset=pending[tp]))
                request = DeleteRecordsRequest(timeout_ms=timeout_ms, topics=[
                    DeleteRecordsRequest.DeleteRecordsTopic(name=n, partitions=p) for n, p in topics.items()])
                response = await self.client.send(node, request)
                for t in response.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if p.error_code:
                            error = ClientError.from_code(p.error_code, None, f"Delete records of {tp}")
                            if error.needs_metadata:
                                self.client.invalidate([tp.topic])
                            raise error
                        out[tp] = p.low_watermark
            return out

        return await self._retry(attempt, "DeleteRecords")

    # -- configs -------------------------------------------------------------------------

    async def describe_configs(self, resource_type: int, name: str, keys: Sequence[str] | None = None,
                               *, include_synonyms: bool = False) -> list[ConfigEntry]:
        node = _config_node(resource_type, name)

        async def attempt() -> list[ConfigEntry]:
            version = await self.client.version_for(node, DescribeConfigsRequest)
            request = DescribeConfigsRequest(
                resources=[DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=resource_type, resource_name=name,
                    configuration_keys=None if keys is None else list(keys))],
                include_synonyms=include_synonyms)
            if node is None:
                response = await self.client.send_any(request, version=version)
            else:
                response = await self.client.send(node, request, version=version)
            out: list[ConfigEntry] = []
            for result in response.results:
                check(result.error_code, result.error_message, f"Describe configs of '{name}'")
                for c in result.configs:
                    source = c.config_source
                    if version == 0:
                        source = ConfigSource.DEFAULT_CONFIG if c.is_default else ConfigSource.UNKNOWN
                    out.append(ConfigEntry(c.name, c.value, source, c.read_only, c.is_sensitive,
                                           tuple((s.name, s.value, s.source) for s in c.synonyms)))
            return out

        return await self._retry(attempt, f"Describe configs of '{name}'")

    async def topic_config_overrides(self, name: str) -> dict[str, str]:
        """The topic's configs that are not defaults (what kafka-topics prints)."""
        entries = await self.describe_configs(ResourceType.TOPIC, name)
        return {e.name: e.value for e in entries if not e.is_default and e.value is not None}

    async def incremental_alter_configs(
        self, resource_type: int, name: str, ops: Sequence[tuple[str, AlterOp, str | None]],
        *, validate_only: bool = False,
    ) -> None:
        """Apply ``(config, operation, value)`` changes to one resource."""
        node = _config_node(resource_type, name)
        request = IncrementalAlterConfigsRequest(
            resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=resource_type, resource_name=name, configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(
                        name=k, config_operation=op, value=None if op == AlterOp.DELETE else v)
                    for k, op, v in ops])],
            validate_only=validate_only)

        async def attempt() -> None:
            if node is None:
                response = await self.client.send_any(request)
            else:
                response = await self.client.send(node, request)
            for result in response.responses:
                check(result.error_code, result.error_message, f"Alter configs of '{name}'")

        await self._retry(attempt, f"Alter configs of '{name}'")

    async def alter_topic_configs(self, name: str, set_configs: Mapping[str, str], delete: Sequence[str]) -> None:
        ops: list[tuple[str, AlterOp, str | None]] = [(k, AlterOp.SET, v) for k, v in set_configs.items()]
        ops += [(k, AlterOp.DELETE, None) for k in delete]
        await self.incremental_alter_configs(ResourceType.TOPIC, name, ops)

    # -- brokers -------------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        async def attempt() -> ClusterDescription:
            response = await self.client.send_any(DescribeClusterRequest())
            check(response.error_code, response.error_message, "DescribeCluster")
            return ClusterDescription(response.cluster_id, response.controller_id,
                                      {b.broker_id: (b.host, b.port, b.rack) for b in response.brokers})

        return await self._retry(attempt, "DescribeCluster")

    async def describe_log_dirs(self, broker_id: int,
                                topics: Mapping[str, Sequence[int]] | None = None) -> list[LogDirInfo]:
        """The log dirs of one broker and the partitions in them (all when ``topics`` is None)."""
        request = DescribeLogDirsRequest(topics=None if topics is None else [
            DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partitions=list(p)) for t, p in topics.items()])

        async def attempt() -> list[LogDirInfo]:
            response = await self.client.send(broker_id, request)
            check(response.error_code, None, f"DescribeLogDirs of broker {broker_id}")
            return [
                LogDirInfo(r.log_dir, r.error_code, r.total_bytes, r.usable_bytes, {
                    TopicPartition(t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
                    for t in r.topics for p in t.partitions})
                for r in response.results
            ]

        return await self._retry(attempt, f"DescribeLogDirs of broker {broker_id}")

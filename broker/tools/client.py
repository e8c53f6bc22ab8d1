"""A small synchronous Kafka protocol client for the command-line tools.

``KafkaClient`` speaks to one broker over a blocking socket with a deadline on every
call: it sends ApiVersions first (v3; v0 when the broker answers UNSUPPORTED_VERSION),
then each request at the highest version both sides support. Frames are read with a bound
(``max_frame_bytes``) and a response whose correlation id does not match closes the
connection with ``ClientError``. ``AdminClient`` adds the topic operations the topics tool
needs and turns Kafka error codes into ``ClientError(error_name, message)``.
"""

from __future__ import annotations

import socket
import time
import uuid
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Self, TypeVar

from protocol import frames
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.create_partitions import CreatePartitionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.metadata import MetadataRequest

CLIENT_ID: Final = "minikafka-tools"
MAX_FRAME_BYTES: Final = 64 * 1024 * 1024
RESOURCE_TOPIC: Final = 2
CONFIG_SOURCE_DEFAULT: Final = 5
OP_SET: Final = 0
OP_DELETE: Final = 1

R = TypeVar("R")


class ClientError(Exception):
    """A failed call: a Kafka error code (``error_name`` is its name) or a broken exchange."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


def _check(code: int, message: str | None, what: str) -> None:
    if code == 0:
        return
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"UNKNOWN_ERROR_{code}"
    raise ClientError(name, message or f"{what}: {name}")


def parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    """The first ``host:port`` of a comma-separated bootstrap list."""
    first = bootstrap.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ClientError("INVALID_CONFIG", f"Invalid url in bootstrap.servers: {first}")
    return host.strip("[]"), int(port)


class KafkaClient:
    """One blocking connection; every call finishes or fails within ``timeout_ms``."""

    def __init__(self, bootstrap: str, timeout_ms: int = 30_000, client_id: str = CLIENT_ID) -> None:
        self._timeout_ms = timeout_ms
        self._client_id = client_id
        self._correlation_id = 0
        host, port = parse_bootstrap(bootstrap)
        self._sock = socket.create_connection((host, port), timeout=timeout_ms / 1000)
        self._versions: dict[int, tuple[int, int]] = {}
        try:
            self._versions = self._api_versions()
        except BaseException:
            self._sock.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def version_for(self, request_cls: type[Any], our_max: int | None = None) -> int:
        """Highest version of ``request_cls`` both sides support; ClientError if none."""
        key: int = request_cls.API_KEY
        theirs = self._versions.get(key)
        ours_max = request_cls.HIGHEST_VERSION if our_max is None else our_max
        if theirs is None or theirs[0] > ours_max:
            raise ClientError(
                "UNSUPPORTED_VERSION",
                f"The broker does not support {request_cls.__name__[:-len('Request')]}",
            )
        return min(ours_max, theirs[1])

    def send(self, request: Any, version: int) -> Any:
        """Send ``request`` at ``version``; return the decoded response body."""
        self._correlation_id += 1
        correlation_id = self._correlation_id
        api_key: int = request.API_KEY
        header = frames.RequestHeader(api_key, version, correlation_id, self._client_id)
        deadline = time.monotonic() + self._timeout_ms / 1000
        try:
            self._sock.settimeout(self._timeout_ms / 1000)
            self._sock.sendall(frames.encode_request(header, request))
            size = frames.decode_frame_size(self._read(4, deadline), MAX_FRAME_BYTES)
            frame = self._read(size, deadline)
            got, body = frames.decode_response(frame, api_key, version)
        except TimeoutError:
            self.close()
            raise ClientError("REQUEST_TIMED_OUT", f"No answer within {self._timeout_ms} ms") from None
        except ProtocolError as exc:
            self.close()
            raise ClientError("CORRUPT_MESSAGE", f"Bad response: {exc}") from None
        except OSError as exc:
            self.close()
            raise ClientError("NETWORK_EXCEPTION", f"Connection to the broker failed: {exc}") from None
        if got != correlation_id:
            self.close()
            raise ClientError(
                "CORRUPT_MESSAGE", f"Correlation id {got} does not match request {correlation_id}"
            )
        return body

    def _read(self, n: int, deadline: float) -> bytes:
        chunks: list[bytes] = []
        remaining = n
        while remaining > 0:
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                raise TimeoutError
            self._sock.settimeout(left_s)
            chunk = self._sock.recv(min(remaining, 1 << 20))
            if not chunk:
                raise ClientError("NETWORK_EXCEPTION", "The broker closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        request = ApiVersionsRequest(client_software_name="minikafka-tools", client_software_version="0.1.0")
        response: ApiVersionsResponse = self.send(request, 3)
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            response = self.send(ApiVersionsRequest(), 0)
        _check(response.error_code, None, "ApiVersions")
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[PartitionMetadata] = field(default_factory=list)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


class AdminClient(KafkaClient):
    """Topic operations over ``KafkaClient``; errors raise ``ClientError``."""

    def _metadata(self, names: list[str] | None) -> list[TopicMetadata]:
        version = self.version_for(MetadataRequest)
        topics = None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
        response = self.send(MetadataRequest(topics=topics, allow_auto_topic_creation=False), version)
        out = []
        for t in response.topics:
            _check(t.error_code, None, f"Topic '{t.name}'")
            parts = [
                PartitionMetadata(p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
                for p in t.partitions
            ]
            out.append(TopicMetadata(t.name or "", t.topic_id, t.is_internal, parts))
        return out

    def list_topics(self) -> list[TopicMetadata]:
        return self._metadata(None)

    def describe_topics(self, names: list[str]) -> list[TopicMetadata]:
        return self._metadata(names)

    def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        version = self.version_for(CreateTopicsRequest)
        topic = CreateTopicsRequest.CreatableTopic(
            name=name,
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
        )
        response = self.send(CreateTopicsRequest(topics=[topic], timeout_ms=self._timeout_ms), version)
        for result in response.topics:
            _check(result.error_code, result.error_message, f"Create topic '{name}'")

    def delete_topics(self, names: list[str]) -> None:
        version = self.version_for(DeleteTopicsRequest)
        request = DeleteTopicsRequest(timeout_ms=self._timeout_ms)
        if version >= 6:
            request.topics = [DeleteTopicsRequest.DeleteTopicState(name=n) for n in names]
        else:
            request.topic_names = list(names)
        response = self.send(request, version)
        for result in response.responses:
            _check(result.error_code, result.error_message, f"Delete topic '{result.name}'")

    def create_partitions(self, name: str, total: int) -> None:
        version = self.version_for(CreatePartitionsRequest)
        topic = CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=total, assignments=None)
        response = self.send(CreatePartitionsRequest(topics=[topic], timeout_ms=self._timeout_ms), version)
        for result in response.results:
            _check(result.error_code, result.error_message, f"Create partitions of '{name}'")

    def topic_config_overrides(self, name: str) -> dict[str, str]:
        """The topic's configs that are not Kafka defaults (what kafka-topics prints)."""
        version = self.version_for(DescribeConfigsRequest)
        resource = DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=RESOURCE_TOPIC, resource_name=name, configuration_keys=None
        )
        response = self.send(DescribeConfigsRequest(resources=[resource]), version)
        out: dict[str, str] = {}
        for result in response.results:
            _check(result.error_code, result.error_message, f"Describe configs of '{name}'")
            for c in result.configs:
                is_default = c.is_default if version == 0 else c.config_source == CONFIG_SOURCE_DEFAULT
                if not is_default and c.value is not None:
                    out[c.name] = c.value
        return out

    def alter_topic_configs(self, name: str, set_configs: dict[str, str], delete: list[str]) -> None:
        version = self.version_for(IncrementalAlterConfigsRequest)
        ops = [
            IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=OP_SET, value=v)
            for k, v in set_configs.items()
        ] + [
            IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=OP_DELETE, value=None)
            for k in delete
        ]
        resource = IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=RESOURCE_TOPIC, resource_name=name, configs=ops
        )
        response = self.send(IncrementalAlterConfigsRequest(resources=[resource]), version)
        for result in response.responses:
            _check(result.error_code, result.error_message, f"Alter configs of '{name}'")

"""The client's pure parts: version choice, the ApiVersions downgrade rule, backoff, settings
by Kafka's property names, bootstrap parsing, metadata merging, error classes."""

from __future__ import annotations

import re
import uuid

import pytest

from client import ClientConfig, ClientError, parse_bootstrap
from client.backoff import backoff_ms
from client.config import unused_properties
from client.metadata import ClusterMetadata, PartitionInfo, TopicInfo
from client.security import jaas_credentials
from client.versions import pick_version, retry_version
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsResponse
from protocol.messages.fetch import FetchRequest
from protocol.messages.metadata import MetadataRequest
from protocol.topic_partition import TopicPartition

pytestmark = pytest.mark.timeout(10)


def test_pick_version_is_the_highest_both_support() -> None:
    ours = FetchRequest.HIGHEST_VERSION
    assert pick_version(FetchRequest, {1: (4, 12)}) == 12
    assert pick_version(FetchRequest, {1: (0, ours + 5)}) == ours
    assert pick_version(FetchRequest, {1: (4, 17)}, our_max=12) == 12
    with pytest.raises(ClientError) as missing:
        pick_version(FetchRequest, {3: (0, 12)})
    assert missing.value.error_name == "UNSUPPORTED_VERSION" and "Fetch" in str(missing.value)
    with pytest.raises(ClientError):  # the broker's range starts above ours
        pick_version(MetadataRequest, {3: (MetadataRequest.HIGHEST_VERSION + 1, 99)})
    with pytest.raises(ClientError):  # our_max below the broker's lowest
        pick_version(FetchRequest, {1: (4, 17)}, our_max=3)


def _unsupported(api_versions_range: tuple[int, int] | None) -> ApiVersionsResponse:
    keys = [] if api_versions_range is None else [
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=api_versions_range[0],
                                       max_version=api_versions_range[1])]
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=keys)


def test_api_versions_downgrade_rule() -> None:
    assert retry_version(ApiVersionsResponse(error_code=0), 4) is None
    assert retry_version(_unsupported((0, 2)), 4) == 2
    assert retry_version(_unsupported(None), 4) == 0  # an old broker lists nothing
    assert retry_version(_unsupported((0, 9)), 4) == 0  # no progress: fall back to v0
    assert retry_version(_unsupported((0, 2)), 0) is None  # v0 is final
    assert retry_version(ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST), 4) is None


def test_backoff_grows_doubles_and_caps_with_jitter() -> None:
    for failures, expected in [(0, 100), (1, 200), (2, 400), (3, 800), (4, 1000), (40, 1000)]:
        values = [backoff_ms(failures, 100, 1000) for _ in range(200)]
        assert all(expected * 0.8 <= v <= expected * 1.2 for v in values), (failures, min(values), max(values))
    assert backoff_ms(3, 0, 1000) == 0


def test_config_from_kafka_property_names() -> None:
    props = {"client.id": "x", "request.timeout.ms": "1500", "retry.backoff.ms": "0",
             "max.in.flight.requests.per.connection": "1", "acks": "all", "bootstrap.servers": "h:1"}
    config = ClientConfig.from_properties(props)
    assert (config.client_id, config.request_timeout_ms, config.retry_backoff_ms,
            config.max_in_flight_requests_per_connection) == ("x", 1500, 0, 1)
    assert config.default_api_timeout_ms == 60_000
    assert unused_properties(props) == ["acks"]
    with pytest.raises(ClientError, match=re.escape("request.timeout.ms")):
        ClientConfig.from_properties({"request.timeout.ms": "soon"})
    with pytest.raises(ClientError, match=re.escape("max.in.flight.requests.per.connection")):
        ClientConfig(max_in_flight_requests_per_connection=0)
    with pytest.raises(ClientError, match=re.escape("security.protocol=SSLv3")):
        ClientConfig.from_properties({"security.protocol": "SSLv3"})
    assert ClientConfig.from_properties({"security.protocol": "SSL"}).tls is not None


def test_client_jaas_credentials() -> None:
    assert jaas_credentials('org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="al ice" password="p\\"w;d";') == ("al ice", 'p"w;d')
    assert jaas_credentials("org.apache.kafka.common.security.scram.ScramLoginModule required "
                            "username=bob password=s3cret;") == ("bob", "s3cret")
    for bad in ("", "username=bob password=x;", "X required username=bob;"):
        with pytest.raises(ClientError) as refused:
            jaas_credentials(bad)
        assert refused.value.error_name == "INVALID_CONFIG"


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("h1:9092, [::1]:9093,") == [("h1", 9092), ("::1", 9093)]
    for bad in ["h1", "h1:x", ":9092", "h:0", "h:70000", " , "]:
        with pytest.raises(ClientError) as exc:
            parse_bootstrap(bad)
        assert exc.value.error_name == "INVALID_CONFIG"


def _topic(name: str, leader: int) -> TopicInfo:
    return TopicInfo(name, uuid.uuid4(), False, 0, {0: PartitionInfo(0, leader, 1, (leader,), (leader,))})


def test_metadata_merge_replaces_only_the_topics_asked() -> None:
    old = ClusterMetadata(topics={"a": _topic("a", 1), "b": _topic("b", 1)})
    newer = ClusterMetadata(controller_id=2, topics={"a": _topic("a", 2)})
    merged = old.merge(newer, ["a", "gone"])
    assert merged.leader(TopicPartition("a", 0)) == 2 and merged.leader(TopicPartition("b", 0)) == 1
    assert merged.controller_id == 2
    everything = old.merge(newer, None)
    assert set(everything.topics) == {"a"}
    assert ClusterMetadata(topics={"a": _topic("a", -1)}).leader(TopicPartition("a", 0)) is None


def test_error_classes_follow_kafka() -> None:
    assert ClientError("NOT_LEADER_OR_FOLLOWER", "").retriable
    assert ClientError("NETWORK_EXCEPTION", "").needs_metadata
    assert not ClientError("TOPIC_ALREADY_EXISTS", "").retriable
    assert not ClientError("INVALID_CONFIG", "").retriable
    assert ClientError.from_code(9999, None, "x").error_name == "UNKNOWN_ERROR_9999"

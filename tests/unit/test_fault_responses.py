"""Error responses of armed faults (broker.faults.responses): for every API the broker
serves, at every version it serves, a response built for any request encodes, decodes, and
carries the error code on every entry; the entries mirror what the request asked about."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.faults import FaultInjector, api_key_of, error_code_of
from broker.faults.responses import error_response, supports
from broker.handlers import REGISTRY
from protocol.codegen import StructSpec
from protocol.errors import ErrorCode
from protocol.messages import API_NAMES, REQUESTS, RESPONSES
from tests.unit.message_strategies import message_strategy, spec_by_name

pytestmark = pytest.mark.timeout(300)

SERVED = [(key, version) for key, spec in sorted(REGISTRY.items()) if supports(key)
          for version in range(spec.min_version, spec.max_version + 1)]


def error_codes(message: Any, struct: StructSpec, version: int) -> list[int]:
    """Every ``error_code`` a decoded message carries at ``version``, nested entries
    included (matched ACLs are results, not entries the request named)."""
    found: list[int] = []
    for f in struct.fields:
        if version not in f.versions:
            continue
        value = getattr(message, f.py_name)
        if f.py_name == "error_code":
            found.append(value)
        elif f.struct is not None and f.py_name != "matching_acls" and value is not None:
            for item in value if f.is_array else [value]:
                found += error_codes(item, f.struct, version)
    return found


def test_every_api_a_client_sends_has_an_error_response() -> None:
    client_apis = {"Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
                   "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup",
                   "DescribeGroups", "ListGroups", "ApiVersions", "CreateTopics", "DeleteTopics",
                   "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch", "DescribeConfigs",
                   "AlterConfigs", "CreatePartitions", "DeleteGroups", "IncrementalAlterConfigs",
                   "OffsetDelete", "DescribeCluster", "DescribeLogDirs", "SaslHandshake",
                   "SaslAuthenticate", "CreateAcls", "DeleteAcls", "DescribeAcls"}
    assert {API_NAMES[k] for k in REGISTRY if supports(k)} >= client_apis


@pytest.mark.parametrize(("api_key", "version"), SERVED,
                         ids=[f"{API_NAMES[k]}-v{v}" for k, v in SERVED])
@settings(max_examples=6)
@given(data=st.data())
def test_error_response_encodes_with_the_code_everywhere(api_key: int, version: int,
                                                         data: st.DataObject) -> None:
    request = data.draw(message_strategy(REQUESTS[api_key].__name__, version))
    code = data.draw(st.sampled_from([ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                      ErrorCode.REQUEST_TIMED_OUT]))
    response = error_response(api_key, request, version, code)
    decoded = RESPONSES[api_key].decode(response.encode(version), version)
    spec = spec_by_name(RESPONSES[api_key].__name__)
    codes = error_codes(decoded, spec.top, version)
    # Every entry carries the code (an empty request may leave no entry to carry it).
    assert set(codes) <= {int(code)}


def test_produce_error_response_mirrors_topics_and_partitions() -> None:
    from protocol.messages import ProduceRequest as P

    request = P(acks=-1, timeout_ms=1000, topic_data=[
        P.TopicProduceData(name="a", partition_data=[P.PartitionProduceData(index=0),
                                                     P.PartitionProduceData(index=2)]),
        P.TopicProduceData(name="b", partition_data=[P.PartitionProduceData(index=1)])])
    response = error_response(0, request, 9, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in response.responses] == [("a", [(0, 6, -1), (2, 6, -1)]), ("b", [(1, 6, -1)])]


def test_entries_mirror_the_request() -> None:
    from protocol.messages import FetchRequest as F
    from protocol.messages import FindCoordinatorRequest, MetadataRequest

    fetch = F(topics=[F.FetchTopic(topic="t", partitions=[F.FetchPartition(partition=3)])])
    response = error_response(1, fetch, 12, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert response.error_code == 6
    ((topic,),) = [response.responses]
    assert topic.topic == "t"
    assert [(p.partition_index, p.error_code, p.high_watermark) for p in topic.partitions] == [(3, 6, -1)]
    assert error_response(1, fetch, 6, 6).error_code == 0  # no top-level code before v7

    metadata = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")])
    response = error_response(3, metadata, 12, ErrorCode.LEADER_NOT_AVAILABLE)
    assert [(t.name, t.error_code) for t in response.topics] == [("t", 5)]

    find = FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"])
    response = error_response(10, find, 4, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert [(c.key, c.error_code, c.node_id) for c in response.coordinators] == [
        ("g1", 14, -1), ("g2", 14, -1)]
    old = error_response(10, FindCoordinatorRequest(key="g"), 3, 14)
    assert (old.error_code, old.node_id) == (14, -1)


def test_names_and_codes() -> None:
    assert api_key_of("Produce") == api_key_of("produce") == api_key_of(0) == 0
    assert api_key_of("find_coordinator") == 10
    assert error_code_of("not_leader_or_follower") == 6 == error_code_of(6)
    with pytest.raises(ValueError, match="unknown API"):
        api_key_of("Produse")
    with pytest.raises(ValueError, match="unknown error"):
        error_code_of("NOT_A_LEADER")


def test_rules_are_taken_in_order_and_spent() -> None:
    from protocol.messages import HeartbeatRequest

    faults = FaultInjector()
    faults.fail_next("Heartbeat", "REBALANCE_IN_PROGRESS", count=2,
                     when=lambda r: r.group_id == "g")
    faults.delay_next("Heartbeat", 50)
    other, mine = HeartbeatRequest(group_id="other"), HeartbeatRequest(group_id="g")
    assert isinstance(faults.take(12, 4, other), type(None)) is False  # the delay rule takes it
    actions = [faults.take(12, 4, mine) for _ in range(3)]
    assert [type(a).__name__ for a in actions] == ["Fail", "Fail", "NoneType"]
    assert actions[0].response.error_code == ErrorCode.REBALANCE_IN_PROGRESS  # type: ignore[union-attr]
    assert faults.count("Heartbeat") == 4 and faults.pending() == 0
    with pytest.raises(ValueError, match="at least 1"):
        faults.drop_next("Fetch", count=0)

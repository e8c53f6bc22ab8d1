"""controller.zk_data: Kafka's znode JSON, against the examples in Kafka's ZkData.scala docs."""

from __future__ import annotations

import contextlib
import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller import zk_data as zd
from protocol.topic_partition import TopicPartition


def obj(data: bytes) -> object:
    return json.loads(data)


def test_paths() -> None:
    tp = TopicPartition("orders", 3)
    assert zd.broker_path(7) == "/brokers/ids/7"
    assert zd.topic_path("orders") == "/brokers/topics/orders"
    assert zd.partition_state_path(tp) == "/brokers/topics/orders/partitions/3/state"
    assert zd.topic_config_path("orders") == "/config/topics/orders"
    assert zd.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zd.sequence_number("config_change_0000000042", zd.CONFIG_CHANGE_PREFIX) == 42
    with pytest.raises(zd.ZkDataError):
        zd.sequence_number("isr_change_0000000042", zd.CONFIG_CHANGE_PREFIX)
    assert "/config/topics" in zd.PERSISTENT_PATHS and "/brokers/ids" in zd.PERSISTENT_PATHS


def test_broker_registration_v5_shape() -> None:
    reg = zd.BrokerRegistration(
        1, (zd.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092),), 1795698919222, rack="r1")
    assert obj(reg.encode()) == {
        "features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://127.0.0.1:9092"], "rack": "r1", "jmx_port": -1,
        "port": 9092, "host": "127.0.0.1", "version": 5, "timestamp": "1795698919222"}
    assert b" " not in reg.encode()  # compact, as Jackson writes
    assert zd.BrokerRegistration.decode(1, reg.encode()) == reg
    no_rack = zd.BrokerRegistration(2, reg.endpoints, 5)
    assert "rack" not in obj(no_rack.encode())


def test_broker_registration_decodes_kafka_doc_versions() -> None:
    v1 = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    reg = zd.BrokerRegistration.decode(0, v1)
    assert reg.endpoints == (zd.BrokerEndpoint("PLAINTEXT", "localhost", 9092),)
    assert reg.jmx_port == 9999 and reg.timestamp_ms == 2233345666
    v3 = (b'{"version":3,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
          b'"endpoints":["PLAINTEXT://host1:9092", "SSL://host1:9093"],"rack":"dc1"}')
    reg = zd.BrokerRegistration.decode(0, v3)
    assert [e.security_protocol for e in reg.endpoints] == ["PLAINTEXT", "SSL"]
    assert reg.rack == "dc1"
    v5 = (b'{"version":5,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
          b'"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],"rack":"dc1",'
          b'"listener_security_protocol_map":{"CLIENT":"PLAINTEXT","REPLICATION":"SSL"},'
          b'"features": {"feature": {"min_version":1, "first_active_version":2, "max_version":3}}}')
    reg = zd.BrokerRegistration.decode(0, v5)
    assert reg.endpoint("REPLICATION") == zd.BrokerEndpoint("REPLICATION", "host1", 9093, "SSL")
    assert reg.features == {"feature": zd.FeatureRange(1, 3)}


@pytest.mark.parametrize("data", [
    None, b"", b"not json", b"[]", b'{"version":5}',
    b'{"version":5,"jmx_port":-1,"endpoints":["PLAINTEXT//h:1"]}',
    b'{"version":5,"jmx_port":-1,"endpoints":["NOPE://h:1"],"listener_security_protocol_map":{}}',
    b'{"version":0,"jmx_port":-1}', b'{"version":"5","jmx_port":-1}',
])
def test_broker_registration_bad_input(data: bytes | None) -> None:
    with pytest.raises(zd.ZkDataError, match="broker registration 3"):
        zd.BrokerRegistration.decode(3, data)


def test_controller_and_epoch() -> None:
    reg = zd.ControllerRegistration(2, 1795698919379)
    assert obj(reg.encode()) == {"version": 2, "brokerid": 2, "timestamp": "1795698919379",
                                 "kraftControllerEpoch": -1}
    assert zd.ControllerRegistration.decode(reg.encode()) == reg
    assert zd.ControllerRegistration.decode(b'{"version":1,"brokerid":4,"timestamp":"9"}') \
        == zd.ControllerRegistration(4, 9)
    assert zd.encode_controller_epoch(17) == b"17"
    assert zd.decode_controller_epoch(b"17") == 17
    for bad in (b"", b"x", None):
        with pytest.raises(zd.ZkDataError):
            zd.decode_controller_epoch(bad)


def test_topic_assignment() -> None:
    topic_id = uuid.UUID("1c4504e5-ebcc-4460-980d-82df060bb993")
    assert zd.uuid_to_kafka(topic_id) == "HEUE5evMRGCYDYLfBgu5kw"
    assert zd.uuid_from_kafka("HEUE5evMRGCYDYLfBgu5kw") == topic_id
    assignment = zd.TopicAssignment.of({0: [1, 2], 1: [2, 3]}, topic_id)
    assert obj(assignment.encode()) == {
        "partitions": {"0": [1, 2], "1": [2, 3]}, "topic_id": "HEUE5evMRGCYDYLfBgu5kw",
        "adding_replicas": {}, "removing_replicas": {}, "version": 3}
    assert zd.TopicAssignment.decode("t", assignment.encode()) == assignment
    moving = zd.TopicAssignment({0: zd.ReplicaAssignment((1, 2, 3), (3,), (1,))})
    body = obj(moving.encode())
    assert body["adding_replicas"] == {"0": [3]} and body["removing_replicas"] == {"0": [1]}
    assert "topic_id" not in body
    assert zd.TopicAssignment.decode("t", moving.encode()) == moving
    # Kafka's older versions: no topic id, no adding/removing.
    old = zd.TopicAssignment.decode("t", b'{"version":1,"partitions":{"0":[5]}}')
    assert old == zd.TopicAssignment.of({0: [5]})
    assert zd.TopicAssignment.decode("t", None) == zd.TopicAssignment({})
    for bad in (b'{"partitions":{"x":[1]}}', b'{"partitions":{"0":["1"]}}',
                b'{"partitions":{},"topic_id":"short"}', b'{"partitions":[]}'):
        with pytest.raises(zd.ZkDataError, match="topic 't'"):
            zd.TopicAssignment.decode("t", bad)


def test_partition_state() -> None:
    state = zd.PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1)
    assert obj(state.encode()) == {"controller_epoch": 1, "leader": 1, "version": 1,
                                   "leader_epoch": 0, "isr": [1]}
    assert zd.PartitionState.decode(state.encode(), zk_version=4) == \
        zd.PartitionState(1, 0, (1,), 1, zk_version=4)
    recovering = zd.PartitionState(2, 5, (2,), 3, zd.LEADER_RECOVERY_RECOVERING)
    assert obj(recovering.encode())["leader_recovery_state"] == 1
    assert zd.PartitionState.decode(recovering.encode()) == recovering
    for bad in (b'{"leader":1}', b'{"leader":1,"leader_epoch":0,"isr":1,"controller_epoch":1}',
                b'{"leader":1,"leader_epoch":0,"isr":[],"controller_epoch":1,'
                b'"leader_recovery_state":7}'):
        with pytest.raises(zd.ZkDataError):
            zd.PartitionState.decode(bad)


def test_configs_and_change_notifications() -> None:
    assert obj(zd.encode_entity_config({"retention.ms": "1000"})) == \
        {"version": 1, "config": {"retention.ms": "1000"}}
    assert zd.decode_entity_config(zd.encode_entity_config({"a": "1", "b": "x"})) == \
        {"a": "1", "b": "x"}
    assert zd.decode_entity_config(None) == {}
    assert zd.decode_entity_config(b'{"version":1}') == {}
    with pytest.raises(zd.ZkDataError):
        zd.decode_entity_config(b'{"version":1,"config":{"a":1}}')
    assert obj(zd.encode_config_change("topics", "t")) == {"version": 2, "entity_path": "topics/t"}
    assert zd.decode_config_change(zd.encode_config_change("topics", "a.b")) == ("topics", "a.b")
    for bad in (b'{"version":1,"entity_type":"topics","entity_name":"t"}',
                b'{"version":2,"entity_path":"topics"}'):
        with pytest.raises(zd.ZkDataError):
            zd.decode_config_change(bad)


def test_admin_znodes_and_notifications() -> None:
    tps = {TopicPartition("b", 1), TopicPartition("a", 0)}
    body = {"version": 1, "partitions": [{"topic": "a", "partition": 0},
                                         {"topic": "b", "partition": 1}]}
    assert obj(zd.encode_preferred_replica_election(tps)) == body
    assert zd.decode_preferred_replica_election(zd.encode_preferred_replica_election(tps)) == tps
    assert obj(zd.encode_isr_change(tps)) == body
    assert zd.decode_isr_change(zd.encode_isr_change(tps)) == tps
    moves = {TopicPartition("a", 0): (1, 2)}
    assert obj(zd.encode_reassignment(moves)) == {
        "version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [1, 2]}]}
    assert zd.decode_reassignment(zd.encode_reassignment(moves)) == moves
    assert obj(zd.encode_log_dir_event(3)) == {"version": 1, "broker": 3, "event": 1}
    assert zd.decode_log_dir_event(zd.encode_log_dir_event(3)) == 3
    for decode in (zd.decode_preferred_replica_election, zd.decode_isr_change,
                   zd.decode_reassignment):
        with pytest.raises(zd.ZkDataError):
            decode(b'{"version":1,"partitions":[{"topic":"a"}]}')


def test_cluster_id_and_feature() -> None:
    assert obj(zd.encode_cluster_id("a-SRFIs9R2yxAoVPg8UcHQ")) == \
        {"version": "1", "id": "a-SRFIs9R2yxAoVPg8UcHQ"}
    assert zd.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    with pytest.raises(zd.ZkDataError):
        zd.decode_cluster_id(b'{"version":"1"}')
    assert obj(zd.FeatureZNode().encode()) == {"features": {}, "version": 2, "status": 1}
    feature = zd.FeatureZNode({"metadata.version": 14})
    assert zd.FeatureZNode.decode(feature.encode()) == feature


_ids = st.integers(min_value=0, max_value=2**31 - 1)
_names = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=20)


@given(st.dictionaries(st.integers(0, 1000), st.lists(_ids, min_size=1, max_size=5),
                       max_size=20), st.booleans())
def test_topic_assignment_roundtrip(replicas: dict[int, list[int]], with_id: bool) -> None:
    assignment = zd.TopicAssignment.of(replicas, uuid.uuid4() if with_id else None)
    assert zd.TopicAssignment.decode("t", assignment.encode()) == assignment


@given(_ids, st.integers(0, 2**31 - 1), st.lists(_ids, max_size=5), st.integers(0, 2**31 - 1))
def test_partition_state_roundtrip(leader: int, epoch: int, isr: list[int], cepoch: int) -> None:
    state = zd.PartitionState(leader, epoch, tuple(isr), cepoch)
    assert zd.PartitionState.decode(state.encode()) == state


@given(st.dictionaries(_names, st.text(max_size=30), max_size=10))
def test_entity_config_roundtrip(configs: dict[str, str]) -> None:
    assert zd.decode_entity_config(zd.encode_entity_config(configs)) == configs


@given(st.binary(max_size=200))
def test_decoders_raise_only_zkdataerror(data: bytes) -> None:
    decoders = (lambda d: zd.BrokerRegistration.decode(1, d), zd.ControllerRegistration.decode,
                lambda d: zd.TopicAssignment.decode("t", d), zd.PartitionState.decode,
                zd.decode_entity_config, zd.decode_config_change, zd.decode_isr_change,
                zd.decode_reassignment, zd.decode_log_dir_event, zd.decode_cluster_id,
                zd.FeatureZNode.decode, zd.decode_controller_epoch)
    for decode in decoders:
        with contextlib.suppress(zd.ZkDataError):
            decode(data)

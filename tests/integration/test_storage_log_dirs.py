"""Several log dirs (JBOD) in a real broker, and one of them failing.

Partitions are spread over the least-loaded dir. Then the broker is restarted with one
dir's disk returning EIO to every write (the test-only ``MINIKAFKA_TEST_FAULT_INJECTION`` hook
of ``storage.fileio``): the first write there takes that dir offline; its partitions
answer produce and fetch with KAFKA_STORAGE_ERROR, DescribeLogDirs reports it, and the
other dir keeps serving, in the same request too. StopReplica (as a controller sends it)
answers KAFKA_STORAGE_ERROR for the failed dir's partitions and leaves them as they are,
even with DeletePartition, as Kafka's ReplicaManager does. When every dir has failed the
broker stops with exit code 1 and says why. A restart on healthy disks serves everything that was
acknowledged.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaProducer

from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from tests.integration.broker_process import BrokerProcess
from tests.integration.data_path_client import batch, create_topic, fetch, records_of

pytestmark = pytest.mark.timeout(120)

TOPIC = "jbod"
PARTITIONS = 4
FAULT_ENV = "MINIKAFKA_TEST_FAULT_INJECTION"


def describe_dirs(client: SyncClient) -> dict[str, tuple[int, list[int]]]:
    """log dir -> (error code, partitions of TOPIC there)."""
    resp: DescribeLogDirsResponse = client.send(DescribeLogDirsRequest(topics=None), 4)
    out: dict[str, tuple[int, list[int]]] = {}
    for r in resp.results:
        parts = [p.partition_index for t in r.topics if t.name == TOPIC for p in t.partitions]
        out[r.log_dir] = (int(r.error_code), sorted(parts))
    return out


def produce_all(client: SyncClient, tag: bytes) -> dict[int, tuple[int, int]]:
    """One request for every partition: partition -> (error, base offset)."""
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(TOPIC, [
            ProduceRequest.PartitionProduceData(p, batch([tag + b"-%d" % p]))
            for p in range(PARTITIONS)])])
    resp: ProduceResponse = client.send(req, 9)
    (topic,) = resp.responses
    return {p.index: (int(p.error_code), p.base_offset) for p in topic.partition_responses}


def stop_replicas(client: SyncClient, partitions: list[int], *, delete: bool) -> dict[int, int]:
    """StopReplica v4 from the single node's own controller (epoch 1, broker epoch not
    checked): partition -> error."""
    req = StopReplicaRequest(controller_id=0, controller_epoch=1, broker_epoch=-1, topic_states=[
        StopReplicaRequest.StopReplicaTopicState(TOPIC, [
            StopReplicaRequest.StopReplicaPartitionState(
                partition_index=p, leader_epoch=-2 if delete else -1, delete_partition=delete)
            for p in partitions])])
    resp: StopReplicaResponse = client.send(req, 4)
    assert resp.error_code == 0
    return {e.partition_index: int(e.error_code) for e in resp.partition_errors}


def values(client: SyncClient, partition: int) -> tuple[int, list[bytes | None]]:
    f = fetch(client, TOPIC, partition, 0)
    data = f.responses[0].partitions[0]
    return int(data.error_code), [r.value for r in records_of(data.records)]


@pytest.mark.broker_errors(r"Log dir .*disk\d is offline: append of jbod-\d failed: .*Input/output",
                           r"Log dir .*disk\d failed: 2 partitions answer KAFKA_STORAGE_ERROR",
                           r"Shutdown broker because all log dirs in .* have failed",
                           exit_codes=(1,))
def test_one_failing_log_dir_takes_only_its_partitions_offline(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "disk1", tmp_path / "disk2"
    broker = BrokerProcess(tmp_path, {"log.dirs": f"{d1},{d2}"})
    broker.start()
    try:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
            dirs = describe_dirs(c)
            assert set(dirs) == {str(d1.resolve()), str(d2.resolve())}
            on1, on2 = dirs[str(d1.resolve())][1], dirs[str(d2.resolve())][1]
            assert len(on1) == len(on2) == 2 and not set(on1) & set(on2)  # least loaded
            assert all(err == 0 for err, _ in produce_all(c, b"before").values())
        for p in on2:
            assert (d2 / f"{TOPIC}-{p}").is_dir()

        # d2's disk now fails every write.
        broker.stop()
        broker.env = {FAULT_ENV: f"op=write,errno=EIO,times=0,path={d2}"}
        broker.start()
        with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
            first = produce_all(c, b"during")
            assert {p: first[p][0] for p in on1} == dict.fromkeys(on1, ErrorCode.NO_ERROR)
            assert {p: first[p][0] for p in on2} == dict.fromkeys(on2, ErrorCode.KAFKA_STORAGE_ERROR)
            second = produce_all(c, b"during2")  # now offline, not just failing
            assert {p: second[p][0] for p in on2} == dict.fromkeys(on2, ErrorCode.KAFKA_STORAGE_ERROR)
            assert all(second[p] == (0, first[p][1] + 1) for p in on1)
            for p in on2:
                assert values(c, p) == (ErrorCode.KAFKA_STORAGE_ERROR, [])
            for p in on1:
                assert values(c, p) == (0, [b"before-%d" % p, b"during-%d" % p, b"during2-%d" % p])
            dirs = describe_dirs(c)
            assert dirs[str(d2.resolve())] == (ErrorCode.KAFKA_STORAGE_ERROR, [])
            assert dirs[str(d1.resolve())] == (0, on1)
            # StopReplica: the offline replicas answer KAFKA_STORAGE_ERROR and stay (not
            # deleted, still offline), the healthy ones stop as asked.
            assert stop_replicas(c, on1 + on2, delete=False) == {
                **dict.fromkeys(on1, 0), **dict.fromkeys(on2, ErrorCode.KAFKA_STORAGE_ERROR)}
            assert stop_replicas(c, on2, delete=True) == dict.fromkeys(
                on2, ErrorCode.KAFKA_STORAGE_ERROR)
            for p in on2:
                assert values(c, p) == (ErrorCode.KAFKA_STORAGE_ERROR, [])
                assert (d2 / f"{TOPIC}-{p}").is_dir()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0,
                                 enable_idempotence=False, acks=1)
        ok = producer.send(TOPIC, b"kp", partition=on1[0]).get(timeout=30)
        assert ok.offset == 3
        producer.close()
        assert broker.is_running()
        text = broker.stderr_text()
        assert f"Log dir {d2} is offline" in text and "Traceback" not in text

        # Every dir failing: the broker stops, exit code 1, with the reason.
        broker.stop()
        broker.env = {FAULT_ENV: f"op=write,errno=EIO,times=0,path={tmp_path}/disk"}
        broker.start()
        with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
            produce_all(c, b"last")
        assert broker.wait(timeout_s=40) == 1
        assert "Shutdown broker because all log dirs in" in broker.stderr_text()

        # Healthy disks again: everything acknowledged is there.
        broker.env = {}
        broker.start()
        with SyncClient(broker.bootstrap, timeout_ms=10_000) as c:
            assert describe_dirs(c)[str(d2.resolve())] == (0, on2)
            for p in on2:
                assert values(c, p) == (0, [b"before-%d" % p])
            for p in on1:
                got = values(c, p)[1]
                assert got[:3] == [b"before-%d" % p, b"during-%d" % p, b"during2-%d" % p]
    finally:
        broker.stop()

"""Client quotas on a real broker: a producer pushing flat out for 30 s is held to its
producer_byte_rate within 10% (the one long test); a consumer over consumer_byte_rate gets
throttle_time_ms, an empty response and a muted connection; request_percentage throttles
a busy client; quotas set and read with Kafka's kafka-configs and AlterClientQuotas /
DescribeClientQuotas, with Kafka's errors.

The broker runs with quota.window.num=2 (Kafka's property; default 11): with 11 one-second
windows the rate is averaged over ten seconds, so a client pushing flat out sends ten
seconds' worth at once and again each time that sample expires, and its 30-second average
runs 10-25% over the quota (the same arithmetic as Kafka's Rate; see the report of the
issue). Two windows keep the bursts to about one second's worth.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.frames import decode_response
from protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.records import NewRecord, build_batch
from tests.integration.broker_process import BrokerProcess
from tests.integration.data_path_client import create_topic, produce
from tests.integration.netclient import RawClient
from tests.integration.secure_clients import java

pytestmark = pytest.mark.timeout(240)

PRODUCE_QUOTA = 512_000  # bytes/s
RUN_S = 30.0


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("quota-broker"),
                         {"quota.window.num": "2", "quota.window.size.seconds": "1"},
                         name="quota-broker")
    proc.start()
    yield proc
    proc.stop()


def alter(client: RawClient, entity: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]],
          validate_only: bool = False) -> AlterClientQuotasResponse:
    _cid, body = client.request(49, 1, AlterClientQuotasRequest(validate_only=validate_only, entries=[
        AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            ops=[AlterClientQuotasRequest.OpData(key=k, value=v, remove=r) for k, v, r in ops])]))
    assert isinstance(body, AlterClientQuotasResponse)
    return body


@pytest.mark.java
def test_kafka_configs_sets_and_describes_quotas(quota_broker: BrokerProcess) -> None:
    bs = quota_broker.bootstrap
    done = java("kafka.admin.ConfigCommand", [
        "--bootstrap-server", bs, "--alter", "--add-config",
        "producer_byte_rate=1048576,consumer_byte_rate=2097152,request_percentage=200",
        "--entity-type", "users", "--entity-name", "carol", "--entity-type", "clients",
        "--entity-name", "app"])
    assert done.returncode == 0, done.stdout + done.stderr
    described = java("kafka.admin.ConfigCommand", [
        "--bootstrap-server", bs, "--describe", "--entity-type", "users", "--entity-name", "carol",
        "--entity-type", "clients", "--entity-name", "app"])
    assert described.returncode == 0, described.stdout + described.stderr
    assert "Quota configs for user-principal 'carol', client-id 'app' are " in described.stdout
    for item in ("producer_byte_rate=1048576.0", "consumer_byte_rate=2097152.0",
                 "request_percentage=200.0"):
        assert item in described.stdout
    with RawClient(bs) as client:
        _cid, body = client.request(48, 1, DescribeClientQuotasRequest(strict=True, components=[
            DescribeClientQuotasRequest.ComponentData(entity_type="user", match_type=0, match="carol"),
            DescribeClientQuotasRequest.ComponentData(entity_type="client-id", match_type=2, match=None)]))
    assert isinstance(body, DescribeClientQuotasResponse) and body.error_code == 0
    assert body.entries is not None
    ((entry,),) = [body.entries]
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("user", "carol"), ("client-id", "app")]
    assert {v.key: v.value for v in entry.values} == {
        "producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0, "request_percentage": 200.0}


def test_alter_client_quotas_errors(quota_broker: BrokerProcess) -> None:
    with RawClient(quota_broker.bootstrap) as client:
        bad_key = alter(client, [("user", "x")], [("SCRAM-SHA-256", 1.0, False)])
        assert [(e.error_code, e.error_message) for e in bad_key.entries] == [
            (ErrorCode.INVALID_REQUEST, "Invalid configuration key SCRAM-SHA-256")]
        fraction = alter(client, [("client-id", "c")], [("producer_byte_rate", 10.5, False)])
        assert fraction.entries[0].error_message == "Configuration producer_byte_rate must be a LONG value"
        dry = alter(client, [("user", None)], [("producer_byte_rate", 100.0, False)], validate_only=True)
        assert dry.entries[0].error_code == 0
        _cid, body = client.request(48, 1, DescribeClientQuotasRequest(strict=False, components=[
            DescribeClientQuotasRequest.ComponentData(entity_type="user", match_type=1, match=None)]))
        assert isinstance(body, DescribeClientQuotasResponse) and body.entries == []  # nothing written
        _cid, dup = client.request(48, 1, DescribeClientQuotasRequest(strict=False, components=[
            DescribeClientQuotasRequest.ComponentData(entity_type="user", match_type=2, match=None),
            DescribeClientQuotasRequest.ComponentData(entity_type="user", match_type=2, match=None)]))
        assert isinstance(dup, DescribeClientQuotasResponse)
        assert (dup.error_code, dup.error_message) == (
            ErrorCode.INVALID_REQUEST, "Duplicate user filter component entity type")


def test_request_percentage_throttles_a_busy_client(quota_broker: BrokerProcess) -> None:
    with RawClient(quota_broker.bootstrap) as client:
        assert alter(client, [("client-id", "busy")], [("request_percentage", 0.01, False)]).entries[0].error_code == 0
    with RawClient(quota_broker.bootstrap) as busy:
        throttles = []
        for _ in range(20):
            _cid, data = busy.frame(3, 12, MetadataRequest(topics=None), client_id="busy")
            busy.send(data)
            _got, body = decode_response(busy.recv_frame(), 3, 12)
            assert isinstance(body, MetadataResponse)
            throttles.append(body.throttle_time_ms)
            if body.throttle_time_ms:
                break
        assert throttles[-1] > 0, throttles


def test_consumer_over_its_byte_rate_is_throttled(quota_broker: BrokerProcess) -> None:
    topic = "fetch-quota"
    create_topic(quota_broker.bootstrap, topic)
    quota = 50_000
    with RawClient(quota_broker.bootstrap) as client:
        assert alter(client, [("client-id", "slow-consumer")],
                     [("consumer_byte_rate", float(quota), False)]).entries[0].error_code == 0
    _produce(quota_broker.bootstrap, topic, 400_000)

    def fetch(client: RawClient, offset: int) -> tuple[FetchResponse, float]:
        request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=10 << 20,
                               isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                   FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                                       partition=0, fetch_offset=offset, partition_max_bytes=10 << 20)])])
        _cid, data = client.frame(1, 12, request, client_id="slow-consumer")
        started = time.monotonic()
        client.send(data)
        _got, body = decode_response(client.recv_frame(), 1, 12)
        assert isinstance(body, FetchResponse)
        return body, time.monotonic() - started

    with RawClient(quota_broker.bootstrap, timeout_s=30) as client:
        first, _ = fetch(client, 0)
        records = first.responses[0].partitions[0].records
        # One response is capped at what the quota window holds (quota x 1 window here).
        assert records is not None and 0 < len(records) <= quota
        throttled, _ = fetch(client, 0)
        assert throttled.throttle_time_ms > 0 and throttled.responses == []  # answered empty
        _after, waited_s = fetch(client, 0)  # read only once the throttle has passed
        assert waited_s >= throttled.throttle_time_ms / 1000 * 0.9


def _produce(bootstrap: str, topic: str, total_bytes: int) -> None:
    """10 kB batches: a fetch response fits the quota window (a batch larger than the window
    could never be fetched, in Kafka as here: it always exceeds the quota)."""
    value = b"v" * 10_000
    with SyncClient(bootstrap) as client:
        for _ in range(total_bytes // len(value)):
            assert produce(client, topic, 0, build_batch([NewRecord(None, value, (), None)])).error_code == 0


def test_producer_held_to_its_byte_rate_over_30_s(quota_broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    topic = "produce-quota"
    create_topic(quota_broker.bootstrap, topic)
    with RawClient(quota_broker.bootstrap) as client:
        assert alter(client, [("client-id", "quota-client")],
                     [("producer_byte_rate", float(PRODUCE_QUOTA), False)]).entries[0].error_code == 0
    acked: list[tuple[float, int]] = []
    value = b"x" * 10_000

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    producer = Producer({"bootstrap.servers": quota_broker.bootstrap, "client.id": "quota-client",
                         "linger.ms": 5, "batch.size": 65536, "queue.buffering.max.kbytes": 2048})
    started = time.monotonic()
    end = started + RUN_S
    while time.monotonic() < end:
        try:
            producer.produce(topic, value, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)
    sent = sum(n for ts, n in acked if ts <= end)
    rate = sent / RUN_S
    assert abs(rate - PRODUCE_QUOTA) <= 0.10 * PRODUCE_QUOTA, f"{rate:.0f} B/s vs quota {PRODUCE_QUOTA}"

"""The project's client (``client``) against real minikafka brokers on real sockets.

Framing and negotiation (each API at the highest version both sides support, the KIP-511
downgrade answer read as the broker sends it), correlation ids with requests pipelined and
the in-flight bound held, request timeouts (a long poll held by the broker) closing the
connection, a response frame over the bound, retries of retriable errors answered by a
broker (produce to a topic that does not exist yet with auto-creation off; a broker
restarted on the same port in the middle of a call), metadata routing, incremental fetch
sessions, and the blocking facade.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from client import (
    Admin,
    ClientConfig,
    ClientError,
    FetchPosition,
    FetchSession,
    KafkaClient,
    fetch,
    list_offsets,
    produce,
    response_partitions,
)
from client.connection import BrokerConnection, _Waiting
from client.sync import SyncClient
from client.versions import pick_version, retry_version
from protocol import frames
from protocol.errors import ErrorCode
from protocol.messages import REQUESTS
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.fetch import FetchRequest
from protocol.messages.metadata import MetadataRequest
from protocol.records import NewRecord, build_batch, iter_batches
from protocol.topic_partition import TopicPartition
from tests.integration.broker_process import BrokerProcess
from tests.integration.netclient import RawClient
from tests.waiting import async_wait_for

pytestmark = pytest.mark.timeout(90)

FAST = ClientConfig(client_id="client-test", request_timeout_ms=10_000, default_api_timeout_ms=15_000,
                    retry_backoff_ms=50, retry_backoff_max_ms=400)


def records(*values: bytes) -> bytes:
    return build_batch([NewRecord(b"k", v, (), None) for v in values])


async def create(bootstrap: str, name: str, partitions: int = 1) -> None:
    async with KafkaClient(bootstrap, FAST) as c:
        await Admin(c).create_topic(name, partitions, 1)


# -- framing and negotiation -----------------------------------------------------------

async def test_each_api_at_the_highest_version_both_support(module_broker: Any) -> None:
    conn = await BrokerConnection.open(module_broker.host, module_broker.port, FAST)
    try:
        with RawClient(module_broker.bootstrap) as raw:
            _, answer = raw.request(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        advertised = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        assert conn.api_versions == advertised and len(advertised) > 20
        for key, (low, high) in advertised.items():
            cls = REQUESTS[key]
            assert conn.version_for(cls) == min(high, cls.HIGHEST_VERSION) >= low
        assert conn.version_for(FetchRequest, our_max=12) == 12
        metadata = await conn.send(MetadataRequest(topics=None))
        assert metadata.brokers[0].port == module_broker.port
    finally:
        await conn.close()


def test_unsupported_api_versions_answer_is_read_as_v0_and_retried_lower(module_broker: Any) -> None:
    """A broker answers an ApiVersions version it lacks in the v0 layout (KIP-511)."""
    body = ApiVersionsRequest(client_software_name="t", client_software_version="1").encode(4)
    with RawClient(module_broker.bootstrap) as raw:
        raw.send(frames.encode_request(frames.RequestHeader(18, 99, 7, "t"), body))
        frame = raw.recv_frame()
    loop = asyncio.new_event_loop()
    try:
        response = BrokerConnection._decode(frame, _Waiting(7, 18, 99, loop.create_future()))
    finally:
        loop.close()
    assert isinstance(response, ApiVersionsResponse)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert retry_version(response, 99) == min(4, ApiVersionsRequest.HIGHEST_VERSION)
    assert pick_version(ApiVersionsRequest, {18: (0, 4)}) == 4


async def test_pipelined_requests_match_by_correlation_id_within_the_bound(module_broker: Any) -> None:
    names = [f"pipe-{i}" for i in range(3)]
    for name in names:
        await create(module_broker.bootstrap, name)
    config = ClientConfig(max_in_flight_requests_per_connection=3)
    conn = await BrokerConnection.open(module_broker.host, module_broker.port, config)
    seen: list[int] = []
    try:
        async def ask(name: str) -> str | None:
            seen.append(conn.in_flight)
            answer = await conn.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]))
            seen.append(conn.in_flight)
            return answer.topics[0].name

        asked = names * 10
        assert await asyncio.gather(*(ask(n) for n in asked)) == asked
        assert max(seen) == 3  # pipelined, never more than the bound
    finally:
        await conn.close()


async def test_request_timeout_closes_the_connection_and_the_client_reconnects(module_broker: Any) -> None:
    await create(module_broker.bootstrap, "held")
    tp = TopicPartition("held", 0)
    async with KafkaClient(module_broker.bootstrap, FAST) as c:
        node = await c.leader_for(tp)
        conn = await c.connection(node)
        held = asyncio.create_task(fetch(c, tp, 0, max_wait_ms=5_000, timeout_ms=None))
        await async_wait_for(lambda: conn.in_flight == 1, 30, "the long poll sent")
        started = time.monotonic()
        with pytest.raises(ClientError) as timed_out:
            await conn.send(FetchRequest(max_wait_ms=5_000, min_bytes=1, topics=[FetchRequest.FetchTopic(
                topic="held", partitions=[FetchRequest.FetchPartition(partition=0, partition_max_bytes=1024)])]),
                version=12, timeout_ms=300)
        # an error at all proves the client's timeout fired (the broker answers only after 5 s)
        assert timed_out.value.error_name == "REQUEST_TIMED_OUT"
        assert time.monotonic() - started >= 0.29  # asyncio timers may fire ~1 ms early
        assert conn.closed
        with pytest.raises(ClientError) as broken:  # the other request on it fails too
            await held
        assert broken.value.error_name == "NETWORK_EXCEPTION" and broken.value.retriable
        got = await fetch(c, tp, 0, max_wait_ms=0)  # a new connection
        assert got.error_code == 0 and await c.connection(node) is not conn


async def test_a_response_over_the_frame_bound_breaks_the_connection(module_broker: Any) -> None:
    await create(module_broker.bootstrap, "big")
    tp = TopicPartition("big", 0)
    async with KafkaClient(module_broker.bootstrap, FAST) as c:
        await produce(c, tp, records(b"x" * 5000))
    small = ClientConfig(max_response_bytes=2000)
    async with KafkaClient(module_broker.bootstrap, small) as c:
        with pytest.raises(ClientError) as exc:
            await fetch(c, tp, 0, max_wait_ms=0)
        assert exc.value.error_name == "NETWORK_EXCEPTION" and "2000 allowed" in str(exc.value)


async def test_unreachable_bootstrap_fails_at_once_naming_it() -> None:
    """Starting tries each bootstrap address once: no retries for the call's whole budget."""
    patient = ClientConfig(default_api_timeout_ms=300_000)
    started = time.monotonic()
    with pytest.raises(ClientError) as exc:
        async with KafkaClient("127.0.0.1:1", patient):
            pass
    assert exc.value.error_name == "NETWORK_EXCEPTION" and "127.0.0.1:1" in str(exc.value)
    assert "attempts" not in str(exc.value)
    assert time.monotonic() - started < 150  # far below the 300 s a retrying start would take


# -- retries against a broker answering errors -----------------------------------------

async def test_produce_retries_until_the_topic_exists(broker_factory: Any) -> None:
    broker = broker_factory(auto_create_topics_enable="false")
    tp = TopicPartition("later", 0)
    async with KafkaClient(broker.bootstrap, FAST) as c:
        with pytest.raises(ClientError) as gave_up:  # a short budget runs out
            await produce(c, tp, records(b"a"), retry_timeout_ms=500)
        assert gave_up.value.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
        attempt = asyncio.create_task(produce(c, tp, records(b"b")))
        await asyncio.sleep(1.0)
        assert not attempt.done()  # still retrying: the broker keeps saying it has no such topic
        await create(broker.bootstrap, "later")
        done = await asyncio.wait_for(attempt, 10)
        assert done is not None and done.base_offset == 0
        with pytest.raises(ClientError) as too_big:  # not retriable: raised by the first attempt
            await produce(c, tp, records(b"x" * 2_000_000))
        assert too_big.value.error_name in ("MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE")
        assert "attempts" not in str(too_big.value)


async def test_calls_survive_a_broker_restarted_on_the_same_port(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory()
    await create(broker.bootstrap, "survivor")
    tp = TopicPartition("survivor", 0)
    async with KafkaClient(broker.bootstrap, FAST) as c:
        assert (await produce(c, tp, records(b"1"))) is not None
        await asyncio.to_thread(broker.stop)
        pending = asyncio.create_task(produce(c, tp, records(b"2")))
        await asyncio.sleep(0.5)
        assert not pending.done()  # retrying while the broker is down
        broker.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port}"
        await asyncio.to_thread(broker.start)
        second = await asyncio.wait_for(pending, 14)
        assert second is not None and second.base_offset == 1
        latest = await list_offsets(c, {tp: -1})
        assert latest[tp].offset == 2


# -- routing, metadata, sessions -------------------------------------------------------

async def test_leader_routing_refreshes_for_new_partitions_and_known_brokers(module_broker: Any) -> None:
    await create(module_broker.bootstrap, "grow", 1)
    async with KafkaClient(module_broker.bootstrap, FAST) as c:
        assert await c.leaders([TopicPartition("grow", 0)]) == {0: [TopicPartition("grow", 0)]}
        assert set(c._conns) == {0}  # the bootstrap connection became broker 0's
        await Admin(c).create_partitions("grow", 3)
        tps = [TopicPartition("grow", p) for p in range(3)]
        assert await c.leaders(tps) == {0: tps}  # unknown partitions: metadata refreshed
        offsets = await list_offsets(c, dict.fromkeys(tps, -2))
        assert {o.offset for o in offsets.values()} == {0}
    # A controller or a follower knows a broker from elsewhere: no bootstrap needed.
    c = KafkaClient("127.0.0.1:1", FAST)
    c.add_broker(7, module_broker.host, module_broker.port)
    try:
        answer = await c.send(7, MetadataRequest(topics=[]))
        assert [b.node_id for b in answer.brokers] == [0]
    finally:
        await c.close()


async def test_incremental_fetch_session(module_broker: Any) -> None:
    await create(module_broker.bootstrap, "sess", 2)
    a, b = TopicPartition("sess", 0), TopicPartition("sess", 1)
    async with KafkaClient(module_broker.bootstrap, FAST) as c:
        await produce(c, a, records(b"a0"))
        node = await c.leader_for(a)
        version = await c.version_for(node, FetchRequest)
        ids = {"sess": c.cluster.topics["sess"].topic_id}
        session = FetchSession(node)

        async def poll(wanted: dict[TopicPartition, FetchPosition]) -> dict[TopicPartition, Any] | None:
            request = session.build(wanted, version, topic_ids=ids, max_wait_ms=0)
            response = await c.send(node, request, version=version)
            if not session.handle_response(response):
                return None
            return response_partitions(response, version, ids)

        first = await poll({a: FetchPosition(0, 1 << 20), b: FetchPosition(0, 1 << 20)})
        assert first is not None and set(first) == {a, b} and session.session_id > 0 and session.epoch == 1
        assert [r.value for batch in iter_batches(first[a].records) for r in batch.records()] == [b"a0"]
        quiet = await poll({a: FetchPosition(1, 1 << 20), b: FetchPosition(0, 1 << 20)})
        assert quiet == {} and session.epoch == 2  # nothing new: an empty incremental answer
        await produce(c, b, records(b"b0"))
        news = await poll({a: FetchPosition(1, 1 << 20), b: FetchPosition(0, 1 << 20)})
        assert news is not None and set(news) == {b} and news[b].high_watermark == 1
        dropped = session.build({a: FetchPosition(1, 1 << 20)}, version, topic_ids=ids, max_wait_ms=0)
        assert [p for t in dropped.forgotten_topics_data for p in t.partitions] == [1]
        assert dropped.topics == []
        assert session.handle_response(await c.send(node, dropped, version=version))
        session.session_id += 1000  # a session the broker does not know
        assert await poll({a: FetchPosition(1, 1 << 20)}) is None
        assert session.session_id == 0 and session.is_full_next
        again = await poll({a: FetchPosition(0, 1 << 20)})
        assert again is not None and set(again) == {a} and session.session_id > 0


# -- the blocking facade ---------------------------------------------------------------

def test_sync_client_from_several_threads(module_broker: Any) -> None:
    asyncio.run(create(module_broker.bootstrap, "threads", 4))
    tps = [TopicPartition("threads", p) for p in range(4)]
    errors: list[BaseException] = []
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as s:
        def work(tp: TopicPartition) -> None:
            try:
                for i in range(5):
                    result = s.produce(tp, records(b"%d" % i))
                    assert result is not None and result.base_offset == i
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(tp,)) for tp in tps]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == []
        assert {tp: o.offset for tp, o in s.list_offsets(dict.fromkeys(tps, -1)).items()} == dict.fromkeys(tps, 5)
        thread = s._thread
    assert not thread.is_alive()

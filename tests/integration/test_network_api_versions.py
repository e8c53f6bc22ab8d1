"""ApiVersions (key 18) against a real broker: every version v0-v4, the KIP-511 fallback for
a too-new version, and the same exchange encoded/decoded by kafka-python's own classes."""

from __future__ import annotations

import asyncio
import logging
import re
import struct
import time
from collections.abc import Callable

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest as KpApiVersionsRequest
from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KpApiVersionsResponse

import broker.handlers  # noqa: F401 - registers the handlers, as the broker does
from broker.handlers.base import REGISTRY
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from tests.integration.broker_process import BrokerProcess
from tests.integration.netclient import RawClient

pytestmark = pytest.mark.timeout(60)


def expected_ranges() -> list[tuple[int, int, int]]:
    return sorted((s.api_key, s.min_version, s.max_version) for s in REGISTRY.values())


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_every_version_advertises_exactly_the_registry(
        module_broker: BrokerProcess, version: int) -> None:
    with RawClient(module_broker.bootstrap) as client:
        body = ApiVersionsRequest(client_software_name="minikafka-tests",
                                  client_software_version="1.0")
        _cid, response = client.request(18, version, body)
    assert response.error_code == ErrorCode.NO_ERROR
    got = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
    assert got == expected_ranges()
    assert (18, 0, 4) in got


def test_api_versions_above_max_gets_v0_unsupported_version(module_broker: BrokerProcess) -> None:
    with RawClient(module_broker.bootstrap) as client:
        # v7 does not exist: header v2 (flexible range), empty tagged body; answer comes as v0.
        cid, data = client.frame(18, 7, b"\x00\x00\x00")
        client.send(data)
        frame = client.recv_frame()
        _cid, response = client.request(18, 0, ApiVersionsRequest())  # connection still open
    (got_cid,) = struct.unpack_from(">i", frame, 0)
    assert got_cid == cid
    # v0 body: error_code int16, api_keys array of (key, min, max)
    error_code, count = struct.unpack_from(">hi", frame, 4)
    assert error_code == ErrorCode.UNSUPPORTED_VERSION
    assert count == 1
    assert struct.unpack_from(">hhh", frame, 10) == (18, 0, 4)
    assert len(frame) == 16
    assert response.error_code == ErrorCode.NO_ERROR


def test_api_versions_invalid_client_software_name_is_invalid_request(
        module_broker: BrokerProcess) -> None:
    with RawClient(module_broker.bootstrap) as client:
        _cid, response = client.request(
            18, 3, ApiVersionsRequest(client_software_name="bad name!", client_software_version="1"))
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert response.api_keys == []


@pytest.mark.parametrize("version", [0, 3, 4])
def test_api_versions_with_kafka_python_codecs(module_broker: BrokerProcess, version: int) -> None:
    """kafka-python encodes the request (with its header) and decodes our response."""
    request = KpApiVersionsRequest(client_software_name="kafka-python",
                                   client_software_version="3.0.12", version=version)
    request.with_header(correlation_id=4242, client_id="kp")
    data = request.encode(header=True, framed=True)
    with RawClient(module_broker.bootstrap) as client:
        client.send(bytes(data))
        frame = client.recv_frame()
    assert struct.unpack_from(">i", frame, 0)[0] == 4242
    response = KpApiVersionsResponse.decode(frame[4:], version=version)
    assert response.error_code == 0
    got = sorted((k.api_key, k.min_version, k.max_version) for k in response.api_keys)
    assert got == expected_ranges()


def test_kafka_python_client_negotiates_api_versions(module_broker: BrokerProcess) -> None:
    """kafka-python 3's connection handshake (ApiVersions v4, header v2) succeeds."""
    from kafka.net.compat import KafkaNetClient

    client = KafkaNetClient(bootstrap_servers=module_broker.bootstrap,
                            request_timeout_ms=5000, api_version_auto_timeout_ms=5000)
    try:
        manager = client._manager
        node_id = next(iter(manager.cluster._bootstrap_brokers))
        conn = manager.get_connection(node_id)
        client._net.poll(timeout_ms=5000, future=conn.init_future)
        assert conn.init_future.succeeded(), conn.init_future.exception
        assert conn.connected
        versions = conn.broker_version_data.api_versions
        assert versions[18] == (0, 4)
        assert set(versions) == {s.api_key for s in REGISTRY.values()}
    finally:
        client.close()


def test_librdkafka_reads_our_api_versions(broker_factory: Callable[..., BrokerProcess]) -> None:
    """confluent-kafka (librdkafka) sends ApiVersions v3 on connect; its protocol debug log
    lists exactly the versions we advertise, and our log names its client software."""
    from confluent_kafka import Producer

    proc = broker_factory(env={"MINIKAFKA_LOG_LEVEL": "DEBUG"})
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("librdkafka-api-versions-test")
    logger.addHandler(Collect())
    logger.setLevel(logging.DEBUG)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "debug": "protocol,feature",
                         "client.software.name": "apiversions-test"}, logger=logger)
    # "[thrd:127.0.0.1:PORT/bootstrap]: ...   ApiKey Produce (0) Versions 3..11": librdkafka
    # may open a second connection (bootstrap, then broker 0's): each lists the versions.
    pattern = re.compile(r"\[thrd:([^\]]+)\].*ApiKey \w+ \((\d+)\) Versions (\d+)\.\.(\d+)")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not any("Enabling feature" in x for x in lines):
        producer.poll(0.1)  # "Enabling feature" lines come after the per-key lines
    producer.flush(1)
    assert any("Sent ApiVersionRequest (v3" in x for x in lines), lines[:20]
    by_connection: dict[str, list[tuple[int, int, int]]] = {}
    for line in lines:
        if (m := pattern.search(line)) is not None:
            by_connection.setdefault(m[1], []).append((int(m[2]), int(m[3]), int(m[4])))
    assert by_connection, lines[:20]
    for connection, ranges in by_connection.items():
        assert sorted(ranges) == expected_ranges(), connection
    assert re.search(r"client software apiversions-test \S+-rdkafka-", proc.stderr_text())


async def test_aiokafka_connection_reads_our_api_versions(module_broker: BrokerProcess) -> None:
    """aiokafka's connection set-up (ApiVersions, its own codec) records exactly our ranges."""
    from aiokafka.conn import create_conn

    async with asyncio.timeout(20):
        conn = await create_conn(module_broker.host, module_broker.port)
    try:
        got = sorted((key, low, high) for key, (low, high) in conn._versions.items())
        assert got == expected_ranges()
    finally:
        conn.close()

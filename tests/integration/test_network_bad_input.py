"""Bad input on the wire gets Kafka's answer (a closed connection, or the error response),
a log line names it, and the broker keeps serving other clients: both one connected before
the bad client and a fresh one."""

from __future__ import annotations

import os
import struct
import time

import pytest

from protocol.errors import ErrorCode
from protocol.frames import RequestHeader, encode_request_header
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from tests.integration.broker_process import BrokerProcess
from tests.integration.netclient import RawClient

pytestmark = pytest.mark.timeout(60)

LOG_WAIT_S = 30.0  # bound on waiting for a log line (milliseconds on a quiet machine)


def api_versions_ok(client: RawClient) -> bool:
    _cid, response = client.request(18, 3, ApiVersionsRequest(client_software_name="t",
                                                               client_software_version="1"))
    return bool(response.error_code == ErrorCode.NO_ERROR and response.api_keys)


def wait_for_log(proc: BrokerProcess, text: str, start_at: int) -> str:
    """The broker's stderr after ``start_at`` once it contains ``text`` (bounded wait)."""
    deadline = time.monotonic() + LOG_WAIT_S
    while True:
        tail = proc.stderr_text()[start_at:]
        if text in tail or time.monotonic() > deadline:
            return tail
        time.sleep(0.02)


def check_closed_logged_and_still_serving(proc: BrokerProcess, payload: bytes, log_text: str) -> None:
    mark = len(proc.stderr_text())
    with RawClient(proc.bootstrap) as bystander:
        assert api_versions_ok(bystander)
        with RawClient(proc.bootstrap) as bad:
            bad.send(payload)
            assert bad.is_closed_by_peer(timeout_s=10), "broker did not close the connection"
        assert log_text in wait_for_log(proc, log_text, mark)
        assert api_versions_ok(bystander)  # connected before: unaffected
    with RawClient(proc.bootstrap) as fresh:
        assert api_versions_ok(fresh)
    assert proc.is_running()


def test_garbage_http_request_closes_connection(module_broker: BrokerProcess) -> None:
    # "GET " read as a frame size is 1,195,725,856 bytes: over socket.request.max.bytes.
    check_closed_logged_and_still_serving(module_broker, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                                          "larger than the 104857600 allowed")


def test_random_garbage_frame_closes_connection(module_broker: BrokerProcess) -> None:
    body = os.urandom(64)
    # api key 0x7ff0 does not exist, whatever follows
    payload = struct.pack(">ih", 2 + len(body), 0x7FF0) + body
    # The random client id length may fail first ("request header: ..."): either way a close.
    check_closed_logged_and_still_serving(module_broker, payload, "Closing connection")


def test_negative_frame_size_closes_connection(module_broker: BrokerProcess) -> None:
    check_closed_logged_and_still_serving(module_broker, struct.pack(">i", -5) + b"xx",
                                          "negative frame size -5")


def test_frame_over_socket_request_max_bytes_closes_connection(module_broker: BrokerProcess) -> None:
    size = 104857600 + 1  # one byte over Kafka's default socket.request.max.bytes
    check_closed_logged_and_still_serving(module_broker, struct.pack(">i", size) + b"\x00" * 100,
                                          f"frame of {size} bytes is larger than the 104857600 allowed")


def test_frame_over_configured_limit_closes_connection(broker_factory: object) -> None:
    proc = broker_factory(socket_request_max_bytes=1000)  # type: ignore[operator]
    header = encode_request_header(RequestHeader(18, 0, 1, "c"))
    body = b"\x00" * 2000
    payload = struct.pack(">i", len(header) + len(body)) + header + body
    check_closed_logged_and_still_serving(proc, payload, "larger than the 1000 allowed")
    # A frame at the limit is fine.
    with RawClient(proc.bootstrap) as client:
        pad = b"\x00" * (1000 - len(header))
        client.send(struct.pack(">i", 1000) + header + pad)
        frame = client.recv_frame()
        assert struct.unpack_from(">ih", frame, 0) == (1, 0)


def test_unknown_api_key_closes_connection(module_broker: BrokerProcess) -> None:
    header = encode_request_header(RequestHeader(999, 0, 7, "c"))
    payload = struct.pack(">i", len(header)) + header
    check_closed_logged_and_still_serving(module_broker, payload, "unknown api key 999")


def test_unsupported_version_of_known_key_closes_connection(module_broker: BrokerProcess) -> None:
    # Produce v2 carries magic 0/1 message sets: not supported, so Kafka's answer is a close.
    header = encode_request_header(RequestHeader(0, 2, 7, "c"))
    payload = struct.pack(">i", len(header) + 2) + header + b"\x00\x00"
    check_closed_logged_and_still_serving(module_broker, payload, "unsupported version 2 of api key 0")


def test_version_above_supported_closes_connection(module_broker: BrokerProcess) -> None:
    from broker.handlers import REGISTRY

    above = REGISTRY[0].max_version + 1  # one past our highest Produce version
    header = encode_request_header(RequestHeader(0, above, 7, "c"))
    payload = struct.pack(">i", len(header) + 2) + header + b"\x00\x00"
    check_closed_logged_and_still_serving(module_broker, payload,
                                          f"unsupported version {above} of api key 0")


def test_unsupported_api_versions_version_below_range_gets_v0_error(module_broker: BrokerProcess) -> None:
    with RawClient(module_broker.bootstrap) as client:
        cid, data = client.frame(18, -1, b"")
        client.send(data)
        frame = client.recv_frame()
        assert struct.unpack_from(">ihi", frame, 0) == (cid, ErrorCode.UNSUPPORTED_VERSION, 1)
        assert api_versions_ok(client)


def test_truncated_body_closes_connection(module_broker: BrokerProcess) -> None:
    # ApiVersions v3 body: compact string of length 15 with only 2 bytes present.
    header = encode_request_header(RequestHeader(18, 3, 9, "c"))
    body = b"\x10ab"
    payload = struct.pack(">i", len(header) + len(body)) + header + body
    check_closed_logged_and_still_serving(module_broker, payload, "malformed ApiVersionsRequest v3 body")


def test_truncated_header_closes_connection(module_broker: BrokerProcess) -> None:
    check_closed_logged_and_still_serving(module_broker, struct.pack(">i", 5) + b"\x00\x12\x00\x00\x00",
                                          "request header needs 8 bytes")


def test_peer_closing_mid_frame_is_logged(module_broker: BrokerProcess) -> None:
    mark = len(module_broker.stderr_text())
    with RawClient(module_broker.bootstrap) as client:
        client.send(struct.pack(">i", 100) + b"\x00" * 10)
    assert "closed after 10 of a 100-byte request frame" in wait_for_log(
        module_broker, "closed after 10 of a 100-byte", mark)
    with RawClient(module_broker.bootstrap) as fresh:
        assert api_versions_ok(fresh)


def test_pipelined_requests_come_back_in_order(module_broker: BrokerProcess) -> None:
    """500 requests written back to back on one connection: 500 responses, in order, each
    decodable at its own version (the connection is muted per request)."""
    count = 500
    with RawClient(module_broker.bootstrap) as client:
        sent: list[tuple[int, int]] = []
        data = bytearray()
        for i in range(count):
            version = i % 5
            cid, frame = client.frame(18, version, ApiVersionsRequest(
                client_software_name="pipe", client_software_version="1"))
            sent.append((cid, version))
            data += frame
        client.send(bytes(data))
        from protocol.frames import decode_response

        for cid, version in sent:
            got_cid, body = decode_response(client.recv_frame(), 18, version)
            assert got_cid == cid
            assert isinstance(body, ApiVersionsResponse) and body.error_code == ErrorCode.NO_ERROR

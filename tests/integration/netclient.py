"""A minimal blocking Kafka-protocol client over a raw socket, for network-layer tests.

Frames are built with ``protocol.frames`` (or given as raw bytes, for bad input); every
receive is bounded by the socket timeout. With ``ssl_context`` the socket speaks TLS.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from protocol.frames import RequestHeader, decode_response, encode_request
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest

DEFAULT_TIMEOUT_S = 10.0


class ConnectionClosed(Exception):
    """The broker closed the connection."""


class RawClient:
    def __init__(self, bootstrap: str, timeout_s: float = DEFAULT_TIMEOUT_S, *,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        host, port = bootstrap.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # ssl_context: TLS to a SSL / SASL_SSL listener (the broker's name is its address).
        self.sock = sock if ssl_context is None else ssl_context.wrap_socket(sock, server_hostname=host)
        self._correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_correlation_id(self) -> int:
        self._correlation_id += 1
        return self._correlation_id

    def frame(self, api_key: int, api_version: int, body: Any, *, correlation_id: int | None = None,
              client_id: str = "test-client") -> tuple[int, bytes]:
        cid = self.next_correlation_id() if correlation_id is None else correlation_id
        return cid, encode_request(RequestHeader(api_key, api_version, cid, client_id), body)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_exactly(self, n: int) -> bytes:
        chunks: list[bytes] = []
        remaining = n
        while remaining:
            chunk = self.sock.recv(min(remaining, 1 << 20))
            if not chunk:
                raise ConnectionClosed(f"closed after {n - remaining} of {n} bytes")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self.recv_exactly(4))
        return self.recv_exactly(size)

    def request(self, api_key: int, api_version: int, body: Any,
                response_version: int | None = None) -> tuple[int, Any]:
        """Send one request and decode its response: (correlation id, body)."""
        cid, data = self.frame(api_key, api_version, body)
        self.send(data)
        frame = self.recv_frame()
        got_cid, decoded = decode_response(frame, api_key,
                                           api_version if response_version is None else response_version)
        assert got_cid == cid, f"correlation id {got_cid} != {cid}"
        return got_cid, decoded

    def is_closed_by_peer(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
        """True when the broker closes the connection (EOF or reset) within the timeout."""
        self.sock.settimeout(timeout_s)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        return data == b""


def sasl_plain_login(client: RawClient, user: str, password: str) -> RawClient:
    """Log ``client``'s connection in with SASL PLAIN (SaslHandshake v1, SaslAuthenticate
    v2) as ``user``; the broker must accept. Returns ``client``."""
    client.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    _cid, body = client.request(36, 2, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))
    assert isinstance(body, SaslAuthenticateResponse) and body.error_code == 0
    return client

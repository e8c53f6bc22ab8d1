"""A bare Metadata client for P7: request latency and "the broker serves its partitions".

One blocking TCP connection sends Metadata v12 (what librdkafka 2.16 and Kafka 3.9's Java
client send; both brokers support it) with ``topics`` null, i.e. every topic, and reads
the whole size-prefixed answer. ``timed_call`` returns the bytes undecoded, so its latency
is the broker's (send, serve, receive the last byte), not a client's parsing of 10,000
partitions; ``led_partitions`` decodes one answer when the bench needs its content.

``wait_served`` is P7's start-up probe: from the broker's launch, reconnect every
``POLL_S`` until a Metadata answer comes, then ask again until every expected partition
has a leader and no error: the first time the broker can serve all its partitions.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Final

from bench.procs import BenchError
from bench.sockets import recv_exact
from protocol.frames import RequestHeader, decode_response, encode_request
from protocol.messages.metadata import MetadataRequest, MetadataResponse

METADATA_KEY: Final[int] = 3
METADATA_VERSION: Final[int] = 12
POLL_S: Final[float] = 0.01
MAX_FRAME_BYTES: Final[int] = 256 << 20  # a Metadata answer for 10,000 partitions is ~0.5 MB
_SIZE: Final[struct.Struct] = struct.Struct(">i")


class MetadataClient:
    """One connection; sequential Metadata requests for every topic."""

    def __init__(self, host: str, port: int, *, timeout_s: float = 30.0) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation_id = 0

    @classmethod
    def to(cls, bootstrap: str, *, timeout_s: float = 30.0) -> MetadataClient:
        host, port = bootstrap.rsplit(":", 1)
        return cls(host, int(port), timeout_s=timeout_s)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> MetadataClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def timed_call(self) -> tuple[float, bytes]:
        """(seconds from send to the answer's last byte, the answer frame without its size)."""
        self._correlation_id += 1
        header = RequestHeader(METADATA_KEY, METADATA_VERSION, self._correlation_id, "bench")
        request = encode_request(
            header, MetadataRequest(topics=None, allow_auto_topic_creation=False)
        )
        t0 = time.perf_counter()
        self._sock.sendall(request)
        (size,) = _SIZE.unpack(recv_exact(self._sock, 4))
        if not 0 < size <= MAX_FRAME_BYTES:
            raise BenchError(f"Metadata answer of {size} bytes")
        frame = recv_exact(self._sock, size)
        elapsed_s = time.perf_counter() - t0
        correlation_id = _SIZE.unpack_from(frame)[0]
        if correlation_id != self._correlation_id:
            raise BenchError(f"correlation id {correlation_id}, expected {self._correlation_id}")
        return elapsed_s, frame


def led_partitions(frame: bytes, prefix: str) -> int:
    """Partitions with a leader and no error, over the topics whose name starts with prefix."""
    _, body = decode_response(frame, METADATA_KEY, METADATA_VERSION)
    assert isinstance(body, MetadataResponse)
    return sum(
        1
        for topic in body.topics
        if topic.error_code == 0 and (topic.name or "").startswith(prefix)
        for p in topic.partitions
        if p.error_code == 0 and p.leader_id >= 0
    )


@dataclass(frozen=True, slots=True)
class Served:
    first_answer: float  # time.monotonic() of the first Metadata answer
    all_led: float  # time.monotonic() of the first answer with every partition led


def wait_served(bootstrap: str, prefix: str, partitions: int, *, timeout_s: float) -> Served:
    """Poll from now until Metadata shows ``partitions`` led partitions under ``prefix``."""
    deadline = time.monotonic() + timeout_s
    first: float | None = None
    last = "no connection"
    while time.monotonic() < deadline:
        try:
            with MetadataClient.to(bootstrap, timeout_s=max(1.0, deadline - time.monotonic())) as c:
                while time.monotonic() < deadline:
                    _, frame = c.timed_call()
                    now = time.monotonic()
                    first = now if first is None else first
                    led = led_partitions(frame, prefix)
                    if led == partitions:
                        return Served(first_answer=first, all_led=now)
                    last = f"{led} of {partitions} partitions led"
                    time.sleep(POLL_S)
        except OSError as exc:  # not listening yet, or the connection closed while starting
            last = str(exc)
            time.sleep(POLL_S)
    raise BenchError(f"{bootstrap}: not serving {partitions} partitions after "
                     f"{timeout_s:.0f} s ({last})")

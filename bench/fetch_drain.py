"""A lean consumer for P2L: Fetch requests on one socket, the record bytes discarded.

librdkafka behind Python copies every record into a Python object, so with 64 KiB records
the client, not the broker, sets the pace (on either broker). This consumer does what a
consumer must and no more: one Fetch v12 in flight (Kafka's consumer defaults:
``fetch.max.bytes`` 50 MiB, ``max.partition.fetch.bytes`` 1 MiB, ``fetch.max.wait.ms``
500), the answer read into one reused buffer, the record batch headers walked to find
the next offset, the records themselves never touched. Its figure is how fast a broker
hands a partition to a consumer that costs almost nothing, to set beside the loopback
sendfile limit.

It receives the way the loopback ceiling's receiver can (``bench.loopback``): woken by the
kernel only once part of the answer is there. It reads the 4-byte size first, then sets
``SO_RCVLOWAT`` to ``min(what is left of the answer, RECV_LOW_WATER_BYTES)`` before each
read of the rest (one ``setsockopt`` when the mark changes, ~2-3 a fetch). On this virtual
machine loopback delivers in the sender's context, and a receiver that reads as soon as
anything arrives is woken for nearly every 64 KiB segment, each wake-up charged to the
sender's ``sendfile``: in the 12:50 quiet slot of 2026-11-27 the ceiling moved 2.4 GB/s that
way and 6.2 GB/s woken at 512 KiB (``bench/results/per-request-cpu/2026-11-27-p2l.md``).
After a reboot, in the 15:52-16:00 slot, the same ceiling was best with no mark (3.4-3.5
GB/s, its receiver at 93% of a core) and this loop measured (MiB/s, medians of 2-3): no mark
1,866-1,972, at 128 KiB 1,921-2,006, 256 KiB 1,712-1,900, 384 KiB 1,680, 512 KiB
1,565-1,572, 768 KiB 1,171, 1 MiB 966 (``2026-11-27-p2lfast.md``): 128 KiB, never worse
than no mark there and better where the wake-ups cost. The mark is never above what is
left of the answer, so no read waits for bytes that will not come; the socket keeps its
timeout (Python polls before each ``recv``, and ``poll`` honours the mark; a blocking
``recv`` that has copied part of what it waits for is not woken by the rest: tried, it
stalls). Both brokers are read the same way. ``low_water_bytes`` in the spec (0: woken for
any data, as before 2026-11-27 15:00 UTC) is for comparisons.

Run as the ``fetch_drain`` workload of ``bench.load`` (its own process): spec ``topic``,
``records`` (partition 0, from offset 0); result as ``consume`` (``bytes`` counts the
record batches received, headers included: ~0.1% over the values with 64 KiB records).
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any, Final

from bench.procs import self_cpu_s
from protocol.batch_header import BATCH_LENGTH, HEADER, HEADER_SIZE_BYTES, LOG_OVERHEAD_BYTES
from protocol.fileslice import FileSlice
from protocol.frames import RequestHeader, decode_response, encode_request
from protocol.messages.fetch import FetchRequest, FetchResponse

FETCH_KEY: Final[int] = 1
FETCH_VERSION: Final[int] = 12  # the last version that names topics (13+: topic ids)
FETCH_MAX_BYTES: Final[int] = 50 << 20
PARTITION_MAX_BYTES: Final[int] = 1 << 20
MAX_WAIT_MS: Final[int] = 500
RECV_LOW_WATER_BYTES: Final[int] = 128 << 10  # SO_RCVLOWAT bound (spec "low_water_bytes")
_SIZE: Final[struct.Struct] = struct.Struct(">i")
IO_TIMEOUT_S: Final[int] = 30


class DrainError(Exception):
    """The broker answered with an error or something this consumer cannot read."""


def _request(topic: str, offset: int, correlation_id: int) -> bytes:
    body = FetchRequest(
        replica_id=-1, max_wait_ms=MAX_WAIT_MS, min_bytes=1, max_bytes=FETCH_MAX_BYTES,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=PARTITION_MAX_BYTES)])],
    )
    return encode_request(RequestHeader(FETCH_KEY, FETCH_VERSION, correlation_id, "drain"), body)


class _Receiver:
    """Whole response frames read into one reused buffer, the way the loopback ceiling's
    receiver reads (``bench.loopback``): the kernel wakes this process only once
    ``min(what is left of the answer, low_water)`` bytes are there (``SO_RCVLOWAT``), not
    for every segment that arrives. ``low_water`` 0: woken for any data (no
    ``SO_RCVLOWAT``), as before 2026-11-27."""

    def __init__(self, sock: socket.socket, buf: bytearray, low_water: int) -> None:
        self._sock = sock
        self._low_water = low_water
        self._set = 1  # the kernel's default
        self.buf = buf
        self._view = memoryview(buf)

    def _wake_at(self, n: int) -> None:
        if n != self._set:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, n)
            self._set = n

    def _fill(self, got: int, end: int) -> int:
        """Read into the buffer from ``got`` up to ``end`` (never past it); returns ``end``."""
        while got < end:
            if self._low_water > 0:
                self._wake_at(min(end - got, self._low_water))
            n = self._sock.recv_into(self._view[got:end])
            if n == 0:
                raise DrainError("connection closed by the broker")
            got += n
        return got

    def response(self) -> memoryview:
        """The next response frame, its size prefix stripped."""
        got = self._fill(0, _SIZE.size)
        (size,) = _SIZE.unpack_from(self.buf)
        if not 0 < size <= len(self.buf) - _SIZE.size:
            raise DrainError(f"Fetch answer of {size} bytes")
        self._fill(got, _SIZE.size + size)
        return self._view[_SIZE.size:_SIZE.size + size]


def _walk(records: memoryview) -> tuple[int, int, int]:
    """(records, bytes, next offset or -1) of the whole batches in records."""
    count = nbytes = 0
    next_offset = -1
    position = 0
    while position + HEADER_SIZE_BYTES <= len(records):
        batch_bytes = BATCH_LENGTH.unpack_from(records, position + 8)[0] + LOG_OVERHEAD_BYTES
        if position + batch_bytes > len(records):
            break  # a partial batch at the end of a fetch: fetched again next time
        header = HEADER.unpack_from(records, position)
        count += header[12]  # recordsCount
        next_offset = header[0] + header[6] + 1  # baseOffset + lastOffsetDelta + 1
        nbytes += batch_bytes
        position += batch_bytes
    return count, nbytes, next_offset


def run_fetch_drain(spec: dict[str, Any]) -> dict[str, Any]:
    records = int(spec["records"])
    topic = spec["topic"]
    host, port = spec["bootstrap"].rsplit(":", 1)
    deadline = time.monotonic() + float(spec.get("timeout_s", 120))
    low_water = int(spec.get("low_water_bytes", RECV_LOW_WATER_BYTES))
    buf = bytearray(FETCH_MAX_BYTES + (1 << 20))
    cpu0, t0 = self_cpu_s(), time.monotonic()
    count = nbytes = offset = 0
    with socket.create_connection((host, int(port)), timeout=IO_TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        receiver = _Receiver(sock, buf, low_water)
        correlation_id = 0
        while count < records:
            if time.monotonic() > deadline:
                raise DrainError(f"fetched {count} of {records} records before the timeout")
            correlation_id += 1
            sock.sendall(_request(topic, offset, correlation_id))
            _, body = decode_response(receiver.response(), FETCH_KEY, FETCH_VERSION)
            assert isinstance(body, FetchResponse)
            if body.error_code:
                raise DrainError(f"Fetch error {body.error_code}")
            partition = body.responses[0].partitions[0]
            if partition.error_code:
                raise DrainError(f"Fetch partition error {partition.error_code}")
            data = partition.records
            if data is None or isinstance(data, FileSlice):
                continue  # nothing yet (a FileSlice never comes out of a decoder)
            got, got_bytes, next_offset = _walk(memoryview(data))
            if next_offset >= 0:
                count, nbytes, offset = count + got, nbytes + got_bytes, next_offset
    elapsed_s, cpu_s = time.monotonic() - t0, self_cpu_s() - cpu0
    return {"records": count, "bytes": nbytes, "elapsed_s": elapsed_s, "cpu_s": cpu_s}

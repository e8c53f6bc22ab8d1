"""Writing a response's parts to a connection: bytes through the transport, record data
(``FileSlice``) with ``os.sendfile`` (zero-copy), or copied when asked to.

uvloop has neither ``loop.sendfile`` nor ``loop.sock_sendfile`` and its transports refuse
``socket.sendfile``, so the zero-copy path is this module's own (checked on this machine,
see /work/shared/ENVIRONMENT.md):

1. bytes parts go through ``transport.write``;
2. before a FileSlice, wait until the transport's write buffer is *empty* (the write buffer
   limits are set to 0 for that wait, so ``drain()`` returns only when everything queued
   has reached the kernel), so the file bytes cannot overtake buffered bytes;
3. ``os.sendfile`` on a duplicate of the socket's descriptor (``os.dup``; the duplicate
   shares the non-blocking flag), waiting on ``loop.add_writer`` when the socket buffer
   is full (``BlockingIOError``); the duplicate is closed afterwards;
4. later parts continue through the transport.

A small response (``SMALL_COPY_BYTES`` in all, record data included: a consumer at the
log's tail) is copied instead, on every connection: one ``pread`` and one write, which
leaves as one TCP segment, cost less than ``write`` + ``sendfile`` + ``write`` of the parts
before, in and after the record data, which with TCP_NODELAY leave as three segments, each
a wake-up of the client.

The copying alternative (``pread`` the region, ``transport.write`` it: a response up to 1 MiB
at once with ``copy_parts_now``, a bigger one 1 MiB at a time) is chosen with ``copy=True``;
the broker takes it for TLS connections (encryption happens in user space, so the file
bytes must pass through it) and, for every connection, from the environment variable
``MINIKAFKA_FETCH_COPY=1`` (``copy_mode_from_env``) so benchmarks can compare both.

Errors: a peer that goes away raises ``ConnectionError``; a file region that ends early
(the file shrank) raises ``SendfileError``, and the caller must close the connection, since
the frame's announced size can no longer be met.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Protocol

from protocol.fileslice import FileSlice, ResponseParts

log = logging.getLogger(__name__)

COPY_ENV_VAR = "MINIKAFKA_FETCH_COPY"
COPY_CHUNK_BYTES = 1 << 20
# Responses up to this size are copied and written at once even where sendfile is used.
SMALL_COPY_BYTES = 16 * 1024
# Largest count handed to one os.sendfile call (Linux caps a call at 0x7ffff000 anyway).
SENDFILE_MAX_CHUNK_BYTES = 1 << 30
_DEFAULT_HIGH_WATER_BYTES = 64 * 1024


class PartsWriter(Protocol):
    """Where parts go: an ``asyncio.StreamWriter``, or a connection with the same three."""

    @property
    def transport(self) -> asyncio.WriteTransport: ...

    def write(self, data: bytes | bytearray | memoryview) -> None: ...

    async def drain(self) -> None: ...


class SendfileError(OSError):
    """The file region could not be sent in full (the file is shorter than the slice)."""


def copy_mode_from_env() -> bool:
    """True when ``MINIKAFKA_FETCH_COPY=1``: send record data by copying, not sendfile."""
    return os.environ.get(COPY_ENV_VAR, "") == "1"


async def write_parts(writer: PartsWriter, parts: ResponseParts, *, copy: bool = False) -> None:
    """Write every part in order; returns once the last part is handed to the kernel or the
    transport's buffer (for bytes). Raises ConnectionError if the peer is gone."""
    for part in parts:
        if isinstance(part, FileSlice):
            if part.length == 0:
                continue
            if copy:
                await _copy_slice(writer, part)
            else:
                await _sendfile_slice(writer, part)
        elif part:
            if writer.transport.is_closing():
                raise ConnectionResetError("connection closed while writing a response")
            writer.write(part)
    await writer.drain()


def write_parts_now(transport: asyncio.WriteTransport, out_fd: int,
                    parts: ResponseParts) -> ResponseParts:
    """Write the leading parts that can go without waiting; returns what is left (empty
    when everything went), for ``write_parts`` to finish.

    Bytes go through ``transport.write``. A FileSlice goes with ``os.sendfile`` on
    ``out_fd`` (a duplicate of the transport's socket descriptor, kept by the caller) only
    while the transport's buffer is empty, so file bytes never overtake buffered bytes; a
    socket buffer that fills part way (a short count or ``BlockingIOError``) leaves the rest
    of the slice, as a smaller FileSlice, at the head of what is returned. Raises
    SendfileError if the file region ends early.
    """
    for i, part in enumerate(parts):
        if isinstance(part, FileSlice):
            if part.length == 0:
                continue
            if transport.get_write_buffer_size() != 0:
                return parts[i:]
            sent = 0
            try:
                while sent < part.length:
                    n = os.sendfile(out_fd, part.fileno(), part.position + sent,
                                    min(part.length - sent, SENDFILE_MAX_CHUNK_BYTES))
                    if n == 0:
                        raise SendfileError(f"file region ended after {sent} of {part.length} bytes")
                    sent += n
            except BlockingIOError:
                rest = FileSlice(part.file, part.position + sent, part.length - sent)
                return [rest, *parts[i + 1:]]
            if log.isEnabledFor(logging.DEBUG):
                log.debug("sendfile: %d bytes of fd %d at %d", part.length, part.fileno(),
                          part.position)
        elif part:
            if transport.is_closing():
                raise ConnectionResetError("connection closed while writing a response")
            transport.write(part)
    return []


def copy_parts_now(transport: asyncio.WriteTransport, parts: ResponseParts,
                   max_bytes: int) -> ResponseParts:
    """The copying counterpart of ``write_parts_now``: a response of at most ``max_bytes``
    (record data included) is read (``pread``) and written in one ``transport.write``;
    returns the parts untouched when it is bigger, for ``write_parts(copy=True)``, which
    copies 1 MiB at a time and waits for the transport to drain. Raises SendfileError if a
    file region ends early."""
    total = sum(p.length if isinstance(p, FileSlice) else len(p) for p in parts)
    if total > max_bytes:
        return parts
    buf = bytearray()
    for part in parts:
        if isinstance(part, FileSlice):
            if part.length:
                chunk = os.pread(part.fileno(), part.length, part.position)
                if len(chunk) != part.length:
                    raise SendfileError(f"file region ended after {len(chunk)} of {part.length} bytes")
                buf += chunk
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("copy: %d bytes of fd %d at %d", part.length, part.fileno(),
                              part.position)
        else:
            buf += part
    if transport.is_closing():
        raise ConnectionResetError("connection closed while writing a response")
    transport.write(buf)
    return []


async def _copy_slice(writer: PartsWriter, part: FileSlice) -> None:
    fd = part.fileno()
    sent = 0
    while sent < part.length:
        n = min(COPY_CHUNK_BYTES, part.length - sent)
        chunk = os.pread(fd, n, part.position + sent)
        if not chunk:
            raise SendfileError(f"file region ended after {sent} of {part.length} bytes")
        if writer.transport.is_closing():
            raise ConnectionResetError("connection closed while writing a response")
        writer.write(chunk)
        sent += len(chunk)
        await writer.drain()
    if log.isEnabledFor(logging.DEBUG):
        log.debug("copy: %d bytes of fd %d at %d", part.length, fd, part.position)


async def _drain_empty(writer: PartsWriter) -> None:
    """Wait until the transport's write buffer is empty (not merely below its low mark)."""
    transport = writer.transport
    if transport.get_write_buffer_size() == 0:
        return
    high, _low = transport.get_write_buffer_limits()
    transport.set_write_buffer_limits(high=0, low=0)
    try:
        await writer.drain()
    finally:
        transport.set_write_buffer_limits(high=max(high, _DEFAULT_HIGH_WATER_BYTES))


async def _sendfile_slice(writer: PartsWriter, part: FileSlice) -> None:
    await _drain_empty(writer)
    transport = writer.transport
    if transport.is_closing():
        raise ConnectionResetError("connection closed while writing a response")
    sock = transport.get_extra_info("socket")
    if sock is None:
        raise ConnectionResetError("connection has no socket")
    loop = asyncio.get_running_loop()
    in_fd = part.fileno()
    out_fd = os.dup(sock.fileno())
    try:
        sent = 0
        while sent < part.length:
            count = min(part.length - sent, SENDFILE_MAX_CHUNK_BYTES)
            try:
                n = os.sendfile(out_fd, in_fd, part.position + sent, count)
            except BlockingIOError:
                await _wait_writable(loop, out_fd, transport)
                continue
            if n == 0:
                raise SendfileError(f"file region ended after {sent} of {part.length} bytes")
            sent += n
    finally:
        os.close(out_fd)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("sendfile: %d bytes of fd %d at %d", part.length, in_fd, part.position)


async def _wait_writable(loop: asyncio.AbstractEventLoop, fd: int,
                         transport: asyncio.WriteTransport) -> None:
    if transport.is_closing():
        raise ConnectionResetError("connection closed while sending file data")
    ready: asyncio.Future[None] = loop.create_future()

    def on_writable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, on_writable)
    try:
        await ready
    finally:
        loop.remove_writer(fd)

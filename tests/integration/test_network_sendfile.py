"""broker.network.sendfile.write_parts over a real TCP connection on uvloop, with a real
file: zero-copy (os.sendfile) and copying give byte-identical streams, in part order, also
when the transport still holds buffered bytes and the socket buffer fills (EAGAIN)."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from broker.network.sendfile import SendfileError, write_parts
from protocol.fileslice import FileSlice, ResponseParts

pytestmark = pytest.mark.timeout(60)


async def serve_once(write: Callable[[asyncio.StreamWriter], Awaitable[None]],
                     read_delay_s: float = 0.0) -> tuple[bytes, BaseException | None]:
    """Run ``write`` on the server side of one connection; return what the client read."""
    result: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await write(writer)
            result.set_result(None)
        except BaseException as exc:  # reported to the test, which asserts on it
            result.set_result(exc)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        if read_delay_s:
            await asyncio.sleep(read_delay_s)  # let the socket buffers fill: EAGAIN path
        data = await reader.read()
        writer.close()
        return data, await result
    finally:
        server.close()


@pytest.fixture
def data_file(tmp_path: Path) -> Iterator[tuple[BinaryIO, bytes]]:
    content = os.urandom(6 * 1024 * 1024 + 123)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(content)
    f = open(path, "rb")  # noqa: SIM115 - closed by the test's finalizer below
    yield f, content
    f.close()


def parts_and_expected(f: BinaryIO, content: bytes) -> tuple[ResponseParts, bytes]:
    big_head = os.urandom(3 * 1024 * 1024)  # still in the transport buffer at the first slice
    parts: ResponseParts = [
        b"\x00\x00\x00\x10header", big_head,
        FileSlice(f, 100, 5 * 1024 * 1024),
        b"between",
        FileSlice(f, 0, 1),
        FileSlice(f, len(content) - 7, 7),
        FileSlice(f, 50, 0),
        b"tail",
    ]
    expected = (b"\x00\x00\x00\x10header" + big_head + content[100:100 + 5 * 1024 * 1024]
                + b"between" + content[:1] + content[-7:] + b"tail")
    return parts, expected


@pytest.mark.parametrize("read_delay_s", [0.0, 0.3])
async def test_sendfile_and_copy_are_byte_identical(data_file: tuple[BinaryIO, bytes],
                                                    sendfile_calls: list[int],
                                                    read_delay_s: float) -> None:
    f, content = data_file
    calls = sendfile_calls  # counts, then calls the real one
    parts, expected = parts_and_expected(f, content)

    zero_copy, err = await serve_once(lambda w: write_parts(w, parts, copy=False), read_delay_s)
    assert err is None
    sent_by_sendfile = sum(calls)
    calls.clear()
    copied, err = await serve_once(lambda w: write_parts(w, parts, copy=True), read_delay_s)
    assert err is None

    assert zero_copy == expected
    assert copied == expected
    assert sent_by_sendfile == 5 * 1024 * 1024 + 1 + 7  # every file byte went via sendfile
    assert calls == []  # the copying path never calls sendfile


async def test_slice_past_end_of_file_raises_sendfile_error(data_file: tuple[BinaryIO, bytes]) -> None:
    f, content = data_file
    parts: ResponseParts = [b"h", FileSlice(f, len(content) - 10, 20)]
    for copy in (False, True):
        _data, err = await serve_once(lambda w, c=copy: write_parts(w, parts, copy=c))  # type: ignore[misc]
        assert isinstance(err, SendfileError), (copy, err)


async def test_peer_gone_mid_sendfile_raises_connection_error(data_file: tuple[BinaryIO, bytes]) -> None:
    f, content = data_file
    parts: ResponseParts = [FileSlice(f, 0, len(content))] * 8  # ~50 MiB, more than buffers hold
    result: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await write_parts(writer, parts)
            result.set_result(None)
        except BaseException as exc:
            result.set_result(exc)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await reader.readexactly(1024 * 1024)
        transport_sock = writer.get_extra_info("socket")
        transport_sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                  b"\x01\x00\x00\x00\x00\x00\x00\x00")  # close -> RST
        writer.close()
        async with asyncio.timeout(10):
            err = await result
        assert isinstance(err, ConnectionError), err
    finally:
        server.close()

"""broker.network.sendfile.write_parts_now (the connection's synchronous first attempt at a
response with record data) over a real TCP connection on uvloop: a small response goes
entirely at once by sendfile; a big one stops where the socket buffer fills and hands back
the rest, which write_parts finishes, byte for byte."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import BinaryIO

import pytest

from broker.network.sendfile import write_parts, write_parts_now
from protocol.fileslice import FileSlice, ResponseParts

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def data_file(tmp_path: object) -> Iterator[tuple[BinaryIO, bytes]]:
    content = os.urandom(16 * 1024 * 1024)
    path = os.path.join(str(tmp_path), "data.log")
    with open(path, "wb") as f:
        f.write(content)
    with open(path, "rb") as f:
        yield f, content


async def run(parts: ResponseParts, total: int,
              sendfile_calls: list[int]) -> tuple[bytes, ResponseParts]:
    """Serve ``parts`` with write_parts_now (client not reading yet), then the rest with
    write_parts while the client reads ``total`` bytes."""
    left: asyncio.Future[ResponseParts] = asyncio.get_running_loop().create_future()
    finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        out_fd = os.dup(writer.transport.get_extra_info("socket").fileno())
        try:
            rest = write_parts_now(writer.transport, out_fd, parts)
            left.set_result(rest)
            await write_parts(writer, rest)
            finished.set_result(None)
        finally:
            os.close(out_fd)
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        rest = await asyncio.wait_for(left, 10)
        data = await asyncio.wait_for(reader.readexactly(total), 20)
        await asyncio.wait_for(finished, 10)
        writer.close()
        return data, rest
    finally:
        server.close()


async def test_small_response_goes_entirely_by_sendfile_at_once(
        data_file: tuple[BinaryIO, bytes], sendfile_calls: list[int]) -> None:
    f, content = data_file
    calls = sendfile_calls
    parts: ResponseParts = [b"head", FileSlice(f, 10, 1000), FileSlice(f, 0, 0), b"mid",
                            FileSlice(f, 5000, 7), b"tail"]
    expected = b"head" + content[10:1010] + b"mid" + content[5000:5007] + b"tail"
    data, rest = await run(parts, len(expected), calls)
    assert rest == []
    assert data == expected
    assert sum(calls) == 1007  # the record bytes went by sendfile


async def test_big_response_hands_back_the_rest_and_write_parts_finishes(
        data_file: tuple[BinaryIO, bytes], sendfile_calls: list[int]) -> None:
    f, content = data_file
    calls = sendfile_calls
    size = len(content) - 100
    parts: ResponseParts = [b"head", FileSlice(f, 100, size), b"tail", FileSlice(f, 0, 3)]
    expected = b"head" + content[100:] + b"tail" + content[:3]
    data, rest = await run(parts, len(expected), calls)
    # 16 MiB does not fit in loopback socket buffers while the client is not reading.
    assert rest and isinstance(rest[0], FileSlice)
    assert rest[0].position + rest[0].length == 100 + size and rest[0].length < size
    assert rest[1:] == parts[2:]
    assert data == expected
    assert sum(calls) == size + 3  # every record byte by sendfile, none twice

"""broker.network.uring_send: several sockets' sends in one io_uring system call, on real
socket pairs (the kernel's io_uring; where it is not available ``open_sender`` says None and
the broker writes one call per answer, which the other network tests cover)."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator

import pytest

from broker.network.uring_send import ENTRIES, UringSender, open_sender

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def sender() -> Iterator[UringSender]:
    opened = open_sender()
    if opened is None:
        pytest.skip("io_uring is not available on this kernel")
    try:
        yield opened
    finally:
        opened.close()


def _pairs(n: int) -> list[tuple[socket.socket, socket.socket]]:
    pairs = [socket.socketpair() for _ in range(n)]
    for a, b in pairs:
        a.setblocking(False)  # as the event loop's sockets are
        b.settimeout(5)
    return pairs


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk
        data += chunk
    return data


def test_each_socket_gets_its_own_bytes_in_one_call(sender: UringSender) -> None:
    pairs = _pairs(14)
    try:
        payloads = [b"answer %d " % i * (i + 1) for i in range(len(pairs))]
        results = sender.send([(a.fileno(), p) for (a, _), p in zip(pairs, payloads, strict=True)])
        assert results == [len(p) for p in payloads]
        assert [_recv(b, len(p)) for (_, b), p in zip(pairs, payloads, strict=True)] == payloads
        # Twice to the same socket in one call: in the order given.
        a, b = pairs[0]
        assert sender.send([(a.fileno(), b"first,"), (a.fileno(), b"second")]) == [6, 6]
        assert _recv(b, 12) == b"first,second"
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_more_sends_than_the_ring_holds_go_in_several_calls(sender: UringSender) -> None:
    pairs = _pairs(16)  # (a few dozen small sends each: a socket pair queues a few hundred)
    try:
        items = [(pairs[i % 16][0].fileno(), b"%05d" % i) for i in range(ENTRIES * 2 + 3)]
        assert sender.send(items) == [5] * len(items)
        for k, (_, b) in enumerate(pairs):
            mine = b"".join(data for i, (_, data) in enumerate(items) if i % 16 == k)
            assert _recv(b, len(mine)) == mine
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_calls_whose_entries_and_completions_pass_the_rings_ends(sender: UringSender) -> None:
    """A call's entries are packed, and its completions read, in one run each, or two where
    they pass the end of their ring (the submission ring holds ENTRIES, the completion
    ring twice as many): calls of sizes that end neither ring on a call's boundary."""
    pairs = _pairs(16)
    try:
        sent: list[list[bytes]] = [[] for _ in pairs]
        n = 0
        for size in (100, 200, ENTRIES - 6, 150, ENTRIES, 7, ENTRIES - 1):  # 1,211 in all
            items = []
            for _ in range(size):
                data = b"<%d>" % n
                items.append((pairs[n % 16][0].fileno(), data))
                sent[n % 16].append(data)
                n += 1
            assert sender.send(items) == [len(data) for _, data in items]
            for (_, b), mine in zip(pairs, sent, strict=True):  # (a few hundred bytes each)
                expected = b"".join(mine)
                assert _recv(b, len(expected)) == expected
                mine.clear()
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_a_full_socket_buffer_takes_part_or_nothing_without_waiting(sender: UringSender) -> None:
    (a, b), (c, d) = _pairs(2)
    try:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        big = b"x" * (1 << 20)  # more than the socket buffers hold: never all of it
        sent, other = sender.send([(a.fileno(), big), (c.fileno(), b"still sent")])
        assert sent == -errno.EAGAIN or 0 < sent < len(big)
        assert other == 10 and _recv(d, 10) == b"still sent"
        while True:  # fill it up: then nothing goes, at once
            try:
                a.send(big)
            except BlockingIOError:
                break
        assert sender.send([(a.fileno(), b"no room")]) == [-errno.EAGAIN]
    finally:
        for s in (a, b, c, d):
            s.close()


def test_a_closed_peer_is_an_error_of_that_send_only(sender: UringSender) -> None:
    (a, b), (c, d) = _pairs(2)
    try:
        b.close()  # (MSG_NOSIGNAL: EPIPE, no SIGPIPE)
        assert sender.send([(a.fileno(), b"lost"), (c.fileno(), b"kept")]) == [-errno.EPIPE, 4]
        assert _recv(d, 4) == b"kept"
    finally:
        for s in (a, c, d):
            s.close()

"""Response frames written together at the end of the event loop's turn.

A response the connection answers at once (the produce and fetch fast paths) is held by its
connection and written when the loop has served every request that arrived in the same
turn (one ``call_soon`` per turn, whatever the number of connections), not in the middle
of them.

Why (measured under P5: 16 librdkafka producers, one request in flight each, 2 cores): the
loop found about 14 of the 16 connections ready in each ``epoll_wait`` and served them one
after the other. Each write to a loopback socket wakes the client thread waiting for it, and
the kernel runs that thread on the writer's CPU (a socket wakes its reader with a "sync"
wake-up), where it preempted the broker: 0.5-0.6 involuntary context switches per request,
4,595 of the broker's 5,665 switches out in one second (``perf sched``) in favour of
librdkafka's broker threads, the rest of the turn's requests waiting meanwhile. Written
together at the end of the turn, the responses cost less CPU per request on both sides
(quiet machine, before / after: client 70-74 / 66-70 us, broker 46-56 / 42-48 us, broker
preemptions 0.35-0.50 / 0.32-0.36 per request), with requests/s unchanged within the
noise (bench/results/per-request-cpu/2026-11-27-p5-rate.md).

Order per connection is kept: a connection writes what it holds before anything else it
writes (its next request starts, a response of the general path, closing).

The held answers of plain TCP connections whose transport has nothing buffered go out in one
system call for the turn (``uring_send``: io_uring), not a ``send`` each: each send wakes its
reader, which the kernel often runs on the broker's CPU, preempting the broker after the
call while the turn's other answers waited (0.50 involuntary switches per request under P5;
0.09 with one call). A send that does not take the whole answer leaves the rest to the
transport (``Connection.sent_held``); where io_uring is not available each is written by
its transport as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from broker.network.uring_send import UringBroken, UringSender, open_sender

log = logging.getLogger(__name__)


class HeldWriter(Protocol):
    def write_held(self) -> None:
        """Write the response frames held for the end of the turn, if any."""

    def take_held(self) -> tuple[int, bytes] | None:
        """The frames held and the socket's descriptor, to be sent by the batch (no longer
        held), when they may go straight to the socket: else None (``write_held``)."""

    def sent_held(self, data: bytes, sent: int) -> None:
        """``data`` taken by ``take_held`` went out up to ``sent`` bytes (or ``-errno``):
        the rest is the transport's. Not called when all of it went out."""


class WriteBatch:
    """The connections holding response frames for the end of this turn (one list per
    event loop, shared by its connections), and work to do before they are written (the
    produce appends gathered in the turn, broker.produce_appends)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: list[HeldWriter] = []
        self._sender: UringSender | None = None  # opened at the first turn with two answers
        self._sender_tried = False
        self._work: list[Callable[[], None]] = []
        # Responses are held for the end of this turn, and their writing has not begun.
        self.holding = False

    def before_writing(self, work: Callable[[], None]) -> None:
        """Run ``work`` at the end of this turn, before the held responses are written
        (only while ``holding``: the end of the turn is scheduled)."""
        assert self.holding
        self._work.append(work)

    def add(self, writer: HeldWriter) -> None:
        """``writer`` holds a response: write it at the end of this turn. Each writer is
        added once per response it holds (it writes everything it holds at once)."""
        if not self._waiting:
            self._loop.call_soon(self._write_all)
            self.holding = True
        self._waiting.append(writer)

    def _write_all(self) -> None:
        self.holding = False
        if self._work:
            # What the work answers is written by it, or held and written below; a request
            # it starts on a connection is served as if alone (not holding).
            work, self._work = self._work, []
            for job in work:
                try:
                    job()
                except Exception:
                    log.exception("Work before writing the turn's responses failed")
        waiting, self._waiting = self._waiting, []
        if len(waiting) > 1:
            self._send_together(waiting)
        else:
            for writer in waiting:
                writer.write_held()

    def write_now(self) -> None:
        """Write what is held now rather than at the end of the turn (work done outside the
        end of the turn made answers: e.g. the produce appends of a turn)."""
        if self.holding:
            self._write_all()

    def _send_together(self, waiting: list[HeldWriter]) -> None:
        sender = self._sender
        if sender is None:
            if self._sender_tried:
                for writer in waiting:
                    writer.write_held()
                return
            self._sender_tried = True
            sender = self._sender = open_sender()
            if sender is None:
                self._send_together(waiting)
                return
        items: list[tuple[int, bytes]] = []
        takers: list[HeldWriter] = []
        for writer in waiting:
            taken = writer.take_held()
            if taken is None:
                writer.write_held()  # (nothing, if it was taken already: a writer added twice)
            else:
                items.append(taken)
                takers.append(writer)
        if not items:
            return
        try:
            results = sender.send(items)
        except UringBroken as exc:
            log.warning("io_uring failed (%s): answers are written one system call each from "
                        "now on", exc)
            self._sender = None
            results = exc.results
        for writer, (_fd, data), sent in zip(takers, items, results, strict=True):
            if sent != len(data):  # (all sent: nothing left for the transport, no call)
                writer.sent_held(data, sent)

    def close(self) -> None:
        """Release the io_uring (the loop is ending)."""
        sender, self._sender = self._sender, None
        self._sender_tried = True
        if sender is not None:
            sender.close()

"""The answers held for the end of a turn, to many sockets, sent with one system call.

``write_batch.WriteBatch`` writes the answers the loop's turn held, one per connection. One
``send`` per socket wakes that socket's reader, and on loopback the kernel wakes it with a
"sync" wake-up: it often runs the reader on the writer's CPU and preempts the writer when
the call returns, while the turn's other answers wait. Under P5 (16 producers, ~14 answers a
turn, 2 cores) the broker was preempted after about one answer in two (0.50 involuntary
switches per request), its clients' threads woken in a trickle. Submitted together through
io_uring (one ``io_uring_enter`` for the turn: the kernel sends them all before returning
to the broker; the kernel here does not preempt inside a system call) the broker was
preempted 0.09 times per request, and the broker and its clients spent less CPU per request
(bench/results/per-request-cpu/2026-11-27-p5warm.md).

``UringSender.send`` takes (file descriptor, bytes) pairs and returns each send's result:
the bytes sent, or ``-errno`` (``-EAGAIN`` where the socket buffer is full: the sends carry
``MSG_DONTWAIT``, so io_uring completes them at once rather than waiting for room). The ring
is the kernel's ABI used directly (``io_uring_setup``, the mmap'd rings, ``io_uring_enter``)
through ``ctypes``; no library. ``open_sender`` returns None where io_uring is not there (an
old kernel, ``kernel.io_uring_disabled``, a seccomp filter), or where ``MINIKAFKA_IO_URING=0``
is in the broker's environment (an operator's way out, and the tests' way to serve a machine
with io_uring through the path one without it takes): the answers are then written one by
one as before.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import mmap
import os
import struct
from collections.abc import Sequence
from typing import Final

log = logging.getLogger(__name__)

_SYS_IO_URING_SETUP: Final[int] = 425  # the same number on every architecture
_SYS_IO_URING_ENTER: Final[int] = 426
_OFF_SQ_RING: Final[int] = 0
_OFF_CQ_RING: Final[int] = 0x8000000
_OFF_SQES: Final[int] = 0x10000000
_ENTER_GETEVENTS: Final[int] = 1
_OP_SEND: Final[int] = 26
_MSG_DONTWAIT: Final[int] = 0x40
_MSG_NOSIGNAL: Final[int] = 0x4000
# struct io_uring_sqe (64 bytes): opcode, flags, ioprio, fd, off, addr, len, msg_flags,
# user_data, buf_index, personality, splice_fd_in, 16 bytes of padding; of a send, the
# zeros as padding: opcode, fd, addr, len, msg_flags, user_data.
_SQE_SEND: Final[str] = "B3xi8xQIIQ24x"
# struct io_uring_cqe (16 bytes): user_data, res, flags; read: user_data, res.
_CQE: Final[str] = "Qi4x"
_U32: Final = struct.Struct("<I")
SQE_BYTES: Final[int] = 64
CQE_BYTES: Final[int] = 16
ENTRIES: Final[int] = 256  # sends per system call at most (more go in several)
ENV_VAR: Final[str] = "MINIKAFKA_IO_URING"  # "0": never open a ring (one write per answer)


class _SqOffsets(ctypes.Structure):
    _fields_ = [("head", ctypes.c_uint32), ("tail", ctypes.c_uint32),
                ("ring_mask", ctypes.c_uint32), ("ring_entries", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("dropped", ctypes.c_uint32),
                ("array", ctypes.c_uint32), ("resv1", ctypes.c_uint32),
                ("user_addr", ctypes.c_uint64)]


class _CqOffsets(ctypes.Structure):
    _fields_ = [("head", ctypes.c_uint32), ("tail", ctypes.c_uint32),
                ("ring_mask", ctypes.c_uint32), ("ring_entries", ctypes.c_uint32),
                ("overflow", ctypes.c_uint32), ("cqes", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("resv1", ctypes.c_uint32),
                ("user_addr", ctypes.c_uint64)]


class _Params(ctypes.Structure):  # struct io_uring_params
    _fields_ = [("sq_entries", ctypes.c_uint32), ("cq_entries", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("sq_thread_cpu", ctypes.c_uint32),
                ("sq_thread_idle", ctypes.c_uint32), ("features", ctypes.c_uint32),
                ("wq_fd", ctypes.c_uint32), ("resv", ctypes.c_uint32 * 3),
                ("sq_off", _SqOffsets), ("cq_off", _CqOffsets)]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


def _bytes_data_offset() -> int:
    """Where a bytes object's data starts from its address (CPython's PyBytesObject),
    checked against ctypes' own pointer to it."""
    sample = b"offset probe"
    address = ctypes.cast(ctypes.c_char_p(sample), ctypes.c_void_p).value
    assert address is not None
    return address - id(sample)


_DATA_OFFSET: Final[int] = _bytes_data_offset()


class UringBroken(OSError):
    """The ring failed and is closed; ``results``: what completed before (``-ECANCELED`` for the
    rest, which were not sent)."""

    def __init__(self, results: list[int], message: str) -> None:
        super().__init__(errno.EIO, message)
        self.results = results


class UringSender:
    """One io_uring whose submissions are sends, each call's completions reaped before it
    returns (nothing stays in flight between calls)."""

    def __init__(self, entries: int = ENTRIES) -> None:
        params = _Params()
        fd = _syscall(_SYS_IO_URING_SETUP, entries, ctypes.byref(params))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"io_uring_setup: {errno.errorcode.get(code, code)}")
        self.fd = int(fd)
        self.entries = int(params.sq_entries)
        sq, cq = params.sq_off, params.cq_off
        try:
            flags = mmap.MAP_SHARED | mmap.MAP_POPULATE
            prot = mmap.PROT_READ | mmap.PROT_WRITE
            self._sq = mmap.mmap(self.fd, sq.array + params.sq_entries * 4, flags, prot,
                                 offset=_OFF_SQ_RING)
            self._cq = mmap.mmap(self.fd, cq.cqes + params.cq_entries * CQE_BYTES, flags, prot,
                                 offset=_OFF_CQ_RING)
            self._sqes = mmap.mmap(self.fd, params.sq_entries * SQE_BYTES, flags, prot,
                                   offset=_OFF_SQES)
        except OSError:
            _libc.close(self.fd)
            raise
        self._sq_tail = int(sq.tail)
        self._sq_mask = _U32.unpack_from(self._sq, sq.ring_mask)[0]
        self._cq_head = int(cq.head)
        self._cq_tail = int(cq.tail)
        self._cq_mask = _U32.unpack_from(self._cq, cq.ring_mask)[0]
        self._cqes = int(cq.cqes)
        self._cq_entries = int(params.cq_entries)
        # The submission array maps ring slot i to entry i, for good.
        for i in range(self.entries):
            _U32.pack_into(self._sq, sq.array + 4 * i, i)
        # The entries of n sends, and n completions, each packed or read in one call:
        # struct's call costs more than its values (~1,000 instructions a send less than a
        # call of 14 values and one of 3 for each; in process, callgrind).
        self._sqe_runs: dict[int, struct.Struct] = {}
        self._cqe_runs: dict[int, struct.Struct] = {}

    def send(self, items: Sequence[tuple[int, bytes]]) -> list[int]:
        """Send each ``(fd, data)``, all in one system call (``ENTRIES`` at most per call);
        each one's result in order: the bytes sent, or ``-errno``. Raises UringBroken
        (with the results so far, ``-ECANCELED`` for those not sent) if the ring fails."""
        results: list[int] = []
        for start in range(0, len(items), self.entries):
            try:
                results += self._send(items[start:start + self.entries])
            except UringBroken as exc:
                exc.results = results + exc.results + [-errno.ECANCELED] * (
                    len(items) - start - len(exc.results))
                raise
        return results

    def _send(self, items: Sequence[tuple[int, bytes]]) -> list[int]:
        count = len(items)
        sq, mask = self._sq, self._sq_mask
        tail = _U32.unpack_from(sq, self._sq_tail)[0]
        values: list[int] = []
        flags = _MSG_DONTWAIT | _MSG_NOSIGNAL
        for i, (fd, data) in enumerate(items):  # (items holds each data alive meanwhile)
            values += (_OP_SEND, fd, id(data) + _DATA_OFFSET, len(data), flags, i)
        # The entries from the tail's on, in two runs where they pass the ring's end.
        first = tail & mask
        run = min(count, self.entries - first)
        self._run(self._sqe_runs, _SQE_SEND, run).pack_into(self._sqes, first * SQE_BYTES,
                                                            *values[:6 * run])
        if run < count:
            self._run(self._sqe_runs, _SQE_SEND, count - run).pack_into(self._sqes, 0,
                                                                        *values[6 * run:])
        _U32.pack_into(sq, self._sq_tail, (tail + count) & 0xFFFFFFFF)
        while True:
            # (-EINTR only when nothing was submitted: a count otherwise)
            entered = _syscall(_SYS_IO_URING_ENTER, self.fd, count, count, _ENTER_GETEVENTS,
                               None, 0)
            if entered >= 0 or ctypes.get_errno() != errno.EINTR:
                break
        cq = self._cq
        head = _U32.unpack_from(cq, self._cq_head)[0]
        done = (_U32.unpack_from(cq, self._cq_tail)[0] - head) & 0xFFFFFFFF
        completions: tuple[int, ...] = ()  # user_data, res of each
        if done:
            at = head & self._cq_mask
            run = min(done, self._cq_entries - at)
            completions = self._run(self._cqe_runs, _CQE, run).unpack_from(
                cq, self._cqes + CQE_BYTES * at)
            if run < done:
                completions += self._run(self._cqe_runs, _CQE, done - run).unpack_from(
                    cq, self._cqes)
            head = (head + done) & 0xFFFFFFFF
        if done == count and completions[::2] == tuple(range(count)):
            results = list(completions[1::2])  # (in order: the sends' own)
        else:
            results = [-errno.ECANCELED] * count
            for i, res in zip(completions[::2], completions[1::2], strict=True):
                results[i] = res
        _U32.pack_into(cq, self._cq_head, head)
        if entered != count:
            # Entries not submitted (or an error): they must never go later, their data
            # gone. The ring is closed; the caller writes what did not complete otherwise.
            code = ctypes.get_errno() if entered < 0 else errno.EIO
            self.close()
            raise UringBroken(results, f"io_uring_enter: {entered} of {count} submitted "
                                       f"({errno.errorcode.get(code, code)})")
        return results

    @staticmethod
    def _run(runs: dict[int, struct.Struct], layout: str, n: int) -> struct.Struct:
        """The struct of ``n`` entries of ``layout`` back to back (made once per n)."""
        found = runs.get(n)
        if found is None:
            found = runs[n] = struct.Struct("<" + layout * n)
        return found

    def close(self) -> None:
        for area in (self._sq, self._cq, self._sqes):
            area.close()
        _libc.close(self.fd)


def open_sender() -> UringSender | None:
    """An io_uring for the turn's sends, or None where the kernel will not give one (or
    ``MINIKAFKA_IO_URING=0`` says not to ask)."""
    if os.environ.get(ENV_VAR, "") == "0":
        log.info("Answers of a turn are written one system call each (%s=0)", ENV_VAR)
        return None
    try:
        return UringSender()
    except OSError as exc:
        log.info("Answers of a turn are written one system call each (no io_uring: %s)", exc)
        return None

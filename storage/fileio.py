"""Every change storage makes to disk goes through here, so that a test can make any of
them fail.

Five kinds of call (``Op``), one function or more each:

- ``WRITE``: ``pwrite_all`` (segments, index entries), ``pwritev_all`` (a produced batch
  with its patched header), ``write_all`` (checkpoint files);
- ``FSYNC``: ``fsync`` (files), ``fsync_dir`` (directory entries), ``msync`` (index maps);
- ``TRUNCATE``: ``ftruncate`` (cutting a segment, sizing an index);
- ``RENAME``: ``replace`` (``*.deleted``, checkpoint ``*.tmp`` -> final, ``-delete`` dirs);
- ``CREATE``: ``open_new`` (files opened with ``O_CREAT``), ``mkdir``.

Each behaves as its ``os`` counterpart and raises ``OSError`` as it does.

Fault injection (test-only): ``inject(FaultPlan(...))`` makes the ``nth`` matching call
(and the ``times - 1`` after it; ``times=0``: every one after it) raise
``OSError(errno)`` instead of running; ``clear()`` ends it. ``record()`` counts and names
the calls a workload makes (``Call``), so a test can fail each of them in turn. ``with
injected(plan):`` and ``with recording() as calls:`` do the same for a block and clear
on leaving it, however it ends. With no
plan and no recorder (production) each call costs one global lookup. The broker applies
``MINIKAFKA_TEST_FAULT_INJECTION`` (``plan_from_spec``) at start-up: a test hook, logged loudly.

Thread-safety: the counters are guarded by a lock; the plan is swapped atomically.
"""

from __future__ import annotations

import contextlib
import enum
import errno as errno_codes
import mmap
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

StrPath = str | Path


class Op(enum.Enum):
    WRITE = "write"
    FSYNC = "fsync"
    TRUNCATE = "truncate"
    RENAME = "rename"
    CREATE = "create"


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """Fail the ``nth`` call (1-based) that matches ``op`` (None: any), whose path starts
    with ``path_prefix`` and is ``path`` (None: any), and ``times - 1`` more (0: all after)."""

    nth: int
    errno: int = errno_codes.ENOSPC
    op: Op | None = None
    times: int = 1
    path_prefix: str | None = None
    path: str | None = None

    def matches(self, op: Op, path: str) -> bool:
        return (
            (self.op is None or self.op is op)
            and (self.path_prefix is None or path.startswith(self.path_prefix))
            and (self.path is None or path == self.path)
        )


class Call(NamedTuple):
    """One call seen by ``record()``: its kind, file and the storage function that made it."""

    op: Op
    path: str
    site: str


@dataclass(slots=True)
class _State:
    plan: FaultPlan | None = None
    seen: int = 0  # matching calls so far
    failed: int = 0
    calls: list[Call] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


_state = _State()
_active = False  # plan or recorder set: the only thing the fast path reads
MAX_RECORDED_CALLS = 1_000_000


def inject(plan: FaultPlan) -> None:
    global _active
    if plan.nth < 1 or plan.times < 0:
        raise ValueError(f"bad fault plan {plan}")
    with _state.lock:
        _state.plan, _state.seen, _state.failed = plan, 0, 0
        _active = True


def clear() -> None:
    global _active
    with _state.lock:
        _state.plan, _state.calls = None, None
        _active = False


def faults_raised() -> int:
    """How many calls the current plan has failed."""
    return _state.failed


def record() -> list[Call]:
    """Start recording every call (until ``clear()``); the returned list fills up."""
    global _active
    calls: list[Call] = []
    with _state.lock:
        _state.calls = calls
        _active = True
    return calls


@contextlib.contextmanager
def injected(plan: FaultPlan) -> Iterator[None]:
    """``inject(plan)`` for the ``with`` block, ``clear()`` on leaving it."""
    inject(plan)
    try:
        yield
    finally:
        clear()


@contextlib.contextmanager
def recording() -> Iterator[list[Call]]:
    """``record()`` for the ``with`` block (the list it fills), ``clear()`` on leaving it."""
    calls = record()
    try:
        yield calls
    finally:
        clear()


def _caller_site() -> str:
    """``Class.method`` of the first caller outside this module (recording only)."""
    frame = sys._getframe(2)
    for _ in range(8):  # bounded walk
        if frame.f_code.co_filename != __file__:
            break
        if frame.f_back is None:
            break
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "?")
    return f"{module}:{frame.f_code.co_qualname}"


def _check(op: Op, path: StrPath) -> None:
    spath = os.fspath(path)
    with _state.lock:
        if _state.calls is not None and len(_state.calls) < MAX_RECORDED_CALLS:
            _state.calls.append(Call(op, spath, _caller_site()))
        plan = _state.plan
        if plan is None or not plan.matches(op, spath):
            return
        _state.seen += 1
        if _state.seen < plan.nth or (plan.times and _state.seen >= plan.nth + plan.times):
            return
        _state.failed += 1
    raise OSError(plan.errno, f"{os.strerror(plan.errno)} (injected {op.value} fault)", spath)


def plan_from_spec(spec: str) -> FaultPlan:
    """``nth=3,errno=EIO,op=write,times=0,path=/data/d2`` -> FaultPlan (the env hook)."""
    fields: dict[str, str] = {}
    for item in spec.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"fault spec item {item!r} is not key=value")
        fields[key.strip()] = value.strip()
    unknown = set(fields) - {"nth", "errno", "op", "times", "path"}
    if unknown:
        raise ValueError(f"fault spec has unknown keys {sorted(unknown)}")
    code = getattr(errno_codes, fields.get("errno", "ENOSPC"), None)
    if not isinstance(code, int):
        raise ValueError(f"unknown errno {fields.get('errno')!r}")
    op = Op(fields["op"]) if "op" in fields else None
    return FaultPlan(nth=int(fields.get("nth", "1")), errno=code, op=op,
                     times=int(fields.get("times", "1")), path_prefix=fields.get("path"))


# ---------------------------------------------------------------------------- calls


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int,
               path: StrPath) -> None:
    """Write all of ``data`` at ``position`` (a loop over short writes)."""
    if _active:
        _check(Op.WRITE, path)
    total = len(data)
    written = os.pwrite(fd, data, position)
    if written < total:  # rare: a short write; finish it from a view
        with memoryview(data) as view:
            while written < total:  # each turn writes >= 1 byte or raises OSError
                if _active:
                    _check(Op.WRITE, path)
                written += os.pwrite(fd, view[written:], position + written)


def pwritev_all(fd: int, head: bytes | bytearray, rest: memoryview, position: int,
                path: StrPath) -> None:
    """Write ``head`` then ``rest`` at ``position`` in one ``pwritev`` (a loop over short
    writes): bytes that differ from a buffer only in their first few are written without
    copying the buffer."""
    if _active:
        _check(Op.WRITE, path)
    written = os.pwritev(fd, (head, rest), position)
    if written < len(head):  # rare: a short write
        pwrite_all(fd, memoryview(head)[written:], position + written, path)
        written = len(head)
    if written < len(head) + rest.nbytes:
        pwrite_all(fd, rest[written - len(head):], position + written, path)


def write_all(fd: int, data: bytes | bytearray | memoryview, path: StrPath) -> None:
    """Write all of ``data`` at the file position."""
    with memoryview(data) as view:
        while view:  # each turn writes >= 1 byte or raises OSError
            if _active:
                _check(Op.WRITE, path)
            view = view[os.write(fd, view):]


def fsync(fd: int, path: StrPath) -> None:
    if _active:
        _check(Op.FSYNC, path)
    os.fsync(fd)


def msync(mm: mmap.mmap, path: StrPath) -> None:
    if _active:
        _check(Op.FSYNC, path)
    mm.flush()


def fsync_dir(directory: StrPath) -> None:
    """fsync a directory so a rename or create inside it is durable."""
    if _active:
        _check(Op.FSYNC, directory)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ftruncate(fd: int, size_bytes: int, path: StrPath) -> None:
    if _active:
        _check(Op.TRUNCATE, path)
    os.ftruncate(fd, size_bytes)


def replace(src: StrPath, dst: StrPath) -> None:
    if _active:
        _check(Op.RENAME, src)
    os.replace(src, dst)


def open_new(path: StrPath, flags: int, mode: int = 0o644) -> int:
    """``os.open`` with ``O_CREAT`` (a create site, whether or not the file exists)."""
    if _active:
        _check(Op.CREATE, path)
    return os.open(path, flags | os.O_CREAT, mode)


def mkdir(path: Path) -> None:
    """``mkdir -p``: a create site only when the directory is missing."""
    if path.is_dir():
        return
    if _active:
        _check(Op.CREATE, path)
    path.mkdir(parents=True, exist_ok=True)

"""A region of an open file that a response sends with ``sendfile`` instead of copying.

Storage returns a ``FileSlice`` from ``Log.read``; the encoder places it among the byte parts
of a response (``ResponseParts``); the network layer writes bytes through the transport and
FileSlices with ``os.sendfile``, so record data never enters Python on the fetch path.

Invariant: ``0 <= position`` and ``0 <= length``; the region lies inside the file when the
slice is made. The file stays open while any slice of it may still be sent: segments are
closed and deleted only after a delay (Kafka's ``file.delete.delay.ms``), and a closed file
makes ``fileno()`` raise ``ValueError`` rather than send bytes from a reused descriptor.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO, TypeAlias


@dataclass(slots=True)  # not frozen: one per partition read, and frozen __init__ costs a setattr call per field
class FileSlice:
    file: BinaryIO
    position: int
    length: int

    def fileno(self) -> int:
        return self.file.fileno()

    def read_bytes(self) -> bytes:
        """Copy the region into memory (tests, tools and the copying fallback only)."""
        return pread_fully(self.fileno(), self.length, self.position)


def pread_fully(fd: int, length: int, position: int) -> bytes:
    """Read ``length`` bytes at ``position`` (fewer only at end of file)."""
    chunks: list[bytes] = []
    remaining = length
    while remaining > 0:
        chunk = os.pread(fd, remaining, position + (length - remaining))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


# What an encoded response is: bytes from memory, and file regions sent with sendfile.
Part: TypeAlias = "bytes | bytearray | memoryview | FileSlice"
ResponseParts: TypeAlias = "list[bytes | bytearray | memoryview | FileSlice]"


def parts_length(parts: ResponseParts) -> int:
    """Total number of bytes the parts put on the wire."""
    return sum(p.length if isinstance(p, FileSlice) else len(p) for p in parts)

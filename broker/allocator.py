"""The C allocator's settings in the broker process (glibc's malloc), set once at start-up.

A produce request's bytes pass through a few buffers of the request's size (the socket's
reads, the connection's buffer, the frame), each allocated and freed again per request.
With glibc's defaults malloc serves a block over its mmap threshold (128 KiB, raised up
to 32 MiB as such blocks are freed) with a fresh mmap, and gives the top of its heap back
to the kernel whenever more than its trim threshold (twice the mmap threshold) is free
there; so each large request is copied into pages that the kernel must map and zero
again, and unmap after it. Measured with produces of one 450 KB batch (P1's size): about
600 minor page faults per MB produced, every page of those buffers faulted in per
request; under a P1 load the faults, the page zeroing and the unmapping were about a
fifth of the broker's CPU (perf), all in the kernel.

``tune()`` sets both thresholds (``mallopt``): blocks up to ``MMAP_THRESHOLD_BYTES`` come
from the heap, whose free top is kept up to ``TRIM_THRESHOLD_BYTES``. What that costs: up
to that much freed memory stays in the process after a burst of large requests, instead
of going back to the kernel (a bound, where the JVM keeps its whole heap). Frames larger
than the mmap threshold are mapped and unmapped per request as before.

Only with glibc. Settings the environment gives malloc (``MALLOC_*_`` variables,
``GLIBC_TUNABLES`` with ``glibc.malloc``) are left in force.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from typing import Final

# glibc's malloc.h
M_TRIM_THRESHOLD: Final[int] = -1
M_MMAP_THRESHOLD: Final[int] = -3
# Above Kafka's default max.message.bytes (1 MiB + 12) and socket frames of that size.
MMAP_THRESHOLD_BYTES: Final[int] = 4 << 20
TRIM_THRESHOLD_BYTES: Final[int] = 32 << 20
ENV_SETTINGS: Final[tuple[str, ...]] = (
    "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
)


def tune(environ: Mapping[str, str]) -> str:
    """Set the thresholds where they apply; what was done, for the start-up log line."""
    try:  # "glibc 2.36"; platform.libc_ver() would read the interpreter's binary
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        libc = ""
    if not libc.startswith("glibc"):
        return "left as it is (not glibc)"
    given = [name for name in ENV_SETTINGS if name in environ]
    if "glibc.malloc" in environ.get("GLIBC_TUNABLES", ""):
        given.append("GLIBC_TUNABLES")
    if given:
        return f"glibc malloc as the environment sets it ({', '.join(given)})"
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 on success, 0 for a value out of its range.
    if not (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
            and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)):
        return "glibc malloc at its defaults (mallopt refused the thresholds)"
    return (f"glibc malloc, mmap threshold {MMAP_THRESHOLD_BYTES >> 20} MiB, "
            f"trim threshold {TRIM_THRESHOLD_BYTES >> 20} MiB")

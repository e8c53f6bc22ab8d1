"""CRC-32C (Castagnoli), the checksum of a record batch, imported the first time it is used.

``crc32c(data) -> int`` is the ``crc32c`` package's C function (hardware-accelerated where
the CPU has it). Importing that package also reads its own version from its installed
metadata (``importlib.metadata``, which loads ``email``, ``zipfile`` and ``csv`` and scans
``sys.path``): about 7% of a broker's start-up, spent before any batch needs a checksum.
So the name is bound on first lookup (PEP 562 ``__getattr__``); every later lookup finds
the C function in this module's namespace, as cheap as before. Call it as
``checksum.crc32c(...)`` (a ``from`` import would look it up at import time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crc32c import crc32c as crc32c


def __getattr__(name: str) -> object:
    if name != "crc32c":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from crc32c import crc32c

    globals()["crc32c"] = crc32c
    return crc32c

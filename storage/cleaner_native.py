"""Which build of ``storage.cleaner_scan`` the cleaner runs: compiled or pure Python.

``scripts/build-native`` compiles ``storage/cleaner_scan.py`` with mypyc into the extension
module ``storage.cleaner_scan_native`` (``storage/cleaner_scan_native.*.so``, not in git),
recording the SHA-256 of the source it was built from as ``SOURCE_SHA256``. It is used
only when that hash matches the current ``storage/cleaner_scan.py`` and the module really
is an extension; otherwise (no compiler at setup, a stale build after an edit) the pure
module runs, which gives the same results, several times slower. ``SCAN_BUILD`` says which
one runs and why; the cleaner worker logs it when it starts.

``MINIKAFKA_CLEANER_SCAN=pure`` in the environment (read at import; the cleaner workers
inherit the broker's) runs the pure module even where a current build exists: the
operator's way out of a suspect build, and how the tests run the fallback end to end.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import storage.cleaner_scan as pure

SOURCE = Path(pure.__file__)
NATIVE_MODULE = "storage.cleaner_scan_native"
ENV_VAR = "MINIKAFKA_CLEANER_SCAN"  # "pure" forces the pure module; unset or "auto": the build


def source_sha256() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()


def _load() -> tuple[ModuleType, str]:
    choice = os.environ.get(ENV_VAR) or "auto"
    if choice == "pure":
        return pure, f"pure Python ({ENV_VAR}=pure)"
    if choice != "auto":
        return pure, f"pure Python ({ENV_VAR}={choice!r} is neither 'auto' nor 'pure')"
    try:
        native = importlib.import_module(NATIVE_MODULE)
    except ImportError as exc:
        return pure, f"pure Python (no compiled build: {exc})"
    origin = str(getattr(native, "__file__", ""))
    if not origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        return pure, f"pure Python ({origin} is not a compiled module)"
    if getattr(native, "SOURCE_SHA256", None) != source_sha256():
        return pure, (f"pure Python ({Path(origin).name} was built from another version of "
                      f"{SOURCE.name}: rerun scripts/build-native)")
    return native, f"compiled by mypyc ({Path(origin).name})"


if TYPE_CHECKING:  # both builds are the same source: type-check against the pure one
    scan = pure
    SCAN_BUILD = ""
else:
    scan, SCAN_BUILD = _load()
COMPILED = scan is not pure

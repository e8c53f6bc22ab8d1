"""Which build of the request path runs: the modules compiled by mypyc, or pure Python.

``scripts/build-request-path`` compiles the modules that every produce and fetch runs
through (framing, primitives, the batch header, the request path in ``broker.network``,
...) with mypyc, as one group, into ``.native/`` at the top of the checkout (not in git):
an extension per module (``.native/protocol/frames.<abi>.so``), mypyc's shared library
for the group (``.native/minikafka_native__mypyc.<abi>.so``) and ``manifest.json``, which
records the SHA-256 of each compiled module's source and of every project module it
imports (mypyc binds calls between the compiled modules and copies ``Final`` constants of
the modules they import at build time, so an edit to either makes the build stale).

The extensions are not beside the sources, so a plain import always finds the pure
modules. ``install()`` (run by the ``protocol``, ``storage`` and ``broker`` packages when
they are first imported, before any of their modules) puts a finder in front of
``sys.meta_path`` that loads the compiled modules instead, but only when every hash in the
manifest matches the files in the checkout and the build is for this interpreter; otherwise
nothing is compiled (all or none: compiled modules call each other directly, so a mix would
run the stale copies). ``BUILD`` says which runs and why; the broker logs it at start-up.

``MINIKAFKA_REQUEST_PATH=pure`` in the environment (read once, at the first import) runs
the pure modules even where a current build exists: the operator's way out of a suspect
build, and how the tests run the pure path where the compiled one is installed.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Final

ROOT: Final[Path] = Path(__file__).resolve().parent.parent
BUILD_DIR: Final[Path] = ROOT / ".native"
MANIFEST: Final[str] = "manifest.json"
ENV_VAR: Final[str] = "MINIKAFKA_REQUEST_PATH"  # "pure": the pure modules; unset or "auto": the build

BUILD = "pure Python (not installed yet)"
COMPILED = False
MODULES: frozenset[str] = frozenset()  # the compiled modules, when COMPILED
_installed = False


class _CompiledFinder:
    """A meta path finder for the compiled modules (and mypyc's shared library)."""

    def __init__(self, files: dict[str, Path]) -> None:
        self._files = files

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        file = self._files.get(fullname)
        if file is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(file))
        return importlib.util.spec_from_file_location(fullname, file, loader=loader)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check(build_dir: Path = BUILD_DIR, root: Path = ROOT) -> tuple[dict[str, Path], str]:
    """The compiled modules' files by module name (empty when the build cannot be used), and
    why: each source and dependency hash in the manifest against the checkout."""
    try:
        manifest = json.loads((build_dir / MANIFEST).read_text())
    except FileNotFoundError:
        return {}, "no compiled build (scripts/build-request-path)"
    except (OSError, ValueError) as exc:
        return {}, f"unreadable {build_dir / MANIFEST}: {exc}"
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    if manifest.get("extension_suffix") != suffix:
        return {}, (f"the build is for {manifest.get('extension_suffix')!r}, this interpreter "
                    f"loads {suffix!r}: rerun scripts/build-request-path")
    hashes: dict[str, str] = {**manifest["depends"], **manifest["sources"]}
    for source, digest in sorted(hashes.items()):
        try:
            current = sha256(root / source)
        except OSError:
            current = ""
        if current != digest:
            return {}, f"{source} changed since the build: rerun scripts/build-request-path"
    files = {name: build_dir / file for name, file in manifest["extensions"].items()}
    for file in files.values():
        if not file.is_file():
            return {}, f"{file} is missing: rerun scripts/build-request-path"
    return files, ""


def install() -> None:
    """Put the finder in front when a current build exists (once per process; idempotent)."""
    global BUILD, COMPILED, MODULES, _installed
    if _installed:
        return
    _installed = True
    choice = os.environ.get(ENV_VAR) or "auto"
    if choice != "auto":
        BUILD = (f"pure Python ({ENV_VAR}=pure)" if choice == "pure" else
                 f"pure Python ({ENV_VAR}={choice!r} is neither 'auto' nor 'pure')")
        return
    files, why = check()
    if not files:
        BUILD = f"pure Python ({why})"
        return
    # The pure copy of a compiled module imported already would be the one others find,
    # while the compiled ones call their own copies: all compiled or none.
    if early := sorted(name for name in files if name in sys.modules):
        BUILD = f"pure Python ({', '.join(early)} imported before the finder)"
        return
    sys.meta_path.insert(0, _CompiledFinder(files))
    MODULES = frozenset(name for name in files if not name.endswith("__mypyc"))
    COMPILED = True
    BUILD = f"compiled by mypyc ({len(MODULES)} modules from {BUILD_DIR})"

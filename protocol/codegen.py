"""Generate ``protocol/messages/`` from Kafka's JSON message schemas in ``protocol/schemas/``.

Usage::

    python -m protocol.codegen            # (re)write protocol/messages/
    python -m protocol.codegen --check    # exit 1, naming stale/extra/missing files
    python -m protocol.codegen --out DIR  # write (or --check) another directory

What is generated (real, readable ``.py`` files; no ``exec`` or metaclasses at import):

- One module per API: snake_case of the name without Request/Response
  (``ProduceRequest.json`` + ``ProduceResponse.json`` -> ``produce.py`` holding
  ``ProduceRequest`` and ``ProduceResponse``). One module per other top-level schema
  (``"type": "data"`` or ``"header"``: ``consumer_protocol_assignment.py``,
  ``request_header.py``), and per internal record type under ``internal/``
  (``internal/offset_commit_key.py``). ``__init__.py`` is the registry: ``REQUESTS`` and
  ``RESPONSES`` (api key -> class) and ``API_NAMES``.
- Each message is a ``@dataclass(slots=True)`` with one attribute per schema field, in schema
  order, named in snake_case (``TransactionalId`` -> ``transactional_id``; a Python keyword
  gets a trailing underscore). Defaults come from the schema: ``"default"`` when given, else
  0 / False / "" / b"" / [] / zero UUID / a fresh struct; ``records`` default to None.
- **Struct naming**: every struct of a message (inline ``fields`` and ``commonStructs``) is a
  class nested *one level* inside the message class, under its schema name:
  ``ProduceRequest.TopicProduceData``, ``ProduceRequest.PartitionProduceData``. Kafka
  requires struct names to be unique within a message, so these never collide, and the
  request and response of one API keep separate namespaces.
- Codecs are straight-line module-level functions, one per struct per distinct wire layout
  (versions with identical code share a function): ``_d_<Message>_<Struct>_v<N>`` decodes,
  ``_e_<Message>_<Struct>_v<N>`` encodes. Runs of fixed-width fields are read and written
  with one precompiled ``struct.Struct``; variable-width fields call ``protocol.primitives``.
- ``records`` fields decode to a ``memoryview`` over the input (no copy) and encode from
  bytes-like objects or ``FileSlice``; ``encode_parts`` keeps FileSlices and large views as
  separate parts.

Message class API: ``API_KEY`` (requests/responses), ``LOWEST_VERSION``, ``HIGHEST_VERSION``,
``FLEXIBLE_VERSIONS_START`` (None when never flexible), ``LATEST_VERSION_UNSTABLE``,
``decode(buf, version)``, ``decode_at(buf, version, offset) -> (message, end)``,
``encode(version) -> bytes``, ``encode_parts(version) -> ResponseParts``.

The generator has three parts: ``codegen_model.py`` parses the schemas, ``codegen_emit.py``
writes one message's class and codecs, and this module assembles modules and the registry,
compares (``--check``) and writes them.

Wire rules follow Kafka's ``MessageDataGenerator``: flexible versions use compact strings,
bytes and arrays (uvarint length + 1) and a tagged-fields section; tagged fields are written
in ascending tag order when they differ from their default; nullable structs carry an int8
presence byte (-1 null, 1 present); encoding a non-default, non-ignorable field at a version
without it raises ``UnsupportedVersionError``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from protocol.codegen_emit import GENERATED_MARK, generate_module
from protocol.codegen_model import (
    SCHEMA_DIR,
    FieldSpec,
    MessageSpec,
    StructSpec,
    Versions,
    api_base_name,
    load_all,
    module_path,
    snake_case,
    strip_comments,
)

__all__ = [
    "MESSAGES_DIR",
    "SCHEMA_DIR",
    "FieldSpec",
    "MessageSpec",
    "StructSpec",
    "Versions",
    "check",
    "generate",
    "load_all",
    "main",
    "module_path",
    "snake_case",
    "strip_comments",
    "write",
]

MESSAGES_DIR = Path(__file__).resolve().parent / "messages"


def _registry(specs: list[MessageSpec]) -> str:
    """``__init__.py``: the registry. Message modules are imported on first use (PEP 562
    ``__getattr__`` for names, ``REQUESTS[key]`` / ``RESPONSES[key]`` for classes), so
    importing the package costs this one module, not one per API; what the framing needs
    of every API up front (flexible versions) is a table here."""
    apis: dict[int, tuple[str, MessageSpec | None, MessageSpec | None]] = {}
    modules: dict[str, str] = {}  # class name -> module (dotted, relative to the package)
    for s in specs:
        if s.kind not in ("request", "response"):
            continue
        assert s.api_key is not None
        base = api_base_name(s)
        req, resp = apis.get(s.api_key, (base, None, None))[1:]
        if s.kind == "request":
            req = s
        else:
            resp = s
        apis[s.api_key] = (base, req, resp)
        modules[s.name] = module_path(s).replace("/", ".")
    keys = sorted(apis)
    reqs = [apis[k][1] for k in keys]
    resps = [apis[k][2] for k in keys]
    assert all(r is not None for r in reqs + resps), "every API has a request and a response"
    by_module: dict[str, list[str]] = {}
    for cls, mod in modules.items():
        by_module.setdefault(mod, []).append(cls)

    def flex(s: MessageSpec | None) -> str:
        assert s is not None
        return "None" if s.flexible.empty else str(s.flexible.lo)

    def name(s: MessageSpec | None) -> str:
        assert s is not None
        return s.name

    lines = [
        f"# {GENERATED_MARK} protocol/schemas/*.json — do not edit",
        '"""Registry of the generated Kafka messages: api key -> request and response class.',
        "",
        "Each message module is imported when first used: ``from protocol.messages import",
        "ProduceRequest`` (PEP 562 ``__getattr__``) or ``REQUESTS[0]`` imports ``produce.py``",
        "alone. What framing needs of every API up front is tabled here (flexible versions).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import importlib",
        "from collections.abc import Iterator, Mapping",
        "from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar",
        "",
        "if TYPE_CHECKING:",
    ]
    for mod in sorted(by_module):
        names = ", ".join(sorted(by_module[mod]))
        lines.append(f"    from protocol.messages.{mod} import {names}")
    # String aliases: the names exist at run time only once imported.
    lines += ["", "AnyRequest: TypeAlias = ("]
    lines += [f"    \"{' | ' if i else ''}{n}\"" for i, n in enumerate(map(name, reqs))]
    lines += [")", "AnyResponse: TypeAlias = ("]
    lines += [f"    \"{' | ' if i else ''}{n}\"" for i, n in enumerate(map(name, resps))]
    lines += [
        ")",
        "",
        '_T = TypeVar("_T")',
        "",
        "# class name -> its module, relative to this package",
        "_MODULES: dict[str, str] = {",
    ]
    lines += [f"    {n!r}: {modules[n]!r}," for n in sorted(modules)]
    lines += [
        "}",
        "",
        "",
        "def _load(name: str) -> Any:",
        "    value = getattr(importlib.import_module(f\"{__name__}.{_MODULES[name]}\"), name)",
        "    globals()[name] = value  # the next lookup is a plain global",
        "    return value",
        "",
        "",
        "def __getattr__(name: str) -> Any:",
        "    if name not in _MODULES:",
        "        raise AttributeError(f\"module {__name__!r} has no attribute {name!r}\")",
        "    return _load(name)",
        "",
        "",
        "def __dir__() -> list[str]:",
        "    return sorted({*globals(), *_MODULES})",
        "",
        "",
        "class _LazyClasses(Mapping[int, _T]):",
        '    """api key -> message class; a class\'s module is imported on its first lookup."""',
        "",
        "    __slots__ = (\"_classes\", \"_names\")",
        "",
        "    def __init__(self, names: dict[int, str]) -> None:",
        "        self._names = names",
        "        self._classes: dict[int, _T] = {}",
        "",
        "    def __getitem__(self, key: int) -> _T:",
        "        cls = self._classes.get(key)",
        "        if cls is None:",
        "            cls = self._classes[key] = _load(self._names[key])",
        "        return cls",
        "",
        "    def __iter__(self) -> Iterator[int]:",
        "        return iter(self._names)",
        "",
        "    def __len__(self) -> int:",
        "        return len(self._names)",
        "",
        "    def __contains__(self, key: object) -> bool:",
        "        return key in self._names",
        "",
        "",
        "REQUESTS: Mapping[int, type[AnyRequest]] = _LazyClasses({",
    ]
    lines += [f"    {k}: {name(r)!r}," for k, r in zip(keys, reqs, strict=True)]
    lines += ["})", "RESPONSES: Mapping[int, type[AnyResponse]] = _LazyClasses({"]
    lines += [f"    {k}: {name(r)!r}," for k, r in zip(keys, resps, strict=True)]
    lines += ["})",
              '"""Each request\'s first flexible version (None: never flexible): the request header',
              'version depends on it."""',
              "REQUEST_FLEXIBLE_VERSIONS: dict[int, int | None] = {"]
    lines += [f"    {k}: {flex(r)}," for k, r in zip(keys, reqs, strict=True)]
    lines += ["}", '"""Each response\'s first flexible version (None: never flexible)."""',
              "RESPONSE_FLEXIBLE_VERSIONS: dict[int, int | None] = {"]
    lines += [f"    {k}: {flex(r)}," for k, r in zip(keys, resps, strict=True)]
    lines += ["}", '"""Kafka\'s API names by key (``ApiKeys`` names in CamelCase)."""',
              "API_NAMES: dict[int, str] = {"]
    lines += [f"    {k}: {apis[k][0]!r}," for k in keys]
    lines += ["}", ""]
    lines += ["__all__ = ["]
    lines += [f"    {n!r}," for n in ["API_NAMES", "REQUESTS", "REQUEST_FLEXIBLE_VERSIONS",
                                       "RESPONSES", "RESPONSE_FLEXIBLE_VERSIONS", "AnyRequest",
                                       "AnyResponse", *sorted(modules)]]
    lines += ["]"]
    return "\n".join(lines) + "\n"


def generate(schema_dir: Path = SCHEMA_DIR) -> dict[str, str]:
    """All generated files: relative path -> text."""
    specs = load_all(schema_dir)
    by_module: dict[str, list[MessageSpec]] = {}
    for s in specs:
        by_module.setdefault(module_path(s), []).append(s)
    files: dict[str, str] = {}
    order = {"request": 0, "response": 1}
    for mod, group in sorted(by_module.items()):
        group.sort(key=lambda s: (order.get(s.kind, 2), s.name))
        files[f"{mod}.py"] = generate_module(group)
    files["__init__.py"] = _registry(specs)
    files["internal/__init__.py"] = (
        f"# {GENERATED_MARK} protocol/schemas/internal/*.json — do not edit\n"
        '"""Kafka\'s internal record types (__consumer_offsets keys and values)."""\n'
    )
    return files


def _existing(out_dir: Path) -> Iterator[str]:
    for p in sorted(out_dir.rglob("*.py")):
        yield p.relative_to(out_dir).as_posix()


def check(out_dir: Path, files: dict[str, str]) -> list[str]:
    """Problems with ``out_dir`` compared to ``files``: stale, missing and extra files."""
    problems: list[str] = []
    for rel, text in sorted(files.items()):
        path = out_dir / rel
        if not path.exists():
            problems.append(f"missing: {path}")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"stale: {path}")
    for rel in _existing(out_dir) if out_dir.exists() else ():
        if rel not in files:
            problems.append(f"extra: {out_dir / rel}")
    return problems


def write(out_dir: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    for rel in _existing(out_dir):
        if rel not in files:
            (out_dir / rel).unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m protocol.codegen", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if the generated files differ from what would be written")
    ap.add_argument("--out", type=Path, default=MESSAGES_DIR, help="output directory")
    ap.add_argument("--schemas", type=Path, default=SCHEMA_DIR, help="schema directory")
    args = ap.parse_args(argv)
    files = generate(args.schemas)
    if args.check:
        problems = check(args.out, files)
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print("generated messages are stale: run `python -m protocol.codegen`",
                  file=sys.stderr)
            return 1
        return 0
    write(args.out, files)
    print(f"wrote {len(files)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

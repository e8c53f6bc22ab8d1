"""The schema model of the code generator: Kafka's JSON message definitions, parsed.

``load_all()`` reads ``protocol/schemas/*.json`` and ``schemas/internal/*.json`` (they carry
``//`` comments, stripped here) into ``MessageSpec`` objects: the message's versions and
flexible versions, its top-level fields, and every struct it defines (inline ``fields`` and
``commonStructs``) by name. Used by ``protocol/codegen_emit.py`` and by the tests, which
derive their value strategies from the same model.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
SCHEMA_DIR = PACKAGE_DIR / "schemas"

MAX_VERSION = 0x7FFF
SCALAR_TYPES = frozenset({"int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
                          "bool", "string", "bytes", "uuid", "records"})
RESERVED_NAMES = frozenset({"encode", "decode", "encode_parts", "decode_at"})


class SchemaError(ValueError):
    """A schema this generator does not understand."""


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; empty when ``lo > hi`` ("none")."""

    lo: int
    hi: int

    @staticmethod
    def parse(text: str | None) -> Versions:
        if text is None or text == "none":
            return Versions(1, 0)
        text = text.strip()
        if text.endswith("+"):
            return Versions(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            lo, hi = text.split("-")
            return Versions(int(lo), int(hi))
        return Versions(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.lo, other.lo), min(self.hi, other.hi))

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


def snake_case(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    if keyword.iskeyword(s) or s in RESERVED_NAMES:
        s += "_"
    return s


@dataclass(slots=True)
class FieldSpec:
    name: str
    py_name: str
    type: str
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    ignorable: bool
    default: object
    flexible: Versions | None  # field-level override ("flexibleVersions" on the field)
    zero_copy: bool
    about: str
    struct: StructSpec | None = None  # the struct when type is Struct or []Struct

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.elem[:1].isupper()

    @property
    def any_nullable(self) -> bool:
        return (not self.nullable.intersect(self.versions).empty or self.default == "null"
                or self.type == "records")


@dataclass(slots=True)
class StructSpec:
    name: str
    fields: list[FieldSpec]
    versions: Versions


@dataclass(slots=True)
class MessageSpec:
    """One schema file: a request, response, header or data (internal record) type."""

    name: str
    kind: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    latest_unstable: bool
    top: StructSpec
    structs: dict[str, StructSpec]
    schema_file: str  # path relative to the schema dir, e.g. "internal/OffsetCommitKey.json"

    @property
    def versions(self) -> range:
        return range(self.valid.lo, self.valid.hi + 1)


def strip_comments(text: str) -> str:
    """Remove ``//`` comments (whole lines and line ends outside strings)."""
    out: list[str] = []
    for line in text.splitlines():
        in_str = False
        cut = len(line)
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\" and in_str:
                i += 2
                continue
            if c == '"':
                in_str = not in_str
            elif not in_str and line.startswith("//", i):
                cut = i
                break
            i += 1
        out.append(line[:cut])
    return "\n".join(out)


def _parse_fields(raw: list[dict[str, object]], structs: dict[str, StructSpec]) -> list[FieldSpec]:
    fields: list[FieldSpec] = []
    for f in raw:
        name = str(f["name"])
        versions = Versions.parse(str(f["versions"]))
        tag = f.get("tag")
        spec = FieldSpec(
            name=name,
            py_name=snake_case(name),
            type=str(f["type"]),
            versions=versions,
            nullable=Versions.parse(f.get("nullableVersions")),  # type: ignore[arg-type]
            tagged=Versions.parse(f.get("taggedVersions")),  # type: ignore[arg-type]
            tag=int(str(tag)) if tag is not None else None,
            ignorable=bool(f.get("ignorable", False)),
            default=f.get("default"),
            flexible=(Versions.parse(str(f["flexibleVersions"]))
                      if "flexibleVersions" in f else None),
            zero_copy=bool(f.get("zeroCopy", False)),
            about=str(f.get("about", "")),
        )
        if spec.tag is not None and spec.tagged.empty:
            raise SchemaError(f"{name}: tag without taggedVersions")
        sub = f.get("fields")
        if isinstance(sub, list):
            if not spec.is_struct:
                raise SchemaError(f"{name}: fields on a non-struct type {spec.type}")
            if spec.elem in structs:
                raise SchemaError(f"duplicate struct name {spec.elem}")
            st = StructSpec(spec.elem, [], versions)
            structs[spec.elem] = st
            st.fields = _parse_fields(sub, structs)
        fields.append(spec)
    return fields


def _link(fields: list[FieldSpec], structs: dict[str, StructSpec]) -> None:
    for f in fields:
        if f.is_struct:
            if f.elem not in structs:
                raise SchemaError(f"unknown struct type {f.elem}")
            f.struct = structs[f.elem]
        elif f.elem not in SCALAR_TYPES:
            raise SchemaError(f"unknown type {f.type}")
        if f.is_array and f.elem in ("records", "bytes", "bool", "float64", "int16", "uint16", "uint32"):
            raise SchemaError(f"unsupported array element type {f.type}")
        if f.tag is not None and f.type == "records":
            raise SchemaError(f"tagged records field {f.name}")


def load_schema(path: Path, schema_dir: Path = SCHEMA_DIR) -> MessageSpec:
    data = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    structs: dict[str, StructSpec] = {}
    for cs in data.get("commonStructs", []):
        st = StructSpec(cs["name"], [], Versions.parse(cs.get("versions", "0+")))
        structs[cs["name"]] = st
    for cs in data.get("commonStructs", []):
        structs[cs["name"]].fields = _parse_fields(cs["fields"], structs)
    top_fields = _parse_fields(data.get("fields", []), structs)
    _link(top_fields, structs)
    for st in structs.values():
        _link(st.fields, structs)
    valid = Versions.parse(data["validVersions"])
    name = data["name"]
    if name in structs:
        raise SchemaError(f"{name}: a struct has the message's own name")
    return MessageSpec(
        name=name,
        kind=data["type"],
        api_key=data.get("apiKey"),
        valid=valid,
        flexible=Versions.parse(data.get("flexibleVersions")),
        latest_unstable=bool(data.get("latestVersionUnstable", False)),
        top=StructSpec(name, top_fields, valid),
        structs=structs,
        schema_file=path.relative_to(schema_dir).as_posix(),
    )


def load_all(schema_dir: Path = SCHEMA_DIR) -> list[MessageSpec]:
    paths = sorted(schema_dir.glob("*.json")) + sorted(schema_dir.glob("internal/*.json"))
    return [load_schema(p, schema_dir) for p in paths]


def api_base_name(spec: MessageSpec) -> str:
    for suffix in ("Request", "Response"):
        if spec.kind == suffix.lower() and spec.name.endswith(suffix):
            return spec.name[: -len(suffix)]
    return spec.name


def module_path(spec: MessageSpec) -> str:
    """Module path relative to the messages package, e.g. ``produce`` or ``internal/x``."""
    mod = snake_case(api_base_name(spec)).rstrip("_")
    return f"internal/{mod}" if spec.schema_file.startswith("internal/") else mod

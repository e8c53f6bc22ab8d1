"""Hypothesis strategies for the generated messages, derived from the schemas themselves.

``message_strategy(spec, version)`` builds instances of the generated class for one version:
every field present in that version gets values (nulls where the version allows them,
tagged fields included, nested structs and arrays bounded in size); fields absent in that
version keep their defaults, which is what decoding yields for them.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from hypothesis import strategies as st

from protocol import codegen
from protocol.codegen import FieldSpec, MessageSpec, StructSpec

MAX_LIST = 3

_INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


@cache
def all_specs() -> tuple[MessageSpec, ...]:
    return tuple(codegen.load_all())


def message_class(spec: MessageSpec) -> Any:
    mod = importlib.import_module(
        "protocol.messages." + codegen.module_path(spec).replace("/", ".")
    )
    return getattr(mod, spec.name)


def struct_class(spec: MessageSpec, struct: StructSpec) -> Any:
    top = message_class(spec)
    return top if struct.name == spec.name else getattr(top, struct.name)


def _scalar(f: FieldSpec) -> st.SearchStrategy[Any]:
    t = f.elem
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return st.integers(lo, hi)
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "string":
        return st.text(max_size=12)
    if t in ("bytes", "records"):
        return st.binary(max_size=24)
    if t == "uuid":
        return st.uuids()
    raise AssertionError(f"no strategy for {t}")


def field_strategy(spec: MessageSpec, f: FieldSpec, version: int) -> st.SearchStrategy[Any]:
    elem = struct_strategy(spec, f.struct, version) if f.struct is not None else _scalar(f)
    if f.is_array:
        strat: st.SearchStrategy[Any] = st.lists(elem, max_size=MAX_LIST)
    else:
        strat = elem
    if version in f.nullable:
        strat = st.none() | strat
    return strat


def struct_strategy(spec: MessageSpec, struct: StructSpec, version: int) -> st.SearchStrategy[Any]:
    cls = struct_class(spec, struct)
    kwargs = {
        f.py_name: field_strategy(spec, f, version)
        for f in struct.fields
        if version in f.versions
    }
    return st.builds(cls, **kwargs)


@cache
def spec_by_name(name: str) -> MessageSpec:
    return next(s for s in all_specs() if s.name == name)


@cache
def message_strategy(name: str, version: int) -> st.SearchStrategy[Any]:
    spec = spec_by_name(name)
    return struct_strategy(spec, spec.top, version)


def all_message_versions() -> list[tuple[str, int]]:
    return [(s.name, v) for s in all_specs() for v in s.versions]

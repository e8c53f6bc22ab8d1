"""Cross-check the generated codecs with kafka-python 3.0.12's independent implementation.

For every (API, version) both know and whose schemas agree on the wire layout of that
version: values drawn from our schema-derived strategies are encoded by us and decoded by
kafka-python to the same values, and encoded by kafka-python and decoded by us to the same
values. The number of covered pairs is asserted, so a regression in coverage fails too.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from functools import cache
from typing import Any

import kafka.protocol as kp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs import BitField

from protocol.codegen import FieldSpec, MessageSpec, StructSpec
from protocol.primitives import ZERO_UUID
from tests.unit.message_strategies import all_specs, message_class, message_strategy

INT32_MIN = -(2**31)


@cache
def their_classes() -> dict[str, Any]:
    for mod in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        importlib.import_module(mod.name)
    found: dict[str, Any] = {}
    todo = list(ApiMessage.__subclasses__())
    while todo:
        c = todo.pop()
        todo.extend(c.__subclasses__())
        if c._class_version is None and getattr(c, "_json", None) is not None:
            found[c.name] = c
    return found


def _is_bitfield(tf: Any) -> bool:
    return bool(tf.type_str == "bitfield")


def _layout_ours(st_: StructSpec, v: int, flexible: bool) -> list[Any]:
    out: list[Any] = []
    for f in st_.fields:
        if v not in f.versions:
            continue
        tagged = flexible and v in f.tagged
        sub = _layout_ours(f.struct, v, flexible) if f.struct is not None else None
        t = f.type if f.struct is None else ("[]" if f.is_array else "") + "struct"
        out.append((f.name, t, v in f.nullable, f.tag if tagged else None, sub))
    return out


def _layout_theirs(fields: Any, v: int, flexible: bool) -> list[Any]:
    out: list[Any] = []
    for tf in fields or ():
        if not tf.for_version_q(v):
            continue
        tagged = flexible and tf.tagged_field_q(v)
        t = "int32" if _is_bitfield(tf) else tf.type_str
        if tf.is_struct() or tf.is_struct_array():
            t = ("[]" if tf.is_struct_array() else "") + "struct"
            sub = _layout_theirs(tf.fields.values(), v, flexible)
        else:
            sub = None
            if tf.is_array():
                t = tf.type_str if tf.type_str.startswith("[]") else "[]" + t
        tag = int(tf.tag) if tagged and tf.tag is not None else None
        # kafka-python renames the int32 authorized-operations fields it reads as bit sets.
        name = None if _is_bitfield(tf) else tf._name
        out.append((name, t, tf.nullable_for_version_q(v), tag, sub))
    return out


def _same(mine: list[Any] | None, other: list[Any] | None) -> bool:
    if mine is None or other is None:
        return mine is other
    if len(mine) != len(other):
        return False
    for a, b in zip(mine, other, strict=True):
        if b[0] is not None and a[0] != b[0]:
            return False
        if a[1:4] != b[1:4] or not _same(a[4], b[4]):
            return False
    return True


def agreeing_pairs() -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(pairs whose layouts agree, pairs both know but whose layouts differ)."""
    theirs = their_classes()
    agree: list[tuple[str, int]] = []
    differ: list[tuple[str, int]] = []
    for spec in all_specs():
        tc = theirs.get(spec.name)
        if tc is None or spec.kind not in ("request", "response"):
            continue
        for v in spec.versions:
            if v > tc.max_version:
                continue
            flex = v in spec.flexible
            if flex != tc.flexible_version_q(v):
                differ.append((spec.name, v))
                continue
            mine = _layout_ours(spec.top, v, flex)
            other = _layout_theirs(tc._struct._fields, v, flex)
            (agree if _same(mine, other) else differ).append((spec.name, v))
    return agree, differ


AGREE, DIFFER = agreeing_pairs()


def _to_theirs_value(f: FieldSpec, tf: Any, value: Any, v: int) -> Any:
    if value is None:
        return None
    if f.struct is not None:
        if f.is_array:
            return [to_theirs(f.struct, tf.fields.values(), tf.data_class, e, v) for e in value]
        return to_theirs(f.struct, tf.fields.values(), tf.data_class, value, v)
    if _is_bitfield(tf):
        return None if value == INT32_MIN else BitField.from_32_bit_field(value & 0xFFFFFFFF)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _pairs(ours: StructSpec, their_fields: Any, v: int) -> list[tuple[FieldSpec, Any]]:
    """Our and their fields present at ``v``, paired by position (layouts agree)."""
    mine = [f for f in ours.fields if v in f.versions]
    other = [tf for tf in their_fields if tf.for_version_q(v)]
    return list(zip(mine, other, strict=True))


def to_theirs(ours: StructSpec, their_fields: Any, their_cls: Any, obj: Any, v: int) -> Any:
    kwargs = {tf.name: _to_theirs_value(f, tf, getattr(obj, f.py_name), v)
              for f, tf in _pairs(ours, their_fields, v)}
    return their_cls(version=v, **kwargs)


def _from_theirs_value(f: FieldSpec, tf: Any, value: Any, v: int, ours_cls: Any,
                       top_cls: Any) -> Any:
    if f.struct is not None:
        if value is None:
            # kafka-python leaves an absent tagged struct as None: our default instance.
            return None if v in f.nullable or f.default == "null" else ours_cls()
        if f.is_array:
            return [from_theirs(f.struct, tf.fields.values(), e, v, ours_cls, top_cls)
                    for e in value]
        return from_theirs(f.struct, tf.fields.values(), value, v, ours_cls, top_cls)
    if _is_bitfield(tf):
        if value is None:
            return INT32_MIN
        raw = BitField.to_32_bit_field(value)
        return raw - 2**32 if raw >= 2**31 else raw
    if f.elem == "uuid":
        if f.is_array:
            return [ZERO_UUID if u is None else u for u in value]
        return ZERO_UUID if value is None else value
    return value


def from_theirs(ours: StructSpec, their_fields: Any, obj: Any, v: int, ours_cls: Any,
                top_cls: Any) -> Any:
    kwargs: dict[str, Any] = {}
    for f, tf in _pairs(ours, their_fields, v):
        sub_cls = getattr(top_cls, f.struct.name) if f.struct is not None else None
        kwargs[f.py_name] = _from_theirs_value(f, tf, getattr(obj, tf.name), v, sub_cls, top_cls)
    return ours_cls(**kwargs)


def _spec(name: str) -> MessageSpec:
    return next(s for s in all_specs() if s.name == name)


def test_coverage_of_pairs() -> None:
    """How many (api message, version) pairs the cross-check covers; it must stay broad."""
    apis = {n.removesuffix("Request").removesuffix("Response") for n, _ in AGREE}
    print(f"cross-checked {len(AGREE)} (message, version) pairs over {len(apis)} APIs; "
          f"{len(DIFFER)} pairs differ in schema: {sorted(DIFFER)}")
    assert len(AGREE) >= 400
    assert len(apis) >= 45


AGREE_BY_NAME: dict[str, list[int]] = {}
for _name, _version in AGREE:
    AGREE_BY_NAME.setdefault(_name, []).append(_version)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(AGREE_BY_NAME))
def test_crosscheck(name: str) -> None:
    """Each example draws one message per cross-checked version of ``name``."""
    spec = _spec(name)
    ours_cls = message_class(spec)
    tc = their_classes()[name]

    @settings(max_examples=4, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def check(data: Any) -> None:
        for version in AGREE_BY_NAME[name]:
            msg = data.draw(message_strategy(name, version))
            if name == "ApiVersionsResponse" and version > 0:
                # kafka-python reads any ApiVersionsResponse carrying an error as v0 (the
                # body a broker sends when it rejects the request's version), so only
                # error-free bodies are comparable at v1+.
                msg = dataclasses.replace(msg, error_code=0)
            # Ours -> bytes -> kafka-python -> same values.
            wire = msg.encode(version)
            decoded = tc.decode(wire, version=version)
            back = from_theirs(spec.top, tc._struct._fields, decoded, version, ours_cls, ours_cls)
            assert back == msg, version
            # kafka-python -> bytes -> ours -> same values.
            theirs = to_theirs(spec.top, tc._struct._fields, tc, msg, version)
            their_wire = theirs.encode(version=version)
            assert ours_cls.decode(their_wire, version) == msg, version

    check()

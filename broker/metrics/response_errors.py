"""Counting the error codes in a response body (Kafka's ``AbstractResponse.errorCounts``).

Kafka marks ``ErrorsPerSec{request, error}`` with every error code a response carries:
one per partition of a Produce or Fetch answer, the top-level code, and so on, ``NONE``
included. Here every field named ``error_code`` of the generated response message counts,
at any depth.

``error_counter(cls, counts)`` builds, once per response class, a function that walks
exactly the fields that can lead to an ``error_code`` (nested structs and lists of structs,
found from the generated dataclasses' annotations) and adds one per code to ``counts``,
indexed by the code (``counts[-1]`` is ``UNKNOWN_SERVER_ERROR``: the list has
``ERROR_SLOTS`` slots, more than Kafka's highest code). Branches without an ``error_code``
below them are never visited, and the walk is one generated function per response class
with the field names written out (nested loops and attribute reads, no call per level).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

ERROR_SLOTS: Final = 256  # codes 0..254, and -1 in the last slot

Counter = Callable[[Any], None]


def _noop(_obj: Any) -> None:
    return None


def _resolve(owner: type, annotation: str) -> type | None:
    """The generated struct class an annotation such as ``list[FetchResponse.PartitionData]``
    or ``FetchResponse.EpochEndOffset | None`` names, else None (a primitive)."""
    text = annotation.strip()
    if text.endswith(" | None"):
        text = text[: -len(" | None")]
    if text.startswith("list[") and text.endswith("]"):
        text = text[len("list["):-1]
    module = sys.modules.get(owner.__module__)
    obj: Any = module
    for part in text.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, type) and dataclasses.is_dataclass(obj) else None


@dataclass(frozen=True, slots=True)
class _Plan:
    """Where the error codes of one struct class are: its own ``error_code`` field, and
    the list and struct fields that lead to more (branches without any are left out)."""

    has_code: bool
    lists: tuple[tuple[str, _Plan], ...]
    structs: tuple[tuple[str, _Plan], ...]

    @property
    def empty(self) -> bool:
        return not (self.has_code or self.lists or self.structs)


def _plan(cls: type, seen: frozenset[type]) -> _Plan:
    if cls in seen:  # generated schemas do not recurse; guard anyway
        return _Plan(False, (), ())
    seen = seen | {cls}
    has_code = False
    lists: list[tuple[str, _Plan]] = []
    structs: list[tuple[str, _Plan]] = []
    for f in dataclasses.fields(cls):
        if f.name == "error_code":
            has_code = True
            continue
        annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        target = _resolve(cls, annotation)
        if target is None:
            continue
        sub = _plan(target, seen)
        if sub.empty:
            continue
        if annotation.strip().startswith("list["):
            lists.append((f.name, sub))
        else:
            structs.append((f.name, sub))
    return _Plan(has_code, tuple(lists), tuple(structs))


def error_counter(cls: type, counts: list[int]) -> Counter:
    """A function ``(message)`` adding 1 to ``counts[code]`` for every error code in
    ``message`` (an instance of the generated class ``cls``); IndexError for a code outside
    ``counts`` (the counts before it stay counted)."""
    plan = _plan(cls, frozenset())
    if plan.empty:
        return _noop
    return _compile(plan, counts)


def _compile(plan: _Plan, counts: list[int]) -> Counter:
    """The counting function of ``plan`` as Python source with the field names written out
    (plain attribute reads and nested loops, no ``getattr`` call or inner function call per
    level: about a third cheaper per response than walking the plan), compiled once per
    response class. Field names come from the generated message classes (identifiers)."""
    lines = ["def count(message):"]
    _emit(plan, "message", 1, lines)
    namespace: dict[str, Any] = {"counts": counts}
    exec(compile("\n".join(lines), f"<error counter {id(plan):x}>", "exec"), namespace)
    counter: Counter = namespace["count"]
    return counter


def _emit(plan: _Plan, var: str, depth: int, lines: list[str]) -> None:
    pad = "    " * depth
    if plan.has_code:
        lines.append(f"{pad}counts[{var}.error_code] += 1")
    item = f"v{depth}"
    for name, sub in plan.lists:
        if not name.isidentifier():
            raise ValueError(f"not a field name: {name!r}")
        lines.append(f"{pad}for {item} in {var}.{name}:")
        _emit(sub, item, depth + 1, lines)
    for name, sub in plan.structs:
        if not name.isidentifier():
            raise ValueError(f"not a field name: {name!r}")
        lines.append(f"{pad}{item} = {var}.{name}")
        lines.append(f"{pad}if {item} is not None:")
        _emit(sub, item, depth + 1, lines)

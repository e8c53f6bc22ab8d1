"""Counting the error codes in a response body (Kafka's ``AbstractResponse.errorCounts``).

Kafka marks ``ErrorsPerSec{request, error}`` with every error code a response carries:
one per partition of a Produce or Fetch answer, the top-level code, and so on, ``NONE``
included. Here every field named ``error_code`` of the generated response message counts,
at any depth.

``error_counter(cls)`` builds, once per response class, a function that walks exactly the
fields that can lead to an ``error_code`` (nested structs and lists of structs, found from
the generated dataclasses' annotations) and adds one per code to a counts list indexed by
the code (``counts[-1]`` is ``UNKNOWN_SERVER_ERROR``: the list has ``ERROR_SLOTS`` slots,
more than Kafka's highest code). Branches without an ``error_code`` below them are never
visited.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any, Final

ERROR_SLOTS: Final = 256  # codes 0..254, and -1 in the last slot

Counter = Callable[[Any, list[int]], None]


def _noop(_obj: Any, _counts: list[int]) -> None:
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


def error_counter(cls: type, _seen: frozenset[type] = frozenset()) -> Counter:
    """A function ``(message, counts)`` adding 1 to ``counts[code]`` for every error code in
    ``message`` (an instance of the generated class ``cls``)."""
    if cls in _seen:  # generated schemas do not recurse; guard anyway
        return _noop
    seen = _seen | {cls}
    has_code = False
    lists: list[tuple[str, Counter]] = []
    structs: list[tuple[str, Counter]] = []
    for f in dataclasses.fields(cls):
        if f.name == "error_code":
            has_code = True
            continue
        annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        target = _resolve(cls, annotation)
        if target is None:
            continue
        sub = error_counter(target, seen)
        if sub is _noop:
            continue
        if annotation.strip().startswith("list["):
            lists.append((f.name, sub))
        else:
            structs.append((f.name, sub))
    if not (has_code or lists or structs):
        return _noop
    if has_code and not lists and not structs:
        def count_leaf(obj: Any, counts: list[int]) -> None:
            counts[obj.error_code] += 1

        return count_leaf
    if not has_code and len(lists) == 1 and not structs:
        (name, sub), = lists

        def count_list(obj: Any, counts: list[int]) -> None:
            for item in getattr(obj, name):
                sub(item, counts)

        return count_list

    def count(obj: Any, counts: list[int]) -> None:
        if has_code:
            counts[obj.error_code] += 1
        for name, sub in lists:
            for item in getattr(obj, name):
                sub(item, counts)
        for name, sub in structs:
            value = getattr(obj, name)
            if value is not None:
                sub(value, counts)

    return count

"""Counting the error codes in a response body (Kafka's ``AbstractResponse.errorCounts``).

Kafka marks ``ErrorsPerSec{request, error}`` with every error code a response carries:
one per partition of a Produce or Fetch answer, the top-level code, and so on, ``NONE``
included. Here every field named ``error_code`` of the generated response message counts,
at any depth.

``error_counter(cls, counts)`` builds, once per response class, a function that walks
exactly the fields that can lead to an ``error_code`` (nested structs and lists of structs,
found from the generated dataclasses' annotations) and adds one per code to ``counts``,
indexed by the code (``counts[-1]`` is ``UNKNOWN_SERVER_ERROR``: the list has
``ERROR_SLOTS`` slots, more than Kafka's highest code). Branches without an ``error_code`` below them are never
visited, and the common shapes (a list of topics of partitions, as Produce answers) are
walked by one function with nested loops instead of a call per level.
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

    @property
    def leaf(self) -> bool:
        return self.has_code and not self.lists and not self.structs

    def only_list(self) -> tuple[str, _Plan] | None:
        """The one list field, when that is all there is."""
        if self.has_code or self.structs or len(self.lists) != 1:
            return None
        return self.lists[0]


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
    return _compile(_plan(cls, frozenset()), counts)


def _compile(plan: _Plan, counts: list[int]) -> Counter:
    # The shapes of the busiest responses get one function without inner calls:
    # a leaf (a partition), a list of leaves, a list of lists of leaves (Produce).
    if plan.empty:
        return _noop
    if plan.leaf:
        def count_leaf(obj: Any) -> None:
            counts[obj.error_code] += 1

        return count_leaf
    outer = plan.only_list()
    if outer is not None:
        outer_name, inner = outer
        if inner.leaf:
            def count_list(obj: Any) -> None:
                for item in getattr(obj, outer_name):
                    counts[item.error_code] += 1

            return count_list
        nested = inner.only_list()
        if nested is not None and nested[1].leaf:
            inner_name = nested[0]

            def count_list_of_lists(obj: Any) -> None:
                for item in getattr(obj, outer_name):
                    for leaf in getattr(item, inner_name):
                        counts[leaf.error_code] += 1

            return count_list_of_lists
    has_code = plan.has_code
    lists = [(name, _compile(sub, counts)) for name, sub in plan.lists]
    structs = [(name, _compile(sub, counts)) for name, sub in plan.structs]

    def count(obj: Any) -> None:
        if has_code:
            counts[obj.error_code] += 1
        for name, sub in lists:
            for item in getattr(obj, name):
                sub(item)
        for name, sub in structs:
            value = getattr(obj, name)
            if value is not None:
                sub(value)

    return count

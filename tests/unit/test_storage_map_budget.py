"""The process-wide budget of maps and sealed segments' files: oldest first out, a
registration made again becomes the newest, the bound follows RLIMIT_NOFILE."""

from __future__ import annotations

import resource

import pytest

from storage.map_budget import MAX_LIMIT, MIN_LIMIT, MapBudget, default_limit

pytestmark = pytest.mark.timeout(10)


class Owner:
    def __init__(self, name: str, evicted: list[str]) -> None:
        self.name = name
        self._evicted = evicted

    def evict_map(self) -> None:
        self._evicted.append(self.name)

    def evict_file(self) -> None:
        self._evicted.append(self.name + ".file")


def test_oldest_registration_goes_first_and_again_means_newest() -> None:
    evicted: list[str] = []
    a, b, c, d = (Owner(n, evicted) for n in "abcd")
    budget = MapBudget(limit=3)
    budget.mapped(a.evict_map)
    budget.mapped(b.evict_map)
    budget.mapped(a.evict_file)  # one owner, two registrations
    budget.mapped(b.evict_map)  # b's map again (remapped): now the newest
    assert evicted == [] and len(budget) == 3
    budget.mapped(c.evict_map)
    assert evicted == ["a"]
    budget.unmapped(a.evict_file)  # dropped by its owner: nothing to evict
    budget.mapped(d.evict_map)
    assert evicted == ["a"] and len(budget) == 3
    budget.set_limit(1)
    assert evicted == ["a", "b", "c"] and len(budget) == 1 and budget.evictions == 3
    with pytest.raises(ValueError):
        budget.set_limit(0)


def test_default_limit_is_an_eighth_of_the_open_file_limit() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert default_limit() == max(MIN_LIMIT, min(MAX_LIMIT, soft // 8))

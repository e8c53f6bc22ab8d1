"""Every generated message, every version: encode -> decode gives back the same values.

Values come from strategies derived from the schemas (tests/unit/message_strategies.py):
nulls where a version allows them, tagged fields, nested structs and arrays.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.message_strategies import (
    all_message_versions,
    all_specs,
    message_class,
    message_strategy,
    spec_by_name,
)

CASES = all_message_versions()
NAMES = sorted({n for n, _ in CASES})


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", NAMES)
def test_round_trip(name: str) -> None:
    """Each example draws one message per version of ``name`` and round-trips each."""
    spec = spec_by_name(name)
    cls = message_class(spec)

    @settings(max_examples=6, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def check(data: Any) -> None:
        for version in spec.versions:
            msg = data.draw(message_strategy(name, version))
            wire = msg.encode(version)
            back, end = cls.decode_at(wire, version)
            assert end == len(wire), version
            assert back == msg, version
            # The decoded copy encodes to the very same bytes.
            assert back.encode(version) == wire, version

    check()


def test_every_schema_version_is_covered() -> None:
    """Every schema file and each of its valid versions has a round-trip case above."""
    specs = all_specs()
    assert {n for n, _ in CASES} == {s.name for s in specs}
    assert len(CASES) == sum(len(s.versions) for s in specs)

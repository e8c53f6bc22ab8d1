"""Every scenario by key (``python -m bench --scenarios``), and those not available yet."""

from __future__ import annotations

from typing import Final

from bench.partition_scaling import PartitionScaling
from bench.scenarios import NOT_YET as _NOT_YET
from bench.scenarios import SCENARIOS as _SHARED_BROKER_SCENARIOS
from bench.scenarios import Scenario

SCENARIOS: Final[dict[str, type[Scenario]]] = {
    **_SHARED_BROKER_SCENARIOS,
    "P7": PartitionScaling,
}
NOT_YET: Final[dict[str, str]] = dict(_NOT_YET)

"""Random, well-formed admin requests (every field drawn from the schema by hypothesis) sent
to a real broker: each is answered with a response that decodes, on the same connection
(no handler crash closes it), and the broker keeps serving. Partition counts are capped at
4 so that the rare valid CreateTopics stays quick."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.sync import SyncClient
from tests.unit.message_strategies import message_strategy

pytestmark = pytest.mark.timeout(180)

APIS = [
    ("MetadataRequest", (1, 12)),
    ("CreateTopicsRequest", (2, 7)),
    ("DeleteTopicsRequest", (1, 6)),
    ("CreatePartitionsRequest", (0, 3)),
    ("DescribeConfigsRequest", (1, 4)),
    ("AlterConfigsRequest", (0, 2)),
    ("IncrementalAlterConfigsRequest", (0, 1)),
    ("DescribeClusterRequest", (0, 1)),
    ("DescribeLogDirsRequest", (1, 4)),
]
MAX_PARTITIONS_DRAWN = 4


def _tame(request: Any) -> Any:
    """Keep drawn partition counts small (any sign kept: 0 and negatives stay invalid)."""
    for topic in getattr(request, "topics", None) or []:
        for attr in ("num_partitions", "count"):
            value = getattr(topic, attr, None)
            if isinstance(value, int) and value > MAX_PARTITIONS_DRAWN:
                setattr(topic, attr, 1 + value % MAX_PARTITIONS_DRAWN)
    return request


@st.composite
def admin_requests(draw: st.DrawFn, name: str, versions: tuple[int, int]) -> tuple[Any, int]:
    version = draw(st.integers(*versions))
    return _tame(draw(message_strategy(name, version))), version


@pytest.mark.parametrize(("name", "versions"), APIS, ids=[a[0] for a in APIS])
def test_random_admin_requests_are_answered(module_broker: Any, name: str,
                                            versions: tuple[int, int]) -> None:
    with SyncClient(module_broker.bootstrap, timeout_ms=20_000) as client:

        @settings(max_examples=15, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(admin_requests(name, versions))
        def answered(case: tuple[Any, int]) -> None:
            request, version = case
            response = client.send(request, version)  # ClientError if the broker hung up
            assert type(response).__name__ == name.replace("Request", "Response")

        answered()
    with SyncClient(module_broker.bootstrap, timeout_ms=10_000) as admin:
        admin.list_topics()  # still serving

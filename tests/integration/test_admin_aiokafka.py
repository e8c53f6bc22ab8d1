"""Admin APIs through aiokafka's AIOKafkaAdminClient against a real broker."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

pytestmark = pytest.mark.timeout(60)

DYNAMIC_TOPIC_CONFIG = 1


async def test_topic_life_cycle(broker: Any) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        created = await admin.create_topics(
            [NewTopic("aio-t", 2, 1, topic_configs={"retention.ms": "1000"})])
        assert [(t[0], t[1]) for t in created.topic_errors] == [("aio-t", 0)]
        assert await admin.list_topics() == ["aio-t"]
        (described,) = await admin.describe_topics(["aio-t"])
        assert described["error_code"] == 0
        assert [(p["partition"], p["leader"], p["replicas"]) for p in described["partitions"]] == [
            (0, 0, [0]), (1, 0, [0])]

        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "aio-t", {"retention.ms": "2000"})])
        (response,) = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "aio-t")])
        entries = {e[0]: e for e in response.resources[0][4]}
        assert entries["retention.ms"][1] == "2000"
        assert entries["retention.ms"][3] == DYNAMIC_TOPIC_CONFIG

        await admin.create_partitions({"aio-t": NewPartitions(3)})
        (grown,) = await admin.describe_topics(["aio-t"])
        assert len(grown["partitions"]) == 3

        cluster = await admin.describe_cluster()
        assert cluster["controller_id"] == 0
        assert [(b["node_id"], b["port"]) for b in cluster["brokers"]] == [(0, broker.port)]

        deleted = await admin.delete_topics(["aio-t"])
        assert [(t[0], t[1]) for t in deleted.topic_error_codes] == [("aio-t", 0)]
        assert await admin.list_topics() == []
    finally:
        await admin.close()

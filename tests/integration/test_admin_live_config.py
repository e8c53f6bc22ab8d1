"""Topic config changes reach the live logs at once (no restart): max.message.bytes set
and removed with IncrementalAlterConfigs changes what Produce accepts, and deleting a topic
makes its partitions unknown to Produce."""

from __future__ import annotations

from typing import Any

import pytest

from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from tests.integration.data_path_client import batch, produce

pytestmark = pytest.mark.timeout(60)


def test_max_message_bytes_applies_to_the_live_log(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    big = batch([b"v" * 3000])
    with SyncClient(bs, timeout_ms=10_000) as admin, SyncClient(bs, timeout_ms=10_000) as client:
        admin.create_topic("live-cfg", 1, 1, {})
        assert produce(client, "live-cfg", 0, big).error_code == ErrorCode.NO_ERROR

        admin.alter_topic_configs("live-cfg", {"max.message.bytes": "1000"}, [])
        assert produce(client, "live-cfg", 0, big).error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert produce(client, "live-cfg", 0, batch([b"small"])).error_code == ErrorCode.NO_ERROR

        admin.alter_topic_configs("live-cfg", {}, ["max.message.bytes"])
        assert produce(client, "live-cfg", 0, big).error_code == ErrorCode.NO_ERROR

        # DescribeLogDirs reports the bytes of the partition's segments
        dirs: DescribeLogDirsResponse = client.send(DescribeLogDirsRequest(topics=[
            DescribeLogDirsRequest.DescribableLogDirTopic(topic="live-cfg", partitions=[0])]), 4)
    (result,) = dirs.results
    (topic,) = result.topics
    (partition,) = topic.partitions
    on_disk = sum(f.stat().st_size for f in (module_broker.log_dir / "live-cfg-0").glob("*.log"))
    assert partition.partition_size == on_disk > 2 * 3000  # two big batches were accepted
    assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes


def test_deleted_topic_is_unknown_to_produce(module_broker: Any) -> None:
    bs = module_broker.bootstrap
    with SyncClient(bs, timeout_ms=10_000) as admin, SyncClient(bs, timeout_ms=10_000) as client:
        admin.create_topic("live-del", 2, 1, {})
        assert produce(client, "live-del", 1, batch([b"x"])).error_code == ErrorCode.NO_ERROR
        admin.delete_topics(["live-del"])
        assert produce(client, "live-del", 1, batch([b"x"])).error_code == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

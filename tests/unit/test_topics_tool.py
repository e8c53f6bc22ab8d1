"""The topics tool's pure parts: kafka-topics' include-list regex, Kafka's Uuid text form,
the describe lines, and argument errors (no broker needed for these)."""

from __future__ import annotations

import base64
import io
import uuid

import pytest

from cli import topics
from client import ClientError, PartitionInfo, TopicInfo, parse_bootstrap

pytestmark = pytest.mark.timeout(10)


def test_include_list_is_a_full_match_regex_with_commas() -> None:
    pattern = topics.topic_filter(" 'a.*,b' ")
    assert pattern is not None
    assert [n for n in ["a1", "b", "bb", "xa"] if pattern.fullmatch(n)] == ["a1", "b"]
    assert topics.topic_filter(None) is None
    with pytest.raises(topics.CommandError):
        topics.topic_filter("(")


def test_kafka_uuid_is_url_safe_base64_without_padding() -> None:
    topic_id = uuid.UUID("fb3d1f5e-7c37-4b5e-9a0a-0cf3e1f1a2b3")
    text = topics.kafka_uuid(topic_id)
    assert len(text) == 22 and "=" not in text
    assert uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")) == topic_id


def test_describe_lines() -> None:
    t = TopicInfo("t", uuid.UUID(int=1), False, 0, {
        1: PartitionInfo(1, 0, 0, (0,), (0,)), 0: PartitionInfo(0, -1, -1, (0,), ())})
    lines = topics.format_topic(t, {"retention.ms": "5"})
    assert lines[0] == ("Topic: t\tTopicId: AAAAAAAAAAAAAAAAAAAAAQ\tPartitionCount: 2"
                        "\tReplicationFactor: 1\tConfigs: retention.ms=5")
    assert lines[1] == "\tTopic: t\tPartition: 0\tLeader: none\tReplicas: 0\tIsr: \tElr: N/A\tLastKnownElr: N/A"
    assert lines[2].startswith("\tTopic: t\tPartition: 1\tLeader: 0\t")


def test_bad_arguments_exit_1_without_a_broker() -> None:
    out = io.StringIO()
    assert topics.main(["--bootstrap-server", "127.0.0.1:9", "--list", "--create"], out=out) == 1
    assert topics.main(["--list"], out=out) == 1
    assert topics.main(["--bootstrap-server", "nohost", "--list"], out=out) == 1
    assert "Invalid url in bootstrap.servers" in out.getvalue()
    with pytest.raises(ClientError):
        parse_bootstrap("host:notaport")
    assert parse_bootstrap("h1:9092,h2:9093") == [("h1", 9092), ("h2", 9093)]

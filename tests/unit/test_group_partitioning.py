"""Group -> __consumer_offsets partition, checked against Java's String.hashCode (values from the JDK)."""

from __future__ import annotations

import pytest

from broker.group.partitioning import java_string_hash_code, kafka_abs, partition_for

# Computed with OpenJDK 17: s.hashCode(), (h & 0x7fffffff) % 50
JAVA = [
    ("", 0, 0),
    ("a", 97, 47),
    ("my-group", -1906497762, 36),
    ("polygenelubricants", -2147483648, 0),  # Integer.MIN_VALUE: Utils.abs gives 0
    ("console-consumer-12345", 158455506, 6),
    ("grüppe-漢字", -1040815730, 18),
    ("emoji-😀", 1164511306, 6),  # a surrogate pair counts as two UTF-16 units
    ("test-group-with-a-rather-long-name-0123456789", -1208264503, 45),
]


@pytest.mark.parametrize(("group", "java_hash", "partition"), JAVA)
def test_hash_and_partition_match_java(group: str, java_hash: int, partition: int) -> None:
    assert java_string_hash_code(group) == java_hash
    assert partition_for(group, 50) == partition


def test_kafka_abs_of_min_int_is_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 2**31 - 5  # Kafka's abs is a mask, not a negation


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for("g", 0)

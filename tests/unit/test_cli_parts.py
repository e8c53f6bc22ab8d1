"""The command line's pure parts: properties files, Kafka's key partitioner, MINIKAFKA_*
variables, the console reader and formatter, and argument parsers of the tools."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from cli.configs import UsageError, parse_add_config
from cli.console_consumer import Formatter
from cli.console_producer import InputError, LineReader
from cli.consumer_groups import parse_duration_ms
from cli.env_config import EnvConfigError, broker_overrides, property_name
from cli.topics import CommandError, parse_replica_assignment, reported
from client import PartitionInfo
from client.partitioner import murmur2, partition_for_key
from client.properties import PropertiesError, load_properties, parse_properties
from protocol.records import TimestampType

pytestmark = pytest.mark.timeout(10)


def test_java_properties_syntax() -> None:
    text = ("# comment\n! also\n\n  a=1\nb : 2\nc 3\nd=\nlong=one \\\n    two\n"
            "path=C:\\\\dir\\tx\nuni=\\u00e9\nkey\\=x=y\nrepeat=1\nrepeat=2\n")
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "", "long": "one two",
                                      "path": "C:\\dir\tx", "uni": "é", "key=x": "y", "repeat": "2"}
    with pytest.raises(PropertiesError):
        parse_properties("x=\\u12")


def test_load_properties_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "client.properties"
    f.write_text("client.id=tool\n")
    assert load_properties(f) == {"client.id": "tool"}
    with pytest.raises(PropertiesError, match=re.escape("missing.properties")):
        load_properties(tmp_path / "missing.properties")


def test_murmur2_matches_kafka() -> None:
    # Kafka's UtilsTest.testMurmur2 vectors
    assert [murmur2(s) for s in (b"21", b"foobar", b"a-little-bit-long-string", b"a-little-bit-longer-string",
                                 b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8")] == [
        -973932308, -790332482, -985981536, -1486304829, -58897971]
    assert partition_for_key(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7


def test_environment_variable_names() -> None:
    assert property_name("MINIKAFKA_LOG_DIRS") == "log.dirs"
    assert property_name("MINIKAFKA_LISTENER_SECURITY_PROTOCOL_MAP") == "listener.security.protocol.map"
    assert property_name("MINIKAFKA_A__B___C") == "a_b-c"
    for bad in ("MINIKAFKA_", "MINIKAFKA_A____B", "MINIKAFKA__A"):
        with pytest.raises(EnvConfigError):
            property_name(bad)
    env = {"MINIKAFKA_LOG_LEVEL": "DEBUG", "MINIKAFKA_TEST_PAUSE_AT": "x", "MINIKAFKA_NUM_PARTITIONS": "3",
           "KAFKA_LOG_DIRS": "/x", "PATH": "/bin",
           # which builds run (storage.cleaner_native, protocol.native): not properties
           "MINIKAFKA_CLEANER_SCAN": "pure", "MINIKAFKA_REQUEST_PATH": "pure"}
    assert broker_overrides(env) == [("MINIKAFKA_NUM_PARTITIONS", "num.partitions", "3")]


def test_line_reader_keys_headers_and_null_marker() -> None:
    reader = LineReader.from_properties({"parse.key": "true", "key.separator": ":", "parse.headers": "true",
                                         "null.marker": "NULL"})
    record = reader.record("h1:a,h2:NULL\tk:v:w")
    assert (record.key, record.value, record.headers) == (b"k", b"v:w", (("h1", b"a"), ("h2", None)))
    assert reader.record("NULL\tNULL:x").key is None
    with pytest.raises(InputError, match="No key separator found on line number 3"):
        reader.record("h:1\tno-separator")
    lenient = LineReader.from_properties({"parse.key": "true", "ignore.error": "true"})
    assert lenient.record("just a value")[:2] == (None, b"just a value")
    with pytest.raises(InputError, match=re.escape("null.marker and key.separator")):
        LineReader.from_properties({"null.marker": "\t"})


def test_formatter_fields_and_separators() -> None:
    fmt = Formatter.from_properties({"print.timestamp": "true", "print.key": "true", "print.partition": "true",
                                     "print.offset": "true", "print.headers": "true", "key.separator": "|"})
    line = fmt.format(2, 7, 1000, TimestampType.CREATE_TIME, [("h", b"1"), ("n", None)], None, b"v")
    assert line == b"CreateTime:1000|Partition:2|Offset:7|h:1,n:null|null|v\n"
    plain = Formatter.from_properties({})
    assert plain.format(0, 0, 5, TimestampType.LOG_APPEND_TIME, [], b"k", None) == b"null\n"
    keys_only = Formatter.from_properties({"print.key": "true", "print.value": "false"})
    assert keys_only.format(0, 0, 5, TimestampType.CREATE_TIME, [], b"k", b"v") == b"k\n"


def test_tool_argument_parsers() -> None:
    assert parse_add_config("a=1, b = [x,y],c=") == {"a": "1", "b": "x,y", "c": ""}
    with pytest.raises(UsageError):
        parse_add_config("novalue")
    assert parse_duration_ms("PT1H30M") == 5_400_000
    assert parse_duration_ms("P1DT0.5S") == 86_400_500
    assert parse_duration_ms("-PT1M") == -60_000
    with pytest.raises(ValueError):
        parse_duration_ms("1 hour")
    assert parse_replica_assignment("0:1, 1:2") == {0: [0, 1], 1: [1, 2]}
    with pytest.raises(CommandError, match="duplicate"):
        parse_replica_assignment("0:0")
    with pytest.raises(CommandError, match="different replication factor"):
        parse_replica_assignment("0:1,2")


def test_topic_report_flags_select_partitions() -> None:
    def args(**on: bool) -> argparse.Namespace:
        flags = ("under_replicated_partitions", "under_min_isr_partitions", "at_min_isr_partitions",
                 "unavailable_partitions")
        return argparse.Namespace(**{f: on.get(f, False) for f in flags})

    healthy = PartitionInfo(0, 1, 0, (1, 2), (1, 2))
    lagging = PartitionInfo(1, 1, 0, (1, 2), (1,))
    leaderless = PartitionInfo(2, -1, 0, (1, 2), ())
    gone = PartitionInfo(3, 3, 0, (3,), (3,))
    live = {1, 2}
    assert [p.partition for p in (healthy, lagging, leaderless, gone)
            if reported(args(under_replicated_partitions=True), p, 2, live)] == [1, 2]
    assert [p.partition for p in (healthy, lagging, leaderless, gone)
            if reported(args(under_min_isr_partitions=True), p, 2, live)] == [1, 2, 3]
    assert [p.partition for p in (healthy, lagging, leaderless, gone)
            if reported(args(at_min_isr_partitions=True), p, 1, live)] == [1, 3]
    assert [p.partition for p in (healthy, lagging, leaderless, gone)
            if reported(args(unavailable_partitions=True), p, 1, live)] == [2, 3]

"""The minikafka Spark source's pure logic: options, offset JSON, rate limit, range split."""

from __future__ import annotations

import itertools

import pytest

from spark_ingest.offsets import (
    OffsetRange,
    SourceError,
    TopicPartition,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)
from spark_ingest.options import Assign, Subscribe, SubscribePattern, parse_options

pytestmark = pytest.mark.timeout(10)

T0, T1, T2 = (TopicPartition("t", i) for i in range(3))
BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


def test_defaults_follow_spark_kafka_source() -> None:
    batch = parse_options(BASE, streaming=False)
    stream = parse_options(BASE, streaming=True)
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"
    assert stream.starting.kind == "latest"
    assert batch.fail_on_data_loss is True and batch.include_headers is False
    assert batch.max_offsets_per_trigger is None and batch.min_partitions is None
    assert batch.subscription == Subscribe(("t",))


def test_option_names_are_case_insensitive() -> None:
    opts = parse_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "t.*",
                          "STARTINGOFFSETS": "earliest", "maxoffsetspertrigger": "7"}, streaming=True)
    assert opts.subscription == SubscribePattern("t.*")
    assert opts.subscription.matches("topic") and not opts.subscription.matches("xt")
    assert opts.starting.kind == "earliest" and opts.max_offsets_per_trigger == 7


def test_assign_and_json_offsets() -> None:
    opts = parse_options({**{"kafka.bootstrap.servers": "h:1"}, "assign": '{"t": [1, 0], "u": [2]}',
                          "startingOffsets": '{"t": {"0": 5, "1": -2}, "u": {"2": -1}}'}, streaming=True)
    assert opts.subscription == Assign((T0, T1, TopicPartition("u", 2)))
    assert opts.starting.kind == "offsets"
    assert opts.starting.offsets_map == {T0: 5, T1: -2, TopicPartition("u", 2): -1}


def test_timestamps_win_over_starting_offsets() -> None:
    opts = parse_options({**BASE, "startingOffsets": "earliest", "startingTimestamp": "1700000000000"},
                         streaming=False)
    assert opts.starting.kind == "timestamp" and opts.starting.timestamp_ms == 1_700_000_000_000
    per = parse_options({**BASE, "startingOffsetsByTimestamp": '{"t": {"0": 10}}'}, streaming=True)
    assert per.starting.kind == "timestamps" and per.starting.offsets_map == {T0: 10}


@pytest.mark.parametrize(("options", "streaming", "names"), [
    ({"subscribe": "t"}, False, "kafka.bootstrap.servers"),
    ({**BASE, "kafka.bootstrap.servers": "nohostport"}, False, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "h:1"}, False, "subscribe/subscribePattern/assign"),
    ({**BASE, "assign": '{"t": [0]}'}, False, "subscribe/subscribePattern/assign"),
    ({**BASE, "startingOffsets": '{"t": {"0": 1'}, False, "startingOffsets"),
    ({**BASE, "startingOffsets": '{"t": {"x": 1}}'}, False, "startingOffsets"),
    ({**BASE, "startingOffsets": '{"t": {"0": "1"}}'}, False, "startingOffsets"),
    ({**BASE, "startingOffsets": '{"t": {"0": -7}}'}, False, "startingOffsets"),
    ({**BASE, "startingOffsets": "latest"}, False, "startingOffsets"),
    ({**BASE, "startingOffsets": '{"t": {"0": -1}}'}, False, "startingOffsets"),
    ({**BASE, "endingOffsets": "earliest"}, False, "endingOffsets"),
    ({**BASE, "endingOffsets": '{"t": {"0": -2}}'}, False, "endingOffsets"),
    ({**BASE, "endingOffsets": "latest"}, True, "endingOffsets"),
    ({**BASE, "maxOffsetsPerTrigger": "0"}, True, "maxOffsetsPerTrigger"),
    ({**BASE, "minPartitions": "many"}, False, "minPartitions"),
    ({**BASE, "failOnDataLoss": "yes"}, False, "failOnDataLoss"),
    ({**BASE, "includeHeaders": "1"}, False, "includeHeaders"),
    ({**BASE, "startingTimestamp": "-5"}, False, "startingTimestamp"),
    ({"kafka.bootstrap.servers": "h:1", "assign": "[0]"}, False, "assign"),
    ({"kafka.bootstrap.servers": "h:1", "assign": '{"t": [-1]}'}, False, "assign"),
    ({"kafka.bootstrap.servers": "h:1", "subscribePattern": "("}, False, "subscribePattern"),
    ({**BASE, "startingOffsetsByTimestampStrategy": "skip"}, False, "startingOffsetsByTimestampStrategy"),
])
def test_bad_options_name_the_option(options: dict[str, str], streaming: bool, names: str) -> None:
    with pytest.raises(SourceError) as err:
        parse_options(options, streaming=streaming)
    assert str(err.value).startswith(names), str(err.value)


def test_offsets_json_round_trip_is_sorted_and_stable() -> None:
    offsets = {TopicPartition("b", 1): 7, TopicPartition("a", 10): 3, TopicPartition("a", 2): 0}
    data = offsets_to_json(offsets)
    assert list(data) == ["a", "b"] and data["a"] == {"2": 0, "10": 3}
    assert offsets_from_json(data, "x") == offsets
    with pytest.raises(SourceError, match=r"^offset: offset -1"):
        offsets_from_json({"a": {"0": -1}}, "offset", allow_special=False)


def test_rate_limit_shares_by_backlog_and_never_starves() -> None:
    start = {T0: 0, T1: 100, T2: 50}
    until = {T0: 900, T1: 200, T2: 50}  # backlogs 900, 100, 0
    limited = rate_limit(start, until, 100)
    assert limited == {T0: 90, T1: 110, T2: 50}
    tiny = rate_limit(start, until, 1)  # prorated below 1 -> ceil, so each backlog moves
    assert tiny[T0] == 1 and tiny[T1] == 101 and tiny[T2] == 50
    assert rate_limit(start, until, 10_000) == until
    # a new partition (absent from start) counts from 0
    assert rate_limit({}, {T0: 10}, 4) == {T0: 4}


def test_split_ranges_reaches_min_partitions_proportionally() -> None:
    ranges = [OffsetRange(T0, 0, 900), OffsetRange(T1, 10, 110), OffsetRange(T2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]  # empty ranges are dropped
    parts = split_ranges(ranges, 10)
    t0 = [r for r in parts if r.tp == T0]
    assert len(t0) == 9 and len(parts) == 10
    assert t0[0].start == 0 and t0[-1].end == 900
    assert all(a.end == b.start for a, b in itertools.pairwise(t0))
    assert sum(r.size for r in parts) == 1000
    assert split_ranges([OffsetRange(T0, 0, 2)], 8) == [OffsetRange(T0, 0, 1), OffsetRange(T0, 1, 2)]

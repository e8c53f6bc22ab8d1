"""The ``minikafka`` Spark source and Spark's own ``format("kafka")`` against a real broker.

One real broker and one local[2] Spark session for the module (a session costs ~10-30 s).
Data is produced with kafka-python (every codec, keys, null keys/values, headers); what
Spark reads is compared with what the producer was told (partition, offset, timestamp).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from pyspark.sql import DataFrame, SparkSession

from client.sync import SyncClient
from protocol.messages.delete_records import DeleteRecordsRequest
from spark_ingest.session import local_session
from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(240)

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
Row = tuple[Any, ...]  # key, value, topic, partition, offset, timestamp_ms, timestampType, headers
# headers: None when the record has none (Spark's Kafka source gives null there)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = local_session("test_spark_source")
    yield session
    session.stop()


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with SyncClient(bootstrap, timeout_ms=10_000) as admin:
        admin.create_topic(name, partitions, 1, {})


def produce(bootstrap: str, topic: str, count: int, *, codec: str | None = None,
            tag: str = "", partitions: int = 3, headers: bool = True) -> list[Row]:
    """Send ``count`` records round-robin over partitions; the rows a reader must see."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5,
                             request_timeout_ms=10_000, max_block_ms=10_000)
    sent = []
    try:
        for i in range(count):
            key = None if i % 7 == 3 else f"key-{tag}-{i}".encode()
            value = None if i % 11 == 5 and key is not None else f"value-{tag}-{i}-{codec}".encode() * (1 + i % 3)
            hdrs = [("h1", f"{i}".encode()), ("h2", b"")] if headers and i % 2 == 0 else []
            future = producer.send(topic, key=key, value=value, partition=i % partitions, headers=hdrs)
            sent.append((key, value, hdrs, future))
        producer.flush(timeout=20)
    finally:
        producer.close(timeout=10)
    rows = []
    for key, value, hdrs, future in sent:
        meta = future.get(timeout=10)
        rows.append((key, value, topic, meta.partition, meta.offset, meta.timestamp, 0,
                     tuple((k, v) for k, v in hdrs) if hdrs else None))
    return rows


def rows_of(df: DataFrame) -> list[Row]:
    out = []
    for r in df.collect():
        headers = None
        if "headers" in r.__fields__ and r["headers"] is not None:
            headers = tuple((h["key"], h["value"]) for h in r["headers"])
        ts_ms = round(r["timestamp"].timestamp() * 1000)
        out.append((r["key"], r["value"], r["topic"], r["partition"], r["offset"], ts_ms,
                    r["timestampType"], headers))
    return sorted(out, key=lambda x: (x[2], x[3], x[4]))


def _sorted(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda x: (x[2], x[3], x[4]))


def read(spark: SparkSession, fmt: str, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


@pytest.fixture(scope="module")
def codec_topic(module_broker: BrokerProcess) -> tuple[str, list[Row]]:
    topic = _topic("codecs")
    create_topic(module_broker.bootstrap, topic, 3)
    rows: list[Row] = []
    for codec in CODECS:
        rows += produce(module_broker.bootstrap, topic, 60, codec=codec, tag=str(codec))
    return topic, _sorted(rows)


def test_batch_read_equals_what_was_produced_every_codec(
        spark: SparkSession, module_broker: BrokerProcess, codec_topic: tuple[str, list[Row]]) -> None:
    topic, expected = codec_topic
    df = read(spark, "minikafka", module_broker.bootstrap, subscribe=topic, includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType", "headers"]
    got = rows_of(df)
    assert len(got) == len(expected) == 300
    assert got == expected
    assert {r[3] for r in got} == {0, 1, 2}


def test_builtin_kafka_source_reads_the_same_rows(
        spark: SparkSession, module_broker: BrokerProcess, codec_topic: tuple[str, list[Row]]) -> None:
    topic, expected = codec_topic
    ours = read(spark, "minikafka", module_broker.bootstrap, subscribe=topic, includeHeaders="true")
    builtin = read(spark, "kafka", module_broker.bootstrap, subscribe=topic, includeHeaders="true")
    assert builtin.schema == ours.schema
    assert rows_of(builtin) == expected


def test_starting_and_ending_offsets_json_and_timestamp_both_sources(
        spark: SparkSession, module_broker: BrokerProcess) -> None:
    bootstrap = module_broker.bootstrap
    topic = _topic("offsets")
    create_topic(bootstrap, topic, 2)
    first = produce(bootstrap, topic, 20, partitions=2, headers=False)
    time.sleep(0.05)
    second = produce(bootstrap, topic, 20, partitions=2, headers=False, tag="late")
    boundary_ms = min(r[5] for r in second)
    starting = f'{{"{topic}": {{"0": 3, "1": -2}}}}'
    ending = f'{{"{topic}": {{"0": 8, "1": -1}}}}'
    want = _sorted([r for r in first + second
                    if (r[3] == 0 and 3 <= r[4] < 8) or r[3] == 1])
    want_ts = _sorted([r for r in first + second if r[5] >= boundary_ms])
    for fmt in ("minikafka", "kafka"):
        got = rows_of(read(spark, fmt, bootstrap, subscribe=topic,
                           startingOffsets=starting, endingOffsets=ending))
        assert got == want, fmt
        got_ts = rows_of(read(spark, fmt, bootstrap, subscribe=topic,
                              startingTimestamp=str(boundary_ms)))
        assert got_ts == want_ts, fmt
    assign = rows_of(read(spark, "minikafka", bootstrap, assign=f'{{"{topic}": [1]}}'))
    assert assign == _sorted([r for r in first + second if r[3] == 1])


def _stream(spark: SparkSession, fmt: str, bootstrap: str, out: Path, checkpoint: Path,
            **options: str) -> None:
    reader = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (reader.load().writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert query.awaitTermination(120), "availableNow query did not finish in 120 s"
    assert query.exception() is None


@pytest.mark.parametrize("fmt", ["minikafka", "kafka"])
def test_stream_available_now_twice_from_one_checkpoint_exactly_once(
        spark: SparkSession, module_broker: BrokerProcess, tmp_path: Path, fmt: str) -> None:
    bootstrap = module_broker.bootstrap
    topic = _topic(f"stream-{fmt}")
    create_topic(bootstrap, topic, 3)
    expected = produce(bootstrap, topic, 90, codec="lz4", headers=False)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    options = {"subscribe": topic, "startingOffsets": "earliest", "maxOffsetsPerTrigger": "40"}
    _stream(spark, fmt, bootstrap, out, checkpoint, **options)
    assert rows_of(spark.read.parquet(str(out))) == _sorted(expected)
    expected += produce(bootstrap, topic, 50, codec="zstd", headers=False, tag="more")
    _stream(spark, fmt, bootstrap, out, checkpoint, **options)
    got = rows_of(spark.read.parquet(str(out)))
    assert got == _sorted(expected)  # every record once: nothing lost, nothing twice
    # maxOffsetsPerTrigger=40 cut the 90 + 50 records into several micro-batches
    assert len(list((checkpoint / "commits").iterdir())) >= 4


@pytest.mark.parametrize("fmt", ["minikafka", "kafka"])
def test_stream_starting_latest_is_kept_in_the_checkpoint(
        spark: SparkSession, module_broker: BrokerProcess, tmp_path: Path, fmt: str) -> None:
    bootstrap = module_broker.bootstrap
    topic = _topic(f"latest-{fmt}")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 10, partitions=2, headers=False, tag="before")  # never read
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _stream(spark, fmt, bootstrap, out, checkpoint, subscribe=topic, startingOffsets="latest")
    # records that arrive between runs are read by the next run from the same checkpoint
    expected = produce(bootstrap, topic, 8, partitions=2, headers=False, tag="after")
    _stream(spark, fmt, bootstrap, out, checkpoint, subscribe=topic, startingOffsets="latest")
    assert rows_of(spark.read.parquet(str(out))) == _sorted(expected)


def test_stream_processing_time_picks_up_new_partitions_and_topics(
        spark: SparkSession, module_broker: BrokerProcess) -> None:
    bootstrap = module_broker.bootstrap
    prefix = _topic("pat")
    first, later = f"{prefix}-a", f"{prefix}-b"
    create_topic(bootstrap, first, 1)
    expected = produce(bootstrap, first, 5, partitions=1, headers=False)
    seen: list[Row] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        seen.extend(rows_of(batch))

    query = (spark.readStream.format("minikafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribePattern", f"{prefix}-.*").option("startingOffsets", "earliest")
             .load().writeStream.foreachBatch(collect).trigger(processingTime="500 milliseconds")
             .start())
    try:
        _wait_for(lambda: len(seen) >= 5, query)
        with SyncClient(bootstrap, timeout_ms=10_000) as admin:
            admin.create_partitions(first, 2)
        create_topic(bootstrap, later, 1)
        expected += produce(bootstrap, first, 6, partitions=2, headers=False, tag="p1")
        expected += produce(bootstrap, later, 4, partitions=1, headers=False, tag="new")
        _wait_for(lambda: len(seen) >= len(expected), query)
    finally:
        query.stop()
    assert _sorted(seen) == _sorted(expected)
    assert {(r[2], r[3]) for r in seen} == {(first, 0), (first, 1), (later, 0)}


def _wait_for(condition: Any, query: Any, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, "stream did not deliver in time"
        time.sleep(0.2)


def _delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    with SyncClient(bootstrap, timeout_ms=10_000) as client:
        request = DeleteRecordsRequest(timeout_ms=10_000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
            topic, [DeleteRecordsRequest.DeleteRecordsPartition(partition, before)])])
        response = client.send(request, client.version_for(DeleteRecordsRequest))
        assert response.topics[0].partitions[0].error_code == 0


def test_fail_on_data_loss_reports_deleted_records(
        spark: SparkSession, module_broker: BrokerProcess) -> None:
    bootstrap = module_broker.bootstrap
    topic = _topic("loss")
    create_topic(bootstrap, topic, 1)
    expected = produce(bootstrap, topic, 10, partitions=1, headers=False)
    _delete_records(bootstrap, topic, 0, 4)
    starting = f'{{"{topic}": {{"0": 0}}}}'
    with pytest.raises(Exception, match=r"failOnDataLoss: records \[0, 4\)") as err:
        read(spark, "minikafka", bootstrap, subscribe=topic, startingOffsets=starting).collect()
    assert "SourceError" in str(err.value)
    got = rows_of(read(spark, "minikafka", bootstrap, subscribe=topic, startingOffsets=starting,
                       failOnDataLoss="false"))
    assert got == _sorted([r for r in expected if r[4] >= 4])


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "no-such-topic"}, "subscribe: unknown topic 'no-such-topic'"),
    ({"subscribe": "x", "startingOffsets": '{"x": {"0": 1'}, "startingOffsets: malformed JSON"),
    ({"subscribe": "x", "kafka.bootstrap.servers": "127.0.0.1:1"},
     "kafka.bootstrap.servers: cannot reach any broker of '127.0.0.1:1'"),
    ({"subscribe": "x", "kafka.bootstrap.servers": "nonsense"}, "kafka.bootstrap.servers: 'nonsense'"),
    ({"subscribe": "x", "startingOffsets": "bogus"},
     "startingOffsets: expected earliest or a JSON object like"),
])
def test_bad_input_gives_a_clear_error_naming_the_option(
        spark: SparkSession, module_broker: BrokerProcess, options: dict[str, str], message: str) -> None:
    opts = {"kafka.bootstrap.servers": module_broker.bootstrap, **options}
    reader = spark.read.format("minikafka")
    for k, v in opts.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as err:
        reader.load().collect()
    text = str(err.value)
    assert f"SourceError: {message}" in text, text
    # the cause is our one error type, not a socket/JSON traceback from deep inside
    assert "ConnectionRefusedError" not in text and "JSONDecodeError" not in text


def test_start_past_the_end_the_package_export_and_to_pandas(
        spark: SparkSession, module_broker: BrokerProcess) -> None:
    import spark_ingest
    from spark_ingest.source import MinikafkaDataSource

    assert spark_ingest.MinikafkaDataSource is MinikafkaDataSource
    bootstrap = module_broker.bootstrap
    topic = _topic("past")
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, 2, partitions=1, headers=False)
    with pytest.raises(Exception) as err:
        read(spark, "minikafka", bootstrap, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 5}}}}').collect()
    assert f"SourceError: startingOffsets: start offset 5 of {topic}-0 is greater than its end offset 2" in str(err.value)
    assert "failOnDataLoss" not in str(err.value)
    frame = read(spark, "minikafka", bootstrap, subscribe=topic).select("offset").toPandas()
    assert sorted(frame["offset"].tolist()) == [0, 1]

"""``minikafka``: a PySpark Python data source reading Kafka topics (batch and streaming).

    spark.dataSource.register(MinikafkaDataSource)
    spark.read.format("minikafka").option("kafka.bootstrap.servers", "h:p")
         .option("subscribe", "t").load()
    spark.readStream.format("minikafka")...  # offsets per topic-partition, checkpointed

Options and output schema are Spark's Kafka source's (``spark_ingest.options``,
``spark_ingest.rows``). The driver plans (Metadata, ListOffsets); each Spark partition
reads one ``OffsetRange`` with Fetch from the partition leader, in the executor
(``spark_ingest.range_reader``), returning Arrow batches.

Streaming: offsets are Spark's JSON ``{"topic": {"0": 42}}`` (the next offset to read per
partition; the initial offset also carries ``INITIAL_MARK``, see below). ``latestOffset`` re-discovers partitions every micro-batch, so new partitions
and new topics matching ``subscribePattern`` are picked up (read from their earliest
offset); ``maxOffsetsPerTrigger`` is the default read limit (``ReadMaxRows``) shared by
backlog; ``Trigger.AvailableNow`` pins the target to the latest offsets at the start
(``prepareForTriggerAvailableNow``). A restarted query resumes from the checkpointed end.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from spark_ingest.kafka_client import Cluster
from spark_ingest.offsets import (
    OffsetRange,
    PartitionOffsets,
    SourceError,
    TopicPartition,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
)
from spark_ingest.options import SourceOptions, parse_options
from spark_ingest.planning import discover, plan_ranges, resolve
from spark_ingest.range_reader import read_range
from spark_ingest.rows import schema_ddl

NAME = "minikafka"


class RangePartition(InputPartition):
    """One Spark partition: records ``[start, end)`` of ``topic``-``partition``."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__((rng.tp.topic, rng.tp.partition, rng.start, rng.end))
        self.topic = rng.tp.topic
        self.partition = rng.tp.partition
        self.start = rng.start
        self.end = rng.end

    @property
    def range(self) -> OffsetRange:
        return OffsetRange(TopicPartition(self.topic, self.partition), self.start, self.end)


def _read(opts: SourceOptions, partition: InputPartition) -> Iterator[Any]:
    assert isinstance(partition, RangePartition)
    return read_range(opts, partition.range)


# Marks the offset ``initialOffset`` returns (no topic name can hold "$"). Spark journals an
# offset only when a micro-batch runs, and runs one only when the latest offset differs
# from the start; with the mark, the first batch always runs (perhaps empty), so the
# resolved starting offsets ("latest", a timestamp) are in the checkpoint and a restart
# resumes from them instead of resolving them again (Spark's Kafka source writes its
# initial offsets to the checkpoint for the same reason).
INITIAL_MARK = "$initial"


def _parse(offsets: dict[str, Any] | None) -> PartitionOffsets:
    """A checkpointed offset (Spark's JSON shape; ``{}`` when no partition existed yet)."""
    topics = {k: v for k, v in (offsets or {}).items() if k != INITIAL_MARK}
    return offsets_from_json(topics, "offset", allow_special=False) if topics else {}


def check_start_before_end(option: str, start: PartitionOffsets, end: PartitionOffsets) -> None:
    """A starting offset past a partition's end is the user's mistake, not data loss."""
    for tp in sorted(start):
        if tp in end and start[tp] > end[tp]:
            raise SourceError(f"{option}: start offset {start[tp]} of {tp} is greater than "
                              f"its end offset {end[tp]}")


class MinikafkaDataSource(DataSource):
    """The ``minikafka`` format; options are checked when a reader is made."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        opts = {str(k).lower(): str(v) for k, v in self.options.items()}
        return schema_ddl(opts.get("includeheaders", "false").strip().lower() == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(parse_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(parse_options(self.options, streaming=True))


class BatchReader(DataSourceReader):
    """``spark.read``: from ``startingOffsets`` to ``endingOffsets``, resolved at planning."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        with Cluster(self.opts.bootstrap, self.opts.request_timeout_ms) as cluster:
            tps = discover(cluster, self.opts)
            start = resolve(cluster, self.opts.starting, tps, self.opts)
            end = resolve(cluster, self.opts.ending, tps, self.opts)
            check_start_before_end(self.opts.starting.option, start, end)
            ranges = plan_ranges(cluster, self.opts, start, end)
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.opts, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``: micro-batches between checkpointed offsets."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._target: PartitionOffsets | None = None
        self._cluster: Cluster | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Shipped to executors for ``read``: the driver's sockets stay behind.
        return {"opts": self.opts, "_target": self._target, "_cluster": None}

    def _conn(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.opts.bootstrap, self.opts.request_timeout_ms)
        return self._cluster

    def _call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(cluster, ...)`` (the client reconnects by itself when a connection broke)."""
        return fn(self._conn(), *args)

    def initialOffset(self) -> dict[str, Any]:
        def first(cluster: Cluster) -> PartitionOffsets:
            tps = discover(cluster, self.opts)
            start = resolve(cluster, self.opts.starting, tps, self.opts)
            check_start_before_end(self.opts.starting.option, start, cluster.latest(tps))
            return start

        initial: dict[str, Any] = {INITIAL_MARK: {"0": 0}}
        initial.update(offsets_to_json(self._call(first)))
        return initial

    def _latest(self, cluster: Cluster) -> PartitionOffsets:
        if self._target is not None:
            return dict(self._target)
        return cluster.latest(discover(cluster, self.opts))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.opts.max_offsets_per_trigger)

    def latestOffset(self, start: dict[str, Any] | None = None,
                     limit: ReadLimit | None = None) -> dict[str, Any]:
        def latest(cluster: Cluster) -> PartitionOffsets:
            until = self._latest(cluster)
            begin = _parse(start)
            new = [tp for tp in until if tp not in begin]
            if new:
                begin = {**begin, **cluster.earliest(new)}
            # Never move a partition backwards here: a truncated log is reported as data
            # loss when the batch is planned.
            until = {tp: max(off, begin.get(tp, off)) if tp in begin else off for tp, off in until.items()}
            if isinstance(limit, ReadMaxRows):
                return rate_limit(begin, until, limit.max_rows)
            return until

        return offsets_to_json(self._call(latest))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._call(lambda c: c.latest(discover(c, self.opts)))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = _parse(start)
        until = _parse(end)
        if begin == until:
            return []
        ranges = self._call(plan_ranges, self.opts, begin, until)
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in the broker."""

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

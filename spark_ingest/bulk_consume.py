"""Bulk consumer job: topics -> Parquet partitioned by topic and date, exactly once.

    python -m spark_ingest.bulk_consume --bootstrap-server H:P --topics a,b \\
        --output DIR [--checkpoint DIR] [--max-records-per-batch N] [--source minikafka|kafka]
    minikafka spark-ingest ...                          (the same, through the CLI)

A structured-streaming query with ``Trigger.AvailableNow``: it reads everything the topics
hold when it starts (in micro-batches of at most ``--max-records-per-batch`` records), writes
it with ``spark_ingest.parquet_sink`` and stops. The checkpoint (default
``<output>/_checkpoint``) keeps the offsets, so a rerun reads only what is new; a run
killed half-way re-runs its unfinished batch idempotently (see parquet_sink), so the output
holds every record exactly once. Prints one progress line per batch (records, MB) and a
summary; exit status 0 on success, 1 on a bad option or a failed query (message on stderr).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from spark_ingest.offsets import SourceError


@dataclass(frozen=True, slots=True)
class Summary:
    batches: int
    records: int
    payload_bytes: int
    seconds: float


def clear_error(text: str) -> str:
    """The source's own message out of a Spark error (which wraps the Python traceback)."""
    for line in text.splitlines():
        _, sep, message = line.partition("SourceError: ")
        if sep:
            return message.strip()
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minikafka spark-ingest",
        description="Land Kafka topics in Parquet (topic=/date= partitions), exactly once.")
    parser.add_argument("--bootstrap-server", required=True, help="host:port of a broker")
    parser.add_argument("--topics", required=True, help="comma-separated topic names")
    parser.add_argument("--output", required=True, type=Path, help="Parquet output directory")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="streaming checkpoint directory (default: OUTPUT/_checkpoint)")
    parser.add_argument("--max-records-per-batch", type=int, default=500_000,
                        help="records per micro-batch (maxOffsetsPerTrigger; default 500000)")
    parser.add_argument("--starting-offsets", default="earliest",
                        help="for the first run: earliest, latest or Spark's offsets JSON")
    parser.add_argument("--source", choices=("minikafka", "kafka"), default="minikafka",
                        help="the Python source (default) or Spark's built-in Kafka source")
    parser.add_argument("--include-headers", action="store_true")
    parser.add_argument("--cores", type=int, default=2, help="local[N] (default 2)")
    parser.add_argument("--timeout-s", type=float, default=3600.0,
                        help="give up when the run takes longer (default 3600)")
    return parser


def run(args: argparse.Namespace) -> Summary:
    from spark_ingest.parquet_sink import ParquetBatchSink
    from spark_ingest.session import local_session

    if args.max_records_per_batch < 1:
        raise SourceError("--max-records-per-batch: must be at least 1")
    output: Path = args.output
    checkpoint: Path = args.checkpoint or output / "_checkpoint"
    output.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    spark = local_session("minikafka-spark-ingest", args.cores,
                          kafka_jars=True if args.source == "kafka" else None)
    sink = ParquetBatchSink(output, log=lambda line: print(line, flush=True))
    try:
        stream = (spark.readStream.format(args.source)
                  .option("kafka.bootstrap.servers", args.bootstrap_server)
                  .option("subscribe", args.topics)
                  .option("startingOffsets", args.starting_offsets)
                  .option("maxOffsetsPerTrigger", str(args.max_records_per_batch))
                  .option("includeHeaders", "true" if args.include_headers else "false")
                  .option("failOnDataLoss", "true")
                  .load())
        query = (stream.writeStream.foreachBatch(sink.write_batch)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        if not query.awaitTermination(args.timeout_s):
            query.stop()
            raise SourceError(f"--timeout-s: the run did not finish within {args.timeout_s} s")
        if query.exception() is not None:
            raise SourceError(clear_error(str(query.exception())))
    finally:
        spark.stop()
    results = sink.results
    return Summary(len(results), sum(r.records for r in results),
                   sum(r.payload_bytes for r in results), time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        summary = run(args)
    except SourceError as exc:
        print(f"minikafka spark-ingest: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a failed Spark job: one clear line, not the JVM's trace
        print(f"minikafka spark-ingest: error: {clear_error(str(exc)) or type(exc).__name__}",
              file=sys.stderr)
        return 1
    mb = summary.payload_bytes / 1e6
    print(f"summary: {summary.batches} batches, {summary.records} records, {mb:.2f} MB in "
          f"{summary.seconds:.1f} s ({summary.records / max(summary.seconds, 1e-3):,.0f} records/s); "
          f"output {args.output}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Bulk consumer job: topics -> Parquet partitioned by topic and date, exactly once.

    minikafka spark-ingest --bootstrap-server H:P --topics a,b --output DIR
        [--checkpoint DIR] [--max-records-per-batch N] [--source minikafka|kafka]
    python -m spark_ingest.bulk_consume ...              (the same)

A structured-streaming query with ``Trigger.AvailableNow``: it reads everything the topics
hold when it starts (in micro-batches of at most ``--max-records-per-batch`` records), writes
it with ``spark_ingest.parquet_sink`` and stops. The checkpoint (default
``<output>/_checkpoint``) keeps the offsets, so a rerun reads only what is new; a run
killed half-way re-runs its unfinished batch idempotently (see parquet_sink), so the output
holds every record exactly once.

Before Spark starts (it takes ~20 s), the options are checked and the cluster is asked
(``preflight``, a few seconds at most): a bad option, an unreachable bootstrap server, an
unknown topic or a starting offset past a partition's end fails at once with one line on
stderr and exit 1, and nothing is created on disk. When the checkpoint's last committed
batch already reaches the end of every partition, there is nothing to read: the job says so
and does not start Spark. A first run that fails before any batch lands removes the output
and checkpoint directories it created. Prints one progress line per batch and a summary that
counts the records landed by this run (a batch an interrupted run had landed already is
rewritten, and counted apart); exit status 0 on success, 1 otherwise (one line on stderr).

Spark starts the source's streaming reader in a Python worker that must connect back to the
driver within a fixed 10 s (``PythonWorkerFactory.createSimpleWorker``; no setting changes
it). On an overloaded machine that start can take longer, and the query then fails before
it reads anything ("Python worker failed to connect back"). Such a query is started again
from its checkpoint, which keeps the exactly-once guarantee, at most
``WORKER_START_ATTEMPTS`` times in all, each restart announced on stdout; any other failure
ends the run at once.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from spark_ingest.checkpoint import landed_anything, last_batch
from spark_ingest.offsets import SourceError
from spark_ingest.options import SourceOptions, parse_options

PREFLIGHT_TIMEOUT_MS: Final = 4_000
WORKER_START_ATTEMPTS: Final = 3
# What Spark says (its SparkException's message) when the Python worker did not connect back.
WORKER_DID_NOT_CONNECT_BACK: Final = "Python worker failed to connect back"


@dataclass(frozen=True, slots=True)
class Summary:
    batches: int
    records: int  # landed by this run
    rewritten: int  # landed again (an interrupted run had landed them)
    payload_bytes: int
    seconds: float
    up_to_date: bool = False


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
        description="Land Kafka topics in Parquet (topic=/date= partitions), exactly once. Options "
                    "and topics are checked before Spark starts; a rerun reads only what is new.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]",
                        help="the broker(s) to read from")
    parser.add_argument("--topics", required=True, metavar="T1,T2", help="comma-separated topic names")
    parser.add_argument("--output", required=True, type=Path, help="Parquet output directory")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="streaming checkpoint directory (default: OUTPUT/_checkpoint)")
    parser.add_argument("--max-records-per-batch", type=int, default=500_000, metavar="N",
                        help="records per micro-batch (maxOffsetsPerTrigger; default 500000)")
    parser.add_argument("--starting-offsets", default="earliest",
                        help="for the first run: earliest (default), latest, or Spark's offsets JSON "
                             '{"topic": {"0": 23}}')
    parser.add_argument("--source", choices=("minikafka", "kafka"), default="minikafka",
                        help="minikafka: this project's Python source (default); kafka: Spark's "
                             "built-in Kafka source (needs tools/fetch-spark-jars)")
    parser.add_argument("--include-headers", action="store_true",
                        help="add the records' headers as a column (array of key/value structs)")
    parser.add_argument("--cores", type=int, default=2, help="Spark's local[N] (default 2)")
    parser.add_argument("--timeout-s", type=float, default=3600.0,
                        help="give up when the run takes longer (default 3600)")
    return parser


def source_options(args: argparse.Namespace) -> dict[str, str]:
    """The source options the job passes (the same for both sources)."""
    return {
        "kafka.bootstrap.servers": args.bootstrap_server,
        "subscribe": args.topics,
        "startingOffsets": args.starting_offsets,
        "maxOffsetsPerTrigger": str(args.max_records_per_batch),
        "includeHeaders": "true" if args.include_headers else "false",
        "failOnDataLoss": "true",
    }


def preflight(opts: SourceOptions, checkpoint: Path) -> bool:
    """Check the cluster side of the options; True when there is nothing new to read."""
    from spark_ingest.kafka_client import Cluster
    from spark_ingest.planning import discover, resolve

    last = last_batch(checkpoint)
    with Cluster(opts.bootstrap, PREFLIGHT_TIMEOUT_MS) as cluster:
        tps = discover(cluster, opts)
        latest = cluster.latest(tps)
        if last is None:
            start = resolve(cluster, opts.starting, tps, opts)
            for tp in sorted(tps):
                if start.get(tp, 0) > latest[tp]:
                    raise SourceError(f"--starting-offsets: start offset {start[tp]} of {tp} is greater "
                                      f"than its end offset {latest[tp]}")
            return False
    return last.committed and last.offsets == latest


def _check_args(args: argparse.Namespace) -> None:
    if args.max_records_per_batch < 1:
        raise SourceError("--max-records-per-batch: must be at least 1")
    if args.cores < 1:
        raise SourceError("--cores: must be at least 1")
    if args.timeout_s <= 0:
        raise SourceError("--timeout-s: must be positive")
    if args.output.exists() and not args.output.is_dir():
        raise SourceError(f"--output: {args.output} is not a directory")


def _remove_unused(created: list[Path], checkpoint: Path, output: Path) -> None:
    """After a failed run: remove the directories this run created if no batch landed."""
    if landed_anything(checkpoint, output):
        return
    for path in created:
        shutil.rmtree(path, ignore_errors=True)


def run(args: argparse.Namespace) -> Summary:
    started = time.monotonic()
    _check_args(args)
    opts = parse_options(source_options(args), streaming=True)
    output: Path = args.output
    checkpoint: Path = args.checkpoint or output / "_checkpoint"
    if preflight(opts, checkpoint):
        return Summary(0, 0, 0, 0, time.monotonic() - started, up_to_date=True)
    created = [p for p in dict.fromkeys([output, checkpoint]) if not p.exists()]
    output.mkdir(parents=True, exist_ok=True)
    try:
        results = _run_query(args, output, checkpoint)
    except BaseException:
        _remove_unused(created, checkpoint, output)
        raise
    new = [r for r in results if not r.rewritten]
    return Summary(len(results), sum(r.records for r in new), sum(r.records for r in results if r.rewritten),
                   sum(r.payload_bytes for r in new), time.monotonic() - started)


def _run_query(args: argparse.Namespace, output: Path, checkpoint: Path) -> list[Any]:
    from pyspark.errors import StreamingQueryException

    from spark_ingest.parquet_sink import ParquetBatchSink
    from spark_ingest.session import local_session

    spark = local_session("minikafka-spark-ingest", args.cores,
                          kafka_jars=True if args.source == "kafka" else None)
    sink = ParquetBatchSink(output, log=lambda line: print(line, flush=True))
    deadline = time.monotonic() + args.timeout_s
    try:
        for attempt in range(1, WORKER_START_ATTEMPTS + 1):
            reader = spark.readStream.format(args.source)
            for key, value in source_options(args).items():
                reader = reader.option(key, value)
            query = (reader.load().writeStream.foreachBatch(sink.write_batch)
                     .option("checkpointLocation", str(checkpoint))
                     .trigger(availableNow=True).start())
            try:
                finished = query.awaitTermination(max(deadline - time.monotonic(), 0.001))
            except StreamingQueryException as exc:  # the query stopped on this failure
                failure: object = exc
            else:
                if not finished:
                    query.stop()
                    raise SourceError(f"--timeout-s: the run did not finish within {args.timeout_s} s")
                failure = query.exception()
                if failure is None:
                    break
            if WORKER_DID_NOT_CONNECT_BACK in str(failure) and attempt < WORKER_START_ATTEMPTS:
                print(f"restart: Spark's Python worker did not connect back within Spark's fixed 10 s "
                      f"(an overloaded machine?); starting the query again from its checkpoint "
                      f"(attempt {attempt + 1} of {WORKER_START_ATTEMPTS})", flush=True)
                continue
            raise SourceError(clear_error(str(failure)))
    finally:
        spark.stop()
    return list(sink.results)


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
    if summary.up_to_date:
        print(f"summary: nothing new since the last run (checkpoint {args.checkpoint or args.output / '_checkpoint'}); "
              f"Spark not started; {summary.seconds:.1f} s; output {args.output}", flush=True)
        return 0
    mb = summary.payload_bytes / 1e6
    again = (f" ({summary.rewritten} more rewritten: an interrupted run had landed them)"
             if summary.rewritten else "")
    print(f"summary: {summary.batches} batches, {summary.records} records{again}, {mb:.2f} MB in "
          f"{summary.seconds:.1f} s ({summary.records / max(summary.seconds, 1e-3):,.0f} records/s); "
          f"output {args.output}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

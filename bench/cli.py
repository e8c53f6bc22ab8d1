"""``python -m bench``: minikafka and Apache Kafka, same workloads, same client, one run.

Flags: ``--quick`` (smoke: minikafka only, tiny sizes, one run, no Java tools),
``--scenarios P1,P2,...`` (P1 P2 P2L P3 P4 P5 P6 P7 ZC; default all but P2L and P7,
which are long: name them), ``--runs N`` (default 3), ``--size-gb`` (P6 log size,
default 2), ``--partitions`` (P7's partition counts, default 1,100,1000,10000; --quick
1,100), ``--p4-rates`` (P4's rates in records/s, one row each, default 10000,50000;
--quick 10000), ``--brokers minikafka,kafka``, ``--profile``
(py-spy on the minikafka broker during P1, P2, P5 and, one flame graph per rate, P4;
``minikafka-metrics`` in ``--brokers``: minikafka with its Prometheus endpoint on and
scraped every 5 s, to measure the cost of metrics against ``minikafka``; ``minikafka-pure``: minikafka with
``MINIKAFKA_REQUEST_PATH=pure``, its request path not compiled), ``--results-dir`` (default
bench/results), ``--no-java`` (skip Kafka's perf tools), ``--keep`` (keep the work dir).

Writes ``<results-dir>/latest.md`` and ``<results-dir>/<date>-<time>.md`` (the dated copy
is kept), the raw figures as ``<date>-<time>.json`` (``--rerender`` rebuilds the report
and plots from one), ``latest-*.png`` plots with dated copies, and prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

from bench import machine
from bench.brokers import SHARED_SETTINGS, BrokerUnderTest
from bench.context import FULL, QUICK, RunContext
from bench.figures import Results
from bench.kafka_broker import ApacheKafka
from bench.minikafka_broker import MiniKafka, MiniKafkaWithMetrics
from bench.partition_scaling import check_partition_counts
from bench.profiles import top_frames
from bench.registry import NOT_YET, SCENARIOS
from bench.report import build_rows, markdown, text_table
from bench.runner import Plan, run_plan

BENCH_DIR = Path(__file__).resolve().parent
ALL_SCENARIOS = ["P1", "P2", "P2L", "P3", "P4", "P5", "P6", "P7", "ZC"]
DEFAULT_SCENARIOS = ["P1", "P2", "P3", "P4", "P5", "P6", "ZC"]  # P2L and P7 when named
QUICK_SCENARIOS = ["P1", "P2", "P4", "P5", "P6"]
MAX_P4_RATE = 1_000_000  # records/s; one librdkafka producer process tops out well below


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke mode: minikafka, tiny sizes")
    parser.add_argument("--scenarios", help="comma-separated, e.g. P1,P2 (default: all)")
    parser.add_argument("--runs", type=int, help="runs per scenario and broker (default 3)")
    parser.add_argument("--size-gb", type=float, help="P6 log size in GB (default 2)")
    parser.add_argument("--records", type=int, help="records per P1/P2 run (default 1,000,000)")
    parser.add_argument("--partitions", help="P7 partition counts, comma-separated "
                        "(default 1,100,1000,10000; --quick: 1,100); above 1,000: multiples of it")
    parser.add_argument("--p4-rates", help="P4 rates in records/s, comma-separated, one row "
                        "each (default 10000,50000; --quick: 10000)")
    parser.add_argument("--brokers", help="minikafka,kafka (default both; --quick: minikafka); "
                        "minikafka-metrics: minikafka with its metrics endpoint on and scraped; "
                        "minikafka-pure: minikafka on its pure-Python request path")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy minikafka in P1, P2, P5 and P4 (per rate)")
    parser.add_argument("--no-java", action="store_true", help="skip Kafka's Java perf tools")
    parser.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs, data)")
    parser.add_argument(
        "--rerender", type=Path, help="rebuild report and plots from a saved <date>.json"
    )
    args = parser.parse_args(argv)
    if args.runs is not None and not 1 <= args.runs <= 50:
        parser.error("--runs must be between 1 and 50")
    if args.size_gb is not None and not 0 < args.size_gb <= 100:
        parser.error("--size-gb must be in (0, 100]")
    if args.records is not None and not 1 <= args.records <= 100_000_000:
        parser.error("--records must be between 1 and 100,000,000")
    if args.partitions is not None:
        try:
            args.partitions = tuple(int(n) for n in args.partitions.split(",") if n.strip())
            check_partition_counts(args.partitions)
        except ValueError as exc:
            parser.error(f"--partitions: {exc}")
    if args.p4_rates is not None:
        try:
            args.p4_rates = parse_rates(args.p4_rates)
        except ValueError as exc:
            parser.error(f"--p4-rates: {exc}")
    return args


def parse_rates(text: str) -> tuple[int, ...]:
    """P4's rates from ``--p4-rates``: distinct integers in [1, MAX_P4_RATE], in the order
    given."""
    rates = tuple(int(n) for n in text.split(",") if n.strip())
    if not rates:
        raise ValueError("no rate given")
    bad = [r for r in rates if not 1 <= r <= MAX_P4_RATE]
    if bad:
        raise ValueError(f"{bad}: each rate must be between 1 and {MAX_P4_RATE:,} records/s")
    if len(set(rates)) != len(rates):
        raise ValueError(f"{list(rates)}: a rate is given twice")
    return rates


def _scenarios(args: argparse.Namespace) -> list[str]:
    if args.scenarios:
        keys = [k.strip().upper() for k in args.scenarios.split(",") if k.strip()]
        unknown = [k for k in keys if k not in SCENARIOS and k not in NOT_YET]
        if unknown:
            raise SystemExit(f"unknown scenarios {unknown}; known: {ALL_SCENARIOS}")
        return keys
    return QUICK_SCENARIOS if args.quick else DEFAULT_SCENARIOS


def _profile_labels(scenarios: list[str], brokers: list[BrokerUnderTest],
                    ctx: RunContext) -> list[str]:
    """Every flame graph ``--profile`` takes in this run (``bench.scenarios.Scenario.
    profile_labels``): P1, P2 and P5 whole, P4 per rate, of the minikafka brokers."""
    return [label for key in scenarios if key in SCENARIOS for b in brokers
            for label in SCENARIOS[key]().profile_labels(b.name, ctx)]


def _brokers(args: argparse.Namespace, work_dir: Path) -> list[BrokerUnderTest]:
    names = (args.brokers or ("minikafka" if args.quick else "minikafka,kafka")).lower()
    brokers: list[BrokerUnderTest] = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name == "minikafka":
            brokers.append(MiniKafka(work_dir / "minikafka"))
        elif name == "minikafka-metrics":
            brokers.append(MiniKafkaWithMetrics(work_dir / "minikafka-metrics"))
        elif name == "minikafka-pure":  # the request path's pure modules (protocol.native)
            brokers.append(MiniKafka(work_dir / "minikafka-pure", name="minikafka-pure",
                                     env={"MINIKAFKA_REQUEST_PATH": "pure"}))
        elif name == "kafka":
            brokers.append(ApacheKafka(work_dir / "kafka"))
        else:
            raise SystemExit(f"unknown broker {name!r}: use minikafka, minikafka-metrics "
                             "(metrics on, scraped), minikafka-pure (the request path not "
                             "compiled) and/or kafka")
    return brokers


def _header(brokers: list[BrokerUnderTest], args: argparse.Namespace, runs: int) -> dict[str, str]:
    facts = machine.describe()
    header = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": "python -m bench " + " ".join(sys.argv[1:]),
        "machine": f"{facts['cores']} cores ({facts['cpu']}), {facts['memory']}, {facts['kernel']}",
        "load average at start": machine.loadavg(),
        "client": f"confluent-kafka {facts['confluent-kafka']} "
        f"(librdkafka {facts['librdkafka']}), Python {facts['python']}, one process per load",
        "runs": f"{runs} per scenario and broker, interleaved (minikafka, Kafka, minikafka, ...)",
        "broker settings (both)": ", ".join(f"{k}={v}" for k, v in SHARED_SETTINGS.items())
        + "; no fsync per message (log.flush.* at Kafka's defaults)",
    }
    for broker in brokers:
        header[broker.name] = broker.version()
    header["Kafka mode"] = "KRaft combined mode (one JVM, controller+broker), -Xmx1g"
    return header


def _stop_on_signal(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _write_outputs(
    results: Results,
    header: dict[str, str],
    results_dir: Path,
    profile_labels: list[str],
    stamp: str | None = None,
) -> tuple[str, Path]:
    from bench.plots import write_plots  # matplotlib is imported only when writing

    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = stamp or time.strftime("%Y-%m-%d-%H%M%S")
    rows = build_rows(results)
    plots = write_plots(rows, results_dir, "latest")
    for plot in plots:
        shutil.copyfile(plot, results_dir / plot.name.replace("latest", stamp))
    profiles = {
        label: top_frames(results_dir / f"{label}.svg")
        for label in profile_labels
        if (results_dir / f"{label}.svg").exists()
    }
    text = markdown(rows, results, header, plots, profiles)
    latest = results_dir / "latest.md"
    latest.write_text(text)
    shutil.copyfile(latest, results_dir / f"{stamp}.md")
    raw = {"header": header, "profile_labels": profile_labels, **results.to_json()}
    (results_dir / f"{stamp}.json").write_text(json.dumps(raw, indent=1))
    return text_table(rows), latest


def rerender(path: Path, results_dir: Path) -> int:
    """Rebuild latest.md and the plots from the raw figures of an earlier run."""
    raw = json.loads(path.read_text())
    results = Results.from_json(raw)
    table, latest = _write_outputs(
        results, raw["header"], results_dir, raw["profile_labels"], stamp=path.stem
    )
    print(table)
    print(f"report: {latest}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.rerender is not None:
        return rerender(args.rerender, args.results_dir)
    sizes = QUICK if args.quick else FULL
    if args.size_gb is not None:
        sizes = dataclasses.replace(sizes, p6_size_bytes=int(args.size_gb * 1e9))
    if args.records is not None:
        sizes = dataclasses.replace(sizes, p1_records=args.records, p2_records=args.records)
    if args.partitions is not None:
        sizes = dataclasses.replace(sizes, p7_partitions=args.partitions)
    if args.p4_rates is not None:
        sizes = dataclasses.replace(sizes, p4_rates=args.p4_rates)
    if args.no_java:
        sizes = dataclasses.replace(sizes, java=False)
    runs = args.runs or (1 if args.quick else 3)
    scenarios = _scenarios(args)
    tmp_root = BENCH_DIR / "results" / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix="run-", dir=tmp_root))
    signal.signal(signal.SIGTERM, _stop_on_signal)
    brokers = _brokers(args, work_dir)
    ctx = RunContext(
        work_dir=work_dir, results_dir=args.results_dir, sizes=sizes, profile=args.profile
    )
    args.results_dir.mkdir(parents=True, exist_ok=True)
    header = _header(brokers, args, runs)
    try:
        results = run_plan(Plan(scenarios=scenarios, runs=runs, brokers=brokers), ctx)
        header["load average at end"] = machine.loadavg()
        table, latest = _write_outputs(
            results,
            header,
            args.results_dir,
            _profile_labels(scenarios, brokers, ctx) if args.profile else [],
        )
    finally:
        if not args.keep:
            with contextlib.suppress(OSError):
                shutil.rmtree(work_dir)
    print(table)
    for note in results.notes:
        print(f"note: {note}")
    for failure in results.failures:
        print(
            f"FAILED {failure.scenario} {failure.broker} run {failure.run}: "
            f"{failure.message.splitlines()[0][:300]}"
        )
    print(f"report: {latest}")
    return 1 if results.failures else 0

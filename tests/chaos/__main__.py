"""``python -m tests.chaos --faults N --seed S``: a fault-injection run (see ``tests/chaos``).

Examples::

    python -m tests.chaos --mode ci --seed 7                      # what CI runs
    python -m tests.chaos --target kafka --faults 20 --seed 1     # Apache Kafka 3.9.1
    python -m tests.chaos --mode long --faults 100 --seed 1       # both, dated report
    python -m tests.chaos --mode selftest --target kafka --seed 1 # the harness catches loss

Each run leaves its directory (``--work-dir``, default a new one under /tmp): ``report.md``,
``figures.json``, ``history.jsonl``, the brokers' and ZooKeeper's logs. ``--mode long`` runs
Apache Kafka then minikafka (``--target`` narrows it) and writes
``tests/chaos/results/<date>-<time>.md`` (and ``.json``) with both side by side.
Exit status: 0 when no run has a failing finding, 1 otherwise: an acknowledged acks=all
record lost, duplicated or reordered, replicas differing below the HW, a committed offset
gone, or a fault after which the cluster was not whole again (every broker registered,
every ISR full) within the recovery bound, as CI's short run requires too. The findings are
printed: each loss with its record, partition, the fault before it and the broker logs
around it; each fault not recovered with what was still missing at the bound. 2 for bad
arguments. ``--mode selftest`` inverts it for the run meant to lose data: 0 when
the checker caught acknowledged loss there and none in the control run.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.chaos import faults, modes, report
from tests.chaos.campaign import RunConfig, RunResult, run
from tests.chaos.cluster import Target
from tests.chaos.nodes import REPO_ROOT

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("run", "ci", "long", "selftest"), default="run",
                   help="run: one target as given; ci: CI's short run; long: Apache Kafka "
                        "and minikafka, dated report; selftest: unclean election must be "
                        "caught losing data")
    p.add_argument("--target", choices=("minikafka", "kafka", "both"), default=None)
    p.add_argument("--faults", type=int, default=None, help="faults to inject")
    p.add_argument("--seed", type=int, default=None, help="fixes the schedule (default: time)")
    p.add_argument("--brokers", type=int, default=None)
    p.add_argument("--zookeeper-nodes", type=int, default=None, choices=(0, 1, 3))
    p.add_argument("--kinds", default=None,
                   help=f"comma-separated fault kinds (default: all the cluster allows): "
                        f"{','.join(faults.KINDS)}")
    p.add_argument("--rate", type=float, default=None, help="records/s per writer")
    p.add_argument("--session-timeout-ms", type=int, default=None)
    p.add_argument("--replica-lag-ms", type=int, default=None)
    p.add_argument("--recovery-seconds", type=float, default=None,
                   help="bound for the cluster to be whole again after each fault (a fault "
                        "past it fails the run)")
    p.add_argument("--max-minutes", type=float, default=None, help="bound of the fault phase")
    p.add_argument("--unclean", action="store_true",
                   help="topics with unclean.leader.election.enable=true")
    p.add_argument("--broker-env", action="append", default=[], metavar="NAME=VALUE",
                   help="environment of minikafka brokers (test switches)")
    p.add_argument("--minikafka-tree", type=Path, default=None,
                   help="run the minikafka broker of another checkout (a source tree)")
    p.add_argument("--work-dir", type=Path, default=None)
    p.add_argument("--no-network", action="store_true", help="no namespaces (no partitions)")
    p.add_argument("--report", action="store_true", help="write a dated report in "
                   "tests/chaos/results (always on with --mode long)")
    p.add_argument("--combine", type=Path, nargs="+", default=None, metavar="RUN_DIR",
                   help="no run: the dated side-by-side report of finished runs (their "
                        "figures.json and report.md), e.g. Apache Kafka and minikafka run "
                        "at the same time with the same seed")
    return p


def _configs(args: argparse.Namespace, seed: int, base: Path) -> list[RunConfig]:
    root = args.minikafka_tree.resolve() if args.minikafka_tree is not None else REPO_ROOT
    caps = modes.minikafka_capabilities(root)
    if args.mode == "ci":
        config = modes.ci_config(base / "minikafka", seed, caps)
        if args.minikafka_tree is not None:
            config.minikafka_root = root
            config.label += f" ({args.minikafka_tree})"
        return [config]
    targets: list[Target]
    if args.target == "both" or (args.target is None and args.mode == "long"):
        targets = ["kafka", "minikafka"]
    elif args.target == "kafka":
        targets = ["kafka"]
    else:
        targets = ["minikafka"]
    configs = []
    for target in targets:
        if args.mode == "long":
            config = modes.long_config(target, base / target, faults=args.faults or
                                       modes.LONG_FAULTS, seed=seed, capabilities=caps)
        else:
            config = modes.base_config(target, base / target, faults=args.faults or 10,
                                       seed=seed, capabilities=caps)
        if args.brokers is not None:
            config.brokers = args.brokers
        if args.zookeeper_nodes is not None:
            config.zookeeper_nodes = args.zookeeper_nodes
        if args.no_network:
            config.network = False
        if args.kinds:
            config.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
        if args.rate is not None:
            config.rate = args.rate
        if args.session_timeout_ms is not None:
            config.session_timeout_ms = args.session_timeout_ms
        if args.replica_lag_ms is not None:
            config.replica_lag_time_max_ms = args.replica_lag_ms
        if args.max_minutes is not None:
            config.max_fault_phase_s = args.max_minutes * 60
        if args.recovery_seconds is not None:
            config.recovery_timeout_s = args.recovery_seconds
        if args.unclean:
            config.topic_configs = {**config.topic_configs,
                                    "unclean.leader.election.enable": "true"}
        if args.minikafka_tree is not None:
            config.minikafka_root = args.minikafka_tree.resolve()
            config.label += f" ({args.minikafka_tree})"
        if args.broker_env:
            config.broker_env = dict(item.split("=", 1) for item in args.broker_env)
        configs.append(config)
    return configs


def _write_dated(results: list[RunResult], seed: int) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d-%H%M%S", time.localtime(results[0].started_wall))
    figs: list[dict[str, Any]] = [report.figures(r) for r in results]
    faults_n = max(len(r.schedule) for r in results)
    text = report.side_by_side(figs, f"Fault injection, seed {seed}, {faults_n} faults "
                                     f"scheduled per target — {stamp}")
    for r in results:
        text += "\n---\n\n" + report.render(r).replace("\n# ", "\n## ", 1).replace(
            "# Fault-injection run", "## Run", 1)
    path = RESULTS_DIR / f"{stamp}.md"
    path.write_text(text)
    (RESULTS_DIR / f"{stamp}.json").write_text(json.dumps(figs, indent=1))
    return path


def _combine(run_dirs: list[Path]) -> Path:
    """The dated report of runs already made (each directory holds figures.json and
    report.md), side by side."""
    figs: list[dict[str, Any]] = []
    texts: list[str] = []
    for run_dir in run_dirs:
        figs.append(json.loads((run_dir / "figures.json").read_text()))
        texts.append((run_dir / "report.md").read_text())
    seeds = sorted({str(f["seed"]) for f in figs})
    faults_n = max(int(f["faults_scheduled"]) for f in figs)
    stamp = time.strftime("%Y-%m-%d-%H%M%S", time.localtime())
    text = report.side_by_side(figs, f"Fault injection, seed {', '.join(seeds)}, {faults_n} "
                                     f"faults scheduled per target — {stamp}")
    for body in texts:
        text += "\n---\n\n" + body.replace("\n# ", "\n## ", 1).replace(
            "# Fault-injection run", "## Run", 1)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{stamp}.md"
    path.write_text(text)
    (RESULTS_DIR / f"{stamp}.json").write_text(json.dumps(figs, indent=1))
    return path


def _stop_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C: the run's cleanup (brokers, namespaces, tmpfs) happens."""
    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)


def _selftest(args: argparse.Namespace, seed: int, base: Path) -> int:
    target: Target = "minikafka" if args.target == "minikafka" else "kafka"
    root = args.minikafka_tree.resolve() if args.minikafka_tree is not None else REPO_ROOT
    try:
        runs = modes.selftest_configs(target, base, seed,
                                      capabilities=modes.minikafka_capabilities(root))
    except ValueError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 2
    if args.minikafka_tree is not None:
        for item in runs:
            item.config.minikafka_root = root
            item.config.label += f" ({args.minikafka_tree})"
    verdicts = []
    for item in runs:
        result = run(item.config)
        path = report.write_run(result)
        lost = sum(w.lost for w in result.result.writers.values() if w.spec.strict)
        # The control run must lose nothing; what else it finds (two of three replicas
        # killed is more than the single failure idempotence is promised under) is printed.
        ok = (lost > 0) if item.expect_loss else lost == 0
        verdicts.append(ok)
        if not item.expect_loss and result.result.failed:
            print(report.failure_text(result), flush=True)
        print(f"chaos: self-test {item.config.label}: {lost} acknowledged records lost, "
              f"{'as expected' if ok else 'NOT as expected'} "
              f"({'loss expected' if item.expect_loss else 'no loss expected'}); "
              f"report {path}", flush=True)
        if item.expect_loss and ok:
            print(report.failure_text(result), flush=True)
    return 0 if all(verdicts) else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.combine:
        print(f"chaos: dated report {_combine(args.combine)}")
        return 0
    _stop_on_sigterm()
    seed = args.seed if args.seed is not None else int(time.time()) % 100_000
    base = args.work_dir or Path(tempfile.mkdtemp(prefix="minikafka-chaos-"))
    if args.mode == "selftest":
        return _selftest(args, seed, base)
    try:
        configs = _configs(args, seed, base)
        for config in configs:
            config.kinds_to_run()
    except ValueError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 2
    results = []
    for config in configs:
        result = run(config)
        path = report.write_run(result)
        results.append(result)
        print(f"chaos: {config.label}: {report.verdict(result)}; report {path}", flush=True)
        if result.result.failed:
            print(report.failure_text(result), flush=True)
    if args.mode == "long" or args.report:
        print(f"chaos: dated report {_write_dated(results, seed)}")
    return 1 if any(r.result.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())

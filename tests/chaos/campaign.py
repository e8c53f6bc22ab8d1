"""One run: start the cluster, load it, inject the scheduled faults, heal, read back, check.

Steps (each bounded):

1. Namespaces (``netns.Network``) when partitions are wanted, then the cluster
   (``cluster.Cluster``): ZooKeeper, brokers on tmpfs log dirs.
2. Topics: ``chaos-all`` (acks=all writers and the group; RF 3, ``min.insync.replicas=2`` on
   three brokers) and ``chaos-acks1`` (the acks=1 writer), unclean election off unless asked.
3. Load (``workloads``): kafka-python and confluent-kafka idempotent acks=all writers, a
   confluent-kafka acks=1 writer, two group consumers committing, an offset observer.
4. The schedule (``faults.make_schedule``), one fault at a time; after each, up to
   ``recovery_timeout_s`` for the cluster to be whole (every broker registered, every ISR
   full; when it is not, what is missing is kept and the run fails: ``check_recovery``).
   The fault phase stops early at ``max_fault_phase_s`` (the report says so).
5. Heal everything, let the load run a few seconds more, stop it (in-flight sends get
   ``workloads.FLUSH_TIMEOUT_S``), note each partition's leader, stop the brokers
   (controlled shutdown) and read every replica from its log dir (``replicas``).
6. ``checker.check``; the run directory gets ``history.jsonl`` and ``report.md``; on a
   failed check the brokers' log dirs are copied next to them before the tmpfs goes.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO

from tests.chaos import faults, netns
from tests.chaos.checker import CheckResult, Finding, WriterSpec, check, check_recovery
from tests.chaos.cluster import Cluster, ClusterSpec, Target
from tests.chaos.history import History
from tests.chaos.replicas import ReplicaLog, read_broker
from tests.chaos.workloads import (
    ConfluentWriter,
    GroupConsumer,
    KafkaPythonWriter,
    OffsetObserver,
    Writer,
)

log = logging.getLogger(__name__)

TOPIC_ALL: Final = "chaos-all"
TOPIC_ACKS1: Final = "chaos-acks1"
GROUP: Final = "chaos-group"
WARMUP_TIMEOUT_S: Final = 90.0
TAIL_S: Final = 3.0
JOIN_TIMEOUT_S: Final = 90.0


@dataclass(slots=True)
class RunConfig:
    target: Target
    faults: int
    seed: int
    work_dir: Path
    brokers: int = 3
    zookeeper_nodes: int = 1
    kinds: Sequence[str] | None = None  # None: every kind the cluster allows
    network: bool = True
    rate: float = 50.0  # records per second per writer
    partitions: int = 6
    session_timeout_ms: int = 6000
    replica_lag_time_max_ms: int = 6000
    recovery_timeout_s: float = 90.0
    max_fault_phase_s: float = 3600.0
    quiet_s: tuple[float, float] = (1.0, 3.0)
    consumers: int = 2
    broker_env: Mapping[str, str] = field(default_factory=dict)
    extra_properties: Mapping[str, str] = field(default_factory=dict)
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    label: str = ""
    minikafka_root: Path | None = None

    def spec(self) -> ClusterSpec:
        return ClusterSpec(self.target, brokers=self.brokers,
                           zookeeper_nodes=self.zookeeper_nodes,
                           session_timeout_ms=self.session_timeout_ms,
                           replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                           broker_env=dict(self.broker_env),
                           extra_properties=dict(self.extra_properties),
                           minikafka_root=self.minikafka_root)

    def kinds_to_run(self) -> list[str]:
        if self.kinds is None:
            return faults.applicable(self.brokers, self.zookeeper_nodes, self.network)
        allowed = faults.applicable(self.brokers, self.zookeeper_nodes, self.network,
                                    named=True)
        unknown = [k for k in self.kinds if k not in faults.KINDS]
        if unknown:
            raise ValueError(f"unknown fault kinds: {unknown} (known: {list(faults.KINDS)})")
        refused = [k for k in self.kinds if k not in allowed]
        if refused:
            raise ValueError(f"fault kinds {refused} need more than this cluster has "
                             f"({self.brokers} brokers, {self.zookeeper_nodes} ZooKeeper "
                             f"nodes, network {'on' if self.network else 'off'})")
        return list(self.kinds)


@dataclass(slots=True)
class RunResult:
    config: RunConfig
    schedule: list[faults.ScheduledFault]
    history: History
    result: CheckResult
    replicas: list[ReplicaLog]
    run_dir: Path
    started_wall: float
    duration_s: float
    faults_done: int
    stopped_early: str | None
    exit_codes: dict[int, int | None]
    uptime_before: str
    uptime_after: str
    broker_logs: dict[int, Path]
    writers: list[WriterSpec]


def uptime() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5,
                              check=False).stdout.strip()
    return "?"


def _writer_specs(config: RunConfig) -> list[WriterSpec]:
    return [WriterSpec("kp-all", -1, True), WriterSpec("ck-all", -1, True),
            WriterSpec("ck-acks1", 1, False)]


def _heal_all(cluster: Cluster, history: History) -> None:
    """Whatever a fault left behind: cuts, paused or stopped processes, a full disk."""
    if cluster.network is not None:
        cluster.network.heal()
    if cluster.zk is not None:
        for zk_node in cluster.zk.nodes:
            if zk_node.paused:
                zk_node.resume()
            if not zk_node.running():
                history.note(f"heal: zookeeper node {zk_node.myid} started again")
                zk_node.start()
        cluster.zk.wait_serving(timeout_s=60)
    for broker_id, node in cluster.brokers.items():
        (node.data_dir / faults.FILLER).unlink(missing_ok=True)
        if node.paused:
            node.resume()
        if not node.running():
            history.note(f"heal: broker {broker_id} started again (exit code "
                         f"{node.exit_code()})")
            cluster.start_broker(broker_id)


def _log_clients_to(path: Path) -> logging.Handler:
    """The clients' own logging (kafka-python, librdkafka, the project's client) goes to a
    file of the run, not to the terminal: a fault makes them loud."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(message)s (%(name)s)"))
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    return handler


def _wait_for_acks(history: History, writers: Sequence[Writer], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        acked = {s.writer for s in history.snapshot_sends() if s.outcome == "ok"}
        if all(w.writer in acked for w in writers):
            return True
        time.sleep(0.2)
    return False


def run(config: RunConfig, out: TextIO = sys.stdout) -> RunResult:
    kinds = config.kinds_to_run()
    schedule = faults.make_schedule(config.seed, kinds, config.faults, quiet_s=config.quiet_s)
    run_dir = config.work_dir
    run_dir.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    client_log = _log_clients_to(run_dir / "clients.log")
    uptime_before = uptime()
    say(f"chaos: {config.label or config.target}: {config.brokers} broker(s), ZooKeeper "
        f"{config.zookeeper_nodes or 'none'}, seed {config.seed}, {len(schedule)} faults of "
        f"{kinds}; run dir {run_dir}")
    say(f"chaos: {uptime_before}")
    for item in schedule:
        say(f"  scheduled {item.describe()}")
    if config.network:
        removed = netns.remove_stale()
        if removed:
            say(f"chaos: removed stale namespaces/links of dead runs: {removed}")
    network = netns.Network() if config.network else None
    cluster = Cluster(config.spec(), run_dir, network)
    history = History()
    started_wall = time.time()
    stopped_early: str | None = None
    faults_done = 0
    exit_codes: dict[int, int | None] = {}
    replicas: list[ReplicaLog] = []
    writers: list[Writer] = []
    consumers: list[GroupConsumer] = []
    observer: OffsetObserver | None = None
    writer_specs = _writer_specs(config)
    try:
        cluster.start()
        rf = config.spec().replication_factor
        topic_configs = {"min.insync.replicas": str(min(2, rf)),
                         "unclean.leader.election.enable": "false", **config.topic_configs}
        cluster.create_topic(TOPIC_ALL, config.partitions, topic_configs)
        cluster.create_topic(TOPIC_ACKS1, max(1, config.partitions // 2), topic_configs)
        say(f"chaos: cluster up at {cluster.bootstrap} ({history.now():.1f} s)")
        bootstrap = cluster.bootstrap
        writers = [
            KafkaPythonWriter("kp-all", history, bootstrap, TOPIC_ALL, config.partitions,
                              acks=-1, idempotent=True, rate=config.rate),
            ConfluentWriter("ck-all", history, bootstrap, TOPIC_ALL, config.partitions,
                            acks=-1, idempotent=True, rate=config.rate),
            ConfluentWriter("ck-acks1", history, bootstrap, TOPIC_ACKS1,
                            max(1, config.partitions // 2), acks=1, idempotent=False,
                            rate=config.rate),
        ]
        consumers = [GroupConsumer(f"c{i}", history, bootstrap, TOPIC_ALL, GROUP)
                     for i in range(config.consumers)]
        observer = OffsetObserver(history, bootstrap, GROUP)
        for thread in [*writers, *consumers, observer]:
            thread.start()
        if not _wait_for_acks(history, writers, WARMUP_TIMEOUT_S):
            raise RuntimeError(f"not every writer had a record acknowledged within "
                               f"{WARMUP_TIMEOUT_S:.0f} s of the start")
        say(f"chaos: load running ({history.acked_count()} acknowledged at "
            f"{history.now():.1f} s)")
        ctx = faults.FaultContext(cluster, history, TOPIC_ALL)
        phase_end = time.monotonic() + config.max_fault_phase_s
        for item in schedule:
            if time.monotonic() + item.quiet_s > phase_end:
                stopped_early = (f"fault phase bound of {config.max_fault_phase_s:.0f} s "
                                 f"reached after {faults_done} faults")
                break
            time.sleep(item.quiet_s)
            try:
                event = faults.run_fault(ctx, item)
            except Exception as exc:  # the fault could not be carried out as planned
                event = (history.faults[-1] if len(history.faults) > faults_done
                         else history.fault(item.kind, "?"))
                event.details.append(f"fault raised {exc!r}; healing everything")
                say(f"chaos: fault #{item.index} {item.kind} raised {exc!r}")
                with contextlib.suppress(Exception):
                    _heal_all(cluster, history)
                if event.t_healed is None:
                    event.t_healed = history.now()
            faults_done += 1
            event.not_whole = cluster.wait_whole([TOPIC_ALL, TOPIC_ACKS1],
                                                 config.recovery_timeout_s)
            if not event.not_whole:
                event.t_recovered = history.now()
                whole = f"whole again at {event.t_recovered:.1f} s"
            else:
                whole = (f"NOT whole {config.recovery_timeout_s:g} s after healing: "
                         f"{'; '.join(event.not_whole)}")
                with contextlib.suppress(Exception):
                    _heal_all(cluster, history)
            say(f"[{event.t_start:7.1f} s] #{event.index} {event.kind} on {event.target}: "
                f"{'; '.join(event.details)}; {whole}; acked {history.acked_count()}")
        _heal_all(cluster, history)
        history.final_not_whole = cluster.wait_whole([TOPIC_ALL, TOPIC_ACKS1],
                                                     config.recovery_timeout_s)
        if history.final_not_whole:
            history.note("final: the cluster was not whole after healing: "
                         + "; ".join(history.final_not_whole))
            say("chaos: the cluster is NOT whole after the final heal: "
                + "; ".join(history.final_not_whole))
        time.sleep(TAIL_S)
    finally:
        end = history.now()
        try:
            threads: list[Writer | GroupConsumer | OffsetObserver] = [*writers, *consumers]
            if observer is not None:
                threads.append(observer)
            for thread in threads:
                thread.stop()
            for thread in threads:
                thread.join(JOIN_TIMEOUT_S)
            say(f"chaos: load stopped at {history.now():.1f} s; {history.acked_count()} "
                "acknowledged")
            leaders = cluster.final_leaders([TOPIC_ALL, TOPIC_ACKS1])
            exit_codes = cluster.stop_brokers()
            for broker_id, node in cluster.brokers.items():
                if node.data_dir.exists():
                    replicas += read_broker(broker_id, node.data_dir, {TOPIC_ALL, TOPIC_ACKS1})
            result = check(history, replicas, leaders, writer_specs, end)
            result.findings += check_recovery(history.faults, history.final_not_whole,
                                              config.recovery_timeout_s, end)
            workers: list[Writer | GroupConsumer] = [*writers, *consumers]
            for worker in workers:
                if worker.crashed is not None or worker.is_alive():
                    why = worker.crashed or f"still running {JOIN_TIMEOUT_S:.0f} s after stop"
                    result.findings.append(Finding(
                        "harness", f"{worker.name} did not run to the end: {why}", True))
            history.write_jsonl(run_dir / "history.jsonl")
            if result.failed:
                for broker_id, node in cluster.brokers.items():
                    with contextlib.suppress(OSError):
                        shutil.copytree(node.data_dir, run_dir / f"broker-{broker_id}-data-copy")
        finally:
            cluster.close()
            if network is not None:
                network.close()
            logging.getLogger().removeHandler(client_log)
            client_log.close()
    return RunResult(config, schedule, history, result, replicas, run_dir, started_wall,
                     time.time() - started_wall, faults_done, stopped_early, exit_codes,
                     uptime_before, uptime(),
                     {b: n.log_path for b, n in cluster.brokers.items()}, writer_specs)

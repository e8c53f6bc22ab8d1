"""The two modes: a short run for CI and a long campaign outside it, and what minikafka can run.

- **CI** (``ci_config``; ``tests/chaos/test_ci_campaign.py``): minikafka only, a handful of
  faults of each kind the build can run, the fault phase bounded so the whole run stays within
  ``CI_BUDGET_S``; it fails the build on any failing finding (acknowledged loss first).
- **Long** (``long_config``): at least 100 faults, Apache Kafka 3.9.1 and minikafka one after
  the other with the same seed and settings; the figures go to a dated report under
  ``tests/chaos/results/``.
- **Self-test** (``selftest_configs``): the harness must catch a broker losing acknowledged
  data. A pair of runs with the same seed: the ``lagging_takeover`` double failure on topics
  with ``unclean.leader.election.enable=true`` (acknowledged records lost, as Kafka
  documents), which the checker must report, and the same with it off, which must lose
  nothing.

Which cluster minikafka runs here depends on what the broker has: a single broker without
ZooKeeper until cluster mode (``zookeeper.connect``) and replication (follower fetchers) are
in the tree, three brokers with RF 3 and ``min.insync.replicas=2`` on a ZooKeeper ensemble
once they are (``minikafka_capabilities``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.chaos.campaign import RunConfig
from tests.chaos.cluster import Target
from tests.chaos.nodes import REPO_ROOT

CI_BUDGET_S: Final = 300.0
CI_FAULT_PHASE_S: Final = 170.0
LONG_FAULTS: Final = 100
CI_CLUSTER_KINDS: Final = ("kill_leader", "kill_controller", "restart", "pause_leader",
                           "partition_peers", "isolate_leader", "zk_expiry_controller",
                           "disk_full")


@dataclass(frozen=True, slots=True)
class Capabilities:
    cluster: bool  # a broker accepts zookeeper.connect
    replication: bool  # followers fetch from their leader

    @property
    def replicated_cluster(self) -> bool:
        return self.cluster and self.replication

    def describe(self) -> str:
        if self.replicated_cluster:
            return "cluster mode and replication"
        missing = [name for name, have in (("cluster mode (zookeeper.connect)", self.cluster),
                                           ("replication (follower fetchers)", self.replication))
                   if not have]
        return "single broker only: no " + " and no ".join(missing)


_PROBE = """
import json
from broker import replica_fetcher
from broker.config import BrokerConfig, ConfigError
try:
    BrokerConfig.from_properties({"zookeeper.connect": "127.0.0.1:2181/chaos",
                                  "broker.id": "1", "log.dirs": "/nonexistent"})
    cluster = True
except ConfigError as exc:
    cluster = "not available" not in str(exc)
print(json.dumps([cluster, hasattr(replica_fetcher, "ReplicaFetcherManager")]))
"""


def minikafka_capabilities(source_root: Path = REPO_ROOT) -> Capabilities:
    """Asked of the broker's own code (of ``source_root``, in a child process): does its
    configuration accept ``zookeeper.connect``, and does it have replica fetchers?"""
    env = {**os.environ, "PYTHONPATH": str(source_root)}
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         env=env, cwd=source_root, timeout=60, check=True).stdout
    cluster, replication = json.loads(out.strip().splitlines()[-1])
    return Capabilities(bool(cluster), bool(replication))


def base_config(target: Target, work_dir: Path, *, faults: int, seed: int,
                capabilities: Capabilities | None = None,
                zookeeper_nodes: int = 3) -> RunConfig:
    """Three brokers on a ZooKeeper ensemble, or (minikafka without a replicated cluster) one
    broker without ZooKeeper."""
    caps = capabilities if capabilities is not None else minikafka_capabilities()
    if target == "minikafka" and not caps.replicated_cluster:
        return RunConfig(target, faults, seed, work_dir, brokers=1, zookeeper_nodes=0,
                         network=False, label="minikafka, 1 broker")
    label = "Apache Kafka 3.9.1" if target == "kafka" else "minikafka"
    return RunConfig(target, faults, seed, work_dir, brokers=3, zookeeper_nodes=zookeeper_nodes,
                     label=f"{label}, 3 brokers")


def ci_config(work_dir: Path, seed: int, capabilities: Capabilities | None = None) -> RunConfig:
    caps = capabilities if capabilities is not None else minikafka_capabilities()
    if caps.replicated_cluster:
        # One of each kind that stands for a failure mode (the long run has them all):
        # kill -9 of a leader and of the controller, restart, pause, a leader cut from its
        # peers, a leader cut from everyone, the controller's ZooKeeper session expiring,
        # a full disk; one ZooKeeper node, 4 s sessions and lag bound, to stay in budget.
        config = base_config("minikafka", work_dir, faults=len(CI_CLUSTER_KINDS), seed=seed,
                             capabilities=caps, zookeeper_nodes=1)
        config.kinds = list(CI_CLUSTER_KINDS)
        config.session_timeout_ms = 4000
        config.replica_lag_time_max_ms = 4000
    else:
        # Two of each kind a single broker takes (kill -9, restart, pause, full disk).
        config = base_config("minikafka", work_dir, faults=8, seed=seed, capabilities=caps)
    config.max_fault_phase_s = CI_FAULT_PHASE_S
    config.recovery_timeout_s = 45.0
    config.quiet_s = (0.5, 1.5)
    return config


@dataclass(frozen=True, slots=True)
class SelfTestRun:
    config: RunConfig
    expect_loss: bool


def selftest_configs(target: Target, base: Path, seed: int,
                     capabilities: Capabilities | None = None) -> list[SelfTestRun]:
    runs = []
    for unclean in (True, False):
        name = "unclean" if unclean else "clean"
        config = base_config(target, base / f"{target}-{name}", faults=2, seed=seed,
                             capabilities=capabilities, zookeeper_nodes=1)
        if config.brokers < 3:
            raise ValueError(f"the self-test needs three {target} brokers with replication")
        config.kinds = ["lagging_takeover"]
        config.topic_configs = {"unclean.leader.election.enable": str(unclean).lower()}
        config.label = f"{config.label}, unclean.leader.election.enable={str(unclean).lower()}"
        runs.append(SelfTestRun(config, expect_loss=unclean))
    return runs


def long_config(target: Target, work_dir: Path, *, faults: int, seed: int,
                capabilities: Capabilities | None = None) -> RunConfig:
    config = base_config(target, work_dir, faults=max(faults, 1), seed=seed,
                         capabilities=capabilities)
    config.max_fault_phase_s = 4 * 3600.0
    return config

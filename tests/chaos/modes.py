"""The two modes: a short run for CI and a long campaign outside it, and what minikafka can run.

- **CI** (``ci_config``; ``tests/chaos/test_ci_campaign.py``): minikafka only, a handful of
  faults of each kind the build can run, the fault phase bounded so the whole run stays within
  ``CI_BUDGET_S``; it fails the build on any failing finding (acknowledged loss first).
- **Long** (``long_config``): at least 100 faults, Apache Kafka 3.9.1 and minikafka one after
  the other with the same seed and settings; the figures go to a dated report under
  ``tests/chaos/results/``.

Which cluster minikafka runs here depends on what the broker has: a single broker without
ZooKeeper until cluster mode (``zookeeper.connect``) and replication (follower fetchers) are
in the tree, three brokers with RF 3 and ``min.insync.replicas=2`` on a ZooKeeper ensemble
once they are (``minikafka_capabilities``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.chaos.campaign import RunConfig
from tests.chaos.cluster import Target

CI_BUDGET_S: Final = 300.0
CI_FAULT_PHASE_S: Final = 170.0
LONG_FAULTS: Final = 100


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


def minikafka_capabilities() -> Capabilities:
    """Asked of the broker's own code: does its configuration accept ``zookeeper.connect``,
    and does it have replica fetchers?"""
    from broker import replica_fetcher
    from broker.config import BrokerConfig, ConfigError

    try:
        BrokerConfig.from_properties({"zookeeper.connect": "127.0.0.1:2181/chaos",
                                      "broker.id": "1", "log.dirs": "/nonexistent"})
        cluster = True
    except ConfigError as exc:
        cluster = "not available" not in str(exc)
    return Capabilities(cluster, hasattr(replica_fetcher, "ReplicaFetcherManager"))


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
        config = base_config("minikafka", work_dir, faults=13, seed=seed, capabilities=caps)
    else:
        config = base_config("minikafka", work_dir, faults=12, seed=seed, capabilities=caps)
    config.max_fault_phase_s = CI_FAULT_PHASE_S
    config.recovery_timeout_s = 45.0
    config.quiet_s = (0.5, 1.5)
    return config


def long_config(target: Target, work_dir: Path, *, faults: int, seed: int,
                capabilities: Capabilities | None = None) -> RunConfig:
    config = base_config(target, work_dir, faults=max(faults, 1), seed=seed,
                         capabilities=capabilities)
    config.max_fault_phase_s = 4 * 3600.0
    return config

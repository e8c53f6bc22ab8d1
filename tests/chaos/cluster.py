"""The cluster under test: ZooKeeper (none, 1 or 3 nodes) and N brokers, each in a network
namespace of its own when the harness has a ``Network`` (else all on 127.0.0.1).

Layout of ``work_dir``::

    zookeeper/node-N/     ZooKeeper's config, data and log (devcluster.zookeeper)
    broker-N/data/        the broker's log.dirs: a tmpfs of its own (Tmpfs)
    broker-N/broker.log   minikafka's stdout+stderr; Kafka: server.log, stdout.log

Brokers use ``zookeeper.connect=<ensemble>/chaos`` and the same settings for both kinds
(``chaos_properties``): the ZooKeeper session timeout and ``replica.lag.time.max.ms`` of the
spec, ``min.insync.replicas`` for the broker default (and so ``__consumer_offsets``), no
automatic topic creation, no group rebalance delay. A single minikafka broker runs without
ZooKeeper.

The harness's view of the cluster is ZooKeeper's (a kazoo session of its own, read only
apart from creating the chroot):
``/controller``, ``/brokers/ids``, and each partition's state znode, which is what the
controller decided; a single node is asked over the Kafka protocol instead.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from client.errors import ClientError
from client.sync import SyncClient
from devcluster.zookeeper import ZooKeeper, free_ports
from protocol.topic_partition import TopicPartition
from tests.chaos.netns import Host, Network
from tests.chaos.nodes import (
    REPO_ROOT,
    STOP_TIMEOUT_S,
    BrokerNode,
    KafkaNode,
    MinikafkaNode,
    NodeError,
    Tmpfs,
)

log = logging.getLogger(__name__)

CHROOT: Final = "/chaos"
BROKER_PORT: Final = 9092
POLL_INTERVAL_S: Final = 0.2
ADMIN_TIMEOUT_MS: Final = 10_000

Target = Literal["minikafka", "kafka"]


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    target: Target
    brokers: int = 3
    zookeeper_nodes: int = 1  # 0: none (a single minikafka broker)
    session_timeout_ms: int = 6000
    replica_lag_time_max_ms: int = 6000
    min_insync_replicas: int = 2
    tmpfs_mib: int = 512
    broker_env: Mapping[str, str] = field(default_factory=dict)  # minikafka test switches
    extra_properties: Mapping[str, str] = field(default_factory=dict)
    minikafka_root: Path | None = None  # another checkout's broker (default: this one)

    @property
    def replication_factor(self) -> int:
        return min(3, self.brokers)

    def chaos_properties(self) -> dict[str, str]:
        props = {
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "10",
            "offsets.topic.replication.factor": str(self.replication_factor),
            "min.insync.replicas": str(min(self.min_insync_replicas, self.replication_factor)),
            "replica.lag.time.max.ms": str(self.replica_lag_time_max_ms),
            "num.partitions": "1",
        }
        if self.zookeeper_nodes:
            props["zookeeper.session.timeout.ms"] = str(self.session_timeout_ms)
        if self.target == "kafka":
            props["transaction.state.log.replication.factor"] = str(self.replication_factor)
            props["transaction.state.log.min.isr"] = "1"
        return {**props, **self.extra_properties}


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]


class Cluster:
    def __init__(self, spec: ClusterSpec, work_dir: Path, network: Network | None) -> None:
        if spec.target == "kafka" and not spec.zookeeper_nodes:
            raise ValueError("Apache Kafka in ZooKeeper mode needs a ZooKeeper")
        self.spec = spec
        self.work_dir = work_dir
        self.network = network
        self.zk: ZooKeeper | None = None
        self.zk_hosts: dict[int, Host] = {}
        self.broker_hosts: dict[int, Host] = {}
        self.brokers: dict[int, BrokerNode] = {}
        self.tmpfs: dict[int, Tmpfs] = {}
        self.kazoo: KazooClient | None = None
        self._admin: SyncClient | None = None

    # -- set-up --------------------------------------------------------------------------

    @property
    def zookeeper_connect(self) -> str:
        assert self.zk is not None
        return self.zk.connect_string + CHROOT

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self) -> None:
        spec = self.spec
        if spec.zookeeper_nodes:
            hosts = wrappers = None
            if self.network is not None:
                for n in range(1, spec.zookeeper_nodes + 1):
                    self.zk_hosts[n] = self.network.add_host(f"zk{n}")
                hosts = [h.ip for h in self.zk_hosts.values()]
                wrappers = [h.wrapper for h in self.zk_hosts.values()]
            self.zk = ZooKeeper(self.work_dir / "zookeeper", nodes=spec.zookeeper_nodes,
                                hosts=hosts, wrappers=wrappers, max_session_timeout_ms=60000)
            self.zk.start()
            self.kazoo = KazooClient(hosts=self.zk.connect_string, timeout=30.0)
            self.kazoo.start(timeout=30)
            self.kazoo.ensure_path(CHROOT)
        for broker_id in range(1, spec.brokers + 1):
            self.brokers[broker_id] = self._make_broker(broker_id)
        for broker_id, node in self.brokers.items():
            self.tmpfs[broker_id] = Tmpfs(node.data_dir, spec.tmpfs_mib)
            self.tmpfs[broker_id].mount()
        for node in self.brokers.values():
            node.start()

    def _make_broker(self, broker_id: int) -> BrokerNode:
        home = self.work_dir / f"broker-{broker_id}"
        wrapper: list[str] = []
        host, port = "127.0.0.1", 0
        if self.network is not None:
            net_host = self.network.add_host(f"b{broker_id}")
            self.broker_hosts[broker_id] = net_host
            host, port, wrapper = net_host.ip, BROKER_PORT, net_host.wrapper
        if port == 0:
            port = free_ports(1)[0]
        props = self.spec.chaos_properties()
        if self.spec.target == "kafka":
            return KafkaNode(home, broker_id=broker_id, host=host, port=port,
                             zookeeper_connect=self.zookeeper_connect, properties=props,
                             wrapper=wrapper)
        if self.zk is not None:
            props["zookeeper.connect"] = self.zookeeper_connect
        return MinikafkaNode(home, broker_id=broker_id, host=host, port=port, properties=props,
                             wrapper=wrapper, env=self.spec.broker_env,
                             source_root=self.spec.minikafka_root or REPO_ROOT)

    def admin(self) -> SyncClient:
        """The harness's own client (the project's), for topics and group offsets."""
        if self._admin is None:
            self._admin = SyncClient(self.bootstrap, timeout_ms=ADMIN_TIMEOUT_MS)
        return self._admin

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str],
                     timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.admin().create_topic(name, partitions, self.spec.replication_factor,
                                          configs)
                break
            except ClientError as exc:
                if "already exists" in str(exc).lower():
                    break
                if time.monotonic() > deadline:
                    raise
                log.info("create topic %s: %s (retrying)", name, exc)
                time.sleep(1.0)
        if not self.wait_converged([name], timeout_s=max(1.0, deadline - time.monotonic())):
            raise NodeError(f"topic {name} has no full ISR after {timeout_s:.0f} s")

    # -- the cluster's state -------------------------------------------------------------

    def controller_id(self) -> int | None:
        if self.kazoo is None:
            return next(iter(self.brokers)) if len(self.brokers) == 1 else None
        try:
            data, _ = self.kazoo.get(f"{CHROOT}/controller")
            return int(json.loads(data)["brokerid"])
        except (NoNodeError, ValueError, KeyError):
            return None

    def registered(self) -> set[int]:
        if self.kazoo is None:
            return {b for b, node in self.brokers.items() if node.running()}
        try:
            return {int(child) for child in self.kazoo.get_children(f"{CHROOT}/brokers/ids")}
        except NoNodeError:
            return set()

    def partition_states(self, topic: str) -> dict[int, PartitionState]:
        """Every partition of ``topic`` as ZooKeeper (or the single broker) has it."""
        if self.kazoo is None:
            return self._states_from_metadata(topic)
        try:
            data, _ = self.kazoo.get(f"{CHROOT}/brokers/topics/{topic}")
        except NoNodeError:
            return {}
        assignment = json.loads(data)["partitions"]
        states = {}
        for p, replicas in assignment.items():
            try:
                raw, _ = self.kazoo.get(f"{CHROOT}/brokers/topics/{topic}/partitions/{p}/state")
            except NoNodeError:
                continue
            state = json.loads(raw)
            states[int(p)] = PartitionState(int(state["leader"]), int(state["leader_epoch"]),
                                            tuple(state["isr"]), tuple(replicas))
        return states

    def _states_from_metadata(self, topic: str) -> dict[int, PartitionState]:
        try:
            infos = self.admin().describe_topics([topic])
        except Exception as exc:  # an unreachable broker is a state, not an error here
            log.debug("metadata of %s: %s", topic, exc)
            return {}
        return {p.partition: PartitionState(p.leader, p.leader_epoch, p.isr, p.replicas)
                for info in infos for p in info.partitions.values() if p.error_code == 0}

    def converged(self, topics: Sequence[str]) -> bool:
        """Every broker running and registered, every partition led with its full ISR."""
        return not self.not_whole(topics)

    def not_whole(self, topics: Sequence[str]) -> list[str]:
        """What keeps the cluster from being whole (``converged``): empty when it is."""
        why = [f"broker {b} {'paused' if node.paused else 'not running'}"
               for b, node in self.brokers.items() if node.paused or not node.running()]
        if self.kazoo is None and why:
            return why  # the single broker's partition states are asked of the broker
        try:
            registered = self.registered()
            why += [f"broker {b} not registered in ZooKeeper"
                    for b in sorted(set(self.brokers) - registered)]
        except Exception as exc:  # ZooKeeper reconnecting
            why.append(f"/brokers/ids could not be read: {exc!r}")
        for topic in topics:
            try:
                states = self.partition_states(topic)
            except Exception as exc:
                why.append(f"{topic}: partition states could not be read: {exc!r}")
                continue
            if not states:
                why.append(f"{topic}: no partition state")
            for p, state in sorted(states.items()):
                if state.leader < 0:
                    why.append(f"{topic}-{p}: no leader")
                elif set(state.isr) != set(state.replicas):
                    why.append(f"{topic}-{p}: ISR {sorted(state.isr)} of replicas "
                               f"{sorted(state.replicas)} (leader {state.leader})")
        if why and self.kazoo is not None:
            with contextlib.suppress(Exception):
                why.append(f"controller: broker {self.controller_id()}")
        return why

    def wait_converged(self, topics: Sequence[str], timeout_s: float) -> bool:
        return not self.wait_whole(topics, timeout_s)

    def wait_whole(self, topics: Sequence[str], timeout_s: float) -> list[str]:
        """Until the cluster is whole (then ``[]``) or ``timeout_s`` passed (then what kept
        it from being whole at the last check)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                why = self.not_whole(topics)
            except Exception as exc:  # ZooKeeper reconnecting, a broker restarting
                log.debug("convergence check: %s", exc)
                why = [f"the cluster's state could not be read: {exc!r}"]
            if not why:
                return []
            if time.monotonic() > deadline:
                return why
            time.sleep(POLL_INTERVAL_S)

    def final_leaders(self, topics: Sequence[str]) -> dict[tuple[str, int], int | None]:
        leaders: dict[tuple[str, int], int | None] = {}
        for topic in topics:
            with contextlib.suppress(Exception):
                for p, state in self.partition_states(topic).items():
                    leaders[(topic, p)] = state.leader if state.leader >= 0 else None
        return leaders

    # -- faults' helpers -----------------------------------------------------------------

    def wait_unregistered(self, broker_id: int, timeout_s: float) -> bool:
        """Until ``/brokers/ids/<id>`` is gone (a killed broker's session expired)."""
        if self.kazoo is None:
            return True
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.kazoo.exists(f"{CHROOT}/brokers/ids/{broker_id}") is None:
                return True
            time.sleep(POLL_INTERVAL_S)
        return False

    def start_broker(self, broker_id: int) -> None:
        """Start a stopped broker again, once ZooKeeper has let its old registration go."""
        node = self.brokers[broker_id]
        if node.running():
            return
        self.wait_unregistered(broker_id, 3 * self.spec.session_timeout_ms / 1000 + 10)
        node.start()

    def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        return self.admin().committed_offsets(group)

    # -- teardown ------------------------------------------------------------------------

    def stop_brokers(self, timeout_s: float = STOP_TIMEOUT_S) -> dict[int, int | None]:
        """SIGTERM each broker in turn (the controller last); their exit codes."""
        for node in self.brokers.values():
            if node.paused:
                node.resume()
        controller = None
        with contextlib.suppress(Exception):
            controller = self.controller_id()
        order = sorted(self.brokers, key=lambda b: (b == controller, b))
        return {b: self.brokers[b].stop(timeout_s) for b in order}

    def close(self) -> None:
        """Everything stopped (SIGKILL for what is left), tmpfs unmounted; idempotent."""
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None
        for node in self.brokers.values():
            if node.running():
                node.kill()
        if self.kazoo is not None:
            with contextlib.suppress(Exception):
                self.kazoo.stop()
                self.kazoo.close()
            self.kazoo = None
        if self.zk is not None:
            self.zk.stop()
        for fs in self.tmpfs.values():
            fs.unmount()

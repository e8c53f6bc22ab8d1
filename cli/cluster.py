"""``minikafka cluster up|status|down``: a development cluster on 127.0.0.1.

    minikafka cluster up [--brokers 3] [--zookeeper-ensemble 1|3] [--base-port 9092]
                         [--dir minikafka-cluster] [--override KEY=VALUE ...]
    minikafka cluster status [--dir minikafka-cluster]
    minikafka cluster down [--dir minikafka-cluster]

``up`` starts a real ZooKeeper (from the jars ``tools/fetch-kafka-jars`` fetched) and N
brokers with ``zookeeper.connect=<zookeeper>/minikafka``, detached, and prints the bootstrap
servers; ``status`` prints the brokers, the controller, every partition's leader, replicas
and ISR, and the under-replicated ones; ``down`` stops the brokers (controlled shutdown)
and then ZooKeeper. What runs is recorded in ``<dir>/cluster.json`` (devcluster.cluster).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from client.errors import ClientError
from client.sync import SyncClient
from devcluster.cluster import ClusterError, ClusterState, down, up

DEFAULT_DIR = Path("minikafka-cluster")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="minikafka cluster",
                                     description="A development cluster on 127.0.0.1.")
    sub = parser.add_subparsers(dest="action", required=True)
    p_up = sub.add_parser("up", help="start ZooKeeper and the brokers")
    p_up.add_argument("--brokers", type=int, default=3)
    p_up.add_argument("--zookeeper-ensemble", type=int, default=1, choices=(1, 3, 5),
                      help="ZooKeeper nodes (1: standalone)")
    p_up.add_argument("--base-port", type=int, default=9092,
                      help="broker N listens on base+N-1 (0: free ports)")
    p_up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                      help="a broker property for every broker (repeatable)")
    for p in (p_up, sub.add_parser("status", help="brokers, controller, partitions"),
              sub.add_parser("down", help="stop the brokers, then ZooKeeper")):
        p.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                       help=f"the cluster's directory (default: ./{DEFAULT_DIR})")
    args = parser.parse_args(argv)
    try:
        if args.action == "up":
            props = {}
            for item in args.override:
                key, sep, value = item.partition("=")
                if not sep:
                    parser.error(f"--override {item!r}: expected KEY=VALUE")
                props[key.strip()] = value.strip()
            state = up(args.dir, brokers=args.brokers, zookeeper_nodes=args.zookeeper_ensemble,
                       base_port=args.base_port, properties=props)
            print(f"zookeeper.connect={state.zookeeper_connect}")
            print(f"bootstrap.servers={state.bootstrap}")
            return 0
        if args.action == "status":
            return status(ClusterState.load(args.dir))
        state = down(args.dir, controller_id=_controller_id(ClusterState.load(args.dir)))
        print(f"stopped {len(state.brokers)} brokers and ZooKeeper")
        return 0
    except ClusterError as exc:
        print(f"minikafka cluster: {exc}", file=sys.stderr)
        return 1


def _controller_id(state: ClusterState) -> int | None:
    """The controller's id, if a broker answers (it is stopped last)."""
    try:
        with SyncClient(state.bootstrap) as client:
            return client.describe_cluster().controller_id
    except ClientError:
        return None


def status(state: ClusterState) -> int:
    print(f"ZooKeeper: {state.zookeeper_connect}")
    try:
        with SyncClient(state.bootstrap) as client:
            cluster = client.describe_cluster()
            topics = client.list_topics()
    except ClientError as exc:
        print(f"minikafka cluster: no broker answers ({state.bootstrap}): {exc}",
              file=sys.stderr)
        return 1
    expected = {b.broker_id for b in state.brokers}
    print(f"Cluster id: {cluster.cluster_id}   Controller: {cluster.controller_id}")
    print("Brokers:")
    for broker_id in sorted(expected | set(cluster.brokers)):
        if broker_id in cluster.brokers:
            host, port, rack = cluster.brokers[broker_id]
            where = f"{host}:{port}" + (f" rack {rack}" if rack else "")
            print(f"  {broker_id}  up    {where}")
        else:
            print(f"  {broker_id}  DOWN")
    under: list[str] = []
    print("Partitions:")
    for topic in topics:
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
            line = (f"  {topic.name}-{p.partition}  leader {p.leader}  replicas "
                    f"{','.join(map(str, p.replicas))}  isr {','.join(map(str, p.isr))}")
            if p.offline_replicas:
                line += f"  offline {','.join(map(str, p.offline_replicas))}"
            print(line)
            if len(p.isr) < len(p.replicas):
                under.append(f"{topic.name}-{p.partition}")
    print(f"Under-replicated partitions: {len(under)}" + (f" ({', '.join(under)})" if under else ""))
    return 0

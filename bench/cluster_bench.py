"""Cluster benchmarks on ZooKeeper: controller failover and controlled shutdown, minikafka and
Apache Kafka 3.9.1 (ZooKeeper mode) side by side on the same machine.

    python -m bench.cluster_bench [--rounds 3] [--partitions 1000] [--session-timeout-ms 18000]

Each side gets its own ZooKeeper (devcluster.zookeeper) and three brokers on 127.0.0.1.

- Failover: a topic whose partition 0 is led by the controller (replicas [controller, a, b]);
  a librdkafka producer (acks=1, retries) sends to partition 0 every 10 ms. The controller
  is killed with SIGKILL; the time is from the kill to the first acknowledged produce of a
  record sent after it. It includes the ZooKeeper session timeout (the controller's
  ``/controller`` and ``/brokers/ids`` znodes go only when its session expires), so the
  session timeout is printed with the result.
- Controlled shutdown: a topic of ``--partitions`` partitions, all led by one broker that is
  not the controller (replicas [b, x, y]); SIGTERM; reported: the time until the metadata
  shows no partition led by it (leaderships moved) and until its process exited.

The load average is printed before and after: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from client.errors import ClientError
from client.sync import SyncClient
from devcluster.apache_kafka import ApacheKafkaZk
from devcluster.cluster import start_broker
from devcluster.zookeeper import ZooKeeper, free_ports

BROKERS: Final = (1, 2, 3)
STEP_TIMEOUT_S: Final = 180.0


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Side(ABC):
    name: str

    def __init__(self, work: Path, session_timeout_ms: int) -> None:
        self.work = work
        self.session_timeout_ms = session_timeout_ms
        self.zk = ZooKeeper(work / "zk")
        self.ports: dict[int, int] = {}
        self.pids: dict[int, int] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for b, p in sorted(self.ports.items())
                        if b in self.pids and _alive(self.pids[b]))

    def start(self) -> None:
        self.zk.start()
        for broker_id in BROKERS:
            self.start_broker(broker_id)

    @abstractmethod
    def start_broker(self, broker_id: int) -> None: ...

    def stop(self) -> None:
        for pid in self.pids.values():
            _kill(pid, signal.SIGKILL)
        self.zk.stop()

    def admin(self) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=60000)

    def controller(self) -> int:
        with SyncClient(self.bootstrap, timeout_ms=30000) as client:
            return client.describe_cluster().controller_id

    def create_topic(self, topic: str, assignment: dict[int, list[int]]) -> None:
        admin = self.admin()
        try:
            admin.create_topics([NewTopic(topic, replica_assignments=assignment)],
                                timeout_ms=120000)
        finally:
            admin.close()
        self.wait_leaders(topic, {p: r[0] for p, r in assignment.items()})

    def leaders(self, topic: str) -> dict[int, int]:
        with SyncClient(self.bootstrap, timeout_ms=30000) as client:
            (info,) = client.describe_topics([topic])
        return {p: i.leader for p, i in info.partitions.items()}

    def wait_leaders(self, topic: str, expected: dict[int, int]) -> None:
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while True:
            with contextlib.suppress(ClientError):  # not there yet
                if self.leaders(topic) == expected:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: leaders of {topic} never became {expected}")
            time.sleep(0.2)


class MiniKafkaSide(Side):
    name = "minikafka"

    def start_broker(self, broker_id: int) -> None:
        port = self.ports.setdefault(broker_id, free_ports(1)[0])
        info = start_broker(self.work, broker_id, port, self.zk.connect_string + "/minikafka",
                            {"zookeeper.session.timeout.ms": str(self.session_timeout_ms),
                             "offsets.topic.replication.factor": "3"})
        self.pids[broker_id] = info.pid


class KafkaSide(Side):
    name = "Apache Kafka 3.9.1 (ZooKeeper mode)"

    def __init__(self, work: Path, session_timeout_ms: int) -> None:
        super().__init__(work, session_timeout_ms)
        self.kafkas: dict[int, ApacheKafkaZk] = {}

    def start_broker(self, broker_id: int) -> None:
        kafka = self.kafkas.get(broker_id)
        if kafka is None:
            kafka = ApacheKafkaZk(self.work / f"kafka-{broker_id}", broker_id=broker_id,
                                  zookeeper_connect=self.zk.connect_string + "/kafka",
                                  properties={"zookeeper.session.timeout.ms":
                                              str(self.session_timeout_ms),
                                              "offsets.topic.replication.factor": "3",
                                              "num.network.threads": "2",
                                              "num.io.threads": "2"})
            self.kafkas[broker_id] = kafka
            self.ports[broker_id] = kafka.port
        kafka.start()
        self.pids[broker_id] = kafka.pid


def failover_s(side: Side, round_no: int) -> float:
    controller = side.controller()
    others = [b for b in BROKERS if b != controller]
    topic = f"failover-{round_no}"
    side.create_topic(topic, {0: [controller, *others]})
    acked: list[float] = []
    sent_after: list[float] = []
    lock = threading.Lock()
    producer = Producer({"bootstrap.servers": side.bootstrap, "acks": 1, "linger.ms": 0,
                         "message.timeout.ms": 120000, "retry.backoff.ms": 50,
                         "topic.metadata.refresh.interval.ms": 1000, "log_level": 0})
    killed_at: list[float] = []

    def delivered(err: Any, _msg: Any, sent: float) -> None:
        if err is None and killed_at and sent > killed_at[0]:
            with lock:
                acked.append(time.monotonic())

    stop = time.monotonic() + STEP_TIMEOUT_S
    next_kill = time.monotonic() + 2.0
    while time.monotonic() < stop and not acked:
        now = time.monotonic()
        if not killed_at and now >= next_kill:
            killed_at.append(time.monotonic())
            _kill(side.pids[controller], signal.SIGKILL)
        sent = time.monotonic()
        if killed_at:
            sent_after.append(sent)
        producer.produce(topic, b"x" * 100, partition=0,
                         on_delivery=lambda e, m, s=sent: delivered(e, m, s))
        producer.poll(0.01)
    producer.flush(5)
    if not acked:
        raise RuntimeError(f"{side.name}: no produce acknowledged after the kill")
    result = acked[0] - killed_at[0]
    # Bring the killed broker back for the next round (after its session expired).
    time.sleep(side.session_timeout_ms / 1000 + 1)
    side.start_broker(controller)
    return result


def controlled_shutdown_s(side: Side, partitions: int) -> tuple[float, float]:
    controller = side.controller()
    leaving = next(b for b in BROKERS if b != controller)
    others = [b for b in BROKERS if b != leaving]
    topic = "shutdown"
    side.create_topic(topic, {p: [leaving, *others] for p in range(partitions)})
    pid = side.pids[leaving]
    start = time.monotonic()
    _kill(pid, signal.SIGTERM)
    moved_at = exited_at = None
    deadline = start + STEP_TIMEOUT_S
    while (moved_at is None or exited_at is None) and time.monotonic() < deadline:
        if exited_at is None and not _alive(pid):
            exited_at = time.monotonic()
        if moved_at is None:
            with contextlib.suppress(Exception):  # a broker going away mid-request: ask again
                if all(leader != leaving for leader in side.leaders(topic).values()):
                    moved_at = time.monotonic()
        time.sleep(0.05)
    if moved_at is None or exited_at is None:
        raise RuntimeError(f"{side.name}: controlled shutdown did not finish")
    return moved_at - start, exited_at - start


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"load_before": loadavg(), "sides": {}}
    for side_cls in (MiniKafkaSide, KafkaSide):
        with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmp:
            side = side_cls(Path(tmp), args.session_timeout_ms)
            try:
                side.start()
                failovers = [failover_s(side, r) for r in range(args.rounds)]
                moved, exited = controlled_shutdown_s(side, args.partitions)
            finally:
                side.stop()
            results["sides"][side.name] = {
                "failover_s": failovers, "failover_median_s": statistics.median(failovers),
                "controlled_shutdown_moved_s": moved, "controlled_shutdown_exit_s": exited}
            print(json.dumps({side.name: results["sides"][side.name]}), flush=True)
    results["load_after"] = loadavg()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster_bench")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--session-timeout-ms", type=int, default=18000)
    args = parser.parse_args(argv)
    results = run(args)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())


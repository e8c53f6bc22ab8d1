"""Group coordinator benchmark: rebalance time and offset commit throughput, minikafka and
Apache Kafka 3.9.1 side by side (``bench.kafka_broker``), the same client code for both.

    .venv/bin/python -m bench.group_bench [--only minikafka|kafka] [--trials 5] [--members 10]
                                          [--commit-seconds 5] [--partitions 20]

1. Rebalance: ``--members`` members (one thread and one connection each, the classic
   protocol as clients speak it: FindCoordinator, JoinGroup with the MEMBER_ID_REQUIRED round
   trip, SyncGroup with the leader's assignment, Heartbeat every 20 ms) join a new group at the
   same instant. The time is from the start barrier until every member holds its assignment of
   one common generation (a member that synced an earlier generation learns of the next
   rebalance from its heartbeat and rejoins, as clients do). Both brokers run
   with ``group.initial.rebalance.delay.ms=0``; median and max of ``--trials`` new groups.
2. Commits: one member of a Stable group commits offsets for all ``--partitions`` partitions
   with synchronous OffsetCommit requests (commitSync), back to back, for ``--commit-seconds``;
   commits/s and the median and p99 round trip.

Requests go through the project's client (``client.sync.SyncClient``: versions negotiated
with ApiVersions, TCP_NODELAY), so both brokers see the same bytes. Every wait is bounded.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.admin import create_topic
from bench.brokers import BrokerUnderTest
from bench.kafka_broker import ApacheKafka
from bench.minikafka_broker import MiniKafka
from client import ClientConfig
from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.sync_group import SyncGroupRequest

TOPIC = "group-bench"
JOIN_TIMEOUT_S = 60.0
MAX_REJOINS = 100
RETRIABLE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
             ErrorCode.NOT_COORDINATOR)


def _subscription() -> bytes:
    return (1).to_bytes(2, "big") + ConsumerProtocolSubscription([TOPIC]).encode(1)


def _assignment(partitions: list[int]) -> bytes:
    body = ConsumerProtocolAssignment([ConsumerProtocolAssignment.TopicPartition(TOPIC, partitions)])
    return (0).to_bytes(2, "big") + body.encode(0)


class Member:
    """One group member on its own connection."""

    def __init__(self, bootstrap: str, group: str, name: str, partitions: int) -> None:
        timeout_ms = int(JOIN_TIMEOUT_S * 1000)
        self.client = SyncClient(bootstrap, ClientConfig(
            client_id=name, request_timeout_ms=timeout_ms, default_api_timeout_ms=timeout_ms))
        self.group = group
        self.partitions = partitions
        self.member_id = ""
        self.generation = -1
        self.assignment = b""

    def close(self) -> None:
        self.client.close()

    def _send(self, request: object, cls: type) -> object:
        return self.client.send(request, self.client.version_for(cls))

    def find_coordinator(self) -> None:
        """Ask until the coordinator is known (Kafka answers COORDINATOR_NOT_AVAILABLE while it
        creates and loads __consumer_offsets); bounded by JOIN_TIMEOUT_S."""
        version = self.client.version_for(FindCoordinatorRequest)
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while True:
            if version >= 4:
                resp = self.client.send(
                    FindCoordinatorRequest(key_type=0, coordinator_keys=[self.group]), version)
                code = resp.coordinators[0].error_code
            else:
                resp = self.client.send(FindCoordinatorRequest(key=self.group), version)
                code = resp.error_code
            if code == 0:
                return
            if code != ErrorCode.COORDINATOR_NOT_AVAILABLE or time.monotonic() > deadline:
                raise RuntimeError(f"FindCoordinator: {ErrorCode(code).name}")
            time.sleep(0.1)

    def join_and_sync(self) -> None:
        """Join until a SyncGroup succeeds (rejoining on REBALANCE_IN_PROGRESS)."""
        for _ in range(MAX_REJOINS):
            join = JoinGroupRequest(
                group_id=self.group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                member_id=self.member_id, protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol("range", _subscription())],
            )
            resp = self.client.send(join, self.client.version_for(JoinGroupRequest))
            if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if resp.error_code in RETRIABLE:
                time.sleep(0.1)  # Kafka is still creating or loading __consumer_offsets
                continue
            if resp.error_code != 0:
                raise RuntimeError(f"JoinGroup: {ErrorCode(resp.error_code).name}")
            self.member_id, self.generation = resp.member_id, resp.generation_id
            assignments = []
            if resp.leader == self.member_id:
                ids = sorted(m.member_id for m in resp.members)
                for i, mid in enumerate(ids):
                    mine = [p for p in range(self.partitions) if p % len(ids) == i]
                    assignments.append(SyncGroupRequest.SyncGroupRequestAssignment(mid, _assignment(mine)))
            sync = SyncGroupRequest(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id,
                protocol_type="consumer", protocol_name=resp.protocol_name or "range", assignments=assignments,
            )
            sresp = self.client.send(sync, self.client.version_for(SyncGroupRequest))
            if sresp.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if sresp.error_code != 0:
                raise RuntimeError(f"SyncGroup: {ErrorCode(sresp.error_code).name}")
            self.assignment = sresp.assignment
            return
        raise RuntimeError(f"no stable generation after {MAX_REJOINS} joins")


@dataclass
class RebalanceResult:
    seconds: float
    generation: int


HEARTBEAT_INTERVAL_S = 0.02
WARMUP_REBALANCES = 3
WARMUP_COMMIT_S = 2.0


def one_rebalance(bootstrap: str, group: str, members: int, partitions: int) -> RebalanceResult:
    """Start ``members`` members together; time until all hold one common generation.

    A member that synced an older generation learns of the newer rebalance from its heartbeat
    (REBALANCE_IN_PROGRESS, every 20 ms) and rejoins, as clients do.
    """
    group_members = [Member(bootstrap, group, f"m{i}", partitions) for i in range(members)]
    lock = threading.Lock()
    synced: dict[int, int] = {}  # member index -> generation it holds (absent while rebalancing)
    done = threading.Event()
    errors: list[BaseException] = []
    try:
        for m in group_members:
            m.find_coordinator()
        barrier = threading.Barrier(members + 1, timeout=JOIN_TIMEOUT_S)

        def run(i: int, m: Member) -> None:
            try:
                barrier.wait()
                while not done.is_set():
                    with lock:
                        synced.pop(i, None)
                    m.join_and_sync()
                    with lock:
                        synced[i] = m.generation
                    while not done.is_set():  # heartbeat until the group moves on or we stop
                        time.sleep(HEARTBEAT_INTERVAL_S)
                        hb = HeartbeatRequest(group_id=group, generation_id=m.generation, member_id=m.member_id)
                        code = m.client.send(hb, m.client.version_for(HeartbeatRequest)).error_code
                        if code == ErrorCode.REBALANCE_IN_PROGRESS or code in RETRIABLE:
                            break
                        if code != 0:
                            raise RuntimeError(f"Heartbeat: {ErrorCode(code).name}")
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                done.set()

        threads = [threading.Thread(target=run, args=(i, m), daemon=True) for i, m in enumerate(group_members)]
        for t in threads:
            t.start()
        barrier.wait()
        started = time.perf_counter()
        deadline = started + JOIN_TIMEOUT_S
        elapsed = -1.0
        generation = -1
        while time.perf_counter() < deadline and not done.is_set():
            with lock:
                generations = set(synced.values())
                if len(synced) == members and len(generations) == 1:
                    elapsed = time.perf_counter() - started
                    generation = generations.pop()
                    break
            time.sleep(0.0005)
        done.set()
        for t in threads:
            t.join(timeout=JOIN_TIMEOUT_S)
        if errors:
            raise RuntimeError(f"a member failed: {errors[0]!r}")
        if elapsed < 0:
            raise RuntimeError(f"no common generation within {JOIN_TIMEOUT_S} s")
        return RebalanceResult(elapsed, generation)
    finally:
        for m in group_members:
            m.close()


def commit_rate(bootstrap: str, group: str, partitions: int, seconds: float) -> tuple[float, float, float, int]:
    """(commits/s, median ms, p99 ms, commits) from one member committing every partition."""
    member = Member(bootstrap, group, "committer", partitions)
    try:
        member.find_coordinator()
        member.join_and_sync()
        version = member.client.version_for(OffsetCommitRequest)
        latencies: list[float] = []
        offset = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            offset += 1
            request = OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=member.generation, member_id=member.member_id,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(TOPIC, [
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset)
                    for p in range(partitions)])],
            )
            t0 = time.perf_counter()
            resp = member.client.send(request, version)
            latencies.append(time.perf_counter() - t0)
            bad = [p.error_code for t in resp.topics for p in t.partitions if p.error_code != 0]
            if bad:
                raise RuntimeError(f"OffsetCommit: {ErrorCode(bad[0]).name}")
        total = sum(latencies)
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        return len(latencies) / total, statistics.median(latencies) * 1000, p99 * 1000, len(latencies)
    finally:
        member.close()


def run_on(broker: BrokerUnderTest, args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, float]:
    broker.start()
    try:
        create_topic(broker.bootstrap, TOPIC, args.partitions)
        # warm-up (not measured): the first group use creates __consumer_offsets; a few
        # rebalances and a second of commits warm the JVM's JIT and Python's caches alike
        for i in range(WARMUP_REBALANCES):
            one_rebalance(broker.bootstrap, f"warmup-{i}", args.members, args.partitions)
        commit_rate(broker.bootstrap, "warmup-committer", args.partitions, WARMUP_COMMIT_S)
        times = []
        for trial in range(args.trials):
            result = one_rebalance(broker.bootstrap, f"rebalance-{trial}", args.members, args.partitions)
            times.append(result.seconds)
            say(f"  {broker.name}: rebalance of {args.members} members #{trial}: "
                f"{result.seconds * 1000:.0f} ms (generation {result.generation})")
        rate, median_ms, p99_ms, count = commit_rate(broker.bootstrap, "committer", args.partitions,
                                                     args.commit_seconds)
        say(f"  {broker.name}: {count} commits of {args.partitions} partitions in "
            f"{args.commit_seconds:.0f} s: {rate:.0f}/s, median {median_ms:.2f} ms, p99 {p99_ms:.2f} ms")
        return {"rebalance_median_ms": statistics.median(times) * 1000, "rebalance_max_ms": max(times) * 1000,
                "commits_per_s": rate, "commit_median_ms": median_ms, "commit_p99_ms": p99_ms}
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.group_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["minikafka", "kafka"], default=None)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--commit-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="group-bench-") as tmp:
        brokers: list[BrokerUnderTest] = []
        if args.only in (None, "minikafka"):
            brokers.append(MiniKafka(Path(tmp) / "minikafka",
                                     settings={"group.initial.rebalance.delay.ms": "0",
                                               "offsets.topic.replication.factor": "1"}))
        if args.only in (None, "kafka"):
            brokers.append(ApacheKafka(Path(tmp) / "kafka"))
        for broker in brokers:
            print(f"{broker.name}: {broker.version()}", flush=True)
            results[broker.name] = run_on(broker, args, lambda line: print(line, flush=True))
    print()
    print(f"| broker | rebalance {args.members} members, median (max) | commits/s ({args.partitions} partitions each) "
          "| commit median / p99 |")
    print("|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['rebalance_median_ms']:.0f} ms ({r['rebalance_max_ms']:.0f} ms) | "
              f"{r['commits_per_s']:.0f} | {r['commit_median_ms']:.2f} / {r['commit_p99_ms']:.2f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Helpers for the group tests (no tests here): broker settings, topics, producing, and a
kafka-python consumer that runs as its own process so it can be stopped, killed or restarted.

The consumer process (``python -m tests.integration.test_groups_support consume ...``) prints
one JSON line per event on stdout, flushed at once:

    {"event": "assigned", "partitions": [0, 3]}      after every rebalance (its whole assignment)
    {"event": "record", "partition": 0, "offset": 5, "value": "p0-5"}   once committed
    {"event": "closed"}                               after a graceful close (SIGTERM)

It commits synchronously after each poll before reporting the records, so a record reported
is committed (a commit refused because the group rebalanced reports nothing: the records go to
the partition's next owner); SIGTERM closes the consumer (commit + LeaveGroup); SIGKILL is a
crash.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.integration.broker_process import REPO_ROOT, BrokerProcess

# Fast groups for tests: no initial rebalance delay, short sessions allowed.
GROUP_PROPS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "50",
}


def start_group_broker(tmp_dir: Path, name: str = "groups-broker", **extra: str) -> BrokerProcess:
    return BrokerProcess(tmp_dir, {**GROUP_PROPS, **extra}, name=name).start()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from client.sync import SyncClient

    with SyncClient(bootstrap, timeout_ms=15_000) as admin:
        admin.create_topic(name, partitions, 1, {})


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> set[str]:
    """Send ``per_partition`` records to every partition (acks=all); returns the values sent."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    sent: set[str] = set()
    try:
        futures = []
        for p in range(partitions):
            for i in range(per_partition):
                value = f"{tag}-p{p}-{i}"
                sent.add(value)
                futures.append(producer.send(topic, value.encode(), partition=p))
        producer.flush(timeout=30)
        for f in futures:
            f.get(timeout=30)
    finally:
        producer.close(timeout=10)
    return sent


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, step_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


class ConsumerProcess:
    """A kafka-python group consumer in a child process; events are read by a thread."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str, *,
                 session_timeout_ms: int = 3000, extra: Iterable[str] = ()) -> None:
        self.name = name
        cmd = [sys.executable, "-m", "tests.integration.test_groups_support", "consume",
               "--bootstrap", bootstrap, "--topic", topic, "--group", group, "--client-id", name,
               "--session-timeout-ms", str(session_timeout_ms), *extra]
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, env=env, text=True)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=1_000_000)
        self.assignment: list[int] | None = None
        self.records: list[tuple[int, int, str]] = []
        self.lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                if event["event"] == "assigned":
                    self.assignment = sorted(event["partitions"])
                elif event["event"] == "record":
                    self.records.append((event["partition"], event["offset"], event["value"]))
            self.events.put_nowait(event)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def current_assignment(self) -> list[int] | None:
        with self.lock:
            return None if self.assignment is None else list(self.assignment)

    def values(self) -> list[str]:
        with self.lock:
            return [v for _, _, v in self.records]

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM: the consumer commits, leaves the group and exits."""
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout_s)

    def kill9(self) -> None:
        if self.alive:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def stderr(self) -> str:
        if self.alive or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read()


def assignments_cover(consumers: list[ConsumerProcess], partitions: int) -> bool:
    """Every partition is owned by exactly one of ``consumers`` (all alive)."""
    owned: list[int] = []
    for c in consumers:
        a = c.current_assignment()
        if a is None or not c.alive:
            return False
        owned.extend(a)
    return sorted(owned) == list(range(partitions))


def _consume(args: argparse.Namespace) -> int:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import CommitFailedError

    def emit(event: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
        enable_auto_commit=False, auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=max(args.session_timeout_ms // 6, 100),
        max_poll_interval_ms=max(args.session_timeout_ms, 10_000),
    )

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit({"event": "assigned", "partitions": sorted(tp.partition for tp in assigned)})

    consumer.subscribe([args.topic], listener=Listener())
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    while not stopping.is_set():
        # 1 s, not less: kafka-python 3.0.12 loses a rebalance when poll's time runs out while
        # its JoinGroup/SyncGroup is in flight and the assignment it computed as leader makes
        # need_rejoin() false (join_group_async returns before taking the join's result: the
        # assignment is never applied, heartbeats stay disabled and the member times out,
        # never to rejoin). With 200 ms that happened at load ~7 (consumer logs, 19:34).
        batch = consumer.poll(timeout_ms=1000)
        records = [r for recs in batch.values() for r in recs]
        if not records:
            continue
        try:
            consumer.commit()
        except CommitFailedError:
            continue  # the group rebalanced: the partitions' next owner reads these again
        for r in records:
            emit({"event": "record", "partition": r.partition, "offset": r.offset,
                  "value": r.value.decode()})
    consumer.close()
    emit({"event": "closed"})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("consume")
    c.add_argument("--bootstrap", required=True)
    c.add_argument("--topic", required=True)
    c.add_argument("--group", required=True)
    c.add_argument("--client-id", required=True)
    c.add_argument("--session-timeout-ms", type=int, default=3000)
    args = parser.parse_args(argv)
    return _consume(args)


if __name__ == "__main__":
    sys.exit(main())

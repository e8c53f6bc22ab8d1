"""A cluster of brokers on a real ZooKeeper, for tests (the ``kafka_cluster`` fixture).

- ZooKeeper: one server for the whole test session (``devcluster.zookeeper``: Apache
  ZooKeeper from the jars ``tools/fetch-kafka-jars`` brings, or those in
  ``MINIKAFKA_KAFKA_LIBS``; Java needed), or one the user names
  (``--minikafka-zookeeper=HOST:PORT``). Each cluster takes a chroot of its own
  (``/minikafka-<hex>``), so clusters never see each other's znodes; it is deleted after
  the cluster stops.
- Brokers: ``broker.id`` 1..N, each a ``BrokerHandle`` (in this process by default, each on
  its own event-loop thread, or in a subprocess) with its own log dir and ephemeral port of
  127.0.0.1, ``zookeeper.connect`` to the chroot. A broker's ``stop()`` is Kafka's
  controlled shutdown (its leaderships move to the others first), ``kill()`` is abrupt (its
  leaderships move when the controller sees its ZooKeeper session end), ``start()`` brings
  it back on the same port and log dir, where it rejoins.
- Leadership: ``leader(topic, partition)``, ``controller()``, ``move_leadership(topic,
  partition)`` (the leader's controlled shutdown hands its leaderships to other in-sync
  replicas, then it starts again), ``elect_preferred_leaders()`` (ElectLeaders, as
  ``kafka-leader-election.sh --election-type preferred``).

Teardown kills every broker at once (stopping them one by one would leave partitions with
no live replica, which the controller rightly reports as errors) and removes their files.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pytest_minikafka.handle import START_TIMEOUT_S, BrokerError, BrokerHandle, base_properties
from pytest_minikafka.topics import TopicsSpec, create_topics

__all__ = ["CLUSTER_TEST_PROPERTIES", "KafkaCluster", "ZooKeeperServer", "make_chroot",
           "remove_chroot"]

T = TypeVar("T")

# Kafka's names; what Kafka's own cluster test harness shortens too. A killed broker's
# leaderships move after its ZooKeeper session expires (6 s, not 18 s); a controlled
# shutdown retries after 100 ms, not 5 s. __consumer_offsets has one replica: Kafka's 3
# would hold every consumer group until three brokers hosted it.
CLUSTER_TEST_PROPERTIES: dict[str, str] = {
    "zookeeper.session.timeout.ms": "6000",
    "controlled.shutdown.retry.backoff.ms": "100",
    "offsets.topic.replication.factor": "1",
}
POLL_S = 0.05
KAZOO_TIMEOUT_S = 15.0


class ZooKeeperServer:
    """A ZooKeeper for the session's clusters: ``connect_string`` (no chroot)."""

    def __init__(self, work_dir: Path | None, *, connect_string: str | None = None) -> None:
        if (work_dir is None) == (connect_string is None):
            raise ValueError("give a work_dir (start a server) or a connect_string (use one)")
        self._work_dir = work_dir
        self._server: Any = None  # devcluster.zookeeper.ZooKeeper when started here
        self.connect_string = connect_string or ""

    def start(self) -> ZooKeeperServer:
        if self._work_dir is not None and self._server is None:
            from devcluster.zookeeper import ZooKeeper, ZooKeeperError

            try:
                self._server = ZooKeeper(self._work_dir, nodes=1).start()
            except ZooKeeperError as exc:
                raise BrokerError(f"could not start a ZooKeeper for kafka_cluster: {exc}\n"
                                  "(or name a running one: --minikafka-zookeeper=HOST:PORT)"
                                  ) from None
            self.connect_string = self._server.connect_string
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


def _kazoo(hosts: str) -> Any:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts, timeout=KAZOO_TIMEOUT_S)
    client.start(timeout=KAZOO_TIMEOUT_S)
    return client


def make_chroot(zookeeper: str) -> str:
    """A fresh chroot on ``zookeeper`` (created): ``/minikafka-<hex>``."""
    chroot = f"/minikafka-{uuid.uuid4().hex[:12]}"
    client = _kazoo(zookeeper)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    return chroot


def remove_chroot(zookeeper: str, chroot: str) -> None:
    client = _kazoo(zookeeper)
    try:
        client.delete(chroot, recursive=True)
    finally:
        client.stop()
        client.close()


class KafkaCluster:
    """``size`` brokers (ids 1..size) on ``zookeeper_connect`` (which ends in the cluster's
    chroot). ``new_broker(properties, name)`` builds a broker handle, not yet started."""

    def __init__(self, zookeeper_connect: str, size: int, directory: Path,
                 properties: Mapping[str, Any] | None,
                 new_broker: Callable[[dict[str, str], str], BrokerHandle]) -> None:
        if size < 1:
            raise ValueError("a cluster needs at least one broker")
        self.zookeeper_connect = zookeeper_connect
        self.directory = directory
        self.brokers: list[BrokerHandle] = []
        for broker_id in range(1, size + 1):
            props = base_properties(directory / f"broker{broker_id}" / "data", {
                **CLUSTER_TEST_PROPERTIES, **(properties or {}),
                "broker.id": broker_id, "zookeeper.connect": zookeeper_connect})
            self.brokers.append(new_broker(props, f"broker{broker_id}"))

    def __repr__(self) -> str:
        return f"<KafkaCluster {len(self.brokers)} brokers {self.zookeeper_connect}>"

    # -- addresses ---------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of the running brokers, for clients' ``bootstrap_servers``."""
        running = [b.bootstrap for b in self.brokers if b.running]
        if not running:
            raise BrokerError("no broker of the cluster is running")
        return ",".join(running)

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap

    def broker(self, broker_id: int) -> BrokerHandle:
        """The broker with this ``broker.id`` (1..N)."""
        if not 1 <= broker_id <= len(self.brokers):
            raise BrokerError(f"no broker {broker_id} (ids 1..{len(self.brokers)})")
        return self.brokers[broker_id - 1]

    # -- life cycle --------------------------------------------------------------------

    def start(self, timeout_s: float = START_TIMEOUT_S) -> KafkaCluster:
        """Start every broker, then wait until each is in the controller's view."""
        for broker in self.brokers:
            if not broker.running:
                broker.start(timeout_s)
        self.wait_for_brokers(timeout_s=timeout_s)
        return self

    def kill(self) -> None:
        """Kill every running broker at once (no controlled shutdown)."""
        errors = []
        for broker in self.brokers:
            try:
                broker.kill()
            except BrokerError as exc:
                errors.append(str(exc))
        if errors:
            raise BrokerError("\n".join(errors))

    def wait_for_brokers(self, broker_ids: Sequence[int] | None = None, *,
                         timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the controller's metadata (as every running broker answers it) lists
        exactly the running brokers (or ``broker_ids``) and names a controller."""
        want = set(broker_ids) if broker_ids is not None else {
            b.broker_id for b in self.brokers if b.running}

        def settled() -> bool:
            from client.sync import SyncClient

            for broker in self.brokers:
                if not broker.running:
                    continue
                with SyncClient(broker.bootstrap, timeout_ms=10_000) as client:
                    described = client.describe_cluster()
                if set(described.brokers) != want or described.controller_id not in want:
                    return False
            return True

        self._wait(settled, timeout_s, f"brokers {sorted(want)} to be the live brokers")

    # -- leadership --------------------------------------------------------------------

    def controller(self) -> BrokerHandle:
        """The broker that is the controller now."""
        from client.sync import SyncClient

        with SyncClient(self.bootstrap, timeout_ms=10_000) as client:
            return self.broker(client.describe_cluster().controller_id)

    def leader(self, topic: str, partition: int = 0) -> BrokerHandle:
        """The leader of ``topic``-``partition`` now (BrokerError when it has none)."""
        leader_id = self.partition_state(topic, partition)[0]
        if leader_id < 0:
            raise BrokerError(f"{topic}-{partition} has no leader")
        return self.broker(leader_id)

    def partition_state(self, topic: str, partition: int = 0) -> tuple[int, list[int], list[int]]:
        """(leader, replicas, ISR) of ``topic``-``partition`` in the cluster's metadata."""
        from client.sync import SyncClient

        with SyncClient(self.bootstrap, timeout_ms=10_000) as client:
            (info,) = client.describe_topics([topic])
        state = info.partitions.get(partition)
        if state is None:
            raise BrokerError(f"no partition {topic}-{partition}")
        return state.leader, list(state.replicas), list(state.isr)

    def move_leadership(self, topic: str, partition: int = 0, *,
                        timeout_s: float = START_TIMEOUT_S) -> BrokerHandle:
        """Move the partition's leadership to another in-sync replica, and return the new
        leader: its leader's controlled shutdown hands every leadership it holds to other
        ISR members (clients get NOT_LEADER_OR_FOLLOWER and refresh metadata), then it
        starts again as a follower (leaders stay where they moved until
        ``elect_preferred_leaders()`` or Kafka's automatic rebalance,
        ``auto.leader.rebalance.enable``)."""
        old, _replicas, isr = self.partition_state(topic, partition)
        if not [r for r in isr if r != old]:
            raise BrokerError(f"{topic}-{partition}: no in-sync replica besides leader {old} "
                              f"(ISR {isr}) to take over")
        leader = self.broker(old)
        leader.stop()
        try:
            moved = self._wait(lambda: self._moved_from(topic, partition, old), timeout_s,
                               f"{topic}-{partition} to get a leader other than {old}")
        finally:
            leader.start(timeout_s)
        self.wait_for_brokers(timeout_s=timeout_s)
        return self.broker(moved)

    def elect_preferred_leaders(self, partitions: Mapping[str, Sequence[int]] | None = None
                                ) -> dict[tuple[str, int], int]:
        """ElectLeaders (preferred) for ``{topic: [partition, ...]}`` or every partition:
        each partition's error code (0: elected; ELECTION_NOT_NEEDED, 84: it was already)."""
        from client.sync import SyncClient
        from protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse

        topics = None if partitions is None else [
            ElectLeadersRequest.TopicPartitions(topic=t, partitions=list(ps))
            for t, ps in partitions.items()]
        request = ElectLeadersRequest(election_type=0, topic_partitions=topics,
                                      timeout_ms=30_000)
        with SyncClient(self.controller().bootstrap, timeout_ms=30_000) as client:
            response = client.send(request)
        assert isinstance(response, ElectLeadersResponse)
        if response.error_code:
            raise BrokerError(f"ElectLeaders: error {response.error_code}")
        return {(r.topic, p.partition_id): p.error_code
                for r in response.replica_election_results for p in r.partition_result}

    def _moved_from(self, topic: str, partition: int, old: int) -> int | None:
        leader = self.partition_state(topic, partition)[0]
        return leader if leader >= 0 and leader != old else None

    # -- topics ------------------------------------------------------------------------

    def create_topics(self, topics: TopicsSpec, *, timeout_ms: int = 30_000) -> None:
        """As ``BrokerHandle.create_topics``; then waits until every running broker knows
        their leaders."""
        create_topics(self.bootstrap, topics, timeout_ms=timeout_ms)
        from pytest_minikafka.topics import parse_topics

        names = [spec.name for spec in parse_topics(topics)]
        if names:
            self._wait(lambda: self._everyone_knows(names), timeout_ms / 1000,
                       f"every broker to know the leaders of {names}")

    def _everyone_knows(self, names: list[str]) -> bool:
        from client.sync import SyncClient

        for broker in self.brokers:
            if not broker.running:
                continue
            with SyncClient(broker.bootstrap, timeout_ms=10_000) as client:
                infos = client.describe_topics(names)
            if any(info.error_code or not info.partitions
                   or any(p.leader < 0 for p in info.partitions.values()) for info in infos):
                return False
        return True

    # -- waiting -----------------------------------------------------------------------

    @staticmethod
    def _wait(condition: Callable[[], T | None], timeout_s: float, what: str) -> T:
        """Poll ``condition`` (a question to the brokers) until it gives a true value;
        BrokerError after ``timeout_s``."""
        from client.errors import ClientError

        deadline = time.monotonic() + timeout_s
        last: BaseException | None = None
        while True:
            try:
                value = condition()
                if value:
                    return value
            except (ClientError, OSError) as exc:  # a broker stopping or starting
                last = exc
            if time.monotonic() > deadline:
                raise BrokerError(f"timed out after {timeout_s:.0f} s waiting for {what}"
                                  + (f" (last error: {last})" if last else ""))
            time.sleep(POLL_S)

"""Metadata answers of a ZooKeeper-mode broker that caches them per metadata snapshot:
every change the controller sends (leaders, ISR, live brokers and their endpoints, new
partitions) reaches the answers of a broker asked over and over in between."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from client.sync import SyncClient
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from tests.cluster.conftest import ClusterBrokers
from tests.cluster.zk_support import wait_until

pytestmark = [pytest.mark.timeout(180)]

PROPAGATION_S = 60.0  # bound for the controller's UpdateMetadata to reach the broker
VERSIONS = (1, 9, 12)

View = tuple[list[tuple[int, int]], dict[int, tuple[int, list[int], list[int]]]]


def view(bootstrap: str, version: int) -> View:
    """(brokers as (id, port), partition -> (leader, replicas, ISR)) of topic "cached" in
    one all-topics Metadata answer."""
    with SyncClient(bootstrap, timeout_ms=10_000) as client:
        answer: MetadataResponse = client.send(
            MetadataRequest(topics=None, allow_auto_topic_creation=version < 4), version)
    parts = {p.partition_index: (p.leader_id, sorted(p.replica_nodes), sorted(p.isr_nodes))
             for t in answer.topics if t.name == "cached" for p in t.partitions}
    return sorted((b.node_id, b.port) for b in answer.brokers), parts


def settles(bootstrap: str, wanted: Callable[[View], bool], what: str) -> None:
    """Ask at every version until each shows ``wanted`` (answers are cached in between)."""
    wait_until(lambda: all(wanted(view(bootstrap, v)) for v in VERSIONS),
               timeout_s=PROPAGATION_S, what=what, interval_s=0.02)


def test_cached_answers_follow_leaders_isr_brokers_and_partitions(
        cluster_brokers: Callable[..., ClusterBrokers]) -> None:
    brokers = cluster_brokers(2)
    one, two = brokers.brokers[1], brokers.brokers[2]
    ports = {1: one.port, 2: two.port}
    with SyncClient(one.bootstrap, timeout_ms=30_000) as admin:
        admin.create_topic("cached", 4, 2, {})
    both = [(1, ports[1]), (2, ports[2])]
    settles(one.bootstrap, lambda v: v[0] == both and len(v[1]) == 4
            and all(isr == [1, 2] for _, _, isr in v[1].values()), "the topic, fully in sync")
    led_by_two = [p for p, (leader, _, _) in view(one.bootstrap, 12)[1].items() if leader == 2]
    assert led_by_two  # round-robin leaders over two brokers

    assert two.stop() == 0  # controlled shutdown: leaders move to 1, ISR shrinks
    settles(one.bootstrap, lambda v: v[0] == [(1, ports[1])]
            and all(leader == 1 and isr == [1] for leader, _, isr in v[1].values()),
            "broker 2 gone, broker 1 leading everything alone")

    two.start()  # on a port of its own again: its new endpoint must be in the answers
    both = [(1, ports[1]), (2, two.port)]
    settles(one.bootstrap, lambda v: v[0] == both
            and all(isr == [1, 2] for _, _, isr in v[1].values()),
            "broker 2 back in the brokers list, at its endpoint now, and in every ISR")

    with SyncClient(one.bootstrap, timeout_ms=30_000) as admin:
        admin.create_partitions("cached", 6)
    settles(one.bootstrap, lambda v: sorted(v[1]) == [0, 1, 2, 3, 4, 5],
            "the new partitions")


def test_leader_without_the_listener_by_version(
        cluster_brokers: Callable[..., ClusterBrokers]) -> None:
    """A partition whose leader has no endpoint on the asking listener: LEADER_NOT_AVAILABLE
    before v6, LISTENER_NOT_FOUND from v6 (leader -1 both), each version right however
    the answers are interleaved (built entries are shared by the versions on either side
    of v6, encoded per version)."""
    brokers = cluster_brokers(0)
    one = brokers.start(1, listeners="PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
                        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
                        inter_broker_listener_name="PLAINTEXT")
    brokers.start(2)
    extra = one.endpoints["EXTRA"]
    with SyncClient(one.bootstrap, timeout_ms=30_000) as admin:
        admin.create_topic("cached", 2, 1, {})

    def partitions(version: int) -> dict[int, tuple[int, int]]:
        with SyncClient(extra, timeout_ms=10_000) as client:
            answer: MetadataResponse = client.send(
                MetadataRequest(topics=None, allow_auto_topic_creation=version < 4), version)
        assert [b.node_id for b in answer.brokers] == [1]  # broker 2 has no EXTRA endpoint
        return {p.partition_index: (p.error_code, p.leader_id)
                for t in answer.topics if t.name == "cached" for p in t.partitions}

    wait_until(lambda: len(partitions(12)) == 2, timeout_s=PROPAGATION_S,
               what="both partitions in broker 1's metadata")
    led_here = {p for p, (error, _) in partitions(12).items() if error == 0}
    assert len(led_here) == 1  # one partition on each broker
    for version in (5, 6, 1, 12, 5, 9, 12, 5):
        expected = (ErrorCode.LISTENER_NOT_FOUND if version >= 6
                    else ErrorCode.LEADER_NOT_AVAILABLE)
        assert {p: error for p, (error, _) in partitions(version).items()} == {
            p: 0 if p in led_here else expected for p in (0, 1)}, version
        assert all(leader == (1 if p in led_here else -1)
                   for p, (_, leader) in partitions(version).items())

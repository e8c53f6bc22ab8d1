"""Kafka's Java consumer detects a log truncation after an unclean leader change (KIP-320).

Three Java consumers (kafka-clients 3.9, tests/fixtures/consumer/TruncationConsumer.java),
one per ``auto.offset.reset``, read a partition up to records that only its leader had
(acknowledged while the ISR was that leader alone). The leader dies and the out-of-sync
replica is elected uncleanly (``unclean.leader.election.enable``), without those records,
and is written to. Each consumer, seeing the new leader epoch in the metadata, validates its
position with OffsetForLeaderEpoch: the new leader ends the consumer's epoch below the
consumer's position, so, as Kafka's ``SubscriptionState.maybeCompleteValidation`` does,
``none`` raises LogTruncationException naming the first divergent offset, and ``earliest``
and ``latest`` both seek to that offset (neither to the start nor to the end of the log)
and read what the new leader wrote there.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from devcluster.zookeeper import ZooKeeper
from tests.cluster.replication_support import alive_brokers
from tests.cluster.test_replication import (
    _cluster,
    _stop_all,
    confluent_producer,
    create_topic,
    produce_all,
    wait_in_sync,
    wait_state,
)
from tests.cluster.zk_support import wait_until
from tests.integration.broker_process import REPO_ROOT

pytestmark = [pytest.mark.timeout(240), pytest.mark.java]

PROGRAM = REPO_ROOT / "tests" / "fixtures" / "consumer" / "TruncationConsumer.java"
CLASSPATH = str(REPO_ROOT / "tools" / "kafka-jars" / "libs" / "*")
CONSUMER_TIMEOUT_S = 120
# The consumer's own log: its truncation messages (SubscriptionState at INFO) on stderr.
LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.clients.consumer.internals.SubscriptionState=INFO
"""
COMMON = [b"both-%d" % i for i in range(10)]  # offsets 0-9, on both replicas
LEADER_ONLY = [b"only-on-1-%d" % i for i in range(5)]  # offsets 10-14, lost uncleanly
AFTER = [b"after-%d" % i for i in range(3)]  # offsets 10-12 on the unclean leader


class JavaConsumer:
    """One TruncationConsumer JVM; its stdout lines are the events it reports."""

    def __init__(self, tmp_path: Path, bootstrap: str, topic: str, reset: str) -> None:
        self.reset = reset
        log4j = tmp_path / "consumer-log4j.properties"
        log4j.write_text(LOG4J)
        self.stderr_path = tmp_path / f"consumer-{reset}.stderr"
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                 f"-Dlog4j.configuration=file:{log4j}", "-cp", CLASSPATH, str(PROGRAM),
                 bootstrap, topic, reset, str(len(COMMON) + len(LEADER_ONLY)), str(len(AFTER))],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
        self.lines: list[str] = []

    def read_until(self, prefix: str) -> str:
        """Lines up to the first one starting with ``prefix`` (bounded by the program's own
        60 s per phase and the test's timeout)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith(prefix):
                return line.rstrip("\n")
        raise AssertionError(f"{self.reset} consumer ended before {prefix}: {self.lines[-5:]}\n"
                             f"{self.stderr_path.read_text()[-3000:]}")

    def go_on(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self) -> list[str]:
        """The lines after PAUSED, once the program has exited."""
        out, _ = self.proc.communicate(timeout=CONSUMER_TIMEOUT_S)
        self.lines.extend(out.splitlines())
        assert self.proc.returncode == 0, (self.lines[-5:], self.stderr_path.read_text()[-3000:])
        return self.lines[self.lines.index(next(ln for ln in self.lines
                                                if ln.startswith("PAUSED"))) + 1:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def records(lines: list[str]) -> list[tuple[int, bytes]]:
    return [(int(ln.split()[1]), ln.split()[3].encode()) for ln in lines
            if ln.startswith("RECORD")]


@pytest.mark.broker_errors(r"no leader for unclean-java-0: no live replica in the ISR \[1\]")
def test_java_consumer_detects_truncation_after_unclean_leader_change(
        zookeeper: ZooKeeper, tmp_path: Path) -> None:
    brokers = _cluster(zookeeper, tmp_path)
    topic = "unclean-java"
    consumers: list[JavaConsumer] = []
    try:
        create_topic(brokers.bootstrap(), topic, {0: [1, 2]},
                     **{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
        wait_state(brokers, topic, 1, [1, 2])
        produce_all(confluent_producer(brokers.bootstrap()), topic, COMMON)
        wait_in_sync(brokers, topic, replicas=(1, 2))
        one, two = brokers.brokers[1], brokers.brokers[2]
        two.kill9()
        wait_state(brokers, topic, 1, [1], timeout_s=30)
        assert produce_all(confluent_producer(one.bootstrap), topic, LEADER_ONLY) == list(
            range(10, 15))
        consumers = [JavaConsumer(tmp_path, brokers.bootstrap(), topic, reset)
                     for reset in ("none", "earliest", "latest")]
        for consumer in consumers:
            # Each has read the 15 records, the leader-only ones included (below the HW).
            assert consumer.read_until("PAUSED") == "PAUSED 15"
            assert records(consumer.lines) == list(enumerate(COMMON + LEADER_ONLY))

        one.kill9()
        wait_until(lambda: alive_brokers(brokers.bootstrap()) == {3}, timeout_s=30,
                   what="brokers 1 and 2 gone", interval_s=0.3)
        brokers.start(2)  # out of sync, but the only replica alive: elected uncleanly
        wait_state(brokers, topic, 2, [2], timeout_s=30)
        assert produce_all(confluent_producer(two.bootstrap), topic, AFTER) == [10, 11, 12]
        for consumer in consumers:
            consumer.go_on()
        none, earliest, latest = (c.finish() for c in consumers)
        # The epoch the new leader ends at offset 10 is that of the common records: 0.
        assert none == ["TRUNCATION 15 10 0"], none
        for name, lines in (("earliest", earliest), ("latest", latest)):
            assert records(lines) == [(10 + i, v) for i, v in enumerate(AFTER)], (name, lines)
            assert lines[-1] == "DONE 13", (name, lines)
            log = (tmp_path / f"consumer-{name}.stderr").read_text()
            assert (f"Truncation detected for partition {topic}-0 at offset "
                    "FetchPosition{offset=15") in log, log[-3000:]
            assert "resetting offset to the first offset known to diverge" in log, log[-3000:]
        none_log = (tmp_path / "consumer-none.stderr").read_text()
        assert "but no reset policy is set" in none_log, none_log[-3000:]
    finally:
        for consumer in consumers:
            consumer.kill()
        _stop_all(brokers)

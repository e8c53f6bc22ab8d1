"""The pytest plugin's fixtures and broker handles: properties and topics per test
(marker, indirect parameter, ini options), kill / restart / pause of a broker in this
process and in a subprocess, several brokers side by side, clean shutdown and removal."""

from __future__ import annotations

import selectors
import socket
import struct
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from pytest_minikafka import BrokerError, BrokerHandle
from pytest_minikafka.plugin import BrokerFactory

pytestmark = pytest.mark.timeout(120)

pytest_plugins = ["pytester"]


def partitions(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        found = consumer.partitions_for_topic(topic)
        return len(found or ())
    finally:
        consumer.close()


def values(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
        return got
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, *items: bytes) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for item in items:
            producer.send(topic, item).get(timeout=30)
    finally:
        producer.close()


def api_versions_request() -> bytes:
    body = struct.pack(">hhih", 18, 0, 7, -1)
    return struct.pack(">i", len(body)) + body


# -- properties and topics -------------------------------------------------------------


@pytest.mark.minikafka(properties={"num.partitions": 3, "auto.create.topics.enable": True})
def test_marker_properties_use_kafkas_names(kafka_broker: BrokerHandle) -> None:
    produce(kafka_broker.bootstrap, "auto", b"x")
    assert partitions(kafka_broker.bootstrap, "auto") == 3
    assert kafka_broker.properties["num.partitions"] == "3"


@pytest.mark.parametrize("kafka_broker", [["a", "b"], {"topics": {"c": 4}}], indirect=True)
def test_topics_from_the_fixture_parameter(kafka_broker: BrokerHandle,
                                           request: pytest.FixtureRequest) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    try:
        listed = set(admin.list_topics()) - {"__consumer_offsets"}
    finally:
        admin.close()
    expected = {"a", "b"} if isinstance(request.node.callspec.params["kafka_broker"], list) else {"c"}
    assert listed == expected
    if "c" in listed:
        assert partitions(kafka_broker.bootstrap, "c") == 4


def test_a_bad_property_names_itself(kafka_broker_factory: BrokerFactory) -> None:
    from broker.config import ConfigError

    with pytest.raises(ConfigError, match=r"log\.segment\.bytes"):
        kafka_broker_factory({"log.segment.bytes": "ten"})
    with pytest.raises(ConfigError, match=r"Unknown configuration 'no\.such\.property'"):
        kafka_broker_factory({"no.such.property": "1"})


def test_several_brokers_side_by_side(kafka_broker_factory: BrokerFactory) -> None:
    brokers = [kafka_broker_factory(topics=["t"]) for _ in range(3)]
    assert len({b.bootstrap for b in brokers}) == 3
    for i, broker in enumerate(brokers):
        produce(broker.bootstrap, "t", b"broker%d" % i)
    assert [values(b.bootstrap, "t") for b in brokers] == [[b"broker0"], [b"broker1"], [b"broker2"]]


# -- life cycle, in process ------------------------------------------------------------


def test_kill_and_restart_keep_acknowledged_data(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory(topics=["t"])
    address = broker.bootstrap
    produce(address, "t", b"1", b"2")
    broker.kill()
    assert not broker.running
    assert not (broker.log_dir / ".kafka_cleanshutdown").exists()  # a crash: recovered next
    broker.start()
    assert broker.bootstrap == address
    produce(address, "t", b"3")
    broker.restart()  # ordered: stop, then start
    assert values(address, "t") == [b"1", b"2", b"3"]


def test_a_paused_broker_answers_only_after_resume(kafka_broker: BrokerHandle) -> None:
    with socket.create_connection((kafka_broker.host, kafka_broker.port), timeout=30) as sock, \
            selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        with kafka_broker.paused():
            sock.sendall(api_versions_request())
            # Bounded look for an answer that must not come while paused.
            assert sel.select(timeout=1.0) == []
        assert sel.select(timeout=30)
        (size,) = struct.unpack(">i", sock.recv(4))
        assert size > 0


def test_teardown_removes_the_brokers_directory(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_dirs="""
        DIRS = []

        def test_one(kafka_broker):
            DIRS.append(kafka_broker.log_dir)
            assert kafka_broker.log_dir.is_dir()

        def test_two():
            assert DIRS and not DIRS[0].parent.exists()
    """)
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_a_test_marker_on_a_shared_broker_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nminikafka_scope = module\n"
                     "minikafka_properties =\n    num.partitions = 2\n")
    pytester.makepyfile(test_shared="""
        import pytest

        def test_defaults(kafka_broker):
            assert kafka_broker.properties["num.partitions"] == "2"

        @pytest.mark.minikafka(faults=True)
        def test_marked(kafka_broker):
            pass
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*does not apply to the kafka_broker fixture shared with "
                                 "scope 'module'*"])


# -- life cycle, subprocess ------------------------------------------------------------


def test_a_subprocess_broker(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory(topics=["t"], subprocess=True)
    from pytest_minikafka.subprocess_broker import SubprocessBroker

    assert isinstance(broker, SubprocessBroker)
    address = broker.bootstrap
    produce(address, "t", b"1")
    with pytest.raises(BrokerError, match="in-process"):
        broker.faults.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER")
    broker.kill()
    assert broker.exit_codes == [-9]
    broker.start()
    with socket.create_connection((broker.host, broker.port), timeout=30) as sock, \
            selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        with broker.paused():  # SIGSTOP ... SIGCONT
            sock.sendall(api_versions_request())
            assert sel.select(timeout=1.0) == []
        assert sel.select(timeout=30)
    produce(address, "t", b"2")
    assert values(address, "t") == [b"1", b"2"]
    broker.stop()
    assert broker.exit_codes == [-9, 0]
    assert "started" in broker.log_text()


def test_faults_cannot_be_asked_of_a_subprocess(kafka_broker_factory: BrokerFactory) -> None:
    with pytest.raises(pytest.UsageError, match="in-process"):
        kafka_broker_factory(faults=True, subprocess=True)


def test_log_dir_is_under_the_tests_temporary_directory(kafka_broker: BrokerHandle,
                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    assert Path(kafka_broker.log_dir).is_relative_to(tmp_path_factory.getbasetemp())

"""The every-API-every-version cases (tests/integration/every_api_cases.py) against Apache
Kafka 3.9.1 in ZooKeeper mode, configured as minikafka is for them (``PROPS``): each
assertion those cases make about minikafka is checked to be Kafka's own answer.

One Kafka broker (id 0) under its own chroot of the session's ZooKeeper, for the module.
Kafka advertises more versions than minikafka; only minikafka's pairs are sent (ApiVersions
is checked to cover them).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from devcluster.apache_kafka import ApacheKafkaZk
from devcluster.zookeeper import ZooKeeper, free_ports
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.metadata import MetadataRequest
from tests.integration.every_api_cases import CASES, PAIRS, PROPS, Env, commit, open_env, pair_id
from tests.integration.netclient import RawClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]

READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class KafkaTarget:
    broker_id: int
    host: str
    port: int
    endpoints: dict[str, str] = field(default_factory=dict)
    log_dir: Path = Path()


def _coordinator_ready(env: Env) -> bool:
    found = env.latest(FindCoordinatorRequest(key_type=0, coordinator_keys=["warm-up"]))
    if found.coordinators[0].error_code != ErrorCode.NO_ERROR:
        return False
    return bool(commit(env, "warm-up", {0: 0}).topics[0].partitions[0].error_code == ErrorCode.NO_ERROR)


def _producer_ids_ready(env: Env) -> bool:
    resp = env.latest(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000))
    return bool(resp.error_code == ErrorCode.NO_ERROR)


def _wait(what: str, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready():
        assert time.monotonic() < deadline, f"Kafka: {what} not ready in {READY_TIMEOUT_S} s"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def kafka_env(zookeeper: ZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    work = tmp_path_factory.mktemp("kafka-every-api")
    port, sasl_port = free_ports(2)
    props = {**PROPS, "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
             "inter.broker.listener.name": "PLAINTEXT",
             "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
    kafka = ApacheKafkaZk(work, broker_id=0, port=port, properties=props,
                          zookeeper_connect=f"{zookeeper.connect_string}/kafka-{uuid.uuid4().hex[:8]}")
    kafka.start()
    target = KafkaTarget(0, "127.0.0.1", port, {"PLAINTEXT": f"127.0.0.1:{port}",
                                                "SASL_PLAINTEXT": f"127.0.0.1:{sasl_port}"}, work / "data")
    try:
        # "started" is logged before Kafka's controller has seen the broker register: topics
        # can be created once its metadata lists the broker
        with RawClient(target.endpoints["PLAINTEXT"]) as client:
            _wait("broker registration", lambda: bool(client.request(
                3, 12, MetadataRequest(topics=[]))[1].brokers))
        with open_env(target, exact_api_versions=False) as env:
            # Kafka creates __consumer_offsets and takes a producer id block on first use:
            # wait for both (COORDINATOR_NOT_AVAILABLE / _LOAD_IN_PROGRESS meanwhile)
            _wait("group coordinator", lambda: _coordinator_ready(env))
            _wait("producer ids", lambda: _producer_ids_ready(env))
            yield env
    finally:
        kafka.stop()


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_api_version_on_kafka(kafka_env: Env, pair: tuple[int, int]) -> None:
    api_key, version = pair
    CASES[api_key](kafka_env, version)

"""docker-compose.yml describes a cluster that forms: its brokers' command lines and
environment, run as local processes.

No Docker engine runs here, so the test takes what ``docker-compose config`` resolves for
each broker service (the image's ENV and ENTRYPOINT from the Dockerfile, then the
service's environment and command) and runs it with the container world mapped onto
127.0.0.1: every host name and listening address (``zookeeper:2181``, ``broker-N:29092``,
``0.0.0.0:9092`` inside container N, ``localhost:909N`` published from it, ``9404``) gets a
port of its own, ``/data`` a directory of the test, and ZooKeeper is the test's own server
(the compose file names the official image). Then: the three brokers form one cluster with
one controller, both listeners of each serve and each advertises the address it is reached
at, the healthchecks pass, and each broker exits 0 on SIGTERM. (The Spark service's command
runs in tests/integration/test_spark_bulk.py.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from client.sync import SyncClient
from devcluster.zookeeper import ZooKeeper, free_ports
from tests.integration.broker_process import BrokerProcess
from tests.integration.test_server_packaging import compose_config, dockerfile_stage

pytestmark = [pytest.mark.timeout(300)]

BROKERS = ("broker-1", "broker-2", "broker-3")


class WorldMap:
    """Container addresses -> ports of 127.0.0.1; the volume -> a directory."""

    def __init__(self, tmp: Path, zk_connect: str, published: dict[str, dict[int, int]]) -> None:
        self.tmp = tmp
        self.zk_connect = zk_connect
        self.published = published  # service -> {host port: container port}
        self.ports: dict[tuple[str, int], int] = {}

    def port(self, service: str, container_port: int) -> int:
        key = (service, container_port)
        if key not in self.ports:
            self.ports[key] = free_ports(1)[0]
        return self.ports[key]

    def value(self, service: str, value: str) -> str:
        value = value.replace("zookeeper:2181", self.zk_connect)
        value = re.sub(r"0\.0\.0\.0:(\d+)", lambda m: f"127.0.0.1:{self.port(service, int(m[1]))}",
                       value)
        value = re.sub(r"127\.0\.0\.1:9404\b", lambda m: f"127.0.0.1:{self.port(service, 9404)}",
                       value)
        value = re.sub(r"\b(broker-\d):(\d+)",
                       lambda m: f"127.0.0.1:{self.port(m[1], int(m[2]))}", value)
        value = re.sub(r"\blocalhost:(\d+)", lambda m: "127.0.0.1:" + str(
            self.port(service, self.published[service][int(m[1])])), value)
        if value == "/data":
            local = self.tmp / service / "data"
            local.mkdir(parents=True, exist_ok=True)
            value = str(local)
        return value


def published_ports(service: dict[str, object]) -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in service.get("ports", []):  # type: ignore[attr-defined]
        if isinstance(entry, dict):
            out[int(entry["published"])] = int(entry["target"])
        else:
            host, _, inside = str(entry).partition(":")
            out[int(host)] = int(inside)
    return out


def test_compose_cluster_forms_as_local_processes(zookeeper: ZooKeeper, zk_chroot: str,
                                                  tmp_path: Path) -> None:
    services = compose_config()["services"]
    assert {"zookeeper", *BROKERS, "spark-ingest"} <= set(services)
    image_env, entrypoint = dockerfile_stage("broker")
    world = WorldMap(tmp_path, zookeeper.connect_string + zk_chroot,
                     {name: published_ports(services[name]) for name in BROKERS})
    procs: dict[str, BrokerProcess] = {}
    try:
        for name in BROKERS:
            service = services[name]
            env = {k: world.value(name, str(v))
                   for k, v in {**image_env, **service["environment"]}.items()}
            assert env["MINIKAFKA_LISTENERS"] == (
                f"INTERNAL://127.0.0.1:{world.port(name, 29092)},"
                f"EXTERNAL://127.0.0.1:{world.port(name, 9092)}")
            proc = BrokerProcess(tmp_path, env=env, name=name)
            proc.overrides = {}  # everything from the compose environment
            assert proc.command()[3:] == [*entrypoint[1:], *service.get("command", [])]
            procs[name] = proc.start(timeout_s=120)
        # One cluster: every broker knows all three and the same controller, on both its
        # listeners, each listener handing out its own addresses.
        controllers = set()
        for name in BROKERS:
            for inside in (29092, 9092):
                address = f"127.0.0.1:{world.port(name, inside)}"
                with SyncClient(address, timeout_ms=30_000) as client:
                    cluster = client.describe_cluster()
                    meta = client.refresh_metadata([])
                assert sorted(cluster.brokers) == [1, 2, 3]
                controllers.add(cluster.controller_id)
                expected = {i: ("127.0.0.1", world.port(f"broker-{i}", inside)) for i in (1, 2, 3)}
                assert {b: (i.host, i.port) for b, i in meta.brokers.items()} == expected
        assert len(controllers) == 1 and controllers <= {1, 2, 3}
        # Each broker's healthcheck passes, and its data went to its volume.
        for name in BROKERS:
            check = [world.value(name, arg) for arg in services[name]["healthcheck"]["test"][1:]]
            assert check[0] == "python"
            result = subprocess.run([sys.executable, *check[1:]], capture_output=True, text=True,
                                    timeout=30)
            assert result.returncode == 0, result.stderr
            assert (tmp_path / name / "data" / "meta.properties").exists()
    finally:
        for proc in reversed(list(procs.values())):
            proc.stop()
    assert all(p.exit_codes == [0] for p in procs.values()), [p.exit_codes for p in procs.values()]

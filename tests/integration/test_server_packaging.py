"""The container files: the Dockerfile passes hadolint, docker-compose.yml validates with
``docker-compose config -q``, the broker properties both pass on are valid, and the compose
broker's command line and environment run as a local process (its Spark service's command
line is the rerun in test_spark_bulk, which has Spark at hand)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.config import BrokerConfig
from cli.env_config import broker_overrides
from tests.integration.broker_process import REPO_ROOT, BrokerProcess

pytestmark = pytest.mark.timeout(60)

VENV_BIN = REPO_ROOT / ".venv" / "bin"


def tool(name: str) -> str:
    found = shutil.which(name) or (str(VENV_BIN / name) if (VENV_BIN / name).exists() else None)
    assert found is not None, f"{name} is not installed: run ./scripts/setup"
    return found


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run([tool("hadolint"), "--no-color", str(REPO_ROOT / "Dockerfile")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_does_flag_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install minikafka\n")
    result = subprocess.run([tool("hadolint"), "--no-color", str(bad)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode != 0 and "DL3006" in result.stdout  # untagged base image


def test_docker_compose_file_is_valid() -> None:
    result = subprocess.run([tool("docker-compose"), "-f", str(REPO_ROOT / "docker-compose.yml"),
                             "config", "-q"], capture_output=True, text=True, timeout=30,
                            cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    config = subprocess.run([tool("docker-compose"), "-f", str(REPO_ROOT / "docker-compose.yml"),
                             "config"], capture_output=True, text=True, timeout=30, cwd=REPO_ROOT)
    assert "9092" in config.stdout and "/data" in config.stdout


def dockerfile_stage(target: str) -> tuple[dict[str, str], list[str]]:
    """The ENV (inherited through ``FROM <stage>``) and ENTRYPOINT of a Dockerfile target."""
    text = (REPO_ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stages: dict[str, tuple[str | None, dict[str, str], list[str]]] = {}
    name = ""
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "FROM":
            base, _, name = rest.partition(" AS ")
            stages[name] = (base.strip() if base.strip() in stages else None, {}, [])
        elif word == "ENV":
            stages[name][1].update(dict(re.findall(r"(\w+)=(\S+)", rest)))
        elif word == "ENTRYPOINT":
            stages[name][2][:] = json.loads(rest)
    env: dict[str, str] = {}
    entrypoint: list[str] = []
    chain = [target]
    while (parent := stages[chain[-1]][0]) is not None:
        chain.append(parent)
    for stage in reversed(chain):
        env.update(stages[stage][1])
        entrypoint = stages[stage][2] or entrypoint
    return env, entrypoint


def compose_config(env: dict[str, str] | None = None) -> dict[str, Any]:
    """docker-compose.yml as docker-compose resolves it (every profile's services), with
    ``env`` for its ${VARIABLES}."""
    result = subprocess.run([tool("docker-compose"), "-f", str(REPO_ROOT / "docker-compose.yml"),
                             "--profile", "spark", "--profile", "monitoring", "config"],
                            capture_output=True, text=True, timeout=30, cwd=REPO_ROOT,
                            env={**os.environ, **(env or {})})
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


def test_dockerfile_broker_properties_are_valid() -> None:
    env, entrypoint = dockerfile_stage("broker")
    assert entrypoint == ["minikafka", "broker"]
    props = [f"{p}={v}" for _, p, v in broker_overrides(env)]
    config = BrokerConfig.load(None, props)
    assert config.listeners[0].port == 9092
    assert str(config.log_dir) == "/data"
    text = (REPO_ROOT / "Dockerfile").read_text()
    assert "EXPOSE 9092" in text and 'VOLUME ["/data"]' in text
    spark_env, spark_entry = dockerfile_stage("spark")
    assert spark_entry == ["minikafka", "spark-ingest"] and "MINIKAFKA_LOG_DIRS" not in spark_env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_compose_broker_runs_as_a_local_process(tmp_path: Path) -> None:
    """The compose broker's command line and environment, with container addresses, ports and
    the volume swapped for local ones: both listeners serve, each advertising itself, and the
    healthcheck passes."""
    service = compose_config()["services"]["broker"]
    image_env, entrypoint = dockerfile_stage("broker")
    ports = {29092: _free_port(), 9092: _free_port(), 9404: _free_port()}

    def local(value: str) -> str:
        for host in ("0.0.0.0", "broker", "localhost"):
            value = value.replace(f"{host}:", "127.0.0.1:")
        for inside, outside in ports.items():
            value = re.sub(rf":{inside}\b", f":{outside}", value)
        return value.replace("/data", str(tmp_path / "data"))

    env = {k: local(str(v)) for k, v in {**image_env, **service["environment"]}.items()}
    assert env["MINIKAFKA_LISTENERS"] == f"INTERNAL://127.0.0.1:{ports[29092]},EXTERNAL://127.0.0.1:{ports[9092]}"
    broker = BrokerProcess(tmp_path, env=env, name="compose-broker")
    broker.overrides = {}  # everything from the compose environment
    assert broker.command()[3:] == [*entrypoint[1:], *service.get("command", [])]
    with broker:
        from client.sync import SyncClient

        for inside in (9092, 29092):
            with SyncClient(f"127.0.0.1:{ports[inside]}", timeout_ms=10_000) as c:
                meta = c.refresh_metadata([])
                assert [(b.host, b.port) for b in meta.brokers.values()] == [("127.0.0.1", ports[inside])]
        check = [local(arg) for arg in service["healthcheck"]["test"][1:]]
        assert check[0] == "python"
        result = subprocess.run([sys.executable, *check[1:]], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "data" / "meta.properties").exists()
    assert broker.exit_codes == [0], broker.stderr_text()

"""The container files: the Dockerfile passes hadolint, docker-compose.yml validates with
``docker-compose config -q`` and the broker properties both pass on are valid. The compose
cluster's brokers (their command lines and environment) run as local processes in
tests/cluster/test_compose_cluster.py, which has a ZooKeeper at hand; its Spark service's
command line is the rerun in test_spark_bulk, which has Spark at hand."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.config import BrokerConfig
from cli.env_config import broker_overrides
from tests.integration.broker_process import REPO_ROOT

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
